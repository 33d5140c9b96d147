package desktop

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/trace"
)

// Recording limits.
const (
	DefaultRecordFPS     = 5
	MaxRecordFPS         = 30
	DefaultSegmentSecs   = 2
	MaxSegmentSecs       = 60
	recordDir            = "/workspace/.genesis-recordings"
	maxSegmentBytes      = 256 << 20
	recordPoll           = 500 * time.Millisecond
	recordStopGrace      = 5 * time.Second
	CodeRecording        = "recording_active"
	CodeNotRecording     = "not_recording"
	CodeRecordingFailed  = "recording_failed"
	recordingKindSegment = "video.segment"
)

// RecordOptions asks for a recording of a desktop's display.
type RecordOptions struct {
	// FPS is the frame rate (1..30, default 5).
	FPS int `json:"fps,omitempty"`
	// SegmentSeconds is the length of one segment (1..60, default 2): a
	// crash of the recorder loses at most the segment being written.
	SegmentSeconds int `json:"segment_seconds,omitempty"`
}

// Recording is the state of a desktop's display recording.
type Recording struct {
	ID             string     `json:"id"`
	SandboxID      string     `json:"sandbox_id"`
	State          string     `json:"state"` // recording | stopped | failed
	FPS            int        `json:"fps"`
	SegmentSeconds int        `json:"segment_seconds"`
	StartedAt      time.Time  `json:"started_at"`
	StoppedAt      *time.Time `json:"stopped_at,omitempty"`
	Segments       int        `json:"segments"`
	Bytes          int64      `json:"bytes"`
	Error          string     `json:"error,omitempty"`
}

// recorder follows one recording: ffmpeg (x11grab → H.264 in fragmented
// MP4 segments) runs as a job in the sandbox; the service keeps each
// segment ffmpeg has closed as an artifact, records it in the trace with
// its wall-clock start and end, and deletes it from the sandbox.
type recorder struct {
	m      *Manager
	t      *Target
	dir    string
	jobID  string
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	st    Recording
	stop  bool
	taken int // segments of the list already kept
	t0    float64
}

func (m *Manager) recorderOf(id string) *recorder {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.recorders[id]
}

