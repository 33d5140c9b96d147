package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

const mcpServerJSON = `{"id":"mcp_1","tenant":"default","catalog":"fs","command":["mcp-fs","/workspace"],
"profile":"tool-basic","scope":"dedicated","endpoint":"/v1/mcp/servers/mcp_1/mcp","token":"gmcp_tok",
"lease_id":"lse_1","own_lease":true,"sandbox_id":"sbx_1","job_id":"job_1","runtime":"runsc","risk":"medium",
"network":"allowlist","decision":{"source":"registry","source_risk":"medium","permission_risk":"medium",
"risk":"medium","ceiling":"high","rule":"risk = max(source registry → medium, …) = medium","min_runtime":"runsc",
"network":"allowlist","hosts":["api.example.com:443"],"secrets":"none"},"state":"ready","restarts":0,
"server":{"name":"fs","version":"1.2.0"},"protocol_version":"2025-11-25","tools":{"deny":["write_*"]},
"pin_mode":"block","idle_ttl_seconds":300,"created_at":"2026-03-01T11:58:00Z","last_used_at":"2026-03-01T11:59:00Z"}`

// TestMCPRun: the flags and the command after -- become the create
// request; mistakes are usage errors that send nothing.
func TestMCPRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		args     []string
		wantBody string // "" - a usage error
		wantErr  string
	}{
		{
			name:     "catalog with tool rules",
			args:     []string{"--catalog", "fs", "--deny", "write_*", "--allow", "read_*", "--allow", "list_*", "--idle-ttl", "5m"},
			wantBody: `{"catalog":"fs","tools":{"allow":["read_*","list_*"],"deny":["write_*"]},"idle_ttl_seconds":300}`,
		},
		{
			name: "command with permissions and timeouts",
			args: []string{"--profile", "code-python-basic", "--network", "api.example.com:443", "--workspace", "read",
				"--env", "A=1", "--cwd", "/workspace", "--idle-ttl", "90", "--call-timeout", "1500ms", "--call-ceiling", "2m",
				"--init-timeout", "10s", "--pin-mode", "block", "--", "python3", "server.py", "--verbose"},
			wantBody: `{"spec":{"command":["python3","server.py","--verbose"],"cwd":"/workspace","env":{"A":"1"},
				"profile":"code-python-basic","permissions":{"network":["api.example.com:443"],"workspace":"read"}},
				"pin_mode":"block","idle_ttl_seconds":90,"call_timeout_ms":1500,"call_ceiling_ms":120000,"init_timeout_ms":10000}`,
		},
		{
			name: "approvals, a stronger runtime and an operator tool",
			args: []string{"--profile", "tool-node", "--tool", "search", "--approve", "pay_*", "--approval-ttl", "2m",
				"--runtime", "runsc", "--", "node", "s.js"},
			wantBody: `{"spec":{"command":["node","s.js"],"profile":"tool-node","permissions":{"tools":["search"]}},
				"runtime":"runsc","tools":{"approve":["pay_*"]},"approval_ttl_seconds":120}`,
		},
		{name: "network and tool", args: []string{"--profile", "p", "--network", "h", "--tool", "t", "--", "x"}, wantErr: "exclusive"},
		{name: "bad runtime", args: []string{"--catalog", "fs", "--runtime", "kata"}, wantErr: "--runtime"},
		{
			name:     "command in a leased sandbox",
			args:     []string{"--lease", "lse_9", "--", "node", "s.js"},
			wantBody: `{"spec":{"command":["node","s.js"]},"lease_id":"lse_9"}`,
		},
		{name: "no server", args: nil, wantErr: "no server"},
		{name: "catalog and command", args: []string{"--catalog", "fs", "--", "x"}, wantErr: "not both"},
		{name: "command without --", args: []string{"--profile", "p", "python3"}, wantErr: "after --"},
		{name: "spec flags with catalog", args: []string{"--catalog", "fs", "--profile", "p"}, wantErr: "not --catalog"},
		{name: "no profile nor lease", args: []string{"--", "x"}, wantErr: "--profile is required"},
		{name: "bad pin mode", args: []string{"--catalog", "fs", "--pin-mode", "off"}, wantErr: "--pin-mode"},
		{name: "bad idle ttl", args: []string{"--catalog", "fs", "--idle-ttl", "soon"}, wantErr: "--idle-ttl"},
		{name: "negative timeout", args: []string{"--catalog", "fs", "--call-timeout", "-1s"}, wantErr: "--call-timeout"},
		{name: "bad env", args: []string{"--profile", "p", "--env", "A", "--", "x"}, wantErr: "KEY=VALUE"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := newFakeAPI(t, reply(201, mcpServerJSON))
			r := cli(t, api.URL, "", nil, append([]string{"mcp", "run"}, tc.args...)...)
			if tc.wantBody == "" {
				if r.code != 2 || !strings.Contains(r.stderr, tc.wantErr) || len(api.requests()) != 0 {
					t.Fatalf("exit %d, stderr %q, %d requests; want usage error %q", r.code, r.stderr, len(api.requests()), tc.wantErr)
				}
				return
			}
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			req := api.only(t)
			if req.Method != "POST" || req.Path != "/v1/mcp/servers" || req.Header.Get("Authorization") != "Bearer k" {
				t.Errorf("request %s %s auth %q", req.Method, req.Path, req.Header.Get("Authorization"))
			}
			jsonEqual(t, req.Body, tc.wantBody)
			if r.stdout != "mcp_1 gmcp_tok\n" {
				t.Errorf("stdout %q", r.stdout)
			}
			if !strings.Contains(r.stderr, api.URL+"/v1/mcp/servers/mcp_1/mcp") || !strings.Contains(r.stderr, "runsc") {
				t.Errorf("stderr %q lacks the endpoint and runtime", r.stderr)
			}
		})
	}
}

