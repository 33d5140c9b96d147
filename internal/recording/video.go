package recording

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
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

// Recording limits and codes.
const (
	DefaultFPS          = 5
	MaxFPS              = 30
	DefaultSegmentSecs  = 2
	MaxSegmentSecs      = 60
	Dir                 = "/workspace/.genesis-recordings"
	maxSegmentBytes     = 256 << 20
	poll                = 500 * time.Millisecond
	stopGrace           = 5 * time.Second
	CodeRecording       = "recording_active"
	CodeNotRecording    = "not_recording"
	CodeRecordingFailed = "recording_failed"
	// CodeDraining refuses a recording while the service stops (503), as
	// control refuses new sandboxes then.
	CodeDraining = "service_draining"
	// ReasonServiceStopping is video.stopped's reason for a recording the
	// service ended because it stops (Drain).
	ReasonServiceStopping = "the service is stopping"
	// ReasonStopCutShort is video.stopped's reason for a recording a stop
	// ended because its recorder did not end (and its last segment was
	// not kept) within the stop's bound; the segment being written is lost.
	ReasonStopCutShort = "the recorder did not end within the stop's bound"
)

// Options asks for a recording.
type Options struct {
	// FPS is the frame rate (1..30, default 5).
	FPS int `json:"fps,omitempty"`
	// SegmentSeconds is the length of one segment (1..60, default 2): a
	// crash of the recorder loses at most the segment being written.
	SegmentSeconds int `json:"segment_seconds,omitempty"`
}

// Recording is the state of a sandbox's recording.
type Recording struct {
	ID        string `json:"id"`
	SandboxID string `json:"sandbox_id"`
	// JobID is the recorder's job (ffmpeg): GET /v1/jobs/{id}.
	JobID          string     `json:"job_id,omitempty"`
	Source         string     `json:"source"` // display | browser
	State          string     `json:"state"`  // recording | stopped | failed
	FPS            int        `json:"fps"`
	SegmentSeconds int        `json:"segment_seconds"`
	StartedAt      time.Time  `json:"started_at"`
	StoppedAt      *time.Time `json:"stopped_at,omitempty"`
	Segments       int        `json:"segments"`
	Bytes          int64      `json:"bytes"`
	Error          string     `json:"error,omitempty"`
}

// Target is the sandbox a recorder works in, through its agent.
type Target struct {
	Tenant    string
	SandboxID string
	// Launch starts the recorder (a recorded background job; the answer's
	// JobID is its id, the request names none); JobInfo and
	// CancelJob follow and end it; OpenStdin streams into its standard
	// input (a Source with a Feed needs it).
	Launch    func(ctx context.Context, req agentproto.JobStartRequest) (agentproto.JobInfo, error)
	JobInfo   func(ctx context.Context, id string) (agentproto.JobInfo, error)
	CancelJob func(ctx context.Context, id string, grace time.Duration) error
	OpenStdin func(ctx context.Context, jobID string) (io.WriteCloser, error)
	// ReadFile opens and RemoveFile deletes a file of the sandbox (the
	// segments, below the workspace).
	ReadFile   func(ctx context.Context, path string) (io.ReadCloser, error)
	RemoveFile func(ctx context.Context, path string, recursive bool) error
	// Release is called when the recording ends.
	Release func()
}

// Source is what a recording records.
type Source struct {
	// Name is the source in the recording and its events: display,
	// browser.
	Name string
	// Input is ffmpeg's input arguments at fps. Its frames must carry
	// wall-clock timestamps (x11grab does; a pipe needs
	// -use_wallclock_as_timestamps 1): a segment's times are ffmpeg's
	// first frame's time plus the segment's offsets.
	Input func(fps int) string
	// Feed, if set, writes the input into ffmpeg's standard input until
	// ctx ends or it fails (the recording then fails with its error).
	Feed func(ctx context.Context, w io.Writer, fps int) error
}

// Set holds the recordings of many sandboxes, one at a time per sandbox.
// It is safe for concurrent use.
type Set struct {
	trace trace.Recorder
	arts  Keeper

	mu   sync.Mutex
	recs map[string]*recorder // sandbox id → its latest recording
	// draining refuses new recordings: the service is stopping (Drain).
	draining bool
}

// NewSet returns a Set that keeps segments in arts and records them in
// rec; without either it refuses recordings (code recording_failed).
func NewSet(rec trace.Recorder, arts Keeper) *Set {
	return &Set{trace: rec, arts: arts, recs: map[string]*recorder{}}
}