// StartRecording starts recording a desktop sandbox's display into trace
// segments; one recording at a time per sandbox (409 recording_active).
func (m *Manager) StartRecording(ctx context.Context, tenant, id string, o RecordOptions) (*Recording, error) {
	if o.FPS == 0 {
		o.FPS = DefaultRecordFPS
	}
	if o.SegmentSeconds == 0 {
		o.SegmentSeconds = DefaultSegmentSecs
	}
	if o.FPS < 1 || o.FPS > MaxRecordFPS {
		return nil, bad("invalid_argument", "fps %d is not 1..%d", o.FPS, MaxRecordFPS)
	}
	if o.SegmentSeconds < 1 || o.SegmentSeconds > MaxSegmentSecs {
		return nil, bad("invalid_argument", "segment_seconds %d is not 1..%d", o.SegmentSeconds, MaxSegmentSecs)
	}
	if m.cfg.Artifacts == nil || m.cfg.Trace == nil {
		return nil, errdefs.WithCode(CodeRecordingFailed, fmt.Errorf("recordings need the trace and the artifact store (trace.record is off): %w", errdefs.ErrFailedPrecondition))
	}
	t, err := m.cfg.Sandboxes.AttachDesktop(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	if r := m.recorders[t.SandboxID]; r != nil && r.state() == "recording" {
		m.mu.Unlock()
		t.Release()
		return nil, errdefs.WithCode(CodeRecording, fmt.Errorf("sandbox %s is being recorded (%s): stop it first: %w", t.SandboxID, r.st.ID, errdefs.ErrConflict))
	}
	m.mu.Unlock()
	var b [6]byte
	_, _ = rand.Read(b[:])
	recID := "rec_" + hex.EncodeToString(b[:])
	dir := recordDir + "/" + recID
	w, h := t.Spec.Width, t.Spec.Height
	// ffmpeg prints the wall-clock time of its first frame (x11grab's
	// timestamps are the wall clock): the segments' times are offsets from
	// it. -g makes a key frame at every segment boundary.
	script := fmt.Sprintf("mkdir -p %[1]s && exec ffmpeg -hide_banner -nostdin -loglevel info -f x11grab -framerate %[2]d -video_size %[3]dx%[4]d -i :%[5]d "+
		"-c:v libx264 -preset ultrafast -tune zerolatency -pix_fmt yuv420p -g %[6]d -f segment -segment_time %[7]d -segment_format mp4 "+
		"-segment_format_options movflags=+frag_keyframe+empty_moov+default_base_moof -reset_timestamps 1 "+
		"-segment_list %[1]s/segments.csv -segment_list_type csv %[1]s/seg-%%05d.mp4 2>%[1]s/ffmpeg.log",
		dir, o.FPS, w, h, t.Spec.Display, o.FPS*o.SegmentSeconds, o.SegmentSeconds)
	jobID := "desktop-record-" + recID
	if _, err := t.Launch(ctx, agentproto.JobStartRequest{ExecRequest: agentproto.ExecRequest{
		JobID: jobID, Command: []string{"/bin/sh", "-c", script}, MaxOutputBytes: 64 << 10}}); err != nil {
		t.Release()
		return nil, errdefs.WithCode(CodeRecordingFailed, fmt.Errorf("starting the recorder in sandbox %s: %v: %w", t.SandboxID, err, errdefs.ErrUnavailable))
	}
	rctx, cancel := context.WithCancel(context.Background())
	r := &recorder{m: m, t: t, dir: dir, jobID: jobID, cancel: cancel, done: make(chan struct{}),
		st: Recording{ID: recID, SandboxID: t.SandboxID, State: "recording", FPS: o.FPS, SegmentSeconds: o.SegmentSeconds, StartedAt: time.Now().UTC()}}
	m.mu.Lock()
	m.recorders[t.SandboxID] = r
	m.mu.Unlock()
	r.record(ctx, "video.started", map[string]any{"recording": recID, "fps": o.FPS, "segment_seconds": o.SegmentSeconds})
	go r.run(rctx)
	st := r.snapshot()
	return &st, nil
}

// StopRecording stops a sandbox's recording and waits (up to about 10 s)
// for its last segment to be kept.
func (m *Manager) StopRecording(ctx context.Context, tenant, id string) (*Recording, error) {
	sandboxID, err := m.desktopID(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	r := m.recorderOf(sandboxID)
	if r == nil {
		return nil, errdefs.WithCode(CodeNotRecording, fmt.Errorf("sandbox %s has no recording: %w", sandboxID, errdefs.ErrConflict))
	}
	r.mu.Lock()
	r.stop = true
	r.mu.Unlock()
	select {
	case <-r.done:
	case <-time.After(2*recordStopGrace + 2*time.Second):
		r.cancel()
		<-r.done
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	st := r.snapshot()
	return &st, nil
}

// GetRecording reports a sandbox's latest recording (404 code
// not_recording when it never had one).
func (m *Manager) GetRecording(ctx context.Context, tenant, id string) (*Recording, error) {
	sandboxID, err := m.desktopID(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	r := m.recorderOf(sandboxID)
	if r == nil {
		return nil, errdefs.WithCode(CodeNotRecording, fmt.Errorf("sandbox %s has no recording: %w", sandboxID, errdefs.ErrNotFound))
	}
	st := r.snapshot()
	return &st, nil
}

// endRecording ends a sandbox's recorder when the sandbox ends: the
// segments kept so far stay; the one being written is lost.
func (m *Manager) endRecording(sandboxID string) {
	m.mu.Lock()
	r := m.recorders[sandboxID]
	delete(m.recorders, sandboxID)
	m.mu.Unlock()
	if r != nil {
		r.cancel()
		<-r.done
	}
}

func (r *recorder) state() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st.State
}

func (r *recorder) snapshot() Recording {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st
}

func (r *recorder) record(ctx context.Context, kind string, d map[string]any) {
	recordTo(ctx, r.m.cfg.Trace, r.t.Tenant, r.t.SandboxID, trace.ActorSystem, kind, d)
}

// run collects segments until asked to stop (then the job is ended
// gracefully, so ffmpeg closes its last segment, which is collected too),
// until the job ends by itself, or until ctx ends (the sandbox ended).
func (r *recorder) run(ctx context.Context) {
	defer close(r.done)
	defer r.t.Release()
	tick := time.NewTicker(recordPoll)
	defer tick.Stop()
	var failure error
	stopping := false
	for {
		select {
		case <-ctx.Done():
			r.finish(context.Background(), "the sandbox ended", nil)
			return
		case <-tick.C:
		}
		r.mu.Lock()
		stop := r.stop
		r.mu.Unlock()
		if stop && !stopping {
			stopping = true
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			_ = r.t.CancelJob(cctx, r.jobID, recordStopGrace)
			cancel()
		}
		info, err := r.jobInfo(ctx)
		ended := err == nil && !info.Running
		if err := r.collect(ctx); err != nil {
			failure = err
		}
		if ended || failure != nil {
			if failure == nil && !stopping && info.Exit != nil {
				failure = fmt.Errorf("the recorder exited (%s, code %d): %s", info.Exit.ExitReason, info.Exit.ExitCode, r.logTail(ctx))
			}
			if failure != nil && !stopping {
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
				_ = r.t.CancelJob(cctx, r.jobID, 0)
				cancel()
			}
			reason := "stopped"
			if !stopping {
				reason = "the recorder ended"
			}
			r.finish(ctx, reason, failure)
			return
		}
	}
}

func (r *recorder) jobInfo(ctx context.Context) (agentproto.JobInfo, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return r.t.JobInfo(cctx, r.jobID)
}

// finish records the end and removes the recording's directory.
func (r *recorder) finish(ctx context.Context, reason string, failure error) {
	now := time.Now().UTC()
	r.mu.Lock()
	r.st.StoppedAt = &now
	r.st.State = "stopped"
	if failure != nil {
		r.st.State, r.st.Error = "failed", failure.Error()
	}
	st := r.st
	r.mu.Unlock()
	d := map[string]any{"recording": st.ID, "reason": reason, "segments": st.Segments, "bytes": st.Bytes}
	if failure != nil {
		d["error"] = failure.Error()
	}
	r.record(ctx, "video.stopped", d)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = r.t.RemoveFile(cctx, r.dir, true)
}

var startRE = regexp.MustCompile(`start: ([0-9]+\.[0-9]+)`)

// collect keeps every segment ffmpeg has listed (it lists a segment once
// it is closed) and not kept yet.
func (r *recorder) collect(ctx context.Context) error {
	list, err := r.readSmall(ctx, r.dir+"/segments.csv")
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			return nil // no segment closed yet
		}
		return err
	}
	var lines []string
	for _, l := range strings.Split(string(list), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	for r.taken < len(lines) {
		line := strings.TrimSpace(lines[r.taken])
		f := strings.Split(line, ",")
		if len(f) != 3 {
			return fmt.Errorf("segment list line %q", line)
		}
		start, err1 := strconv.ParseFloat(f[1], 64)
		end, err2 := strconv.ParseFloat(f[2], 64)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("segment list line %q", line)
		}
		if r.t0 == 0 {
			log, _ := r.readSmall(ctx, r.dir+"/ffmpeg.log")
			m := startRE.FindSubmatch(log)
			if m == nil {
				return fmt.Errorf("ffmpeg did not report its first frame's time: %s", tail(log))
			}
			r.t0, _ = strconv.ParseFloat(string(m[1]), 64)
		}
		if err := r.keepSegment(ctx, f[0], start, end); err != nil {
			return err
		}
		r.taken++
	}
	return nil
}

func (r *recorder) keepSegment(ctx context.Context, name string, start, end float64) error {
	path := r.dir + "/" + name
	rc, err := r.t.ReadFile(ctx, path)
	if err != nil {
		return fmt.Errorf("reading segment %s: %w", name, err)
	}
	var buf bytes.Buffer
	_, err = io.Copy(&buf, io.LimitReader(rc, maxSegmentBytes+1))
	rc.Close()
	if err != nil {
		return fmt.Errorf("reading segment %s: %w", name, err)
	}
	if buf.Len() > maxSegmentBytes {
		return fmt.Errorf("segment %s is over %d bytes", name, maxSegmentBytes)
	}
	size := int64(buf.Len())
	r.mu.Lock()
	idx := r.st.Segments
	recID := r.st.ID
	r.mu.Unlock()
	a, err := r.m.cfg.Artifacts.KeepBytes(context.WithoutCancel(ctx), r.t.Tenant, r.t.SandboxID, recID+"-"+name, &buf)
	if err != nil {
		return fmt.Errorf("keeping segment %s: %w", name, err)
	}
	ws := wall(r.t0 + start)
	we := wall(r.t0 + end)
	r.record(ctx, recordingKindSegment, map[string]any{"recording": recID, "index": idx,
		"start": ws.Format(time.RFC3339Nano), "end": we.Format(time.RFC3339Nano), "duration_ms": we.Sub(ws).Milliseconds(),
		"artifact": artifactRef(a)})
	r.mu.Lock()
	r.st.Segments++
	r.st.Bytes += size
	r.mu.Unlock()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = r.t.RemoveFile(cctx, path, false)
	return nil
}

func wall(sec float64) time.Time {
	s := int64(sec)
	return time.Unix(s, int64((sec-float64(s))*1e9)).UTC()
}

func (r *recorder) readSmall(ctx context.Context, path string) ([]byte, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rc, err := r.t.ReadFile(cctx, path)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(io.LimitReader(rc, 1<<20))
}

func (r *recorder) logTail(ctx context.Context) string {
	b, _ := r.readSmall(ctx, r.dir+"/ffmpeg.log")
	return tail(b)
}

// tail is the last few lines of an ffmpeg log.
func tail(b []byte) string {
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return strings.Join(lines, " | ")
}