func TestMCPRunJSONAndErrors(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, reply(201, mcpServerJSON))
	r := cli(t, api.URL, "", nil, "-o", "json", "mcp", "run", "--catalog", "fs")
	if r.code != 0 || !strings.Contains(r.stdout, `"token": "gmcp_tok"`) || !strings.Contains(r.stdout, `"min_runtime": "runsc"`) {
		t.Fatalf("exit %d stdout %s stderr %s", r.code, r.stdout, r.stderr)
	}
	api = newFakeAPI(t, problem(403, "risk_above_ceiling", "the server's risk is high, above the ceiling medium"))
	r = cli(t, api.URL, "", nil, "mcp", "run", "--profile", "p", "--", "x")
	if r.code != 1 || !strings.Contains(r.stderr, "risk_above_ceiling") || !strings.Contains(r.stderr, "req-42") {
		t.Errorf("exit %d stderr %q", r.code, r.stderr)
	}
}

// TestMCPVerbs: each verb calls its route and prints its answer.
func TestMCPVerbs(t *testing.T) {
	t.Parallel()
	entryFile := filepath.Join(t.TempDir(), "entry.json")
	if err := os.WriteFile(entryFile, []byte(`{"name":"mine","command":["node","s.js"],"tools":{"deny":["rm"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name                 string
		args                 []string
		body                 string
		status               int
		wantMethod, wantPath string
		wantQuery            map[string][]string
		wantBody             string
		wantOut              []string
		wantErr              string
	}{
		{
			name: "ls", args: []string{"mcp", "ls"}, body: `{"items":[` + mcpServerJSON + `]}`,
			wantMethod: "GET", wantPath: "/v1/mcp/servers",
			wantOut: []string{"SERVER", "mcp_1", "ready", "fs", "medium", "runsc", "allowlist", "lse_1", "2m", "mcp-fs /workspace"},
		},
		{
			name: "ls json", args: []string{"-o", "json", "mcp", "ls"}, body: `{"items":[]}`,
			wantMethod: "GET", wantPath: "/v1/mcp/servers", wantOut: []string{`"items": []`},
		},
		{
			name: "get", args: []string{"mcp", "get", "mcp_1"}, body: mcpServerJSON,
			wantMethod: "GET", wantPath: "/v1/mcp/servers/mcp_1",
			wantOut: []string{"Endpoint:", "/v1/mcp/servers/mcp_1/mcp", "lse_1 (its own)", "allowlist: api.example.com:443",
				"risk = max(source registry", "Deny:", "write_*", "fs 1.2.0", "5m0s"},
		},
		{
			name: "rm", args: []string{"mcp", "rm", "mcp_1"}, status: 204,
			wantMethod: "DELETE", wantPath: "/v1/mcp/servers/mcp_1", wantOut: []string{"mcp_1"},
		},
		{
			name: "tools", args: []string{"mcp", "tools", "mcp_1"},
			body:       `{"items":[{"name":"read_file","description":"Read a file.\nMore.","inputSchema":{"type":"object"}}]}`,
			wantMethod: "GET", wantPath: "/v1/mcp/servers/mcp_1/tools", wantOut: []string{"TOOL", "read_file", "Read a file."},
		},
		{
			name: "pins", args: []string{"mcp", "pins", "mcp_1"},
			body: `{"items":[{"tool":"read_file","hash":"sha256:aa","pinned_at":"2026-03-01T12:00:00Z","definition":{},
				"changed":{"hash":"sha256:bb","seen_at":"2026-03-01T12:01:00Z","definition":{},"blocked":true}}]}`,
			wantMethod: "GET", wantPath: "/v1/mcp/servers/mcp_1/pins", wantOut: []string{"read_file", "sha256:aa", "sha256:bb", "true"},
		},
		{
			name: "approve", args: []string{"mcp", "approve", "mcp_1", "read_file", "sha256:bb"},
			body:       `{"tool":"read_file","hash":"sha256:bb","pinned_at":"2026-03-01T12:02:00Z","definition":{}}`,
			wantMethod: "POST", wantPath: "/v1/mcp/servers/mcp_1/pins/read_file/approve", wantBody: `{"hash":"sha256:bb"}`,
			wantOut: []string{"read_file sha256:bb"},
		},
		{
			name: "approve a stale hash", args: []string{"mcp", "approve", "mcp_1", "read_file", "sha256:cc"}, status: 409,
			wantMethod: "POST", wantPath: "/v1/mcp/servers/mcp_1/pins/read_file/approve", wantBody: `{"hash":"sha256:cc"}`,
			wantErr: "pin_hash_mismatch",
		},
		{
			name: "approvals", args: []string{"mcp", "approvals", "mcp_1"},
			body: `{"items":[{"id":"apr_1","instance":"mcp_1","tool":"pay","arguments":{"amount":3},"args_digest":"sha256:ab",
				"state":"pending","created_at":"2026-03-01T12:00:00Z","expires_at":"2026-03-01T12:05:00Z"}]}`,
			wantMethod: "GET", wantPath: "/v1/mcp/servers/mcp_1/approvals",
			wantOut: []string{"APPROVAL", "apr_1", "pending", "pay", "sha256:ab", `{"amount":3}`},
		},
		{
			name: "decide", args: []string{"mcp", "decide", "mcp_1", "apr_1", "deny", "sha256:ab", "--reason", "no"},
			body: `{"id":"apr_1","instance":"mcp_1","tool":"pay","args_digest":"sha256:ab","state":"denied",
				"created_at":"2026-03-01T12:00:00Z","expires_at":"2026-03-01T12:05:00Z"}`,
			wantMethod: "POST", wantPath: "/v1/mcp/servers/mcp_1/approvals/apr_1",
			wantBody: `{"decision":"deny","args_digest":"sha256:ab","reason":"no"}`, wantOut: []string{"apr_1 denied"},
		},
		{
			name: "calls", args: []string{"mcp", "calls", "mcp_1", "--cursor", "7", "--limit", "1"},
			body: `{"items":[{"seq":8,"time":"2026-03-01T12:00:03Z","client":"claude/1","method":"tools/call","tool":"read_file",
				"args_bytes":2,"decision":"hidden","rule":"deny write_*","duration_ms":0,"outcome":"refused","result_bytes":0}],"next_cursor":"8"}`,
			wantMethod: "GET", wantPath: "/v1/mcp/servers/mcp_1/calls", wantQuery: map[string][]string{"cursor": {"7"}, "limit": {"1"}},
			wantOut: []string{"SEQ", "8", "tools/call", "read_file", "hidden", "refused", "claude/1", "deny write_*"},
			wantErr: "--cursor 8",
		},
		{
			name: "catalog", args: []string{"mcp", "catalog"},
			body: `{"items":[{"name":"fetch","description":"Fetch web pages","source":"registry","command":["mcp-fetch"],
				"permissions":{"network":["example.com:443"]},"tools":{}}]}`,
			wantMethod: "GET", wantPath: "/v1/mcp/catalog", wantOut: []string{"fetch", "registry", "example.com:443", "Fetch web pages"},
		},
		{
			name: "catalog add", args: []string{"mcp", "catalog", "add", entryFile}, status: 201,
			body:       `{"name":"mine","source":"unverified","command":["node","s.js"],"permissions":{},"tools":{"deny":["rm"]},"owner":"tenant"}`,
			wantMethod: "POST", wantPath: "/v1/mcp/catalog", wantBody: `{"name":"mine","command":["node","s.js"],"tools":{"deny":["rm"]}}`,
			wantOut: []string{"mine"},
		},
		{
			name: "catalog rm", args: []string{"mcp", "catalog", "rm", "mine"}, status: 204,
			wantMethod: "DELETE", wantPath: "/v1/mcp/catalog/mine",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			status := tc.status
			if status == 0 {
				status = 200
			}
			handle := reply(status, tc.body)
			if status >= 400 {
				handle = problem(status, tc.wantErr, "changed to another definition")
			}
			api := newFakeAPI(t, handle)
			r := cli(t, api.URL, "", nil, tc.args...)
			if status >= 400 {
				if r.code != 1 || !strings.Contains(r.stderr, tc.wantErr) {
					t.Errorf("exit %d stderr %q, want %s", r.code, r.stderr, tc.wantErr)
				}
			} else if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			req := api.only(t)
			if req.Method != tc.wantMethod || req.Path != tc.wantPath {
				t.Errorf("request %s %s, want %s %s", req.Method, req.Path, tc.wantMethod, tc.wantPath)
			}
			if tc.wantQuery != nil {
				for k, v := range tc.wantQuery {
					if !slices.Equal(req.Query[k], v) {
						t.Errorf("query %s = %v, want %v", k, req.Query[k], v)
					}
				}
			}
			if tc.wantBody != "" {
				jsonEqual(t, req.Body, tc.wantBody)
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, r.stdout)
				}
			}
			if status < 400 && tc.wantErr != "" && !strings.Contains(r.stderr, tc.wantErr) {
				t.Errorf("stderr %q lacks %q", r.stderr, tc.wantErr)
			}
		})
	}
	r := cli(t, "http://127.0.0.1:1", "", nil, "mcp", "calls", "mcp_1", "--limit", "0")
	if r.code != 2 {
		t.Errorf("--limit 0: exit %d", r.code)
	}
}

// mcpEndpointAPI serves an MCP server (one tool, echo) at the endpoint of
// instance mcp_1 behind the token gmcp_tok, as the service does, and
// records what reached it.
type mcpEndpointAPI struct {
	URL  string
	mu   sync.Mutex
	seen []seen
}

func newMCPEndpointAPI(t *testing.T) *mcpEndpointAPI {
	t.Helper()
	srv := sdk.NewServer(&sdk.Implementation{Name: "echo-server", Version: "1"}, nil)
	type echoIn struct {
		Text string `json:"text"`
	}
	sdk.AddTool(srv, &sdk.Tool{Name: "echo", Description: "Echo text"}, func(_ context.Context, _ *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: in.Text}}}, nil, nil
	})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	f := &mcpEndpointAPI{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.seen = append(f.seen, seen{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone()})
		f.mu.Unlock()
		if r.URL.Path != "/v1/mcp/servers/mcp_1/mcp" || r.Header.Get("Authorization") != "Bearer gmcp_tok" {
			problem(401, "mcp_token_invalid", "this endpoint takes the instance's bearer token")(w, r, nil)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	f.URL = hs.URL
	return f
}

func (f *mcpEndpointAPI) requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.seen)
}

// TestMCPStdio: genesis mcp stdio relays a stdio client's session to the
// endpoint with the instance token, and every answer back.
func TestMCPStdio(t *testing.T) {
	t.Parallel()
	api := newMCPEndpointAPI(t)
	stdin := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":"three","method":"tools/call","params":{"name":"echo","arguments":{"text":"hi there"}}}`,
	}, "\n") + "\n"
	r := cli(t, api.URL, stdin, nil, "mcp", "stdio", "mcp_1", "--token", "gmcp_tok")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	answers := map[string]json.RawMessage{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("stdout line %q: %v", line, err)
		}
		if m.Error != nil {
			t.Errorf("answer %s is an error: %s", m.ID, m.Error)
		}
		answers[string(m.ID)] = m.Result
	}
	if len(answers) != 3 {
		t.Fatalf("answers %v, want 3:\n%s", answers, r.stdout)
	}
	if !strings.Contains(string(answers["1"]), `"echo-server"`) || !strings.Contains(string(answers["1"]), `"2025-11-25"`) {
		t.Errorf("initialize answer %s", answers["1"])
	}
	if !strings.Contains(string(answers["2"]), `"name":"echo"`) {
		t.Errorf("tools/list answer %s", answers["2"])
	}
	if !strings.Contains(string(answers[`"three"`]), `"hi there"`) {
		t.Errorf("tools/call answer %s", answers[`"three"`])
	}
	reqs := api.requests()
	var methods []string
	for i, q := range reqs {
		methods = append(methods, q.Method)
		if q.Header.Get("Authorization") != "Bearer gmcp_tok" {
			t.Errorf("request %d Authorization %q, want the instance token (never the API key)", i, q.Header.Get("Authorization"))
		}
		if i > 0 && (q.Header.Get("Mcp-Session-Id") == "" || q.Header.Get("Mcp-Protocol-Version") != "2025-11-25") {
			t.Errorf("request %d (%s) session %q version %q", i, q.Method, q.Header.Get("Mcp-Session-Id"), q.Header.Get("Mcp-Protocol-Version"))
		}
	}
	if len(methods) != 5 || methods[len(methods)-1] != "DELETE" {
		t.Errorf("requests %v, want four POSTs and the session's DELETE", methods)
	}
}

