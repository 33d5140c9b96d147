package replay

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"os"
	"time"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/browser"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/trace"
)

// DefaultThreshold is the fraction of pixels a replayed screenshot may
// differ by and still be the same.
const DefaultThreshold = 0.02

// maxGap bounds the wait between two replayed actions.
const maxGap = 5 * time.Second

// Traces reads the recorded trace (trace.Store).
type Traces interface {
	Last(tenant, sandboxID string) (int64, error)
	Read(tenant, sandboxID string, after int64, limit int) ([]trace.Event, <-chan struct{}, error)
}

// Sandboxes finds the source's and the target's records (control.Service).
type Sandboxes interface {
	GetSandbox(ctx context.Context, tenant, id string) (*sandbox.Sandbox, error)
}

// Computer runs computer actions (desktop.Manager).
type Computer interface {
	Run(ctx context.Context, tenant, id string, req *api.ComputerActionsRequest) (*api.ComputerActionsResult, error)
}

// Browser runs browser actions (browser.Manager).
type Browser interface {
	Run(ctx context.Context, tenant, id string, req *api.BrowserActionsRequest) (*browser.ActionsResult, error)
}

// Jobs runs a job to its end (jobs.Manager).
type Jobs interface {
	Exec(ctx context.Context, in jobs.ExecInput) (*jobs.ExecOutput, error)
}

// Artifacts opens a recorded screenshot (artifacts.Keeper).
type Artifacts interface {
	Open(ctx context.Context, tenant, id string) (*sandbox.Artifact, *os.File, error)
}

// Config configures a Replayer. Traces, Sandboxes, Jobs and Artifacts are
// required; without Computer (Browser) computer (browser) actions are not
// replayed.
type Config struct {
	Traces    Traces
	Sandboxes Sandboxes
	Computer  Computer
	Browser   Browser
	Jobs      Jobs
	Artifacts Artifacts
	// Now is the clock (default time.Now); Sleep waits d or until ctx
	// ends (default a timer).
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration)
}

// Replayer replays traces.
type Replayer struct{ cfg Config }

// New returns a Replayer for cfg.
func New(cfg Config) (*Replayer, error) {
	if cfg.Traces == nil || cfg.Sandboxes == nil || cfg.Jobs == nil || cfg.Artifacts == nil {
		return nil, fmt.Errorf("replay: nil traces, sandboxes, jobs or artifacts: %w", errdefs.ErrInvalidArgument)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Sleep == nil {
		cfg.Sleep = func(ctx context.Context, d time.Duration) {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
			}
		}
	}
	return &Replayer{cfg: cfg}, nil
}

func invalidArg(msg string) error { return errdefs.Invalid("%s", msg) }

// Replay runs the agent's actions recorded in the trace of tenant's
// sandbox source (computer actions, browser actions, execs and jobs;
// never a person's input, the API's or the system's) again, one at a time,
// in order and at the recorded pace, on req.TargetSandbox: a running
// sandbox of the same profile. Each is compared with its record. When ctx
// ends the report holds the steps replayed so far.
func (rp *Replayer) Replay(ctx context.Context, tenant, source string, req api.ReplayRequest) (*api.ReplayReport, error) {
	if req.Threshold == 0 {
		req.Threshold = DefaultThreshold
	}
	if req.Threshold < 0 || req.Threshold > 1 {
		return nil, invalidArg("threshold must be between 0 and 1")
	}
	if req.TargetSandbox == "" || req.TargetSandbox == source {
		return nil, invalidArg("target_sandbox must name another sandbox (a fresh one of the source's profile)")
	}
	if _, err := rp.cfg.Traces.Last(tenant, source); err != nil {
		return nil, err
	}
	src, err := rp.cfg.Sandboxes.GetSandbox(ctx, tenant, source)
	if err != nil {
		return nil, errdefs.WithCode("source_unknown", fmt.Errorf("the record of sandbox %s is gone, so its profile is unknown: %w", source, errdefs.ErrFailedPrecondition))
	}
	target, err := rp.cfg.Sandboxes.GetSandbox(ctx, tenant, req.TargetSandbox)
	if err != nil {
		return nil, err
	}
	if err := control.CheckReservation(target, ""); err != nil {
		return nil, err // nothing is replayed into a sandbox reserved to a workload
	}
	if target.Profile != src.Profile {
		return nil, errdefs.WithCode("profile_mismatch", fmt.Errorf("sandbox %s runs profile %s; the trace of %s was recorded on %s: %w",
			target.ID, target.Profile, source, src.Profile, errdefs.ErrInvalidArgument))
	}
	var events []trace.Event
	for after := int64(0); ; {
		evs, _, err := rp.cfg.Traces.Read(tenant, source, after, 1000)
		if err != nil {
			return nil, err
		}
		if len(evs) == 0 {
			break
		}
		events = append(events, evs...)
		after = evs[len(evs)-1].Seq
	}
	start := rp.cfg.Now()
	run := &run{Replayer: rp, tenant: tenant, target: target.ID, threshold: req.Threshold, events: events}
	out := &api.ReplayReport{Source: source, Target: target.ID, Steps: []api.ReplayStep{}}
	var last time.Time // the recorded time of the last action replayed
	for i, ev := range events {
		if ev.Actor != trace.ActorAgent {
			continue
		}
		// At the recorded pace: the gap between two recorded actions (the
		// agent's polls, a window appearing, at most maxGap) passes again
		// before the next one.
		if !last.IsZero() {
			if gap := min(ev.Time.Sub(last), maxGap); gap > 0 {
				rp.cfg.Sleep(ctx, gap)
			}
		}
		last = ev.Time
		var st *api.ReplayStep
		switch {
		case ev.Kind == trace.KindComputerActionStarted && rp.cfg.Computer != nil:
			st = run.computer(ctx, i, ev)
		case ev.Kind == trace.KindBrowserActionStarted && rp.cfg.Browser != nil:
			st = run.browser(ctx, i, ev)
		case ev.Kind == trace.KindJobStarted:
			st = run.job(ctx, i, ev)
		default:
			continue
		}
		if st == nil {
			continue
		}
		switch st.Status {
		case "same":
			out.Same++
		case "differs":
			out.Differs++
		case "failed":
			out.Failed++
		default:
			out.Skipped++
		}
		out.Steps = append(out.Steps, *st)
		if ctx.Err() != nil {
			break
		}
	}
	out.Duration = rp.cfg.Now().Sub(start).Milliseconds()
	return out, nil
}

