package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// viewerRun is the JSON line test/browserclient/viewer.mjs prints.
type viewerRun struct {
	OK            bool     `json:"ok"`
	Error         string   `json:"error"`
	Status        int      `json:"status"`
	CSP           string   `json:"csp"`
	RoleText      string   `json:"role_text"`
	ControlText   string   `json:"control_text"`
	RequestsText  string   `json:"requests_text"`
	ConsoleErrors []string `json:"console_errors"`
	Canvas        struct {
		Width, Height, Bright, Colours int
	} `json:"canvas"`
	Holder      string `json:"holder"`
	AgentStatus int    `json:"agent_status"`
	AgentCode   string `json:"agent_code"`
}

func runViewer(t *testing.T, args ...string) viewerRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{"viewer.mjs"}, args...)...)
	cmd.Dir = browserClientDir(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, _ := cmd.Output()
	var r viewerRun
	if err := json.Unmarshal(bytes.TrimSpace(out), &r); err != nil {
		t.Fatalf("viewer.mjs %s: %v: stdout %q stderr %q", args[0], err, out, stderr.String())
	}
	if !r.OK {
		t.Fatalf("viewer.mjs %s: %s\nstderr: %s", args[0], r.Error, stderr.String())
	}
	if len(r.ConsoleErrors) > 0 {
		t.Errorf("viewer.mjs %s: console errors %q", args[0], r.ConsoleErrors)
	}
	return r
}

