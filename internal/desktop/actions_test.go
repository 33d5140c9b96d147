package desktop

import (
	"errors"
	"image"
	"testing"
	"time"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/errdefs"
)

func TestParseCombo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want []keysym
	}{
		{"Return", []keysym{0xff0d}},
		{"ctrl+shift+t", []keysym{0xffe3, 0xffe1, 't'}},
		{"ctrl+A", []keysym{0xffe3, 'A'}},
		{"super", []keysym{0xffeb}},
		{"ctrl++", []keysym{0xffe3, '+'}},
		{"+", []keysym{'+'}},
		{"F12", []keysym{0xffbe + 11}},
		{"Page_Down", []keysym{0xff56}},
		{"é", []keysym{0xe9}},
		{"€", []keysym{0x01000000 + 0x20ac}},
	} {
		got, err := parseCombo(tc.in)
		if err != nil || len(got) != len(tc.want) {
			t.Errorf("parseCombo(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("parseCombo(%q) = %v; want %v", tc.in, got, tc.want)
			}
		}
	}
	for _, in := range []string{"", "ctrl+", "nosuchkey", "ctrl+bogus", "F36", "\x01"} {
		if _, err := parseCombo(in); err == nil || !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("parseCombo(%q) = %v; want an invalid-argument error", in, err)
		}
	}
	if _, err := parseCombo("nosuchkey"); errdefs.Code(err) != CodeUnknownKey {
		t.Errorf("unknown key code %q", errdefs.Code(err))
	}
	// OpenAI's list names keys, not shifted characters.
	got, err := parseKeyList([]string{"CTRL", "A"})
	if err != nil || len(got) != 2 || got[0] != 0xffe3 || got[1] != 'a' {
		t.Errorf("parseKeyList = %v, %v", got, err)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	logical := api.DisplaySize{Width: 1024, Height: 768}
	ok := []api.ComputerAction{
		{Action: "screenshot"}, {Action: "left_click", Coordinate: []int{0, 0}}, {Action: "left_click"},
		{Action: "click", X: ptr(1023), Y: ptr(767), Button: "right"}, {Action: "scroll", ScrollY: -250},
		{Action: "scroll", Coordinate: []int{5, 5}, ScrollDirection: "left", ScrollAmount: 3},
		{Action: "drag", Path: []api.ComputerPoint{{X: 1, Y: 1}, {X: 2, Y: 2}, {X: 3, Y: 3}}}, {Action: "left_click_drag", StartCoordinate: []int{1, 1}, Coordinate: []int{9, 9}},
		{Action: "type", Text: "hi"}, {Action: "key", Text: "ctrl+c"}, {Action: "keypress", Keys: []string{"ENTER"}},
		{Action: "hold_key", Text: "shift", Duration: 0.5}, {Action: "wait"}, {Action: "zoom", Region: []int{0, 0, 1024, 768}},
		{Action: "focus_window", Window: "0x20000c"}, {Action: "launch", Command: []string{"xterm"}},
		{Action: "wait_for_window", Title: "xterm"}, {Action: "wait_for_window", Title: "x", Duration: 30},
	}
	steps, err := validate(&api.ComputerActionsRequest{Actions: ok}, logical, 100)
	if err != nil || len(steps) != len(ok) {
		t.Fatalf("validate: %v", err)
	}
	if steps[4].scrollB != 4 || steps[4].amount != 3 {
		t.Errorf("scroll_y -250 = button %d × %d, want up (4) × 3", steps[4].scrollB, steps[4].amount)
	}
	if w := steps[len(steps)-2]; w.text != "xterm" || w.hold != defaultWindowWait {
		t.Errorf("wait_for_window without a duration: %q for %v, want xterm for %v", w.text, w.hold, defaultWindowWait)
	}
	if w := steps[len(steps)-1]; w.hold != 30*time.Second {
		t.Errorf("wait_for_window duration 30: %v", w.hold)
	}
	if !onlyLooks(steps[len(steps)-2:]) {
		t.Error("wait_for_window counts as input")
	}
	for _, tc := range []struct {
		a    api.ComputerAction
		code string
	}{
		{api.ComputerAction{Action: "left_click", Coordinate: []int{1024, 0}}, CodeOutOfRange},
		{api.ComputerAction{Action: "mouse_move", X: ptr(-1), Y: ptr(0)}, CodeOutOfRange},
		{api.ComputerAction{Action: "drag", Path: []api.ComputerPoint{{X: 1, Y: 1}, {X: 2, Y: 900}}}, CodeOutOfRange},
		{api.ComputerAction{Action: "zoom", Region: []int{0, 0, 1025, 10}}, CodeOutOfRange},
		{api.ComputerAction{Action: "zoom", Region: []int{10, 10, 10, 20}}, CodeOutOfRange},
		{api.ComputerAction{Action: "key", Text: "hyper+q"}, CodeUnknownKey},
		{api.ComputerAction{Action: "rm_rf"}, CodeUnknownAction},
		{api.ComputerAction{Action: "mouse_move"}, "invalid_action"},
		{api.ComputerAction{Action: "scroll", ScrollDirection: "sideways", ScrollAmount: 1}, "invalid_action"},
		{api.ComputerAction{Action: "wait", Duration: 31}, "invalid_action"},
		{api.ComputerAction{Action: "focus_window", Window: "12"}, "invalid_action"},
		{api.ComputerAction{Action: "launch"}, "invalid_action"},
		{api.ComputerAction{Action: "click", Button: "fourth"}, "invalid_action"},
		{api.ComputerAction{Action: "wait_for_window"}, "invalid_action"},
		{api.ComputerAction{Action: "wait_for_window", Title: "xterm", Duration: 31}, "invalid_action"},
		{api.ComputerAction{Action: "wait_for_window", Title: "xterm", Duration: -1}, "invalid_action"},
	} {
		_, err := validate(&api.ComputerActionsRequest{Actions: []api.ComputerAction{{Action: "screenshot"}, tc.a}}, logical, 100)
		if !errors.Is(err, errdefs.ErrInvalidArgument) || errdefs.Code(err) != tc.code {
			t.Errorf("%+v: %v (code %q), want %s", tc.a, err, errdefs.Code(err), tc.code)
		}
	}
	if _, err := validate(&api.ComputerActionsRequest{Actions: make([]api.ComputerAction, 3)}, logical, 2); err == nil {
		t.Error("more than max_actions accepted")
	}
}

func ptr(v int) *int { return &v }

func TestScaler(t *testing.T) {
	t.Parallel()
	s := scaler{logical: api.DisplaySize{Width: 1024, Height: 640}, real: api.DisplaySize{Width: 1280, Height: 800}}
	for _, p := range []api.ComputerPoint{{X: 0, Y: 0}, {X: 512, Y: 320}, {X: 1023, Y: 639}, {X: 100, Y: 7}} {
		x, y := s.toReal(p)
		if x < 0 || y < 0 || x >= 1280 || y >= 800 {
			t.Errorf("toReal(%v) = %d,%d outside the real display", p, x, y)
		}
		if back := s.toLogical(x, y); back != p {
			t.Errorf("toLogical(toReal(%v)) = %v", p, back)
		}
	}
	if r := s.rectToReal(image.Rect(0, 0, 512, 320)); r != image.Rect(0, 0, 640, 400) {
		t.Errorf("rectToReal = %v", r)
	}
}