// TestMCPStdioRefused: a wrong token is answered to the client as an error
// and ends the bridge with a message.
func TestMCPStdioRefused(t *testing.T) {
	t.Parallel()
	api := newMCPEndpointAPI(t)
	stdin := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n"
	r := cli(t, api.URL, stdin, map[string]string{envMCPToken: "gmcp_wrong"}, "mcp", "stdio", "mcp_1")
	if r.code != 1 || !strings.Contains(r.stderr, "401") {
		t.Errorf("exit %d stderr %q", r.code, r.stderr)
	}
	var m struct {
		ID    int `json:"id"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil || m.ID != 1 || m.Error == nil {
		t.Errorf("stdout %q (%v), want an error answer to id 1", r.stdout, err)
	} else if !strings.Contains(m.Error.Message, "401") || !strings.Contains(m.Error.Message, "token") {
		t.Errorf("error answer %q, want the refusal explained (the host shows it, not stderr)", m.Error.Message)
	}
	if got := api.requests(); len(got) != 1 || got[0].Header.Get("Authorization") != "Bearer gmcp_wrong" {
		t.Errorf("requests %+v", got)
	}
	if r := cli(t, api.URL, "", nil, "mcp", "stdio", "mcp_1"); r.code != 2 || !strings.Contains(r.stderr, "--token") {
		t.Errorf("no token: exit %d stderr %q", r.code, r.stderr)
	}
}

// TestMCPServeUnreachable: when the service cannot be reached, genesis mcp
// serve answers the client's call with an error that says so (a host shows
// the answer, often not stderr), not the transport's bare "rejected by
// transport".
func TestMCPServeUnreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	stdin := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n"
	r := cli(t, closed, stdin, nil, "mcp", "serve")
	if r.code != 1 {
		t.Errorf("exit %d, want 1; stderr %q", r.code, r.stderr)
	}
	var m struct {
		ID    int `json:"id"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	want := "cannot reach the Genesis service at " + closed + ": connection refused"
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil || m.ID != 1 || m.Error == nil {
		t.Fatalf("stdout %q (%v), want an error answer to id 1", r.stdout, err)
	}
	if m.Error.Message != want {
		t.Errorf("error answer %q, want %q", m.Error.Message, want)
	}
}