// run is one replay: its target and the source's events.
type run struct {
	*Replayer
	tenant    string
	target    string
	threshold float64
	events    []trace.Event
}

// finished finds the event that ended the action started by events[i]: the
// first later event of kind whose data matches by match.
func (r *run) finished(i int, kind trace.Kind, match func(d map[string]any) bool) map[string]any {
	for _, ev := range r.events[i+1:] {
		if ev.Kind != kind {
			continue
		}
		var d map[string]any
		if json.Unmarshal(ev.Data, &d) == nil && match(d) {
			return d
		}
	}
	return nil
}

func (r *run) computer(ctx context.Context, i int, ev trace.Event) *api.ReplayStep {
	var d struct {
		Batch    string             `json:"batch"`
		Index    int                `json:"index"`
		Action   string             `json:"action"`
		Redacted bool               `json:"redacted"`
		Display  *api.DisplaySize   `json:"display"`
		Args     api.ComputerAction `json:"args"`
	}
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		return nil
	}
	st := &api.ReplayStep{Seq: ev.Seq, Kind: string(ev.Kind), Action: d.Action}
	same := func(m map[string]any) bool { return m["batch"] == d.Batch && m["index"] == float64(d.Index) }
	if f := r.finished(i, trace.KindComputerActionFinished, same); f != nil {
		st.RecordedOK, _ = f["ok"].(bool)
	}
	if d.Redacted {
		st.Status, st.Reason = "skipped", "its text was redacted in the trace"
		return st
	}
	if d.Action == "wait" || d.Action == "screenshot" || d.Action == "zoom" || d.Action == "cursor_position" || d.Action == "list_windows" {
		st.Status, st.Reason = "skipped", "it only looks"
		return st
	}
	req := &api.ComputerActionsRequest{Actions: []api.ComputerAction{d.Args}, Display: d.Display}
	res, err := r.cfg.Computer.Run(ctx, r.tenant, r.target, req)
	if err != nil {
		st.Status, st.Reason = "failed", err.Error()
		return st
	}
	st.OK = res.OK
	if !res.OK && len(res.Results) > 0 {
		st.Reason = res.Results[0].Error
	}
	if st.OK != st.RecordedOK {
		st.Status = "differs"
		if st.Reason == "" {
			st.Reason = "the action failed when it was recorded"
		}
		return st
	}
	st.Status = "same"
	// The screenshot after it, against the recorded one at the real size.
	shot := r.finished(i, trace.KindComputerScreenshot, func(m map[string]any) bool { return same(m) && m["phase"] == "after" })
	if shot == nil {
		return st
	}
	art, _ := shot["artifact"].(map[string]any)
	aid, _ := art["id"].(string)
	if aid == "" {
		return st
	}
	recorded, err := r.artifactPNG(ctx, aid)
	if err != nil {
		st.Reason = "the recorded screenshot: " + err.Error()
		return st
	}
	now, err := r.cfg.Computer.Run(ctx, r.tenant, r.target, &api.ComputerActionsRequest{Actions: []api.ComputerAction{{Action: "screenshot"}}})
	if err != nil || !now.OK {
		st.Status, st.Reason = "failed", fmt.Sprintf("screenshot after the action: %v", err)
		return st
	}
	img, err := decodePNG64(now.Results[0].Screenshot)
	if err != nil {
		st.Status, st.Reason = "failed", "screenshot after the action: "+err.Error()
		return st
	}
	diff := PixelDiff(recorded, img)
	st.ScreenshotDiff = &diff
	if diff > r.threshold {
		st.Status, st.Reason = "differs", fmt.Sprintf("%.1f%% of the screenshot's pixels differ (threshold %.1f%%)", 100*diff, 100*r.threshold)
	}
	return st
}

