package e2e

import (
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPHTTPServer: a server that serves Streamable HTTP inside its
// sandbox (the reference server in its streamableHttp mode, on a port set
// by the entry) is reached through the port primitive and still parsed by
// the bridge: a stock client lists and calls through the instance's
// endpoint, a denied tool is missing from the list and refused as unknown,
// arguments are checked against the schema, and every call is recorded.
// Under runc and runsc.
func TestMCPHTTPServer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `
mcp:
  catalog:
    - name: everything-http
      source: builtin
      profile: tool-node
      transport: http
      port: 3099
      env: {PORT: "3099"}
      command: [node, /opt/genesis/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js, streamableHttp]
      tools: {deny: [echo]}
`)
	e.requireImage(t, "tool-node")
	svc := e.start(t)
	if code, body := apiJSON(t, svc, "POST", "/v1/mcp/servers", map[string]any{"spec": map[string]any{"command": []string{"true"}, "transport": "http"}}, nil); code != 400 || !strings.Contains(body, "port") {
		t.Errorf("transport http without a port: %d %s", code, body)
	}
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			var s mcpServer
			if code, body := apiJSON(t, svc, "POST", "/v1/mcp/servers", map[string]any{"catalog": "everything-http", "runtime": rt}, &s); code != 201 {
				t.Fatalf("create: %d %s", code, body)
			}
			t.Cleanup(func() { apiJSON(t, svc, "DELETE", "/v1/mcp/servers/"+s.ID, nil, nil) })
			if s.State != "ready" || s.Runtime != rt || s.Server == nil || !strings.Contains(s.Server.Name, "everything") {
				t.Fatalf("instance %+v", s)
			}
			cs := mcpConnect(t, svc, &s, "2025-11-25", nil, nil)
			tools, err := cs.ListTools(callCtx(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tl := range tools.Tools {
				names = append(names, tl.Name)
			}
			if !strings.Contains(","+strings.Join(names, ",")+",", ",get-sum,") || strings.Contains(","+strings.Join(names, ",")+",", ",echo,") {
				t.Fatalf("tools %v: want get-sum and no echo", names)
			}
			res, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "get-sum", Arguments: map[string]any{"a": 2, "b": 40}})
			if err != nil || res.IsError || !strings.Contains(toolText(res), "42") {
				t.Fatalf("get-sum: %q %v", toolText(res), err)
			}
			if _, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "x"}}); err == nil || !strings.Contains(err.Error(), "unknown tool") {
				t.Errorf("a denied tool: %v, want unknown tool", err)
			}
			if res, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "get-sum", Arguments: map[string]any{"a": "two"}}); err == nil && !res.IsError {
				t.Errorf("arguments against the schema were not refused: %q", toolText(res))
			}
			var log struct {
				Items []struct {
					Tool     string `json:"tool"`
					Decision string `json:"decision"`
					Outcome  string `json:"outcome"`
				} `json:"items"`
			}
			if code, body := apiJSON(t, svc, "GET", "/v1/mcp/servers/"+s.ID+"/calls", nil, &log); code != 200 {
				t.Fatalf("calls: %d %s", code, body)
			}
			var got []string
			for _, r := range log.Items {
				got = append(got, r.Tool+":"+r.Decision+":"+r.Outcome)
			}
			if len(got) < 3 || got[0] != "get-sum:allowed:ok" || got[1] != "echo:hidden:refused" || !strings.HasPrefix(got[2], "get-sum:refused") {
				t.Errorf("call log %v", got)
			}
		})
	}
}
