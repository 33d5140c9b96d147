package desktop

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"image"
	"image/png"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jezek/xgb/xproto"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/recording"
)

// Error codes of the actions API.
const (
	CodeUnknownAction = "unknown_action"
	CodeOutOfRange    = "coordinate_out_of_range"
	CodeActionFailed  = "action_failed"
	// CodeWindowNotFound is the code of a wait_for_window step whose
	// window did not show within its duration.
	CodeWindowNotFound = "window_not_found"
)

// Bounds of wait_for_window: how long it waits by default and at most,
// and how often it looks.
const (
	defaultWindowWait = 10 * time.Second
	maxWindowWait     = 30 * time.Second
	windowPoll        = 50 * time.Millisecond
	// wmWait bounds how long a display's first launch waits for its
	// window manager to start (waitWM).
	wmWait = 15 * time.Second
)

// step is a validated action.
type step struct {
	kind    string
	pts     []api.ComputerPoint // logical
	button  byte
	clicks  int
	keys    []keysym
	text    string
	hold    time.Duration
	scrollB byte
	amount  int
	region  image.Rectangle // logical
	window  xproto.Window
	cmd     []string
	env     map[string]string
}

func bad(code, format string, args ...any) error {
	return errdefs.WithCode(code, fmt.Errorf(format+": %w", append(args, errdefs.ErrInvalidArgument)...))
}

// point reads a step's single position from coordinate or x/y.
func point(i int, a api.ComputerAction, logical api.DisplaySize) (api.ComputerPoint, error) {
	var p api.ComputerPoint
	switch {
	case len(a.Coordinate) == 2:
		p = api.ComputerPoint{X: a.Coordinate[0], Y: a.Coordinate[1]}
	case len(a.Coordinate) != 0:
		return p, bad("invalid_action", "actions[%d]: coordinate must be [x, y]", i)
	case a.X != nil && a.Y != nil:
		p = api.ComputerPoint{X: *a.X, Y: *a.Y}
	default:
		return p, bad("invalid_action", "actions[%d] (%s): needs coordinate [x, y] or x and y", i, a.Action)
	}
	return p, inRange(i, p, logical)
}

func inRange(i int, p api.ComputerPoint, logical api.DisplaySize) error {
	if p.X < 0 || p.Y < 0 || p.X >= logical.Width || p.Y >= logical.Height {
		return bad(CodeOutOfRange, "actions[%d]: (%d, %d) is outside the %dx%d display", i, p.X, p.Y, logical.Width, logical.Height)
	}
	return nil
}

// optPoint is point when the action names one, nil when not.
func optPoint(i int, a api.ComputerAction, logical api.DisplaySize) ([]api.ComputerPoint, error) {
	if len(a.Coordinate) == 0 && a.X == nil && a.Y == nil {
		return nil, nil
	}
	p, err := point(i, a, logical)
	return []api.ComputerPoint{p}, err
}

var buttons = map[string]byte{"": 1, "left": 1, "middle": 2, "wheel": 2, "right": 3, "back": 8, "forward": 9}