// recorder follows one recording: ffmpeg (the source → H.264 in
// fragmented MP4 segments) runs as a job in the sandbox; the service keeps
// each segment ffmpeg has closed as an artifact, records it in the trace
// with its wall-clock start and end, and deletes it from the sandbox.
type recorder struct {
	set    *Set
	t      *Target
	src    Source
	dir    string
	jobID  string
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	st      Recording
	stop    bool
	feedErr error
	taken   int // segments of the list already kept
	t0      float64

	// stopReason is video.stopped's reason once stop is set (under mu).
	stopReason string
	// cutShort is set (under mu) when a stop ended the recorder because
	// it did not end within the stop's bound.
	cutShort bool
}

func bad(format string, a ...any) error {
	return errdefs.WithCode("invalid_argument", fmt.Errorf(format+": %w", append(a, errdefs.ErrInvalidArgument)...))
}

// Start starts recording src in t's sandbox. It owns t from then on (it
// releases it when the recording ends), also when it fails.
func (s *Set) Start(ctx context.Context, t *Target, src Source, o Options) (*Recording, error) {
	if o.FPS == 0 {
		o.FPS = DefaultFPS
	}
	if o.SegmentSeconds == 0 {
		o.SegmentSeconds = DefaultSegmentSecs
	}
	if o.FPS < 1 || o.FPS > MaxFPS {
		t.Release()
		return nil, bad("fps %d is not 1..%d", o.FPS, MaxFPS)
	}
	if o.SegmentSeconds < 1 || o.SegmentSeconds > MaxSegmentSecs {
		t.Release()
		return nil, bad("segment_seconds %d is not 1..%d", o.SegmentSeconds, MaxSegmentSecs)
	}
	if s.arts == nil || s.trace == nil {
		t.Release()
		return nil, errdefs.WithCode(CodeRecordingFailed, fmt.Errorf("recordings need the trace and the artifact store (trace.record is off): %w", errdefs.ErrFailedPrecondition))
	}
	s.mu.Lock()
	if s.draining {
		s.mu.Unlock()
		t.Release()
		return nil, errdefs.WithCode(CodeDraining, fmt.Errorf("the service is stopping and starts no new recordings: %w", errdefs.ErrUnavailable))
	}
	if r := s.recs[t.SandboxID]; r != nil && r.state() == "recording" {
		s.mu.Unlock()
		t.Release()
		return nil, errdefs.WithCode(CodeRecording, fmt.Errorf("sandbox %s is being recorded (%s): stop it first: %w", t.SandboxID, r.st.ID, errdefs.ErrConflict))
	}
	s.mu.Unlock()
	var b [6]byte
	_, _ = rand.Read(b[:])
	recID := "rec_" + hex.EncodeToString(b[:])
	dir := Dir + "/" + recID
	// ffmpeg prints the wall-clock time of its first frame: the segments'
	// times are offsets from it. -g makes a key frame at every segment
	// boundary.
	script := fmt.Sprintf("mkdir -p %[1]s && exec ffmpeg -hide_banner -loglevel info %[2]s "+
		"-c:v libx264 -preset ultrafast -tune zerolatency -pix_fmt yuv420p -r %[3]d -g %[4]d -f segment -segment_time %[5]d -segment_format mp4 "+
		"-segment_format_options movflags=+frag_keyframe+empty_moov+default_base_moof -reset_timestamps 1 "+
		"-segment_list %[1]s/segments.csv -segment_list_type csv %[1]s/seg-%%05d.mp4 2>%[1]s/ffmpeg.log",
		dir, src.Input(o.FPS), o.FPS, o.FPS*o.SegmentSeconds, o.SegmentSeconds)
	if src.Feed == nil {
		script = strings.Replace(script, "-loglevel info", "-nostdin -loglevel info", 1)
	}
	info, err := t.Launch(ctx, agentproto.JobStartRequest{ExecRequest: agentproto.ExecRequest{
		Command: []string{"/bin/sh", "-c", script}, MaxOutputBytes: 64 << 10, StdinStream: src.Feed != nil}})
	if err != nil {
		t.Release()
		return nil, errdefs.WithCode(CodeRecordingFailed, fmt.Errorf("starting the recorder in sandbox %s: %v: %w", t.SandboxID, err, errdefs.ErrUnavailable))
	}
	jobID := info.JobID
	rctx, cancel := context.WithCancel(context.Background())
	r := &recorder{set: s, t: t, src: src, dir: dir, jobID: jobID, cancel: cancel, done: make(chan struct{}),
		st: Recording{ID: recID, SandboxID: t.SandboxID, JobID: jobID, Source: src.Name, State: "recording", FPS: o.FPS, SegmentSeconds: o.SegmentSeconds, StartedAt: time.Now().UTC()}}
	s.mu.Lock()
	s.recs[t.SandboxID] = r
	s.mu.Unlock()
	r.record(ctx, trace.KindVideoStarted, map[string]any{"recording": recID, "job_id": jobID, "source": src.Name, "fps": o.FPS, "segment_seconds": o.SegmentSeconds})
	if src.Feed != nil {
		go r.feed(rctx)
	}
	go r.run(rctx)
	st := r.snapshot()
	return &st, nil
}