func (r *run) browser(ctx context.Context, i int, ev trace.Event) *api.ReplayStep {
	var d struct {
		Index    int               `json:"index"`
		Type     string            `json:"type"`
		Redacted bool              `json:"redacted"`
		Args     api.BrowserAction `json:"args"`
	}
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		return nil
	}
	st := &api.ReplayStep{Seq: ev.Seq, Kind: string(ev.Kind), Action: d.Type}
	if f := r.finished(i, trace.KindBrowserActionFinished, func(m map[string]any) bool {
		return m["index"] == float64(d.Index) && m["type"] == d.Type
	}); f != nil {
		st.RecordedOK, _ = f["ok"].(bool)
	}
	if d.Redacted {
		st.Status, st.Reason = "skipped", "its text was redacted in the trace"
		return st
	}
	res, err := r.cfg.Browser.Run(ctx, r.tenant, r.target, &api.BrowserActionsRequest{Actions: []api.BrowserAction{d.Args}})
	if err != nil {
		st.Status, st.Reason = "failed", err.Error()
		return st
	}
	st.OK = res.OK
	if !res.OK && len(res.Results) > 0 {
		st.Reason = res.Results[0].Error
	}
	st.Status = "same"
	if st.OK != st.RecordedOK {
		st.Status = "differs"
	}
	return st
}

func (r *run) job(ctx context.Context, i int, ev trace.Event) *api.ReplayStep {
	var d struct {
		JobID   string   `json:"job_id"`
		Mode    string   `json:"mode"`
		Command []string `json:"command"`
		Script  string   `json:"script"`
	}
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		return nil
	}
	st := &api.ReplayStep{Seq: ev.Seq, Kind: string(ev.Kind), Action: d.Mode}
	if f := r.finished(i, trace.KindJobFinished, func(m map[string]any) bool { return m["job_id"] == d.JobID }); f != nil {
		if c, ok := f["exit_code"].(float64); ok {
			code := int(c)
			st.RecordedExitCode = &code
		}
		st.RecordedOK = f["state"] == string(sandbox.JobSucceeded)
	}
	if len(d.Command) == 0 && d.Script == "" {
		st.Status, st.Reason = "skipped", "the trace holds no command (too long to record)"
		return st
	}
	out, err := r.cfg.Jobs.Exec(ctx, jobs.ExecInput{Tenant: r.tenant, SandboxID: r.target, Command: d.Command, Script: d.Script,
		TimeoutMS: 60_000, MaxOutputBytes: 64 << 10})
	if err != nil {
		st.Status, st.Reason = "failed", err.Error()
		return st
	}
	st.ExitCode = out.Job.ExitCode
	st.OK = out.Job.State == sandbox.JobSucceeded
	st.Status = "same"
	if (st.ExitCode == nil) != (st.RecordedExitCode == nil) || (st.ExitCode != nil && *st.ExitCode != *st.RecordedExitCode) || st.OK != st.RecordedOK {
		st.Status, st.Reason = "differs", "the exit differs from the recorded one"
	}
	return st
}

func (r *run) artifactPNG(ctx context.Context, id string) (image.Image, error) {
	_, f, err := r.cfg.Artifacts.Open(ctx, r.tenant, id)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return png.Decode(io.LimitReader(f, 64<<20))
}

func decodePNG64(b64 string) (image.Image, error) {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, err
	}
	return png.Decode(bytes.NewReader(raw))
}

// PixelDiff is the fraction of pixels of a and b that differ by more than
// a little in any channel (1 when the sizes differ).
func PixelDiff(a, b image.Image) float64 {
	ab, bb := a.Bounds(), b.Bounds()
	if ab.Dx() != bb.Dx() || ab.Dy() != bb.Dy() || ab.Empty() {
		return 1
	}
	const tol = 24 << 8
	n := 0
	for y := 0; y < ab.Dy(); y++ {
		for x := 0; x < ab.Dx(); x++ {
			r1, g1, b1, _ := a.At(ab.Min.X+x, ab.Min.Y+y).RGBA()
			r2, g2, b2, _ := b.At(bb.Min.X+x, bb.Min.Y+y).RGBA()
			if absDiff(r1, r2) > tol || absDiff(g1, g2) > tol || absDiff(b1, b2) > tol {
				n++
			}
		}
	}
	return float64(n) / float64(ab.Dx()*ab.Dy())
}

func absDiff(a, b uint32) uint32 {
	if a > b {
		return a - b
	}
	return b - a
}
