package e2e

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/png"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// createDesktop creates a desktop-vnc sandbox under rt, deleted when t
// ends.
func createDesktop(t *testing.T, c *client.Client, rt string) *client.Sandbox {
	t.Helper()
	req := client.CreateSandboxRequest{Profile: "desktop-vnc", Runtime: rt}
	if rt == "runc" {
		req.RiskLevel = "low" // the profile's default (high) runs under runsc only
	}
	sb, err := c.CreateSandbox(callCtx(t), req, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.DeleteSandbox(callCtx(t), sb.ID) })
	return sb
}

// decodeShot decodes a base64 PNG screenshot.
func decodeShot(t *testing.T, b64 string) image.Image {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatalf("screenshot is not base64: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	return img
}

// changedPixels counts the pixels of r that differ between a and b.
func changedPixels(a, b image.Image, r image.Rectangle) int {
	n := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			ar, ag, ab, _ := a.At(x, y).RGBA()
			br, bg, bb, _ := b.At(x, y).RGBA()
			if ar != br || ag != bg || ab != bb {
				n++
			}
		}
	}
	return n
}

func ip(v int) *int { return &v }

// TestDesktop is an agent's computer-use loop on a real desktop (Xtigervnc,
// openbox, xterm) under each runtime: screenshot, click a window, type,
// screenshot; the typed command runs in the window's shell and the
// window's pixels change. Coordinates are in a logical 1024x640 display
// scaled to the real 1280x800. Bad input answers 400 before anything runs.
func TestDesktop(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "desktop-vnc")
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	c := svc.client()

	plain, err := c.CreateSandbox(callCtx(t), client.CreateSandboxRequest{Profile: "tool-basic"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if code, body := apiJSON(t, svc, "POST", "/v1/sandboxes/"+plain.ID+"/computer/actions",
		client.ComputerActionsRequest{Actions: []client.ComputerAction{{Action: "screenshot"}}}, nil); code != 409 || !strings.Contains(body, "not_a_desktop_profile") {
		t.Errorf("computer actions on a tool-basic sandbox: %d %s", code, body)
	}
	c.DeleteSandbox(callCtx(t), plain.ID)

	logical := &client.DisplaySize{Width: 1024, Height: 640}
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			sb := createDesktop(t, c, rt)
			run := func(actions ...client.ComputerAction) *client.ComputerActionsResult {
				t.Helper()
				res, err := c.ComputerActions(callCtx(t), sb.ID, client.ComputerActionsRequest{Actions: actions, Display: logical})
				if err != nil {
					t.Fatalf("actions %+v: %v", actions, err)
				}
				if !res.OK || res.Completed != len(actions) {
					t.Fatalf("actions %+v: %+v", actions, res)
				}
				return res
			}
			// The first screenshot waits for the display service.
			first := run(client.ComputerAction{Action: "screenshot"})
			if img := decodeShot(t, first.Results[0].Screenshot); img.Bounds().Dx() != 1024 || img.Bounds().Dy() != 640 {
				t.Fatalf("screenshot is %v, want the logical 1024x640", img.Bounds())
			}
			if first.Real != (client.DisplaySize{Width: 1280, Height: 800}) {
				t.Fatalf("real display %+v", first.Real)
			}
			launch := run(client.ComputerAction{Action: "launch", Command: []string{"xterm", "-fa", "DejaVu Sans Mono", "-fs", "14",
				"-geometry", "70x12+80+60", "-title", "agent-term"}})
			if launch.Results[0].JobID == "" {
				t.Fatalf("launch gave no job: %+v", launch.Results[0])
			}
			var win client.ComputerWindow
			eventually(t, 30*time.Second, "the xterm window listed", func() (bool, string) {
				res := run(client.ComputerAction{Action: "list_windows"})
				// The only window; its shell retitles it with its prompt.
				for _, w := range res.Results[0].Windows {
					if w.Title != "" {
						win = w
						return w.Width > 100 && w.Height > 50, fmt_(w, nil)
					}
				}
				return false, fmt_(res.Results[0].Windows, nil)
			})
			cx, cy := win.X+win.Width/2, win.Y+win.Height/2
			// The shell prompt is drawn before the agent types.
			// The xterm's shell is up before anything is typed (the image has no
			// procps: read /proc).
			if r := execOK(t, c, sb.ID, "for i in $(seq 100); do cat /proc/[0-9]*/comm 2>/dev/null | grep -qx bash && exit 0; sleep 0.1; done; exit 1"); r.ExitCode != 0 {
				t.Fatalf("the xterm's shell did not start: %+v", r)
			}
			before := run(client.ComputerAction{Action: "left_click", Coordinate: []int{cx, cy}}, client.ComputerAction{Action: "wait", Duration: 0.3},
				client.ComputerAction{Action: "screenshot"})
			shot1 := decodeShot(t, before.Results[2].Screenshot)
			marker := "typed-by-agent-" + rt
			run(client.ComputerAction{Action: "type", Text: "echo " + marker + " > /workspace/typed.txt"},
				client.ComputerAction{Action: "key", Text: "Return"})
			eventually(t, 20*time.Second, "the typed command ran in the xterm", func() (bool, string) {
				res, err := c.Exec(callCtx(t), sb.ID, client.ExecRequest{Script: "cat /workspace/typed.txt 2>/dev/null"})
				if err != nil {
					return false, err.Error()
				}
				return strings.TrimSpace(res.Stdout) == marker, res.Stdout
			})
			after := run(client.ComputerAction{Action: "screenshot"}, client.ComputerAction{Action: "cursor_position"})
			shot2 := decodeShot(t, after.Results[0].Screenshot)
			region := image.Rect(win.X, win.Y, win.X+win.Width, win.Y+win.Height)
			if n := changedPixels(shot1, shot2, region); n < 200 {
				t.Errorf("only %d pixels of the xterm window changed after typing", n)
			}
			if n := changedPixels(shot1, shot2, image.Rect(0, 0, 1024, 640)) - changedPixels(shot1, shot2, region); n > 0 {
				t.Errorf("%d pixels outside the xterm window changed", n)
			}
			if cur := after.Results[1].Cursor; cur == nil || abs(cur.X-cx) > 1 || abs(cur.Y-cy) > 1 {
				t.Errorf("cursor %+v, want (%d, %d)", cur, cx, cy)
			}
			// OpenAI's shapes: x/y, keypress keys, scroll in pixels; a zoom
			// is at real resolution.
			res := run(client.ComputerAction{Action: "click", X: ip(cx), Y: ip(cy), Button: "left"},
				client.ComputerAction{Action: "keypress", Keys: []string{"CTRL", "L"}},
				client.ComputerAction{Action: "scroll", X: ip(cx), Y: ip(cy), ScrollY: 300},
				client.ComputerAction{Action: "zoom", Region: []int{0, 0, 512, 320}})
			if z := decodeShot(t, res.Results[3].Screenshot); z.Bounds().Dx() != 640 || z.Bounds().Dy() != 400 {
				t.Errorf("zoom of a 512x320 logical region is %v, want 640x400 real pixels", z.Bounds())
			}
			// wait_for_window finds the xterm by its class (its shell has
			// retitled it); one that never shows fails the step with
			// window_not_found, and the display still serves the next batch.
			if w := run(client.ComputerAction{Action: "wait_for_window", Title: "XTerm"}).Results[0].Windows; len(w) != 1 || w[0].ID != win.ID || w[0].Instance != "xterm" {
				t.Errorf("wait_for_window XTerm: %+v, want the xterm %s", w, win.ID)
			}
			missing, err := c.ComputerActions(callCtx(t), sb.ID, client.ComputerActionsRequest{Actions: []client.ComputerAction{
				{Action: "wait_for_window", Title: "no-such-window", Duration: 1}, {Action: "screenshot"}}})
			if err != nil || missing.OK || missing.Completed != 0 || len(missing.Results) != 1 || missing.Results[0].Code != "window_not_found" ||
				!strings.Contains(missing.Results[0].Error, "XTerm") {
				t.Errorf("waiting for a window that never shows: %+v %v", missing, err)
			}
			run(client.ComputerAction{Action: "cursor_position"})

			// Bad input: 400 with a stable code, and nothing of the batch
			// runs (the typed "touch" would create the file).
			for _, tc := range []struct {
				name, code string
				bad        client.ComputerAction
			}{
				{"unknown key", "unknown_key", client.ComputerAction{Action: "key", Text: "ctrl+nosuchkey"}},
				{"outside the display", "coordinate_out_of_range", client.ComputerAction{Action: "left_click", Coordinate: []int{1024, 10}}},
				{"negative", "coordinate_out_of_range", client.ComputerAction{Action: "mouse_move", Coordinate: []int{-1, 10}}},
				{"unknown action", "unknown_action", client.ComputerAction{Action: "format_disk"}},
				{"bad region", "coordinate_out_of_range", client.ComputerAction{Action: "zoom", Region: []int{10, 10, 5, 5}}},
			} {
				body := client.ComputerActionsRequest{Display: logical, Actions: []client.ComputerAction{
					{Action: "type", Text: "touch /workspace/never\n"}, tc.bad}}
				if code, out := apiJSON(t, svc, "POST", "/v1/sandboxes/"+sb.ID+"/computer/actions", body, nil); code != 400 || !strings.Contains(out, `"code":"`+tc.code+`"`) {
					t.Errorf("%s: %d %s", tc.name, code, out)
				}
			}
			run(client.ComputerAction{Action: "type", Text: "echo done > /workspace/done.txt\n"})
			eventually(t, 20*time.Second, "the later command ran", func() (bool, string) {
				res, err := c.Exec(callCtx(t), sb.ID, client.ExecRequest{Script: "cat /workspace/done.txt 2>/dev/null"})
				return err == nil && strings.TrimSpace(res.Stdout) == "done", fmt.Sprint(res, err)
			})
			if res := execOK(t, c, sb.ID, "test -e /workspace/never && echo present || echo absent"); strings.TrimSpace(res.Stdout) != "absent" {
				t.Errorf("a rejected batch typed its first action")
			}

			// The control lease: a human's takeover wins at once; the agent's
			// next input answers 409 control_held, its screenshots too
			// unless allowed; the release wakes an agent waiting for it.
			st, err := c.RequestHuman(callCtx(t), sb.ID, "a captcha")
			if err != nil || len(st.Requests) != 1 || st.Holder != "" {
				t.Fatalf("request a human: %+v %v", st, err)
			}
			took := time.Now()
			st, err = c.TakeDesktopControl(callCtx(t), sb.ID, client.TakeDesktopControlRequest{Holder: "human:alice", Reason: "captcha"})
			if err != nil || st.Holder != "human:alice" || len(st.Requests) != 0 {
				t.Fatalf("takeover: %+v %v", st, err)
			}
			code, body := apiJSON(t, svc, "POST", "/v1/sandboxes/"+sb.ID+"/computer/actions",
				client.ComputerActionsRequest{Actions: []client.ComputerAction{{Action: "type", Text: "touch /workspace/held\n"}}}, nil)
			t.Logf("takeover → the agent's refused action: %v", time.Since(took))
			if code != 409 || !strings.Contains(body, `"code":"control_held"`) {
				t.Errorf("agent input while a human holds control: %d %s", code, body)
			}
			if code, body := apiJSON(t, svc, "POST", "/v1/sandboxes/"+sb.ID+"/computer/actions",
				client.ComputerActionsRequest{Actions: []client.ComputerAction{{Action: "screenshot"}}}, nil); code != 409 || !strings.Contains(body, "control_held") {
				t.Errorf("agent screenshot while a human holds control: %d %s", code, body)
			}
			if _, err := c.TakeDesktopControl(callCtx(t), sb.ID, client.TakeDesktopControlRequest{Holder: "agent"}); err == nil {
				t.Errorf("the agent took control from a human")
			}
			if code, body := apiJSON(t, svc, "POST", "/v1/sandboxes/"+sb.ID+"/control", map[string]any{"holder": "root"}, nil); code != 400 || !strings.Contains(body, "invalid_holder") {
				t.Errorf("holder root: %d %s", code, body)
			}
			if _, err := c.TakeDesktopControl(callCtx(t), sb.ID, client.TakeDesktopControlRequest{Holder: "human:alice", AllowScreenshots: true}); err != nil {
				t.Fatal(err)
			}
			run(client.ComputerAction{Action: "screenshot"})
			held, err := c.DesktopControl(callCtx(t), sb.ID, -1, 0)
			if err != nil {
				t.Fatal(err)
			}
			released := make(chan *client.DesktopControl, 1)
			go func() {
				st, err := c.DesktopControl(callCtx(t), sb.ID, held.Version, 30*time.Second)
				if err != nil {
					st = nil
				}
				released <- st
			}()
			if _, err := c.ReleaseDesktopControl(callCtx(t), sb.ID); err != nil {
				t.Fatal(err)
			}
			if st := <-released; st == nil || st.Holder != "" || st.Version <= held.Version {
				t.Errorf("the waiting agent saw %+v after the release", st)
			}
			run(client.ComputerAction{Action: "type", Text: "echo back > /workspace/back.txt\n"})
			eventually(t, 20*time.Second, "the agent's input after the release", func() (bool, string) {
				res, err := c.Exec(callCtx(t), sb.ID, client.ExecRequest{Script: "cat /workspace/back.txt 2>/dev/null; test -e /workspace/held && echo HELD"})
				return err == nil && strings.TrimSpace(res.Stdout) == "back", fmt.Sprint(res, err)
			})
		})
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}
