package e2e

import (
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPForkBomb: a server that forks without end instead of speaking MCP
// hits its sandbox's pids limit, fails its initialize within the timeout
// (a clear 502 or 503, its lease released) and leaves the service and another
// instance serving. An ad-hoc server is high risk, so this is under runsc.
func TestMCPForkBomb(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "tool-node")
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	c := svc.client()
	var good mcpServer
	if code, body := apiJSON(t, svc, "POST", "/v1/mcp/servers", map[string]any{"catalog": "everything"}, &good); code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	t.Cleanup(func() { apiJSON(t, svc, "DELETE", "/v1/mcp/servers/"+good.ID, nil, nil) })
	cs := mcpConnect(t, svc, &good, "2025-11-25", nil, nil)

	t0 := time.Now()
	code, body := apiJSON(t, svc, "POST", "/v1/mcp/servers", map[string]any{"init_timeout_ms": 3000, "spec": map[string]any{
		"profile": "tool-basic", "command": []string{"sh", "-c", "while :; do sleep 60 & done"}}}, nil)
	// Which process the pids limit stops first is up to the race: the
	// server never answers (mcp_init_timeout) or its stdout ends with it
	// (mcp_init_failed), or the job is lost when the limit also stops the
	// sandbox's exec path (mcp_server_exited). Each is a clear refusal.
	if (code != 503 && code != 502) || !(strings.Contains(body, `"mcp_init_timeout"`) || strings.Contains(body, `"mcp_init_failed"`) || strings.Contains(body, `"mcp_server_exited"`)) {
		t.Fatalf("a fork-bombing server: %d %s, want 503 mcp_init_timeout or mcp_init_failed, or 502 mcp_server_exited", code, body)
	}
	// A not-a-hang bound, not a speed bound: the call also creates the
	// instance's own runsc lease, which a loaded machine can slow by tens
	// of seconds, and a lease_id of the test's would keep the lease from
	// being released, which is checked below. Without the 3 s init timeout
	// the call would wait for a server that never answers, far past 60 s.
	d := time.Since(t0)
	t.Logf("the refusal took %v", d.Round(time.Millisecond))
	if d > time.Minute {
		t.Errorf("the refusal took %v; want a timeout, not a hang", d)
	}
	var list struct {
		Items []mcpServer `json:"items"`
	}
	if code, body := apiJSON(t, svc, "GET", "/v1/mcp/servers", nil, &list); code != 200 || len(list.Items) != 1 || list.Items[0].ID != good.ID {
		t.Errorf("instances after the refusal: %d %s", code, body)
	}
	// Its lease was released: the one active lease is the good instance's.
	eventually(t, 30*time.Second, "the fork bomb's lease released", func() (bool, string) {
		ls, err := c.ListLeases(callCtx(t), "active")
		if err != nil {
			return false, err.Error()
		}
		var held []string
		for _, l := range ls {
			held = append(held, l.Holder)
		}
		return len(ls) == 1 && ls[0].LeaseID == good.LeaseID, strings.Join(held, ",")
	})
	res, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "still here"}})
	if err != nil || !strings.Contains(toolText(res), "still here") {
		t.Fatalf("the other instance after the fork bomb: %q %v", toolText(res), err)
	}
	if _, err := c.Health(callCtx(t)); err != nil {
		t.Errorf("health: %v", err)
	}
}