// TestDesktopViewer opens the live-view page (noVNC from npm, served by
// the service) with live-view links in headless Chromium, under runc and
// runsc: the page connects and the canvas shows the desktop (an xterm's
// white pixels read back from it); an observer's page, with its view-only
// switched off as a tampered page would, types and clicks and nothing
// reaches the sandbox; a controller's typing runs in the xterm, takes the
// control lease as human:<who>, and the agent's next action answers 409
// control_held; closing the page releases it.
func TestDesktopViewer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "desktop-vnc")
	svc := e.start(t)
	requireConsoleBuilt(t, svc)
	c := svc.client()
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			sb := createDesktop(t, c, rt)
			if res, err := c.ComputerActions(callCtx(t), sb.ID, client.ComputerActionsRequest{Actions: []client.ComputerAction{
				{Action: "launch", Command: []string{"xterm", "-fa", "DejaVu Sans Mono", "-fs", "12", "-geometry", "80x20+0+0"}}}}); err != nil || !res.OK {
				t.Fatalf("launch: %+v %v", res, err)
			}
			eventually(t, 30*time.Second, "the xterm window", func() (bool, string) {
				res, err := c.ComputerActions(callCtx(t), sb.ID, client.ComputerActionsRequest{Actions: []client.ComputerAction{{Action: "list_windows"}}})
				return err == nil && len(res.Results[0].Windows) > 0, fmt.Sprint(res, err)
			})
			// The xterm's shell is up before anyone types.
			eventually(t, 30*time.Second, "the xterm's shell", func() (bool, string) {
				r, err := c.Exec(callCtx(t), sb.ID, client.ExecRequest{Script: "cat /proc/[0-9]*/comm 2>/dev/null | grep -cx bash"})
				return err == nil && strings.TrimSpace(r.Stdout) != "0", fmt.Sprint(r, err)
			})
			dir := consoleArtifacts(t, "viewer-"+rt)

			// The agent asks for a person: the pages show it.
			if _, err := c.RequestHuman(callCtx(t), sb.ID, "a captcha"); err != nil {
				t.Fatal(err)
			}
			obs, err := c.CreateDisplayLink(callCtx(t), sb.ID, "observer", time.Minute)
			if err != nil || !strings.Contains(obs.ViewerURL, "/v1/displays/") || strings.Contains(obs.ViewerURL, svc.e.apiKey) {
				t.Fatalf("observer link: %+v %v", obs, err)
			}
			o := runViewer(t, "observer", obs.ViewerURL, "touch /workspace/observer\n", filepath.Join(dir, "observer.png"), svc.url(), svc.e.apiKey, sb.ID)
			if o.Status != 200 || !strings.Contains(o.CSP, "script-src 'self'") || !strings.Contains(o.RoleText, "observing") {
				t.Errorf("observer page: status %d, CSP %q, role %q", o.Status, o.CSP, o.RoleText)
			}
			if !strings.Contains(o.RequestsText, "a captcha") || !strings.Contains(o.ControlText, "the agent may act") {
				t.Errorf("observer page: control %q, requests %q", o.ControlText, o.RequestsText)
			}
			if o.Canvas.Width != 1280 || o.Canvas.Height != 800 || o.Canvas.Bright < 5000 || o.Canvas.Colours < 2 {
				t.Errorf("observer canvas is not the desktop with its xterm: %+v", o.Canvas)
			}

			// The CLI prints a page's link (the WebSocket's with --ws).
			if r := svc.cli(t, "desktop", "view", sb.ID); r.code != 0 || !strings.HasSuffix(strings.TrimSpace(r.stdout), "/viewer") {
				t.Errorf("genesis desktop view: %s", r)
			}
			if r := svc.cli(t, "desktop", "view", "--ws", sb.ID); r.code != 0 || !strings.HasPrefix(strings.TrimSpace(r.stdout), "ws://") {
				t.Errorf("genesis desktop view --ws: %s", r)
			}

			// The authenticated route makes a link and redirects to its page.
			hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			req, _ := http.NewRequest("GET", svc.url()+"/v1/sandboxes/"+sb.ID+"/display/viewer?role=controller&ttl_seconds=60", nil)
			req.Header.Set("Authorization", "Bearer "+svc.e.apiKey)
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			loc := resp.Header.Get("Location")
			if resp.StatusCode != 303 || !strings.HasPrefix(loc, svc.url()+"/v1/displays/") || !strings.HasSuffix(loc, "/viewer") {
				t.Fatalf("GET …/display/viewer: %d %q", resp.StatusCode, loc)
			}
			ctl := runViewer(t, "controller", loc+"?who=bob", "touch /workspace/controller\n", filepath.Join(dir, "controller.png"), svc.url(), svc.e.apiKey, sb.ID)
			if !strings.Contains(ctl.RoleText, "control") || ctl.Holder != "human:bob" || ctl.AgentStatus != 409 || ctl.AgentCode != "control_held" {
				t.Errorf("controller: role %q, holder %q, agent's next action %d %q", ctl.RoleText, ctl.Holder, ctl.AgentStatus, ctl.AgentCode)
			}
			eventually(t, 20*time.Second, "the controller's command", func() (bool, string) {
				r, err := c.Exec(callCtx(t), sb.ID, client.ExecRequest{Script: "ls /workspace"})
				return err == nil && strings.Contains(r.Stdout, "controller"), fmt.Sprint(r, err)
			})
			if r := execOK(t, c, sb.ID, "ls /workspace"); strings.Contains(r.Stdout, "observer") {
				t.Errorf("an observer page's input reached the desktop: %q", r.Stdout)
			}
			eventually(t, 20*time.Second, "control released when the page closed", func() (bool, string) {
				st, err := c.DesktopControl(callCtx(t), sb.ID, -1, 0)
				return err == nil && st.Holder == "", fmt.Sprint(st, err)
			})

			// An expired or tampered link's page is a 404, not a page.
			tampered := strings.Replace(obs.ViewerURL, "/v1/displays/v2.", "/v1/displays/v2.A", 1)
			if code, body := apiJSONAs(t, svc, "", "GET", strings.TrimPrefix(tampered, svc.url()), nil, nil); code != 404 || !strings.Contains(body, "link_invalid") {
				t.Errorf("tampered viewer link: %d %s", code, body)
			}
			if code, _ := apiJSONAs(t, svc, "", "GET", "/viewer/app.js", nil, nil); code != 404 {
				t.Errorf("/viewer/ serves a file that is not the viewer's: %d", code)
			}
		})
	}
}

// runNodeJSON runs a script of test/browserclient with node and decodes
// the one JSON line it prints into out.
func runNodeJSON(t *testing.T, script string, out any, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{script}, args...)...)
	cmd.Dir = browserClientDir(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, _ := cmd.Output()
	if err := json.Unmarshal(bytes.TrimSpace(stdout), out); err != nil {
		t.Fatalf("%s: %v: stdout %q stderr %q", script, err, stdout, stderr.String())
	}
}
