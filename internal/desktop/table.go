package desktop

import (
	"context"
	"fmt"
	"image"
	"strconv"
	"strings"
	"time"

	"github.com/jezek/xgb/xproto"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/agent/agentproto"
)

// actionKind is what the package knows of one computer action. The table
// actions is the vocabulary's one list: a new action is one entry (how it
// is read and checked, how it runs, how the trace treats it).
type actionKind struct {
	// kind is the step the action becomes; an alias names the action it
	// stands for (move is mouse_move). Empty: the action's own name.
	kind string
	// parse checks action i and fills its step (nil: it takes nothing).
	parse func(i int, a api.ComputerAction, logical api.DisplaySize, s *step) error
	// run runs the step on the display.
	run func(ctx context.Context, t *Target, d *display, sc scaler, st step, r *api.ComputerStepResult) error
	// looks marks the steps that change nothing on the display: a batch
	// of them only looks, and they get no trace screenshots.
	looks bool
	// launches marks the step that starts a program: the first batch
	// that launches waits for the window manager, and it gets no trace
	// screenshots (the program draws later).
	launches bool
}

// actions is the computer-use vocabulary (Anthropic's computer tool and
// OpenAI's computer-use names).
var actions = actionTable()

func actionTable() map[string]actionKind {
	click := func(button byte, clicks int) func(int, api.ComputerAction, api.DisplaySize, *step) error {
		return func(i int, a api.ComputerAction, logical api.DisplaySize, s *step) error {
			var err error
			s.pts, err = optPoint(i, a, logical)
			s.button, s.clicks = button, clicks
			if button == 0 { // click: the button is named
				b, ok := buttons[a.Button]
				if !ok {
					return bad("invalid_action", "actions[%d]: unknown button %q (left, right, middle, back, forward)", i, a.Button)
				}
				s.button = b
			}
			if err == nil && a.Text != "" {
				s.keys, err = parseCombo(a.Text)
			}
			return err
		}
	}
	mouseMove := actionKind{parse: parseMove, run: runMove}
	drag := actionKind{parse: parseDrag, run: runDrag}
	key := actionKind{parse: parseKeys, run: func(_ context.Context, _ *Target, d *display, _ scaler, st step, _ *api.ComputerStepResult) error {
		return d.chord(st.keys, 0)
	}}
	tbl := map[string]actionKind{
		"screenshot": {looks: true, run: func(_ context.Context, _ *Target, d *display, sc scaler, _ step, r *api.ComputerStepResult) error {
			img, err := shot(d, sc, image.Rect(0, 0, sc.real.Width, sc.real.Height), sc.logical)
			r.Screenshot = img
			return err
		}},
		"zoom": {looks: true, parse: parseZoom, run: func(_ context.Context, _ *Target, d *display, sc scaler, st step, r *api.ComputerStepResult) error {
			img, err := shot(d, sc, sc.rectToReal(st.region), api.DisplaySize{})
			r.Screenshot = img
			return err
		}},
		"cursor_position": {looks: true, run: func(_ context.Context, _ *Target, d *display, sc scaler, _ step, r *api.ComputerStepResult) error {
			x, y, err := d.pointer()
			if err == nil {
				p := sc.toLogical(x, y)
				r.Cursor = &p
			}
			return err
		}},
		"mouse_move":      mouseMove,
		"move":            {kind: "mouse_move", parse: mouseMove.parse, run: mouseMove.run},
		"left_click":      {parse: click(1, 1), run: runClick},
		"right_click":     {parse: click(3, 1), run: runClick},
		"middle_click":    {parse: click(2, 1), run: runClick},
		"double_click":    {parse: click(1, 2), run: runClick},
		"triple_click":    {parse: click(1, 3), run: runClick},
		"click":           {parse: click(0, 1), run: runClick},
		"left_mouse_down": {parse: click(1, 1), run: runButton(true)},
		"left_mouse_up":   {parse: click(1, 1), run: runButton(false)},
		"drag":            drag,
		"left_click_drag": {kind: "drag", parse: drag.parse, run: drag.run},
		"scroll":          {parse: parseScroll, run: runScroll},
		"type":            {parse: parseType, run: runType},
		"key":             key,
		"keypress":        {kind: "key", parse: key.parse, run: key.run},
		"hotkey":          {kind: "key", parse: key.parse, run: key.run},
		"hold_key": {parse: parseHold, run: func(_ context.Context, _ *Target, d *display, _ scaler, st step, _ *api.ComputerStepResult) error {
			return d.chord(st.keys, st.hold)
		}},
		"wait": {looks: true, parse: parseWait, run: func(ctx context.Context, _ *Target, _ *display, _ scaler, st step, _ *api.ComputerStepResult) error {
			select {
			case <-time.After(st.hold):
				return nil
			case <-ctx.Done():
				return fmt.Errorf("the batch ran out of time: %w", ctx.Err())
			}
		}},
		"list_windows": {looks: true, run: func(_ context.Context, _ *Target, d *display, sc scaler, _ step, r *api.ComputerStepResult) error {
			ws, err := d.windows()
			r.Windows = logicalWindows(sc, ws)
			return err
		}},
		"wait_for_window": {looks: true, parse: parseWaitWindow, run: func(ctx context.Context, _ *Target, d *display, sc scaler, st step, r *api.ComputerStepResult) error {
			ws, err := waitWindow(ctx, d, st.text, st.hold)
			r.Windows = logicalWindows(sc, ws)
			return err
		}},
		"focus_window": {parse: parseWindow, run: func(ctx context.Context, _ *Target, d *display, _ scaler, st step, _ *api.ComputerStepResult) error {
			deadline, ok := ctx.Deadline()
			if !ok {
				deadline = time.Now().Add(5 * time.Second)
			}
			return d.focus(st.window, deadline)
		}},
		"launch": {launches: true, parse: parseLaunch, run: runLaunch},
	}
	for name, k := range tbl {
		if k.kind == "" {
			k.kind = name
			tbl[name] = k
		}
	}
	return tbl
}

