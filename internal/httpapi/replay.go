package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"net/http"
	"time"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/trace"
)

// defaultReplayThreshold is the fraction of pixels a replayed screenshot
// may differ by and still be the same.
const defaultReplayThreshold = 0.02

// maxReplayGap bounds the wait between two replayed actions.
const maxReplayGap = 5 * time.Second

// replayTrace serves POST /v1/traces/{id}/replay (id: the sandbox whose trace): the agent's actions
// recorded in the sandbox's trace (computer actions, browser actions, execs
// and jobs; never a person's input, the API's or the system's) are run
// again, one at a time and in order, on a running sandbox of the same
// profile, and each is compared with its record: whether it succeeded, a
// job's exit code, and for a computer action the screenshot after it.
func (s *Server) replayTrace(w http.ResponseWriter, r *http.Request) {
	var req api.ReplayRequest
	if err := s.decode(w, r, &req); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	ten, src := tenantOf(r), r.PathValue("id")
	if req.Threshold == 0 {
		req.Threshold = defaultReplayThreshold
	}
	if req.Threshold < 0 || req.Threshold > 1 {
		s.writeProblem(w, r, invalidArg("threshold must be between 0 and 1"))
		return
	}
	if req.TargetSandbox == "" || req.TargetSandbox == src {
		s.writeProblem(w, r, invalidArg("target_sandbox must name another sandbox (a fresh one of the source's profile)"))
		return
	}
	if _, err := s.trace.Last(ten, src); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	source, err := s.ctl.GetSandbox(r.Context(), ten, src)
	if err != nil {
		s.writeProblem(w, r, errdefs.WithCode("source_unknown", fmt.Errorf("the record of sandbox %s is gone, so its profile is unknown: %w", src, errdefs.ErrFailedPrecondition)))
		return
	}
	target, err := s.ctl.GetSandbox(r.Context(), ten, req.TargetSandbox)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	if err := control.CheckReservation(target, ""); err != nil {
		s.writeProblem(w, r, err) // nothing is replayed into a sandbox reserved to a workload
		return
	}
	if target.Profile != source.Profile {
		s.writeProblem(w, r, errdefs.WithCode("profile_mismatch", fmt.Errorf("sandbox %s runs profile %s; the trace of %s was recorded on %s: %w",
			target.ID, target.Profile, src, source.Profile, errdefs.ErrInvalidArgument)))
		return
	}
	var events []trace.Event
	for after := int64(0); ; {
		evs, _, err := s.trace.Read(ten, src, after, 1000)
		if err != nil {
			s.writeProblem(w, r, err)
			return
		}
		if len(evs) == 0 {
			break
		}
		events = append(events, evs...)
		after = evs[len(evs)-1].Seq
	}
	start := time.Now()
	rp := replayer{s: s, ctx: r.Context(), tenant: ten, target: target.ID, threshold: req.Threshold, events: events}
	out := api.ReplayReport{Source: src, Target: target.ID, Steps: []api.ReplayStep{}}
	var last time.Time // the recorded time of the last action replayed
	for i, ev := range events {
		if ev.Actor != trace.ActorAgent {
			continue
		}
		// At the recorded pace: the gap between two recorded actions (the
		// agent's polls, a window appearing, at most maxReplayGap) passes
		// again before the next one.
		if !last.IsZero() {
			if gap := min(ev.Time.Sub(last), maxReplayGap); gap > 0 {
				select {
				case <-time.After(gap):
				case <-r.Context().Done():
				}
			}
		}
		last = ev.Time
		var st *api.ReplayStep
		switch {
		case ev.Kind == "computer.action.started" && s.desktop != nil:
			st = rp.computer(i, ev)
		case ev.Kind == "browser.action.started" && s.browser != nil:
			st = rp.browser(i, ev)
		case ev.Kind == "job.started":
			st = rp.job(i, ev)
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
		if r.Context().Err() != nil {
			break
		}
	}
	out.Duration = time.Since(start).Milliseconds()
	writeJSON(w, http.StatusOK, out)
}

type replayer struct {
	s         *Server
	ctx       context.Context
	tenant    string
	target    string
	threshold float64
	events    []trace.Event
}

// finished finds the event that ended the action started by events[i]: the
// first later event of kind whose data matches by match.
func (rp *replayer) finished(i int, kind string, match func(d map[string]any) bool) map[string]any {
	for _, ev := range rp.events[i+1:] {
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

func (rp *replayer) computer(i int, ev trace.Event) *api.ReplayStep {
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
	st := &api.ReplayStep{Seq: ev.Seq, Kind: ev.Kind, Action: d.Action}
	same := func(m map[string]any) bool { return m["batch"] == d.Batch && m["index"] == float64(d.Index) }
	if f := rp.finished(i, "computer.action.finished", same); f != nil {
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
	res, err := rp.s.desktop.Run(rp.ctx, rp.tenant, rp.target, req)
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
	shot := rp.finished(i, "computer.screenshot", func(m map[string]any) bool { return same(m) && m["phase"] == "after" })
	if shot == nil {
		return st
	}
	art, _ := shot["artifact"].(map[string]any)
	aid, _ := art["id"].(string)
	if aid == "" {
		return st
	}
	recorded, err := rp.artifactPNG(aid)
	if err != nil {
		st.Reason = "the recorded screenshot: " + err.Error()
		return st
	}
	now, err := rp.s.desktop.Run(rp.ctx, rp.tenant, rp.target, &api.ComputerActionsRequest{Actions: []api.ComputerAction{{Action: "screenshot"}}})
	if err != nil || !now.OK {
		st.Status, st.Reason = "failed", fmt.Sprintf("screenshot after the action: %v", err)
		return st
	}
	img, err := decodePNG64(now.Results[0].Screenshot)
	if err != nil {
		st.Status, st.Reason = "failed", "screenshot after the action: "+err.Error()
		return st
	}
	diff := pixelDiff(recorded, img)
	st.ScreenshotDiff = &diff
	if diff > rp.threshold {
		st.Status, st.Reason = "differs", fmt.Sprintf("%.1f%% of the screenshot's pixels differ (threshold %.1f%%)", 100*diff, 100*rp.threshold)
	}
	return st
}

func (rp *replayer) browser(i int, ev trace.Event) *api.ReplayStep {
	var d struct {
		Index    int               `json:"index"`
		Type     string            `json:"type"`
		Redacted bool              `json:"redacted"`
		Args     api.BrowserAction `json:"args"`
	}
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		return nil
	}
	st := &api.ReplayStep{Seq: ev.Seq, Kind: ev.Kind, Action: d.Type}
	if f := rp.finished(i, "browser.action.finished", func(m map[string]any) bool {
		return m["index"] == float64(d.Index) && m["type"] == d.Type
	}); f != nil {
		st.RecordedOK, _ = f["ok"].(bool)
	}
	if d.Redacted {
		st.Status, st.Reason = "skipped", "its text was redacted in the trace"
		return st
	}
	res, err := rp.s.browser.Run(rp.ctx, rp.tenant, rp.target, &api.BrowserActionsRequest{Actions: []api.BrowserAction{d.Args}})
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

func (rp *replayer) job(i int, ev trace.Event) *api.ReplayStep {
	var d struct {
		JobID   string   `json:"job_id"`
		Mode    string   `json:"mode"`
		Command []string `json:"command"`
		Script  string   `json:"script"`
	}
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		return nil
	}
	st := &api.ReplayStep{Seq: ev.Seq, Kind: ev.Kind, Action: d.Mode}
	if f := rp.finished(i, "job.finished", func(m map[string]any) bool { return m["job_id"] == d.JobID }); f != nil {
		if c, ok := f["exit_code"].(float64); ok {
			code := int(c)
			st.RecordedExitCode = &code
		}
		st.RecordedOK = f["state"] == "succeeded"
	}
	if len(d.Command) == 0 && d.Script == "" {
		st.Status, st.Reason = "skipped", "the trace holds no command (too long to record)"
		return st
	}
	out, err := rp.s.jobs.Exec(rp.ctx, jobs.ExecInput{Tenant: rp.tenant, SandboxID: rp.target, Command: d.Command, Script: d.Script,
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

func (rp *replayer) artifactPNG(id string) (image.Image, error) {
	_, f, err := rp.s.arts.Open(rp.ctx, rp.tenant, id)
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

// pixelDiff is the fraction of pixels that differ by more than a little
// in any channel (1 when the sizes differ).
func pixelDiff(a, b image.Image) float64 {
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