// validate checks a whole batch before anything runs: a bad action
// anywhere answers 400 and changes nothing.
func validate(req *api.ComputerActionsRequest, logical api.DisplaySize, maxActions int) ([]step, error) {
	if len(req.Actions) == 0 {
		return nil, bad("invalid_action", "actions is empty")
	}
	if len(req.Actions) > maxActions {
		return nil, bad("invalid_action", "%d actions; at most %d per request", len(req.Actions), maxActions)
	}
	out := make([]step, 0, len(req.Actions))
	for i, a := range req.Actions {
		kind, ok := actions[a.Action]
		if !ok {
			return nil, bad(CodeUnknownAction, "actions[%d]: unknown action %q", i, a.Action)
		}
		s := step{kind: kind.kind}
		var err error
		if kind.parse != nil {
			err = kind.parse(i, a, logical, &s)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// onlyLooks reports whether a batch changes nothing on the display.
func onlyLooks(steps []step) bool {
	for _, s := range steps {
		if !actions[s.kind].looks {
			return false
		}
	}
	return true
}

// scaler maps logical coordinates to real ones and back.
type scaler struct{ logical, real api.DisplaySize }

func (s scaler) toReal(p api.ComputerPoint) (int, int) {
	x := int(math.Round(float64(p.X) * float64(s.real.Width) / float64(s.logical.Width)))
	y := int(math.Round(float64(p.Y) * float64(s.real.Height) / float64(s.logical.Height)))
	return min(x, s.real.Width-1), min(y, s.real.Height-1)
}

func (s scaler) toLogical(x, y int) api.ComputerPoint {
	lx := int(math.Round(float64(x) * float64(s.logical.Width) / float64(s.real.Width)))
	ly := int(math.Round(float64(y) * float64(s.logical.Height) / float64(s.real.Height)))
	return api.ComputerPoint{X: min(lx, s.logical.Width-1), Y: min(ly, s.logical.Height-1)}
}

func (s scaler) rectToReal(r image.Rectangle) image.Rectangle {
	x0 := r.Min.X * s.real.Width / s.logical.Width
	y0 := r.Min.Y * s.real.Height / s.logical.Height
	x1 := (r.Max.X*s.real.Width + s.logical.Width - 1) / s.logical.Width
	y1 := (r.Max.Y*s.real.Height + s.logical.Height - 1) / s.logical.Height
	return image.Rect(x0, y0, x1, y1)
}

// Run runs a batch of actions on a desktop sandbox's display, in order,
// stopping at the first failure. The whole batch is checked first; a bad
// action answers 400 and nothing runs.
func (m *Manager) Run(ctx context.Context, tenant, id string, req *api.ComputerActionsRequest) (*api.ComputerActionsResult, error) {
	t, err := m.cfg.Sandboxes.AttachDesktop(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	defer t.Release()
	real := api.DisplaySize{Width: t.Spec.Width, Height: t.Spec.Height}
	logical := real
	if req.Display != nil {
		logical = *req.Display
		if logical.Width < 64 || logical.Height < 64 || logical.Width > 7680 || logical.Height > 4320 {
			return nil, bad("invalid_display", "display %dx%d is not between 64x64 and 7680x4320", logical.Width, logical.Height)
		}
	}
	steps, err := validate(req, logical, t.Spec.MaxActions)
	if err != nil {
		return nil, err
	}
	tr := m.tracer(t)
	// A paused or aborted agent is refused at once (the gate records it).
	if m.cfg.Gate != nil {
		if err := m.cfg.Gate.Admit(ctx, t.Tenant, t.SandboxID, "computer.actions"); err != nil {
			return nil, err
		}
	}
	// A human holding control wins at once: nothing is queued.
	if err := m.ctl.checkAgent(t.SandboxID, onlyLooks(steps)); err != nil {
		tr.refused(ctx, CodeControlHeld, len(steps))
		return nil, err
	}
	s, err := m.session(ctx, t)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	unlock := true // false once a background capture holds the lock
	defer func() {
		if unlock {
			s.mu.Unlock()
		}
	}()
	if s.d == nil {
		return nil, errdefs.WithCode(CodeNotReady, fmt.Errorf("the display connection of sandbox %s closed; retry: %w", id, errdefs.ErrUnavailable))
	}
	// A program launched while the window manager starts can lose its
	// window: the first batch that launches one waits for it first,
	// outside the batch's own time.
	if slices.ContainsFunc(steps, func(st step) bool { return actions[st.kind].launches }) {
		if err := waitWM(ctx, s.d, wmWait); err != nil {
			s.broken = true
			s.d.close()
			s.d = nil
			return nil, errdefs.WithCode(CodeNotReady, fmt.Errorf("the display of sandbox %s: %v; retry: %w", id, err, errdefs.ErrUnavailable))
		}
	}
	// The real size is the server's, whatever the profile says.
	real = api.DisplaySize{Width: s.d.width, Height: s.d.height}
	sc := scaler{logical: logical, real: real}
	ctx, cancel := context.WithTimeout(ctx, t.Spec.ActionTimeout)
	defer cancel()
	res := &api.ComputerActionsResult{Results: []api.ComputerStepResult{}, Display: logical, Real: real, OK: true}
	// The last step's "after" screenshot for the trace is taken once the
	// batch is done: from the final screenshot if one is asked for, else
	// after the answer, holding the display until it is captured (so it
	// shows what this batch left, and the next batch waits for it).
	lastAfter := -1
	for i, st := range steps {
		start := time.Now()
		r := api.ComputerStepResult{Index: i, Action: req.Actions[i].Action, OK: true}
		// A takeover during the batch stops it before its next input.
		err := m.ctl.checkAgent(t.SandboxID, onlyLooks([]step{st}))
		if err == nil {
			tr.started(ctx, i, req.Actions[i], st, sc)
			if tr.wantShot(st, "before") {
				tr.shot(ctx, s.d, sc, i, st, "before")
			}
			err = m.runStep(ctx, t, s.d, sc, st, &r)
		}
		if err != nil && errdefs.Code(err) == CodeControlHeld {
			r.OK, r.Error, r.Code = false, err.Error(), CodeControlHeld
			res.OK = false
			res.Results = append(res.Results, r)
			tr.refused(ctx, CodeControlHeld, len(steps)-i)
			return res, nil
		}
		if err != nil {
			r.OK, r.Error, r.Code = false, err.Error(), CodeActionFailed
			if c := errdefs.Code(err); c != "" {
				r.Code = c
			}
			res.OK = false
			// The connection may be what failed: the next batch opens a
			// new one (one dial) rather than guess. A window that did not
			// show is the display's answer, not a failure of it.
			if r.Code != CodeWindowNotFound {
				s.broken = true
				s.d.close()
				s.d = nil
			}
		}
		r.DurationMS = time.Since(start).Milliseconds()
		res.Results = append(res.Results, r)
		tr.finished(ctx, r)
		if r.OK && tr.wantShot(st, "after") {
			if i == len(steps)-1 {
				lastAfter = i
			} else {
				tr.shot(ctx, s.d, sc, i, st, "after")
			}
		}
		if !r.OK {
			return res, nil
		}
		res.Completed++
	}
	if req.Screenshot {
		raw, err := s.d.capture(image.Rect(0, 0, real.Width, real.Height))
		if lastAfter >= 0 {
			tr.keep(ctx, sc, lastAfter, steps[lastAfter], "after", raw, err)
		}
		if err != nil {
			return nil, errdefs.WithCode(CodeActionFailed, fmt.Errorf("final screenshot: %v: %w", err, errdefs.ErrBadGateway))
		}
		img, err := encodeShot(raw, logical)
		if err != nil {
			return nil, errdefs.WithCode(CodeActionFailed, fmt.Errorf("final screenshot: %v: %w", err, errdefs.ErrInternal))
		}
		res.Screenshot = img
	} else if lastAfter >= 0 {
		unlock = false
		d := s.d
		go func() {
			defer s.mu.Unlock()
			tr.shot(ctx, d, sc, lastAfter, steps[lastAfter], "after")
		}()
	}
	return res, nil
}

func (m *Manager) runStep(ctx context.Context, t *Target, d *display, sc scaler, st step, r *api.ComputerStepResult) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("the batch ran out of time: %w", err)
	}
	if run := actions[st.kind].run; run != nil {
		return run(ctx, t, d, sc, st, r)
	}
	return fmt.Errorf("action %q has no runner: %w", st.kind, errdefs.ErrInternal)
}

// waitWM waits, the first time a display launches a program, up to wait
// (and within ctx) until the window manager has finished starting
// (display.wmStarted). A program that maps its window while the window
// manager is still starting can lose it: openbox takes a second or two to
// start under runc and several under runsc, and an xterm launched
// meanwhile stayed unmapped — a black screen — or showed only after five
// seconds. A display whose window manager has not started by then
// launches anyway (a desktop may have none), and does not wait again.
func waitWM(ctx context.Context, d *display, wait time.Duration) error {
	if d.wmChecked {
		return nil
	}
	deadline := time.Now().Add(wait)
	for {
		ok, err := d.wmStarted()
		if err != nil {
			return fmt.Errorf("waiting for the window manager: %w", err)
		}
		if ok || !time.Now().Before(deadline) {
			break
		}
		select {
		case <-time.After(windowPoll):
		case <-ctx.Done():
			return fmt.Errorf("the batch ran out of time waiting for the window manager: %w", ctx.Err())
		}
	}
	d.wmChecked = true
	return nil
}

// logicalWindows turns windows in real coordinates into logical ones.
func logicalWindows(sc scaler, ws []api.ComputerWindow) []api.ComputerWindow {
	for i := range ws {
		p := sc.toLogical(ws[i].X, ws[i].Y)
		e := sc.toLogical(ws[i].X+ws[i].Width, ws[i].Y+ws[i].Height)
		ws[i].X, ws[i].Y, ws[i].Width, ws[i].Height = p.X, p.Y, e.X-p.X, e.Y-p.Y
	}
	return ws
}

// waitWindow waits up to wait (and within ctx) until a window whose title
// contains title, or whose class or instance name is title, is managed and
// shown (mapped and viewable: the server has drawn its background) and
// answers the windows that match; none by then is CodeWindowNotFound,
// naming the windows there are.
func waitWindow(ctx context.Context, d *display, title string, wait time.Duration) ([]api.ComputerWindow, error) {
	deadline := time.Now().Add(wait)
	if end, ok := ctx.Deadline(); ok && end.Add(-windowPoll).Before(deadline) {
		deadline = end.Add(-windowPoll) // the batch's end comes first: answer before it
		wait = time.Until(deadline).Round(time.Millisecond)
	}
	for {
		ws, err := d.windows()
		if err != nil {
			return nil, err
		}
		var found []api.ComputerWindow
		titles := make([]string, 0, len(ws))
		for _, w := range ws {
			titles = append(titles, fmt.Sprintf("%q (%s)", w.Title, cmp.Or(w.Class, "no class")))
			if (strings.Contains(w.Title, title) || w.Class == title || w.Instance == title) && d.viewable(w.ID) {
				found = append(found, w)
			}
		}
		if len(found) > 0 {
			return found, nil
		}
		if !time.Now().Before(deadline) {
			return nil, errdefs.WithCode(CodeWindowNotFound, fmt.Errorf("no window titled *%s* or of that class showed within %v (windows: %s): %w",
				title, wait, cmp.Or(strings.Join(titles, ", "), "none"), errdefs.ErrDeadlineExceeded))
		}
		select {
		case <-time.After(min(windowPoll, time.Until(deadline))):
		case <-ctx.Done():
			return nil, fmt.Errorf("the batch ran out of time waiting for a window titled *%s*: %w", title, ctx.Err())
		}
	}
}

// shot captures real region r and encodes it as base64 PNG, scaled to
// out (the logical display) when out is set and differs.
func shot(d *display, sc scaler, r image.Rectangle, out api.DisplaySize) (string, error) {
	img, err := d.capture(r)
	if err != nil {
		return "", err
	}
	return encodeShot(img, out)
}

// encodeShot encodes img as base64 PNG, scaled to out when out is set and
// differs.
func encodeShot(img *image.RGBA, out api.DisplaySize) (string, error) {
	r := img.Rect
	var src image.Image = img
	if out.Width != 0 && (out.Width != r.Dx() || out.Height != r.Dy()) {
		src = recording.Scale(img, out.Width, out.Height)
	}
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&buf, src); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}
