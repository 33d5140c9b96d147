package recording

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"path"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/trace"
)

// fakeFFmpeg plays ffmpeg in a sandbox for a recorder: it writes one
// segment and closes it (lists it in segments.csv) only when its job is
// ended gracefully (a cancel with a grace), as ffmpeg does on SIGTERM; a
// cancel without grace kills it with the segment unlisted.
type fakeFFmpeg struct {
	mu       sync.Mutex
	files    map[string][]byte // by base name (the recorder's directory is one)
	running  bool
	released int
	// killedInGrace plays an ffmpeg too starved to close its segment
	// within a stop's grace: the cancel kills it, the segment unlisted.
	killedInGrace bool
}

func (f *fakeFFmpeg) target(sandboxID string) *Target {
	return &Target{
		Tenant: "a", SandboxID: sandboxID,
		Launch: func(context.Context, agentproto.JobStartRequest) (agentproto.JobInfo, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.running = true
			f.files["ffmpeg.log"] = []byte("Input #0, x11grab, from ':0':\n  Duration: N/A, start: 1700000000.250000, bitrate: N/A\n")
			f.files["seg-00000.mp4"] = []byte("segment being written")
			return agentproto.JobInfo{JobID: "job_recorder", Running: true}, nil
		},
		JobInfo: func(_ context.Context, id string) (agentproto.JobInfo, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.running {
				return agentproto.JobInfo{JobID: id, Running: true}, nil
			}
			return agentproto.JobInfo{JobID: id, Exit: &agentproto.ExitResult{ExitReason: "canceled"}}, nil
		},
		CancelJob: func(_ context.Context, _ string, grace time.Duration) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.running && grace > 0 && !f.killedInGrace {
				f.files["seg-00000.mp4"] = []byte("the whole last segment")
				f.files["segments.csv"] = []byte("seg-00000.mp4,0.000000,3.400000\n")
			}
			f.running = false
			return nil
		},
		ReadFile: func(_ context.Context, p string) (io.ReadCloser, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			b, ok := f.files[path.Base(p)]
			if !ok {
				return nil, errdefs.ErrNotFound
			}
			return io.NopCloser(bytes.NewReader(b)), nil
		},
		RemoveFile: func(_ context.Context, p string, _ bool) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			delete(f.files, path.Base(p))
			return nil
		},
		Release: func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.released++
		},
	}
}

// events and kept are a trace recorder and an artifact keeper in memory.
type events struct {
	mu   sync.Mutex
	list []trace.Event
	kept map[string][]byte
}

func (e *events) Record(_ context.Context, _, _ string, ev trace.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, ev)
}

func (e *events) KeepBytes(_ context.Context, _, _, name string, r io.Reader) (*sandbox.Artifact, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.kept[name] = b
	return &sandbox.Artifact{ID: "art_" + name, Size: int64(len(b))}, nil
}

func (e *events) of(kind string) []map[string]any {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []map[string]any
	for _, ev := range e.list {
		if string(ev.Kind) == kind {
			var d map[string]any
			_ = json.Unmarshal(ev.Data, &d)
			out = append(out, d)
		}
	}
	return out
}

var display = Source{Name: "display", Input: func(int) string { return "-f x11grab -i :0" }}

// TestDrainKeepsTheLastSegment: a service that stops drains its recordings
// and they end as a stop ends them: ffmpeg ended gracefully, the segment it
// was writing kept and recorded, video.stopped saying why; a new recording
// is refused (503 service_draining) and Close after it has nothing left.
// Without the drain (End, as when a sandbox ends) the segment is lost.
func TestDrainKeepsTheLastSegment(t *testing.T) {
	t.Parallel()
	ev := &events{kept: map[string][]byte{}}
	set := NewSet(ev, ev)
	ff := &fakeFFmpeg{files: map[string][]byte{}}
	rec, err := set.Start(t.Context(), ff.target("sbx_1"), display, Options{SegmentSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	if rec.JobID != "job_recorder" {
		t.Errorf("recording's job_id %q, want the recorder's job job_recorder", rec.JobID)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	set.Drain(ctx)

	st, err := set.Get("sbx_1")
	if err != nil || st.State != "stopped" || st.Segments != 1 {
		t.Fatalf("after the drain: %+v %v, want stopped with 1 segment", st, err)
	}
	if got := ev.kept[rec.ID+"-seg-00000.mp4"]; string(got) != "the whole last segment" {
		t.Errorf("kept segment %q, want the one ffmpeg closed", got)
	}
	segs := ev.of("video.segment")
	if len(segs) != 1 || segs[0]["duration_ms"] != float64(3400) {
		t.Errorf("video.segment events %v, want one of 3.4 s", segs)
	}
	stopped := ev.of("video.stopped")
	if len(stopped) != 1 || stopped[0]["reason"] != ReasonServiceStopping || stopped[0]["segments"] != float64(1) || stopped[0]["last_segment_lost"] != false {
		t.Errorf("video.stopped %v, want one with reason %q and 1 segment", stopped, ReasonServiceStopping)
	}
	if ff.released != 1 {
		t.Errorf("target released %d times, want 1", ff.released)
	}

	_, err = set.Start(t.Context(), ff.target("sbx_2"), display, Options{})
	if errdefs.Code(err) != CodeDraining || !errdefs.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("a recording while draining: %v, want 503 %s", err, CodeDraining)
	}
	if ff.released != 2 {
		t.Errorf("the refused recording's target released %d times in all, want 2", ff.released)
	}
	set.Close()
	if n := len(ev.of("video.stopped")); n != 1 {
		t.Errorf("%d video.stopped after Close, want still 1", n)
	}

	// The contrast: a recording ended with its sandbox keeps nothing of
	// the segment being written.
	lost := NewSet(ev, ev)
	ff2 := &fakeFFmpeg{files: map[string][]byte{}}
	if _, err := lost.Start(t.Context(), ff2.target("sbx_3"), display, Options{SegmentSeconds: 60}); err != nil {
		t.Fatal(err)
	}
	lost.End("sbx_3")
	if segs := ev.of("video.segment"); len(segs) != 1 {
		t.Errorf("%d video.segment events after End, want still 1 (the ended recording's segment is lost)", len(segs))
	}
	if stopped := ev.of("video.stopped"); len(stopped) != 2 || stopped[1]["last_segment_lost"] != true {
		t.Errorf("video.stopped after End %v, want a second one saying the last segment is lost", stopped)
	}
}

// TestStopSaysTheLastSegmentIsLost: a stop whose recorder is killed before
// it closes the segment it is writing (a starved ffmpeg past the stop's
// grace) ends stopped, and its video.stopped says that the last segment is
// lost: the video ends before the recording did.
func TestStopSaysTheLastSegmentIsLost(t *testing.T) {
	t.Parallel()
	ev := &events{kept: map[string][]byte{}}
	set := NewSet(ev, ev)
	ff := &fakeFFmpeg{files: map[string][]byte{}, killedInGrace: true}
	if _, err := set.Start(t.Context(), ff.target("sbx_1"), display, Options{SegmentSeconds: 60}); err != nil {
		t.Fatal(err)
	}
	st, err := set.Stop(t.Context(), "sbx_1")
	if err != nil || st.State != "stopped" || st.Segments != 0 {
		t.Fatalf("stop: %+v %v, want stopped with no segment", st, err)
	}
	stopped := ev.of("video.stopped")
	if len(stopped) != 1 || stopped[0]["reason"] != "stopped" || stopped[0]["last_segment_lost"] != true {
		t.Errorf("video.stopped %v, want one saying the last segment is lost", stopped)
	}
}