func parseMove(i int, a api.ComputerAction, logical api.DisplaySize, s *step) error {
	p, err := point(i, a, logical)
	s.pts = []api.ComputerPoint{p}
	return err
}

func parseDrag(i int, a api.ComputerAction, logical api.DisplaySize, s *step) error {
	var err error
	switch {
	case len(a.Path) > 0:
		if len(a.Path) < 2 {
			return bad("invalid_action", "actions[%d]: a drag path needs at least two points", i)
		}
		s.pts = a.Path
	case len(a.StartCoordinate) == 2:
		var end api.ComputerPoint
		if end, err = point(i, a, logical); err == nil {
			s.pts = []api.ComputerPoint{{X: a.StartCoordinate[0], Y: a.StartCoordinate[1]}, end}
		}
	default:
		return bad("invalid_action", "actions[%d]: drag needs path or start_coordinate and coordinate", i)
	}
	for _, p := range s.pts {
		if err == nil {
			err = inRange(i, p, logical)
		}
	}
	return err
}

func parseScroll(i int, a api.ComputerAction, logical api.DisplaySize, s *step) error {
	var err error
	s.pts, err = optPoint(i, a, logical)
	dir, amount := a.ScrollDirection, a.ScrollAmount
	if dir == "" {
		// OpenAI: pixels, 100 per wheel click; vertical wins.
		switch {
		case a.ScrollY < 0:
			dir, amount = "up", -a.ScrollY
		case a.ScrollY > 0:
			dir, amount = "down", a.ScrollY
		case a.ScrollX < 0:
			dir, amount = "left", -a.ScrollX
		case a.ScrollX > 0:
			dir, amount = "right", a.ScrollX
		}
		amount = (amount + 99) / 100
	}
	b, ok := map[string]byte{"up": 4, "down": 5, "left": 6, "right": 7}[dir]
	if !ok {
		return bad("invalid_action", "actions[%d]: scroll_direction must be up, down, left or right (or give scroll_x/scroll_y)", i)
	}
	if amount < 1 || amount > 100 {
		return bad("invalid_action", "actions[%d]: scroll amount %d is not 1..100", i, amount)
	}
	s.scrollB, s.amount = b, amount
	if err == nil && a.Text != "" {
		s.keys, err = parseCombo(a.Text)
	}
	return err
}

func parseType(i int, a api.ComputerAction, _ api.DisplaySize, s *step) error {
	if a.Text == "" || len(a.Text) > 10000 {
		return bad("invalid_action", "actions[%d]: type needs text of 1..10000 bytes", i)
	}
	s.text = a.Text
	return nil
}

// parseKeys reads the keys of key, keypress and hotkey.
func parseKeys(_ int, a api.ComputerAction, _ api.DisplaySize, s *step) error {
	var err error
	if len(a.Keys) > 0 {
		s.keys, err = parseKeyList(a.Keys)
	} else {
		s.keys, err = parseCombo(a.Text)
	}
	return err
}

// parseHold reads hold_key: keys held for a duration.
func parseHold(i int, a api.ComputerAction, logical api.DisplaySize, s *step) error {
	err := parseKeys(i, a, logical, s)
	if a.Duration <= 0 || a.Duration > 30 {
		return bad("invalid_action", "actions[%d]: hold_key needs a duration of 0..30 seconds", i)
	}
	s.hold = time.Duration(a.Duration * float64(time.Second))
	return err
}

func parseWait(i int, a api.ComputerAction, _ api.DisplaySize, s *step) error {
	d := a.Duration
	if d == 0 {
		d = 1
	}
	if d < 0 || d > 30 {
		return bad("invalid_action", "actions[%d]: wait duration must be 0..30 seconds", i)
	}
	s.hold = time.Duration(d * float64(time.Second))
	return nil
}

