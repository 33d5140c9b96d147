package client

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

const mcpServerJSON = `{"id":"mcp_1","tenant":"default","catalog":"fs","command":["mcp-fs","/workspace"],
"profile":"tool-basic","scope":"dedicated","endpoint":"/v1/mcp/servers/mcp_1/mcp","token":"gmcp_secret",
"lease_id":"lse_1","own_lease":true,"sandbox_id":"sbx_1","job_id":"job_1","runtime":"runsc","risk":"medium",
"network":"allowlist","decision":{"source":"registry","source_risk":"medium","permission_risk":"medium",
"risk":"medium","ceiling":"high","rule":"risk = …","min_runtime":"runsc","network":"allowlist",
"hosts":["api.example.com:443"],"secrets":"none"},"state":"ready","restarts":1,"last_exit_code":3,
"server":{"name":"fs","version":"1.2.0"},"protocol_version":"2025-11-25","tools":{"deny":["write_*"]},
"pin_mode":"block","idle_ttl_seconds":300,"created_at":"2026-03-01T12:00:00Z",
"ready_at":"2026-03-01T12:00:01Z","last_used_at":"2026-03-01T12:00:02Z"}`

// callsPage is what MCPServerCalls returns, as one value.
type callsPage struct {
	items []MCPCallRecord
	next  string
}