// Stop stops a sandbox's recording and waits (up to about 12 s) for its
// last segment to be kept.
func (s *Set) Stop(ctx context.Context, sandboxID string) (*Recording, error) {
	s.mu.Lock()
	r := s.recs[sandboxID]
	s.mu.Unlock()
	if r == nil {
		return nil, errdefs.WithCode(CodeNotRecording, fmt.Errorf("sandbox %s has no recording: %w", sandboxID, errdefs.ErrConflict))
	}
	if err := r.halt(ctx, "stopped"); err != nil {
		return nil, err
	}
	st := r.snapshot()
	return &st, nil
}

// halt asks r to stop as Stop does (ffmpeg ended gracefully, its last
// segment kept) and waits for it: up to about 12 s, then the recorder is
// cut short (the segment being written is lost), or until ctx ends.
func (r *recorder) halt(ctx context.Context, reason string) error {
	r.mu.Lock()
	if !r.stop {
		r.stop, r.stopReason = true, reason
	}
	r.mu.Unlock()
	select {
	case <-r.done:
	case <-time.After(2*stopGrace + 2*time.Second):
		r.mu.Lock()
		r.cutShort = true
		r.mu.Unlock()
		r.cancel()
		<-r.done
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// Get reports a sandbox's latest recording (404 code not_recording when
// it never had one).
func (s *Set) Get(sandboxID string) (*Recording, error) {
	s.mu.Lock()
	r := s.recs[sandboxID]
	s.mu.Unlock()
	if r == nil {
		return nil, errdefs.WithCode(CodeNotRecording, fmt.Errorf("sandbox %s has no recording: %w", sandboxID, errdefs.ErrNotFound))
	}
	st := r.snapshot()
	return &st, nil
}

// End ends a sandbox's recorder when the sandbox ends: the segments kept
// so far stay; the one being written is lost.
func (s *Set) End(sandboxID string) {
	s.mu.Lock()
	r := s.recs[sandboxID]
	delete(s.recs, sandboxID)
	s.mu.Unlock()
	if r != nil {
		r.cancel()
		<-r.done
	}
}

// Drain is for a service that stops: it refuses new recordings (503
// service_draining) and stops every recording in progress as Stop does,
// all at once, so that each keeps its last segment and its video.stopped
// says ReasonServiceStopping. It returns once they have ended (each within
// Stop's bound) or ctx ends. The sandboxes must still run: a recording
// whose sandbox is gone loses the segment being written (End).
func (s *Set) Drain(ctx context.Context) {
	s.mu.Lock()
	s.draining = true
	all := make([]*recorder, 0, len(s.recs))
	for _, r := range s.recs {
		all = append(all, r)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range all {
		wg.Go(func() { _ = r.halt(ctx, ReasonServiceStopping) })
	}
	wg.Wait()
}

// Close ends every recorder: as Drain (each keeps its last segment if its
// sandbox still runs), then each is forgotten.
func (s *Set) Close() {
	s.Drain(context.Background())
	s.mu.Lock()
	ids := make([]string, 0, len(s.recs))
	for id := range s.recs {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	for _, id := range ids {
		s.End(id)
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

func (r *recorder) record(ctx context.Context, kind trace.Kind, d map[string]any) {
	b, err := json.Marshal(d)
	if err != nil {
		return
	}
	r.set.trace.Record(context.WithoutCancel(ctx), r.t.Tenant, r.t.SandboxID, trace.Event{Actor: trace.ActorSystem, Kind: kind, Data: b})
}

// feed streams the source into ffmpeg's standard input until the
// recording stops; closing the stdin then lets ffmpeg finish its last
// segment.
func (r *recorder) feed(ctx context.Context) {
	w, err := r.t.OpenStdin(ctx, r.jobID)
	if err == nil {
		fctx, cancel := context.WithCancel(ctx)
		go func() { // the stop ends the feed
			defer cancel()
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for fctx.Err() == nil {
				r.mu.Lock()
				stop := r.stop
				r.mu.Unlock()
				if stop {
					return
				}
				select {
				case <-fctx.Done():
				case <-tick.C:
				}
			}
		}()
		err = r.src.Feed(fctx, w, r.st.FPS)
		cancel()
		if cerr := w.Close(); err == nil && ctx.Err() == nil {
			err = cerr
		}
		if errors.Is(err, context.Canceled) {
			err = nil
		}
	}
	if err != nil && ctx.Err() == nil {
		r.mu.Lock()
		r.feedErr = fmt.Errorf("feeding the recorder: %w", err)
		r.mu.Unlock()
	}
}

// run collects segments until asked to stop (then the job is ended
// gracefully, so ffmpeg closes its last segment, which is collected too),
// until the job ends by itself, or until ctx ends (the sandbox ended).
func (r *recorder) run(ctx context.Context) {
	defer close(r.done)
	defer r.t.Release()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	var failure error
	stopping := false
	for {
		select {
		case <-ctx.Done():
			reason := "the sandbox ended"
			r.mu.Lock()
			if r.cutShort {
				reason = ReasonStopCutShort
			}
			r.mu.Unlock()
			// The segment being written is lost.
			r.finish(context.Background(), reason, nil, true)
			return
		case <-tick.C:
		}
		r.mu.Lock()
		stop, feedErr := r.stop, r.feedErr
		r.mu.Unlock()
		if stop && !stopping {
			stopping = true
			// A fed ffmpeg ends at the end of its input (the feed closes
			// it); the cancel after the grace ends one that does not.
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			_ = r.t.CancelJob(cctx, r.jobID, stopGrace)
			cancel()
		}
		info, err := r.jobInfo(ctx)
		ended := err == nil && !info.Running
		if err := r.collect(ctx); err != nil {
			failure = err
		}
		if failure == nil && feedErr != nil && !stopping {
			failure = feedErr
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
			reason := "the recorder ended"
			if stopping {
				r.mu.Lock()
				reason = r.stopReason
				r.mu.Unlock()
			}
			// A recorder that failed while running is killed: the
			// segment it was writing is lost.
			r.finish(ctx, reason, failure, !ended || r.unlisted(ctx))
			return
		}
	}
}

func (r *recorder) jobInfo(ctx context.Context) (agentproto.JobInfo, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return r.t.JobInfo(cctx, r.jobID)
}

// unlisted reports whether ffmpeg, ended, left a segment it never closed
// (killed before it could, e.g. after a stop's grace): the file of the
// next segment after the kept ones exists, though unlisted.
func (r *recorder) unlisted(ctx context.Context) bool {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	rc, err := r.t.ReadFile(cctx, fmt.Sprintf("%s/seg-%05d.mp4", r.dir, r.taken))
	if err != nil {
		return false
	}
	rc.Close()
	return true
}

// finish records the end and removes the recording's directory. lost says
// that the segment being written when the recorder ended was not kept: the
// video ends at the last kept segment's end, before the recording's end.
func (r *recorder) finish(ctx context.Context, reason string, failure error, lost bool) {
	r.cancel() // ends the feed
	now := time.Now().UTC()
	r.mu.Lock()
	r.st.StoppedAt = &now
	r.st.State = "stopped"
	if failure != nil {
		r.st.State, r.st.Error = "failed", failure.Error()
	}
	st := r.st
	r.mu.Unlock()
	d := map[string]any{"recording": st.ID, "reason": reason, "segments": st.Segments, "bytes": st.Bytes, "last_segment_lost": lost}
	if failure != nil {
		d["error"] = failure.Error()
	}
	r.record(ctx, trace.KindVideoStopped, d)
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
	a, err := r.set.arts.KeepBytes(context.WithoutCancel(ctx), r.t.Tenant, r.t.SandboxID, recID+"-"+name, &buf)
	if err != nil {
		return fmt.Errorf("keeping segment %s: %w", name, err)
	}
	ws := wall(r.t0 + start)
	we := wall(r.t0 + end)
	r.record(ctx, trace.KindVideoSegment, map[string]any{"recording": recID, "source": r.src.Name, "index": idx,
		"start": ws.Format(time.RFC3339Nano), "end": we.Format(time.RFC3339Nano), "duration_ms": we.Sub(ws).Milliseconds(),
		"artifact": Ref(a)})
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