func parseZoom(i int, a api.ComputerAction, logical api.DisplaySize, s *step) error {
	if len(a.Region) != 4 {
		return bad("invalid_action", "actions[%d]: zoom needs region [x0, y0, x1, y1]", i)
	}
	r := image.Rect(a.Region[0], a.Region[1], a.Region[2], a.Region[3])
	if r.Empty() || r.Min.X < 0 || r.Min.Y < 0 || r.Max.X > logical.Width || r.Max.Y > logical.Height || r != r.Canon() ||
		a.Region[0] >= a.Region[2] || a.Region[1] >= a.Region[3] {
		return bad(CodeOutOfRange, "actions[%d]: region %v is not inside the %dx%d display", i, a.Region, logical.Width, logical.Height)
	}
	s.region = r
	return nil
}

func parseWaitWindow(i int, a api.ComputerAction, _ api.DisplaySize, s *step) error {
	if a.Title == "" || len(a.Title) > 1024 {
		return bad("invalid_action", "actions[%d]: wait_for_window needs a title of 1..1024 bytes (a part of the window's title, or its class)", i)
	}
	if a.Duration < 0 || a.Duration > maxWindowWait.Seconds() {
		return bad("invalid_action", "actions[%d]: wait_for_window duration must be 0..%.0f seconds", i, maxWindowWait.Seconds())
	}
	s.text, s.hold = a.Title, defaultWindowWait
	if a.Duration > 0 {
		s.hold = time.Duration(a.Duration * float64(time.Second))
	}
	return nil
}

func parseWindow(i int, a api.ComputerAction, _ api.DisplaySize, s *step) error {
	v, err := strconv.ParseUint(strings.TrimPrefix(a.Window, "0x"), 16, 32)
	if err != nil || !strings.HasPrefix(a.Window, "0x") {
		return bad("invalid_action", "actions[%d]: window %q is not a window id of list_windows (0x…)", i, a.Window)
	}
	s.window = xproto.Window(v)
	return nil
}

func parseLaunch(i int, a api.ComputerAction, _ api.DisplaySize, s *step) error {
	if len(a.Command) == 0 || a.Command[0] == "" {
		return bad("invalid_action", "actions[%d]: launch needs a command", i)
	}
	s.cmd, s.env = a.Command, a.Env
	return nil
}

// moveTo moves the pointer to the step's first point, if it has one.
func moveTo(d *display, sc scaler, st step) {
	if len(st.pts) > 0 {
		x, y := sc.toReal(st.pts[0])
		d.move(x, y)
	}
}

// withMods runs f with the step's modifier keys held.
func withMods(d *display, st step, f func() error) error {
	for _, k := range st.keys {
		if err := d.key(k, true); err != nil {
			return err
		}
	}
	err := f()
	for i := len(st.keys) - 1; i >= 0; i-- {
		if kerr := d.key(st.keys[i], false); kerr != nil && err == nil {
			err = kerr
		}
	}
	return err
}

func runMove(_ context.Context, _ *Target, d *display, sc scaler, st step, _ *api.ComputerStepResult) error {
	moveTo(d, sc, st)
	return d.sync()
}

func runClick(_ context.Context, _ *Target, d *display, sc scaler, st step, _ *api.ComputerStepResult) error {
	moveTo(d, sc, st)
	err := withMods(d, st, func() error {
		for range st.clicks {
			d.button(st.button, true)
			d.button(st.button, false)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return d.sync()
}

func runButton(down bool) func(context.Context, *Target, *display, scaler, step, *api.ComputerStepResult) error {
	return func(_ context.Context, _ *Target, d *display, sc scaler, st step, _ *api.ComputerStepResult) error {
		moveTo(d, sc, st)
		d.button(1, down)
		return d.sync()
	}
}

func runDrag(_ context.Context, _ *Target, d *display, sc scaler, st step, _ *api.ComputerStepResult) error {
	x, y := sc.toReal(st.pts[0])
	d.move(x, y)
	d.button(1, true)
	for _, p := range st.pts[1:] {
		x, y := sc.toReal(p)
		d.move(x, y)
		// Each point is its own motion event the application sees.
		if err := d.sync(); err != nil {
			return err
		}
	}
	d.button(1, false)
	return d.sync()
}

func runScroll(_ context.Context, _ *Target, d *display, sc scaler, st step, _ *api.ComputerStepResult) error {
	moveTo(d, sc, st)
	err := withMods(d, st, func() error {
		for range st.amount {
			d.button(st.scrollB, true)
			d.button(st.scrollB, false)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return d.sync()
}

func runType(_ context.Context, _ *Target, d *display, _ scaler, st step, _ *api.ComputerStepResult) error {
	for _, ru := range st.text {
		if err := d.chord([]keysym{runeKeysym(ru)}, 0); err != nil {
			return err
		}
	}
	return nil
}

func runLaunch(ctx context.Context, t *Target, _ *display, _ scaler, st step, r *api.ComputerStepResult) error {
	env := map[string]string{"DISPLAY": fmt.Sprintf(":%d", t.Spec.Display)}
	for k, v := range st.env {
		env[k] = v
	}
	info, err := t.Launch(ctx, agentproto.JobStartRequest{ExecRequest: agentproto.ExecRequest{
		Command: st.cmd, Env: env, MaxOutputBytes: 64 << 10}})
	if err != nil {
		return fmt.Errorf("launch %s: %w", st.cmd[0], err)
	}
	r.JobID = info.JobID
	return nil
}
