package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPEphemeral: with scope ephemeral every tools/call runs in a sandbox
// and server of its own, placed by the instance's decision (its runtime)
// and destroyed when the call ends; the instance's own sandbox serves the
// lists. A lease_id is refused for that scope. Under runc and runsc.
func TestMCPEphemeral(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "tool-node")
	svc := e.start(t)
	c := svc.client()
	if code, body := apiJSON(t, svc, "POST", "/v1/mcp/servers", map[string]any{"catalog": "everything", "scope": "ephemeral", "lease_id": "lse_1"}, nil); code != 400 {
		t.Errorf("ephemeral with a lease_id: %d %s", code, body)
	}
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			var s mcpServer
			if code, body := apiJSON(t, svc, "POST", "/v1/mcp/servers", map[string]any{"catalog": "everything", "scope": "ephemeral", "runtime": rt}, &s); code != 201 {
				t.Fatalf("create: %d %s", code, body)
			}
			t.Cleanup(func() { apiJSON(t, svc, "DELETE", "/v1/mcp/servers/"+s.ID, nil, nil) })
			cs := mcpConnect(t, svc, &s, "2025-11-25", nil, nil)
			tools, err := cs.ListTools(callCtx(t), nil)
			if err != nil || len(tools.Tools) == 0 {
				t.Fatalf("tools/list: %v %v", tools, err)
			}
			for i := range 2 {
				msg := fmt.Sprintf("call %d", i)
				res, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"message": msg}})
				if err != nil || !strings.Contains(toolText(res), msg) {
					t.Fatalf("echo %d: %v %v", i, toolText(res), err)
				}
			}
			var log struct {
				Items []struct {
					Tool      string `json:"tool"`
					Outcome   string `json:"outcome"`
					SandboxID string `json:"sandbox_id"`
				} `json:"items"`
			}
			if code, body := apiJSON(t, svc, "GET", "/v1/mcp/servers/"+s.ID+"/calls", nil, &log); code != 200 {
				t.Fatalf("calls: %d %s", code, body)
			}
			seen := map[string]bool{}
			for _, r := range log.Items {
				if r.Tool != "echo" {
					continue
				}
				if r.Outcome != "ok" || r.SandboxID == "" || r.SandboxID == s.SandboxID || seen[r.SandboxID] {
					t.Fatalf("call record %+v (instance sandbox %s, seen %v): want a sandbox of its own", r, s.SandboxID, seen)
				}
				seen[r.SandboxID] = true
			}
			if len(seen) != 2 {
				t.Fatalf("%d echo calls in the log, want 2: %+v", len(seen), log.Items)
			}
			for id := range seen {
				sb, err := c.GetSandbox(callCtx(t), id)
				if err != nil || sb.Runtime != rt || sb.Profile != "tool-node" || sb.Network != nil {
					t.Errorf("call sandbox %s: %+v %v", id, sb, err)
				}
				eventually(t, 30*time.Second, "call sandbox "+id+" destroyed", func() (bool, string) {
					sb, err := c.GetSandbox(callCtx(t), id)
					if err != nil {
						return false, err.Error()
					}
					return sb.State == "destroyed", sb.State
				})
			}
		})
	}
}
