package desktop

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"image"
	"strconv"
	"unicode/utf8"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/recording"
	"genesis.dev/sandbox/internal/trace"
)

// Keeper keeps bytes as an artifact of a sandbox (the trace's screenshots
// and video segments).
type Keeper = recording.Keeper

// maxEncoders bounds the screenshots being encoded and kept at once; a
// batch waits for a slot rather than let captures pile up in memory.
const maxEncoders = 2

// batchID names one request of actions in its events.
func batchID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// traced is what a batch records: its sandbox, tenant and id.
type traced struct {
	m      *Manager
	tenant string
	id     string
	batch  string
}

func (m *Manager) tracer(t *Target) *traced {
	if m.cfg.Trace == nil {
		return nil
	}
	return &traced{m: m, tenant: t.Tenant, id: t.SandboxID, batch: batchID()}
}

func (tr *traced) record(ctx context.Context, actor string, kind trace.Kind, d map[string]any) {
	if tr == nil {
		return
	}
	recordTo(ctx, tr.m.cfg.Trace, tr.tenant, tr.id, actor, kind, d)
}

func recordTo(ctx context.Context, rec trace.Recorder, tenant, id, actor string, kind trace.Kind, d map[string]any) {
	if rec == nil {
		return
	}
	b, err := json.Marshal(d)
	if err != nil {
		return
	}
	if len(b) > trace.MaxDataBytes { // a huge text or command: keep the event
		delete(d, "args")
		d["args_dropped"] = true
		if b, err = json.Marshal(d); err != nil {
			return
		}
	}
	rec.Record(context.WithoutCancel(ctx), tenant, id, trace.Event{Actor: actor, Kind: kind, Data: b})
}

// started records that step i of the batch starts: its arguments (the
// text of a sensitive action as a count), and its position in logical
// and physical (the display's) pixels.
func (tr *traced) started(ctx context.Context, i int, a api.ComputerAction, st step, sc scaler) {
	if tr == nil {
		return
	}
	args := a
	d := map[string]any{"batch": tr.batch, "index": i, "action": a.Action, "display": sc.logical}
	if a.Sensitive && args.Text != "" {
		d["redacted"] = true
		d["text_chars"] = utf8.RuneCountInString(a.Text)
		args.Text = ""
	}
	if a.Sensitive && len(args.Env) > 0 {
		args.Env = nil
		d["redacted"] = true
	}
	d["args"] = args
	if len(st.pts) > 0 {
		p := st.pts[len(st.pts)-1]
		x, y := sc.toReal(p)
		d["logical"] = p
		d["physical"] = api.ComputerPoint{X: x, Y: y}
	}
	tr.record(ctx, trace.ActorAgent, trace.KindComputerActionStarted, d)
}

// finished records how step r ended.
func (tr *traced) finished(ctx context.Context, r api.ComputerStepResult) {
	if tr == nil {
		return
	}
	d := map[string]any{"batch": tr.batch, "index": r.Index, "action": r.Action, "ok": r.OK, "duration_ms": r.DurationMS}
	if r.Error != "" {
		d["error"], d["code"] = r.Error, r.Code
	}
	if r.Cursor != nil {
		d["cursor"] = r.Cursor
	}
	if r.JobID != "" {
		d["job_id"] = r.JobID
	}
	tr.record(ctx, trace.ActorSystem, trace.KindComputerActionFinished, d)
}

// refused records a batch refused before it ran (a human holds control).
func (tr *traced) refused(ctx context.Context, code string, n int) {
	tr.record(ctx, trace.ActorSystem, trace.KindActionRefused, map[string]any{"action": "computer.actions", "batch": tr.batch, "state": code, "actions": n})
}

// wantShot reports whether step st gets a trace screenshot in phase
// ("before" or "after"): input steps only, and what the mode asks.
func (tr *traced) wantShot(st step, phase string) bool {
	if tr == nil || tr.m.cfg.Artifacts == nil {
		return false
	}
	if k := actions[st.kind]; k.looks || k.launches { // a launched program draws later
		return false
	}
	return recording.WantShot(tr.m.cfg.Screenshots, phase)
}

// shot captures the whole display now (the caller holds the session) and
// keeps it, with a thumbnail, as artifacts in the background; the event
// computer.screenshot names both, the step and the point it acted on. A
// failed capture is recorded as such: the action is not failed by it.
func (tr *traced) shot(ctx context.Context, d *display, sc scaler, i int, st step, phase string) {
	img, err := d.capture(image.Rect(0, 0, d.width, d.height))
	tr.keep(ctx, sc, i, st, phase, img, err)
}

// keep keeps img (or records err) as the screenshot of step i in phase, in
// the background.
func (tr *traced) keep(ctx context.Context, sc scaler, i int, st step, phase string, img *image.RGBA, err error) {
	ev := map[string]any{"batch": tr.batch, "index": i, "action": st.kind, "phase": phase}
	if len(st.pts) > 0 {
		x, y := sc.toReal(st.pts[len(st.pts)-1])
		ev["physical"] = api.ComputerPoint{X: x, Y: y}
	}
	if err != nil {
		ev["error"] = err.Error()
		tr.record(ctx, trace.ActorSystem, trace.KindComputerScreenshot, ev)
		return
	}
	ev["size"] = api.DisplaySize{Width: img.Rect.Dx(), Height: img.Rect.Dy()}
	tr.m.encoders <- struct{}{}
	go func() {
		defer func() { <-tr.m.encoders }()
		ctx := context.WithoutCancel(ctx)
		name := tr.batch + "-" + strconv.Itoa(i) + "-" + phase
		s, err := recording.KeepRGBA(ctx, tr.m.cfg.Artifacts, tr.tenant, tr.id, name, img)
		if err != nil {
			ev["error"] = err.Error()
		} else {
			ev["artifact"] = recording.Ref(s.Full)
			if s.Thumb != nil {
				ev["thumbnail"] = recording.Ref(s.Thumb)
			}
		}
		tr.record(ctx, trace.ActorSystem, trace.KindComputerScreenshot, ev)
	}()
}
