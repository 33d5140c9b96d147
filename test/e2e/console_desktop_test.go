package e2e

import (
	"fmt"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// TestConsoleDesktop drives the console's desktop and trace views in
// Chromium under runc and runsc: the desktop sandbox is listed with the
// agent's request for a person; Take over makes the tenant's person the
// holder and opens the live view in a new tab, which shows the desktop;
// the agent's next action answers 409 control_held; Release lets it act
// again; the trace view lists every event of the sandbox and shows a
// screenshot the trace kept.
func TestConsoleDesktop(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "desktop-vnc")
	svc := e.start(t)
	requireConsoleBuilt(t, svc)
	c := svc.client()
	me, err := c.Whoami(callCtx(t))
	if err != nil {
		t.Fatal(err)
	}
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
			if res, err := c.ComputerActions(callCtx(t), sb.ID, client.ComputerActionsRequest{Actions: []client.ComputerAction{
				{Action: "left_click", Coordinate: []int{100, 100}}}}); err != nil || !res.OK {
				t.Fatalf("click: %+v %v", res, err)
			}
			if _, err := c.RequestHuman(callCtx(t), sb.ID, "a captcha"); err != nil {
				t.Fatal(err)
			}
			var r struct {
				OK                bool     `json:"ok"`
				Error             string   `json:"error"`
				ConsoleErrors     []string `json:"console_errors"`
				RequestsText      string   `json:"requests_text"`
				ViewerRole        string   `json:"viewer_role"`
				ViewerBright      int      `json:"viewer_bright"`
				AgentStatus       int      `json:"agent_status"`
				AgentCode         string   `json:"agent_code"`
				AgentAfterRelease int      `json:"agent_after_release"`
				TraceItems        int      `json:"trace_items"`
				TraceShotWidth    int      `json:"trace_shot_width"`
			}
			runNodeJSON(t, "console-desktop.mjs", &r, svc.url(), svc.e.apiKey, sb.ID, me.Tenant, consoleArtifacts(t, "desktop-"+rt))
			if !r.OK || len(r.ConsoleErrors) > 0 {
				t.Fatalf("console: %s %q", r.Error, r.ConsoleErrors)
			}
			page, err := c.TracePage(callCtx(t), sb.ID, 0, 1000)
			if err != nil {
				t.Fatal(err)
			}
			if r.RequestsText != "asks for a person: a captcha" || r.ViewerBright < 5000 || r.AgentStatus != 409 || r.AgentCode != "control_held" ||
				r.AgentAfterRelease != 200 || r.TraceItems < 10 || r.TraceItems > len(page.Events) || r.TraceShotWidth != 1280 {
				t.Errorf("console: %+v (the trace has %d events)", r, len(page.Events))
			}
		})
	}
}