func TestMCPRequests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name       string
		ans        answer
		call       func(c *Client) (any, error)
		wantMethod string
		wantPath   string
		wantQuery  map[string][]string
		wantBody   string
		check      func(t *testing.T, got any)
	}{
		{
			name: "create from the catalog",
			ans:  answer{Status: 201, Body: mcpServerJSON, Header: map[string]string{"Location": "/v1/mcp/servers/mcp_1"}},
			call: func(c *Client) (any, error) {
				return c.CreateMCPServer(ctx, MCPCreateRequest{Catalog: "fs", Tools: &MCPToolRules{Deny: []string{"write_*"}}, IdleTTLSeconds: 300})
			},
			wantMethod: "POST", wantPath: "/v1/mcp/servers",
			wantBody: `{"catalog":"fs","tools":{"deny":["write_*"]},"idle_ttl_seconds":300}`,
			check: func(t *testing.T, got any) {
				s := got.(*MCPServer)
				if s.ID != "mcp_1" || s.Token != "gmcp_secret" || !s.OwnLease || s.Decision.MinRuntime != "runsc" ||
					len(s.Decision.Hosts) != 1 || s.Server == nil || s.Server.Version != "1.2.0" || s.LastExitCode == nil ||
					*s.LastExitCode != 3 || s.ReadyAt == nil || s.Restarts != 1 || !reflect.DeepEqual(s.Tools.Deny, []string{"write_*"}) {
					t.Errorf("server = %+v", s)
				}
			},
		},
		{
			name: "create from a spec",
			ans:  answer{Status: 201, Body: mcpServerJSON},
			call: func(c *Client) (any, error) {
				return c.CreateMCPServer(ctx, MCPCreateRequest{
					Spec: &MCPSpec{Command: []string{"python3", "server.py"}, Profile: "code-python-basic",
						Permissions: &MCPPermissions{Network: []string{"api.example.com:443"}}},
					LeaseID: "lse_9", CallTimeoutMS: 5000,
				})
			},
			wantMethod: "POST", wantPath: "/v1/mcp/servers",
			wantBody: `{"spec":{"command":["python3","server.py"],"profile":"code-python-basic",
				"permissions":{"network":["api.example.com:443"]}},"lease_id":"lse_9","call_timeout_ms":5000}`,
		},
		{
			name:       "list",
			ans:        answer{Body: `{"items":[` + mcpServerJSON + `]}`},
			call:       func(c *Client) (any, error) { return c.ListMCPServers(ctx) },
			wantMethod: "GET", wantPath: "/v1/mcp/servers",
			check: func(t *testing.T, got any) {
				if l := got.([]MCPServer); len(l) != 1 || l[0].State != MCPStateReady {
					t.Errorf("list = %+v", l)
				}
			},
		},
		{
			name:       "get escapes the id",
			ans:        answer{Body: mcpServerJSON},
			call:       func(c *Client) (any, error) { return c.GetMCPServer(ctx, "mcp 1") },
			wantMethod: "GET", wantPath: "/v1/mcp/servers/mcp%201",
		},
		{
			name:       "delete",
			ans:        answer{Status: 204},
			call:       func(c *Client) (any, error) { return nil, c.DeleteMCPServer(ctx, "mcp_1") },
			wantMethod: "DELETE", wantPath: "/v1/mcp/servers/mcp_1",
		},
		{
			name: "tools",
			ans: answer{Body: `{"items":[{"name":"read_file","description":"Read a file",
				"inputSchema":{"type":"object","properties":{"path":{"type":"string"}}},"annotations":{"readOnlyHint":true}}]}`},
			call:       func(c *Client) (any, error) { return c.MCPServerTools(ctx, "mcp_1") },
			wantMethod: "GET", wantPath: "/v1/mcp/servers/mcp_1/tools",
			check: func(t *testing.T, got any) {
				l := got.([]MCPTool)
				if len(l) != 1 || l[0].Name != "read_file" || l[0].Description != "Read a file" ||
					!strings.Contains(string(l[0].InputSchema), `"path"`) || !strings.Contains(string(l[0].Annotations), "readOnlyHint") {
					t.Errorf("tools = %+v", l)
				}
			},
		},
		{
			name: "pins",
			ans: answer{Body: `{"items":[{"tool":"read_file","hash":"sha256:aa","pinned_at":"2026-03-01T12:00:00Z",
				"definition":{"name":"read_file"},"changed":{"hash":"sha256:bb","seen_at":"2026-03-01T12:05:00Z",
				"definition":{"name":"read_file","description":"now different"},"blocked":true}}]}`},
			call:       func(c *Client) (any, error) { return c.MCPServerPins(ctx, "mcp_1") },
			wantMethod: "GET", wantPath: "/v1/mcp/servers/mcp_1/pins",
			check: func(t *testing.T, got any) {
				l := got.([]MCPPin)
				if len(l) != 1 || l[0].Hash != "sha256:aa" || l[0].Changed == nil || !l[0].Changed.Blocked ||
					l[0].Changed.Hash != "sha256:bb" || string(l[0].Definition) != `{"name":"read_file"}` {
					t.Errorf("pins = %+v", l)
				}
			},
		},
		{
			name: "approve escapes the tool",
			ans:  answer{Body: `{"tool":"a/b","hash":"sha256:bb","pinned_at":"2026-03-01T12:06:00Z","definition":{}}`},
			call: func(c *Client) (any, error) {
				return c.ApproveMCPPin(ctx, "mcp_1", "a/b", "sha256:bb")
			},
			wantMethod: "POST", wantPath: "/v1/mcp/servers/mcp_1/pins/a%2Fb/approve",
			wantBody: `{"hash":"sha256:bb"}`,
			check: func(t *testing.T, got any) {
				if p := got.(*MCPPin); p.Hash != "sha256:bb" || p.Changed != nil {
					t.Errorf("pin = %+v", p)
				}
			},
		},
		{
			name: "calls with cursor and limit",
			ans: answer{Body: `{"items":[{"seq":8,"time":"2026-03-01T12:00:03Z","session":"S1","client":"claude/1",
				"method":"tools/call","tool":"read_file","args_digest":"sha256:cc","args_bytes":17,"decision":"allowed",
				"rule":"allowed","duration_ms":12,"outcome":"ok","result_bytes":99}],"next_cursor":"8"}`},
			call: func(c *Client) (any, error) {
				items, next, err := c.MCPServerCalls(ctx, "mcp_1", "7", 1)
				return callsPage{items, next}, err
			},
			wantMethod: "GET", wantPath: "/v1/mcp/servers/mcp_1/calls",
			wantQuery: map[string][]string{"cursor": {"7"}, "limit": {"1"}},
			check: func(t *testing.T, got any) {
				page := got.(callsPage)
				items := page.items
				if page.next != "8" {
					t.Errorf("next = %q", page.next)
				}
				if len(items) != 1 || items[0].Seq != 8 || items[0].Tool != "read_file" || items[0].ArgsBytes != 17 || items[0].Outcome != "ok" {
					t.Errorf("calls = %+v", items)
				}
			},
		},
		{
			name:       "calls from the start",
			ans:        answer{Body: `{"items":[],"next_cursor":""}`},
			call:       func(c *Client) (any, error) { _, _, err := c.MCPServerCalls(ctx, "mcp_1", "", 0); return nil, err },
			wantMethod: "GET", wantPath: "/v1/mcp/servers/mcp_1/calls",
			wantQuery: map[string][]string{},
		},
		{
			name: "approvals",
			ans: answer{Body: `{"items":[{"id":"apr_1","instance":"mcp_1","tool":"pay","arguments":{"amount":3},
				"args_digest":"sha256:ab","state":"pending","created_at":"2026-03-01T12:00:00Z","expires_at":"2026-03-01T12:05:00Z"}]}`},
			call:       func(c *Client) (any, error) { return c.MCPServerApprovals(ctx, "mcp_1") },
			wantMethod: "GET", wantPath: "/v1/mcp/servers/mcp_1/approvals",
			check: func(t *testing.T, got any) {
				l := got.([]MCPApproval)
				if len(l) != 1 || l[0].ID != "apr_1" || l[0].State != MCPApprovalPending || l[0].ArgsDigest != "sha256:ab" ||
					string(l[0].Arguments) != `{"amount":3}` || l[0].DecidedAt != nil {
					t.Errorf("approvals = %+v", l)
				}
			},
		},
		{
			name: "decide an approval",
			ans: answer{Body: `{"id":"apr_1","instance":"mcp_1","tool":"pay","args_digest":"sha256:ab","state":"denied",
				"created_at":"2026-03-01T12:00:00Z","expires_at":"2026-03-01T12:05:00Z","decided_at":"2026-03-01T12:01:00Z",
				"decided_by":"acme/key_1","reason":"too much"}`},
			call: func(c *Client) (any, error) {
				return c.DecideMCPApproval(ctx, "mcp_1", "apr 1", MCPApprovalDecision{Decision: "deny", ArgsDigest: "sha256:ab", Reason: "too much"})
			},
			wantMethod: "POST", wantPath: "/v1/mcp/servers/mcp_1/approvals/apr%201",
			wantBody: `{"decision":"deny","args_digest":"sha256:ab","reason":"too much"}`,
			check: func(t *testing.T, got any) {
				a := got.(*MCPApproval)
				if a.State != MCPApprovalDenied || a.DecidedAt == nil || a.DecidedBy != "acme/key_1" {
					t.Errorf("approval = %+v", a)
				}
			},
		},
		{
			name: "catalog",
			ans: answer{Body: `{"items":[{"name":"fs","source":"builtin","command":["mcp-fs"],"permissions":{"workspace":"read"},
				"tools":{"allow":["read_*"]}}]}`},
			call:       func(c *Client) (any, error) { return c.MCPCatalog(ctx) },
			wantMethod: "GET", wantPath: "/v1/mcp/catalog",
			check: func(t *testing.T, got any) {
				l := got.([]MCPCatalogEntry)
				if len(l) != 1 || l[0].Source != "builtin" || l[0].Permissions.Workspace != "read" || l[0].Tools.Allow[0] != "read_*" {
					t.Errorf("catalog = %+v", l)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, f := newTestClient(t, tc.ans)
			got, err := tc.call(c)
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			r := f.last(t)
			if r.Method != tc.wantMethod || r.Path != tc.wantPath {
				t.Errorf("request = %s %s, want %s %s", r.Method, r.Path, tc.wantMethod, tc.wantPath)
			}
			if tc.wantQuery != nil && !reflect.DeepEqual(r.Query, tc.wantQuery) {
				t.Errorf("query = %v, want %v", r.Query, tc.wantQuery)
			}
			if r.Header.Get("Authorization") != "Bearer key-123" {
				t.Errorf("Authorization = %q", r.Header.Get("Authorization"))
			}
			assertJSONEqual(t, r.Body, tc.wantBody)
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
}

func TestMCPErrorsAndURL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, _ := newTestClient(t, answer{Status: 403, ContentType: "application/problem+json",
		Body: `{"title":"Forbidden","status":403,"code":"risk_above_ceiling","detail":"the server's risk is high"}`})
	_, err := c.CreateMCPServer(ctx, MCPCreateRequest{Spec: &MCPSpec{Command: []string{"x"}}})
	var ae *APIError
	if !errors.As(err, &ae) || ae.Problem.Code != "risk_above_ceiling" || ae.Status != 403 || ErrorCode(err) != "risk_above_ceiling" {
		t.Errorf("err = %v", err)
	}
	for name, call := range map[string]func() error{
		"get":     func() error { _, err := c.GetMCPServer(ctx, ""); return err },
		"delete":  func() error { return c.DeleteMCPServer(ctx, "") },
		"tools":   func() error { _, err := c.MCPServerTools(ctx, ""); return err },
		"approve": func() error { _, err := c.ApproveMCPPin(ctx, "mcp_1", "", "h"); return err },
		"calls":   func() error { _, _, err := c.MCPServerCalls(ctx, "", "", 0); return err },
		"decide":  func() error { _, err := c.DecideMCPApproval(ctx, "mcp_1", "", MCPApprovalDecision{}); return err },
	} {
		if err := call(); err == nil {
			t.Errorf("%s with an empty id succeeded", name)
		}
	}
	if u := New("http://h:1/base/", "k").MCPServerURL("mcp_1"); u != "http://h:1/base/v1/mcp/servers/mcp_1/mcp" {
		t.Errorf("MCPServerURL = %q", u)
	}
	// The wire types carry exactly the documented JSON.
	b, _ := json.Marshal(MCPCreateRequest{})
	if string(b) != "{}" {
		t.Errorf("empty create request = %s", b)
	}
}
