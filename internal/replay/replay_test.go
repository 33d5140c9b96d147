package replay

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/browser"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/trace"
)

type fakeTraces struct{ events []trace.Event }

func (f *fakeTraces) Last(tenant, id string) (int64, error) {
	if id != "src" {
		return 0, errdefs.ErrNotFound
	}
	return int64(len(f.events)), nil
}

func (f *fakeTraces) Read(tenant, id string, after int64, limit int) ([]trace.Event, <-chan struct{}, error) {
	var out []trace.Event
	for _, e := range f.events {
		if e.Seq > after && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil, nil
}

type fakeSandboxes map[string]*sandbox.Sandbox

func (f fakeSandboxes) GetSandbox(ctx context.Context, tenant, id string) (*sandbox.Sandbox, error) {
	if sb := f[id]; sb != nil {
		return sb, nil
	}
	return nil, errdefs.ErrNotFound
}

type fakeComputer struct {
	shot []byte // the PNG a screenshot answers
	runs []string
}

func (f *fakeComputer) Run(ctx context.Context, tenant, id string, req *api.ComputerActionsRequest) (*api.ComputerActionsResult, error) {
	a := req.Actions[0].Action
	f.runs = append(f.runs, a)
	res := api.ComputerStepResult{OK: true}
	if a == "screenshot" {
		res.Screenshot = base64.StdEncoding.EncodeToString(f.shot)
	}
	return &api.ComputerActionsResult{OK: true, Results: []api.ComputerStepResult{res}}, nil
}

type fakeBrowser struct{ ok bool }

func (f fakeBrowser) Run(ctx context.Context, tenant, id string, req *api.BrowserActionsRequest) (*browser.ActionsResult, error) {
	return &browser.ActionsResult{OK: f.ok}, nil
}

type fakeJobs struct{ code int }

func (f fakeJobs) Exec(ctx context.Context, in jobs.ExecInput) (*jobs.ExecOutput, error) {
	st := sandbox.JobSucceeded
	if f.code != 0 {
		st = sandbox.JobFailed
	}
	code := f.code
	return &jobs.ExecOutput{Job: &sandbox.Job{State: st, ExitCode: &code}}, nil
}

type fakeArtifacts struct{ path string }

func (f fakeArtifacts) Open(ctx context.Context, tenant, id string) (*sandbox.Artifact, *os.File, error) {
	if id != "art_shot" {
		return nil, nil, errdefs.ErrNotFound
	}
	fh, err := os.Open(f.path)
	return &sandbox.Artifact{ID: id}, fh, err
}

func pngOf(t *testing.T, c color.Color) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	for y := range 4 {
		for x := range 4 {
			img.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func ev(seq int64, actor string, kind trace.Kind, d any) trace.Event {
	b, _ := json.Marshal(d)
	return trace.Event{Seq: seq, Time: time.Unix(1000+seq, 0), Actor: actor, Kind: kind, Data: b}
}

// recorded is a trace with a click (and its screenshot after), a browser
// action that failed, a job that exited 3, a person's input and an
// action that only looks.
func recorded() []trace.Event {
	return []trace.Event{
		ev(1, trace.ActorAgent, trace.KindComputerActionStarted, map[string]any{"batch": "b1", "index": 0, "action": "left_click", "args": map[string]any{"action": "left_click"}}),
		ev(2, trace.ActorSystem, trace.KindComputerActionFinished, map[string]any{"batch": "b1", "index": 0, "ok": true}),
		ev(3, trace.ActorSystem, trace.KindComputerScreenshot, map[string]any{"batch": "b1", "index": 0, "phase": "after", "artifact": map[string]any{"id": "art_shot"}}),
		ev(4, trace.ActorAgent, trace.KindBrowserActionStarted, map[string]any{"index": 0, "type": "click", "args": map[string]any{"type": "click"}}),
		ev(5, trace.ActorSystem, trace.KindBrowserActionFinished, map[string]any{"index": 0, "type": "click", "ok": false}),
		ev(6, trace.ActorAgent, trace.KindJobStarted, map[string]any{"job_id": "job_1", "mode": "exec", "command": []string{"false"}}),
		ev(7, trace.ActorSystem, trace.KindJobFinished, map[string]any{"job_id": "job_1", "state": "failed", "exit_code": 3}),
		ev(8, trace.HumanActor("ann"), trace.KindHumanInput, map[string]any{}),
		ev(9, trace.ActorAgent, trace.KindComputerActionStarted, map[string]any{"batch": "b2", "index": 0, "action": "screenshot", "args": map[string]any{"action": "screenshot"}}),
	}
}

func newReplayer(t *testing.T, comp *fakeComputer, jobCode int, recordedShot []byte) (*Replayer, *[]time.Duration) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "shot.png")
	if err := os.WriteFile(path, recordedShot, 0o600); err != nil {
		t.Fatal(err)
	}
	var slept []time.Duration
	rp, err := New(Config{
		Traces: &fakeTraces{events: recorded()},
		Sandboxes: fakeSandboxes{
			"src":      {ID: "src", Profile: "desktop"},
			"dst":      {ID: "dst", Profile: "desktop"},
			"other":    {ID: "other", Profile: "python"},
			"reserved": {ID: "reserved", Profile: "desktop", Reserved: "mcp_x"},
		},
		Computer:  comp,
		Browser:   fakeBrowser{ok: false},
		Jobs:      fakeJobs{code: jobCode},
		Artifacts: fakeArtifacts{path: path},
		Sleep:     func(ctx context.Context, d time.Duration) { slept = append(slept, d) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return rp, &slept
}

func TestReplay(t *testing.T) {
	t.Parallel()
	red, blue := pngOf(t, color.RGBA{255, 0, 0, 255}), pngOf(t, color.RGBA{0, 0, 255, 255})
	tests := []struct {
		name    string
		shot    []byte // the screenshot after the replayed click
		jobCode int
		want    []string // statuses in order
	}{
		{"all the same", red, 3, []string{"same", "same", "same", "skipped"}},
		{"screenshot and exit differ", blue, 0, []string{"differs", "same", "differs", "skipped"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			comp := &fakeComputer{shot: tc.shot}
			rp, slept := newReplayer(t, comp, tc.jobCode, red)
			out, err := rp.Replay(context.Background(), "t1", "src", api.ReplayRequest{TargetSandbox: "dst"})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, st := range out.Steps {
				got = append(got, st.Status)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("steps %q, want %q", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("steps %q, want %q", got, tc.want)
				}
			}
			if out.Source != "src" || out.Target != "dst" || out.Same+out.Differs+out.Skipped+out.Failed != len(tc.want) {
				t.Fatalf("report %+v", out)
			}
			want := 1.0 // every pixel differs
			if bytes.Equal(tc.shot, red) {
				want = 0
			}
			if d := out.Steps[0].ScreenshotDiff; d == nil || *d != want {
				t.Fatalf("screenshot diff %v", d)
			}
			if s := out.Steps[2]; s.RecordedExitCode == nil || *s.RecordedExitCode != 3 || s.RecordedOK {
				t.Fatalf("job step %+v: want the recorded exit 3, not ok", s)
			}
			// Paced as recorded: one gap of 3 s between the click (1) and
			// the browser action (4), and so on between agent actions.
			if len(*slept) != 3 || (*slept)[0] != 3*time.Second {
				t.Fatalf("slept %v", *slept)
			}
			if len(comp.runs) != 2 || comp.runs[0] != "left_click" || comp.runs[1] != "screenshot" {
				t.Fatalf("computer ran %q: want the click and a screenshot, never the recorded look-only screenshot", comp.runs)
			}
		})
	}
}

func TestReplayRefuses(t *testing.T) {
	t.Parallel()
	red := pngOf(t, color.RGBA{255, 0, 0, 255})
	tests := []struct {
		name, source string
		req          api.ReplayRequest
		class        error
		code         string
	}{
		{"threshold above 1", "src", api.ReplayRequest{TargetSandbox: "dst", Threshold: 1.5}, errdefs.ErrInvalidArgument, ""},
		{"no target", "src", api.ReplayRequest{}, errdefs.ErrInvalidArgument, ""},
		{"target is the source", "src", api.ReplayRequest{TargetSandbox: "src"}, errdefs.ErrInvalidArgument, ""},
		{"no trace", "gone", api.ReplayRequest{TargetSandbox: "dst"}, errdefs.ErrNotFound, ""},
		{"unknown target", "src", api.ReplayRequest{TargetSandbox: "nope"}, errdefs.ErrNotFound, ""},
		{"another profile", "src", api.ReplayRequest{TargetSandbox: "other"}, errdefs.ErrInvalidArgument, "profile_mismatch"},
		{"reserved target", "src", api.ReplayRequest{TargetSandbox: "reserved"}, errdefs.ErrPermissionDenied, "sandbox_reserved"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			comp := &fakeComputer{shot: red}
			rp, _ := newReplayer(t, comp, 0, red)
			_, err := rp.Replay(context.Background(), "t1", tc.source, tc.req)
			if !errors.Is(err, tc.class) || (tc.code != "" && errdefs.Code(err) != tc.code) {
				t.Fatalf("err %v (code %q), want %v with code %q", err, errdefs.Code(err), tc.class, tc.code)
			}
			if len(comp.runs) != 0 {
				t.Fatalf("a refused replay ran %q", comp.runs)
			}
		})
	}
}

func TestPixelDiff(t *testing.T) {
	t.Parallel()
	a := image.NewRGBA(image.Rect(0, 0, 2, 2))
	b := image.NewRGBA(image.Rect(0, 0, 2, 2))
	if d := PixelDiff(a, b); d != 0 {
		t.Fatalf("equal images differ by %v", d)
	}
	b.Set(0, 0, color.RGBA{255, 255, 255, 255})
	b.Set(1, 1, color.RGBA{10, 10, 10, 255}) // within the tolerance
	if d := PixelDiff(a, b); d != 0.25 {
		t.Fatalf("one pixel of four: diff %v, want 0.25", d)
	}
	if d := PixelDiff(a, image.NewRGBA(image.Rect(0, 0, 3, 2))); d != 1 {
		t.Fatalf("sizes differ: diff %v, want 1", d)
	}
}
