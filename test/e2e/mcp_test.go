package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/testenv"
)

// mcpFixtureBuild builds ./test/mcpfixture (static) once.
var mcpFixtureBuild struct {
	once sync.Once
	path string
	err  error
}

func mcpFixtureBinary(t *testing.T) string {
	t.Helper()
	mcpFixtureBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "genesis-mcpfixture-")
		if err != nil {
			mcpFixtureBuild.err = err
			return
		}
		p := filepath.Join(dir, "mcpfixture")
		cmd := exec.Command("go", "build", "-trimpath", "-o", p, "./test/mcpfixture")
		cmd.Dir = testenv.ModuleRoot(t)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			mcpFixtureBuild.err = fmt.Errorf("%v: %s", err, out)
			return
		}
		mcpFixtureBuild.path = p
	})
	if mcpFixtureBuild.err != nil {
		t.Fatalf("building mcpfixture: %v", mcpFixtureBuild.err)
	}
	return mcpFixtureBuild.path
}

// mcpServer is the API view of an instance (the fields the tests read).
type mcpServer struct {
	ID        string `json:"id"`
	Endpoint  string `json:"endpoint"`
	Token     string `json:"token"`
	Runtime   string `json:"runtime"`
	Risk      string `json:"risk"`
	Network   string `json:"network"`
	State     string `json:"state"`
	LeaseID   string `json:"lease_id"`
	OwnLease  bool   `json:"own_lease"`
	SandboxID string `json:"sandbox_id"`
	JobID     string `json:"job_id"`
	LastError string `json:"last_error"`
	Decision  struct {
		Source      string `json:"source"`
		Risk        string `json:"risk"`
		Ceiling     string `json:"ceiling"`
		CeilingFrom string `json:"ceiling_from"`
		Rule        string `json:"rule"`
		MinRun      string `json:"min_runtime"`
		NetworkIs   string `json:"network"`
	} `json:"decision"`
	Server *struct {
		Name string `json:"name"`
	} `json:"server"`
}

// apiJSON sends a JSON request with the tenant key and decodes the answer
// into out (when not nil); it returns the status and the raw body.
func apiJSON(t *testing.T, svc *service, method, path string, body any, out any) (int, string) {
	t.Helper()
	return apiJSONAs(t, svc, svc.e.apiKey, method, path, body, out)
}

// apiJSONAs is apiJSON with the API key key.
func apiJSONAs(t *testing.T, svc *service, key, method, path string, body any, out any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, svc.url()+path, rd)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: decoding %s: %v", method, path, b, err)
		}
	}
	return resp.StatusCode, string(b)
}

// leaseWithFixture acquires a lease (released at cleanup) and uploads the
// fixture binary bin to its /workspace/mcpfixture.
func leaseWithFixture(t *testing.T, c *client.Client, req client.AcquireLeaseRequest, bin string) *client.Lease {
	t.Helper()
	ctx := callCtx(t)
	lease, err := c.AcquireLease(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.ReleaseLease(context.Background(), lease.LeaseID) })
	f, err := os.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WriteFile(ctx, lease.SandboxID, "/workspace/mcpfixture", f, client.WriteFileOptions{Mode: "0755", Size: fi.Size()}); err != nil {
		t.Fatal(err)
	}
	return lease
}

// bearer is an http.Client that sends token on every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func mcpConnect(t *testing.T, svc *service, s *mcpServer, version string, opts *sdk.ClientOptions, rt http.RoundTripper) *sdk.ClientSession {
	t.Helper()
	if rt == nil {
		rt = http.DefaultTransport
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	c := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1"}, opts)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: svc.url() + s.Endpoint,
		HTTPClient: &http.Client{Transport: bearer{s.Token, rt}}, MaxRetries: 3}, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("MCP connect (%s): %v", version, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func toolText(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	t.Cleanup(cancel)
	return ctx
}

// TestMCPServers runs stdio MCP servers in sandboxes under runc and runsc
// and serves each to unmodified MCP clients (the Go SDK's) at its own
// endpoint: list and call, both protocol revisions, duplicate ids from two
// clients, a dropped SSE stream resumed with no gap or duplicate, the
// instance token (never the tenant key), the risk rule (an ad-hoc server
// needs runsc and is refused on a runc lease), a rug pull blocked until
// approved, a server that breaks the protocol killed, the call log and the
// audit, and delete.
func TestMCPServers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `
mcp:
  catalog:
    - name: fixture
      description: the test fixture, trusted by this operator
      source: verified
      command: ["/workspace/mcpfixture", "serve"]
`)
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	c := svc.client()
	bin := mcpFixtureBinary(t)
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			risk := "low"
			if rt == "runsc" {
				risk = "high"
			}
			lease := leaseWithFixture(t, c, client.AcquireLeaseRequest{Profile: "tool-basic", RiskLevel: risk, Runtime: rt}, bin)

			// An ad-hoc server is high risk: runsc, never a runc lease. The
			// instance keeps the default call timeout: a short one would
			// cancel an echo of the concurrent calls below that a loaded
			// machine stalls for a moment, and no case here needs one.
			adhoc := map[string]any{"spec": map[string]any{"command": []string{"/workspace/mcpfixture", "serve"}}, "lease_id": lease.LeaseID}
			var s mcpServer
			if rt == "runc" {
				code, body := apiJSON(t, svc, "POST", "/v1/mcp/servers", adhoc, nil)
				if code != 409 && code != 412 || !strings.Contains(body, "runtime_too_weak") {
					t.Fatalf("an ad-hoc server on a runc lease: %d %s", code, body)
				}
				code, body = apiJSON(t, svc, "POST", "/v1/mcp/servers",
					map[string]any{"catalog": "fixture", "lease_id": lease.LeaseID}, &s)
				if code != 201 {
					t.Fatalf("create from the catalog: %d %s", code, body)
				}
				if s.Decision.Source != "verified" || s.Risk != "low" {
					t.Fatalf("decision %+v", s.Decision)
				}
			} else {
				code, body := apiJSON(t, svc, "POST", "/v1/mcp/servers", adhoc, &s)
				if code != 201 {
					t.Fatalf("create ad hoc: %d %s", code, body)
				}
				if s.Decision.Source != "ad-hoc" || s.Risk != "high" || s.Decision.MinRun != "runsc" || !strings.Contains(s.Decision.Rule, "ad-hoc") {
					t.Fatalf("decision %+v", s.Decision)
				}
			}
			if s.State != "ready" || s.Runtime != rt || !strings.HasPrefix(s.Token, "gmcp_") || s.Server == nil || s.Server.Name != "mcpfixture" {
				t.Fatalf("instance %+v", s)
			}

			// Two protocol revisions, each a stock Go SDK client.
			for _, v := range []string{"2025-11-25", "2026-07-28"} {
				cs := mcpConnect(t, svc, &s, v, nil, nil)
				if got := cs.InitializeResult().ProtocolVersion; got != v {
					t.Fatalf("negotiated %s, want %s", got, v)
				}
				lt, err := cs.ListTools(callCtx(t), nil)
				if err != nil {
					t.Fatal(err)
				}
				if len(lt.Tools) < 3 {
					t.Fatalf("tools %d", len(lt.Tools))
				}
				res, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi " + v}})
				if err != nil || toolText(res) != "echo: hi "+v {
					t.Fatalf("echo over %s: %v %v", v, res, err)
				}
			}

			// Two clients, the same JSON-RPC ids, concurrent calls.
			var wg sync.WaitGroup
			errs := make(chan error, 40)
			for k := range 2 {
				cs := mcpConnect(t, svc, &s, "2025-11-25", nil, nil)
				for i := range 10 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						want := fmt.Sprintf("c%d-%d", k, i)
						res, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": want}})
						if err != nil {
							errs <- err
						} else if toolText(res) != "echo: "+want {
							errs <- fmt.Errorf("asked %s, got %s", want, toolText(res))
						}
					}()
				}
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}

			// A dropped SSE stream mid-call resumes: every progress step
			// once, then the answer.
			cut := &streamCutter{}
			var mu sync.Mutex
			var steps []float64
			cs := mcpConnect(t, svc, &s, "2025-11-25", &sdk.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
				mu.Lock()
				steps = append(steps, r.Params.Progress)
				mu.Unlock()
			}}, cut)
			p := &sdk.CallToolParams{Name: "slow", Arguments: map[string]any{"steps": 5, "step_ms": 150}}
			p.SetProgressToken("e2e")
			res, err := cs.CallTool(callCtx(t), p)
			if err != nil || toolText(res) != "done after 5 steps" {
				t.Fatalf("slow: %v %v", res, err)
			}
			eventually(t, 10*time.Second, "five progress steps", func() (bool, string) {
				mu.Lock()
				defer mu.Unlock()
				return len(steps) >= 5, fmt.Sprint(steps)
			})
			mu.Lock()
			if fmt.Sprint(steps) != "[1 2 3 4 5]" || !cut.wasCut() {
				t.Fatalf("progress after a cut stream %v (cut %v)", steps, cut.wasCut())
			}
			mu.Unlock()

			// The endpoint takes the instance token only.
			for _, key := range []string{"", e.apiKey, "gmcp_wrong"} {
				req, _ := http.NewRequest("POST", svc.url()+s.Endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				if key != "" {
					req.Header.Set("Authorization", "Bearer "+key)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") == "" {
					t.Fatalf("key %q: %d", key, resp.StatusCode)
				}
			}

			// The call log holds every echo of this instance, allowed.
			var calls struct {
				Items []struct {
					Seq      int64  `json:"seq"`
					Tool     string `json:"tool"`
					Decision string `json:"decision"`
					Outcome  string `json:"outcome"`
				} `json:"items"`
				Next string `json:"next_cursor"`
			}
			if code, body := apiJSON(t, svc, "GET", "/v1/mcp/servers/"+s.ID+"/calls?limit=1000", nil, &calls); code != 200 {
				t.Fatalf("calls: %d %s", code, body)
			}
			echoes := 0
			for _, it := range calls.Items {
				if it.Tool == "echo" && it.Decision == "allowed" && it.Outcome == "ok" {
					echoes++
				}
			}
			if echoes != 22 {
				t.Fatalf("want 22 echo calls in the log, got %d of %d", echoes, len(calls.Items))
			}
			eventually(t, 20*time.Second, "the calls in the audit log", func() (bool, string) {
				page, err := c.ListAudit(callCtx(t), client.AuditQuery{Action: "mcp tools/call", Limit: 500})
				if err != nil {
					return false, err.Error()
				}
				n := 0
				for _, r := range page.Items {
					if strings.HasPrefix(r.Target, s.ID+"/echo") {
						n++
					}
				}
				return n == 22, fmt.Sprintf("%d audit records", n)
			})

			// A server that writes non-JSON to stdout is killed; the
			// instance fails and says why.
			if _, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "spew"}); err == nil {
				t.Fatal("spew answered")
			}
			eventually(t, 30*time.Second, "the instance to fail", func() (bool, string) {
				var got mcpServer
				apiJSON(t, svc, "GET", "/v1/mcp/servers/"+s.ID, nil, &got)
				return got.State == "failed" && strings.Contains(got.LastError, "not JSON"), got.State + " " + got.LastError
			})

			if code, body := apiJSON(t, svc, "DELETE", "/v1/mcp/servers/"+s.ID, nil, nil); code != 204 {
				t.Fatalf("delete: %d %s", code, body)
			}
			if code, _ := apiJSON(t, svc, "GET", "/v1/mcp/servers/"+s.ID, nil, nil); code != 404 {
				t.Fatalf("after delete: %d", code)
			}
		})
	}
}

// TestMCPRugPull: a server that changes a tool's description after the
// first tools/list has that tool hidden and its calls refused until the
// change is approved by its hash. A tool under tools.approve waits for a
// decision on each call, bound to the call's argument digest (approve and
// deny). Both instances end with the lease they run in.
func TestMCPRugPull(t *testing.T) {
	t.Parallel()
	// An operator's catalog entry that pins echo to a reviewed hash the
	// fixture's echo does not have. Two keys of the tenant with the scope
	// approve: a person's, beside the agent's plain key.
	approver, approver2 := "e2e_approver_"+randomHex(t, 12), "e2e_approver2_"+randomHex(t, 12)
	e := newEnv(t, `mcp:
  catalog:
    - name: pinned
      source: verified
      profile: tool-basic
      command: [/workspace/mcpfixture, serve]
      pins: {echo: "sha256:`+strings.Repeat("0", 64)+`"}
tenants:
  default: {approver_keys: [`+approver+`, `+approver2+`]}
`)
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	c := svc.client()
	lease := leaseWithFixture(t, c, client.AcquireLeaseRequest{Profile: "tool-basic", RiskLevel: "high"}, mcpFixtureBinary(t))
	var s mcpServer
	if code, body := apiJSON(t, svc, "POST", "/v1/mcp/servers", map[string]any{
		"spec": map[string]any{"command": []string{"/workspace/mcpfixture", "rugpull"}}, "lease_id": lease.LeaseID,
		"pin_mode": "warn", // asked for, but a high-risk server's changes always block
	}, &s); code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	cs := mcpConnect(t, svc, &s, "2025-11-25", nil, nil)
	names := func() string {
		lt, err := cs.ListTools(callCtx(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		var n []string
		for _, tl := range lt.Tools {
			n = append(n, tl.Name)
		}
		return strings.Join(n, ",")
	}
	if !strings.Contains(names(), "echo") {
		t.Fatal("echo missing at first")
	}
	if strings.Contains(names(), "echo") {
		t.Fatal("the changed echo is still listed")
	}
	res, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}})
	if err != nil || !res.IsError || !strings.Contains(toolText(res), "changed its definition") {
		t.Fatalf("call of the changed tool: %v %v", res, err)
	}
	var pins struct {
		Items []struct {
			Tool    string `json:"tool"`
			Changed *struct {
				Hash       string          `json:"hash"`
				Blocked    bool            `json:"blocked"`
				Definition json.RawMessage `json:"definition"`
			} `json:"changed"`
		} `json:"items"`
	}
	apiJSON(t, svc, "GET", "/v1/mcp/servers/"+s.ID+"/pins", nil, &pins)
	var hash string
	for _, p := range pins.Items {
		if p.Tool == "echo" && p.Changed != nil && p.Changed.Blocked && strings.Contains(string(p.Changed.Definition), "id_rsa") {
			hash = p.Changed.Hash
		}
	}
	if hash == "" {
		t.Fatalf("no blocked change of echo in %+v", pins)
	}
	// The agent's key (which started the server) cannot approve the change.
	if code, body := apiJSON(t, svc, "POST", "/v1/mcp/servers/"+s.ID+"/pins/echo/approve", map[string]any{"hash": hash}, nil); code != 403 || !strings.Contains(body, "approve_scope_required") {
		t.Fatalf("approving with the agent's key: %d %s", code, body)
	}
	if code, body := apiJSONAs(t, svc, approver, "POST", "/v1/mcp/servers/"+s.ID+"/pins/echo/approve", map[string]any{"hash": "sha256:00"}, nil); code != 409 {
		t.Fatalf("approving another hash: %d %s", code, body)
	}
	if code, body := apiJSONAs(t, svc, approver, "POST", "/v1/mcp/servers/"+s.ID+"/pins/echo/approve", map[string]any{"hash": hash}, nil); code != 200 {
		t.Fatalf("approve: %d %s", code, body)
	}
	res, err = cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}})
	if err != nil || res.IsError || toolText(res) != "echo: x" {
		t.Fatalf("after approval: %v %v", res, err)
	}

	// A second server in the same sandbox whose echo needs an approval of
	// each call: the call waits until a decision bound to its arguments.
	// It is started with an approver key, which then may not approve its
	// calls; another approver key may.
	var held mcpServer
	if code, body := apiJSONAs(t, svc, approver, "POST", "/v1/mcp/servers", map[string]any{
		"spec": map[string]any{"command": []string{"/workspace/mcpfixture", "serve"}}, "lease_id": lease.LeaseID,
		"tools": map[string]any{"approve": []string{"echo"}},
	}, &held); code != 201 {
		t.Fatalf("create the held server: %d %s", code, body)
	}
	hcs := mcpConnect(t, svc, &held, "2025-11-25", nil, nil)
	type answer struct {
		res *sdk.CallToolResult
		err error
	}
	for _, decision := range []string{"approve", "deny"} {
		done := make(chan answer, 1)
		go func() {
			res, err := hcs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": decision}})
			done <- answer{res, err}
		}()
		var pending struct {
			ID         string `json:"id"`
			Tool       string `json:"tool"`
			ArgsDigest string `json:"args_digest"`
			State      string `json:"state"`
		}
		eventually(t, 30*time.Second, "a pending approval", func() (bool, string) {
			var list struct {
				Items []json.RawMessage `json:"items"`
			}
			apiJSON(t, svc, "GET", "/v1/mcp/servers/"+held.ID+"/approvals", nil, &list)
			if len(list.Items) == 0 {
				return false, "none"
			}
			_ = json.Unmarshal(list.Items[0], &pending)
			return pending.State == "pending", string(list.Items[0])
		})
		path := "/v1/mcp/servers/" + held.ID + "/approvals/" + pending.ID
		for key, code := range map[string]string{svc.e.apiKey: "approve_scope_required", approver: "approver_is_creator"} {
			if status, body := apiJSONAs(t, svc, key, "POST", path, map[string]any{"decision": decision, "args_digest": pending.ArgsDigest}, nil); status != 403 || !strings.Contains(body, code) {
				t.Fatalf("a decision by a key that may not decide: %d %s, want 403 %s", status, body, code)
			}
		}
		if code, body := apiJSONAs(t, svc, approver2, "POST", path, map[string]any{"decision": decision, "args_digest": "sha256:00"}, nil); code != 409 {
			t.Fatalf("a decision for other arguments: %d %s", code, body)
		}
		if code, body := apiJSONAs(t, svc, approver2, "POST", path, map[string]any{"decision": decision, "args_digest": pending.ArgsDigest, "reason": "checked"}, nil); code != 200 {
			t.Fatalf("decide: %d %s", code, body)
		}
		a := <-done
		if a.err != nil {
			t.Fatal(a.err)
		}
		if decision == "approve" && (a.res.IsError || toolText(a.res) != "echo: approve") ||
			decision == "deny" && (!a.res.IsError || !strings.Contains(toolText(a.res), "denied")) {
			t.Fatalf("%s: answer %q (error %v)", decision, toolText(a.res), a.res.IsError)
		}
	}

	// A tool that differs from the operator's pin is blocked from the
	// very first tools/list, until its definition is approved.
	var ps mcpServer
	if code, body := apiJSON(t, svc, "POST", "/v1/mcp/servers", map[string]any{"catalog": "pinned", "lease_id": lease.LeaseID}, &ps); code != 201 {
		t.Fatalf("create pinned: %d %s", code, body)
	}
	pcs := mcpConnect(t, svc, &ps, "2025-11-25", nil, nil)
	lt, err := pcs.ListTools(callCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range lt.Tools {
		if tl.Name == "echo" {
			t.Fatal("echo, whose definition is not the pinned one, is listed")
		}
	}
	var ppins struct {
		Items []struct {
			Tool    string `json:"tool"`
			Hash    string `json:"hash"`
			Changed *struct {
				Hash    string `json:"hash"`
				Blocked bool   `json:"blocked"`
			} `json:"changed"`
		} `json:"items"`
	}
	apiJSON(t, svc, "GET", "/v1/mcp/servers/"+ps.ID+"/pins", nil, &ppins)
	var real string
	for _, p := range ppins.Items {
		if p.Tool == "echo" && p.Hash == "sha256:"+strings.Repeat("0", 64) && p.Changed != nil && p.Changed.Blocked {
			real = p.Changed.Hash
		}
	}
	if real == "" {
		t.Fatalf("pins of the pinned server: %+v", ppins)
	}
	if code, body := apiJSONAs(t, svc, approver, "POST", "/v1/mcp/servers/"+ps.ID+"/pins/echo/approve", map[string]any{"hash": real}, nil); code != 200 {
		t.Fatalf("approve: %d %s", code, body)
	}
	if res, err := pcs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "pinned"}}); err != nil || res.IsError {
		t.Fatalf("echo after approval: %v %v", res, err)
	}

	// The instance ends with the lease it runs in.
	if err := c.ReleaseLease(callCtx(t), lease.LeaseID); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the instance to stop with its lease", func() (bool, string) {
		var got mcpServer
		apiJSON(t, svc, "GET", "/v1/mcp/servers/"+s.ID, nil, &got)
		return got.State == "stopped" && strings.Contains(got.LastError, "sandbox ended"), got.State + " " + got.LastError
	})
}

// TestMCPOwnLease: without lease_id an instance takes a lease of its own,
// placed by the risk rule (ad-hoc: runsc, no network), and releases it on
// delete. The server is a Python script in the profile's image.
func TestMCPOwnLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "code-python-basic")
	if !strings.Contains(strings.Join(e.runtimes(t), ","), "runsc") {
		t.Fatal("runsc is not available; an ad-hoc server needs it")
	}
	svc := e.start(t)
	c := svc.client()
	script, err := os.ReadFile(filepath.Join(testenv.ModuleRoot(t), "test", "mcpfixture", "server.py"))
	if err != nil {
		t.Fatal(err)
	}
	var s mcpServer
	if code, body := apiJSON(t, svc, "POST", "/v1/mcp/servers", map[string]any{
		"spec": map[string]any{"command": []string{"python3", "-c", string(script)}, "profile": "code-python-basic"},
	}, &s); code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	if !s.OwnLease || s.Runtime != "runsc" || s.Network != "none" || s.State != "ready" {
		t.Fatalf("instance %+v", s)
	}
	cs := mcpConnect(t, svc, &s, "2025-11-25", nil, nil)
	res, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "py"}})
	if err != nil || toolText(res) != "echo: py" {
		t.Fatalf("echo: %v %v", res, err)
	}
	// The call is in the trace of the server's sandbox: the tool, the
	// decision and the outcome, not the arguments; the server is the
	// system's job.
	var calls, starts []client.TraceEvent
	if err := c.FollowTrace(callCtx(t), s.SandboxID, 0, false, func(ev client.TraceEvent) error {
		switch ev.Kind {
		case "mcp.tool_call":
			calls = append(calls, ev)
		case "job.started":
			starts = append(starts, ev)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 || calls[0].Actor != "agent" || !strings.Contains(string(calls[0].Data), `"tool":"echo"`) ||
		!strings.Contains(string(calls[0].Data), `"decision":"allowed"`) || !strings.Contains(string(calls[0].Data), `"outcome":"ok"`) ||
		strings.Contains(string(calls[0].Data), `"text"`) || len(starts) != 1 || starts[0].Actor != "system" {
		t.Fatalf("trace of the server's sandbox: calls %+v, job starts %+v", calls, starts)
	}
	// The sandbox runs runsc with no network.
	sb, err := c.GetSandbox(callCtx(t), s.SandboxID)
	if err != nil || sb.Runtime != "runsc" || sb.Network != nil {
		t.Fatalf("the server's sandbox: %+v %v", sb, err)
	}
	if code, body := apiJSON(t, svc, "DELETE", "/v1/mcp/servers/"+s.ID, nil, nil); code != 204 {
		t.Fatalf("delete: %d %s", code, body)
	}
	l, err := c.GetLease(callCtx(t), s.LeaseID)
	if err != nil || l.State == "active" {
		t.Fatalf("the instance's lease after delete: %+v %v", l, err)
	}
}

// streamCutter drops the first event stream that carries the second
// progress step, right after it, as a broken connection would.
type streamCutter struct {
	mu  sync.Mutex
	cut bool
}

func (c *streamCutter) cutNow() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	first := !c.cut
	c.cut = true
	return first
}

func (c *streamCutter) wasCut() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cut
}

func (c *streamCutter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || r.Method != http.MethodPost || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp, err
	}
	pr, pw := io.Pipe()
	body := resp.Body
	go func() {
		defer body.Close()
		br := bufio.NewReader(body)
		var ev strings.Builder
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				pw.CloseWithError(err)
				return
			}
			ev.WriteString(line)
			if line != "\n" {
				continue
			}
			if _, err := io.WriteString(pw, ev.String()); err != nil {
				return
			}
			if strings.Contains(ev.String(), `"progress":2`) && c.cutNow() {
				pw.CloseWithError(io.ErrUnexpectedEOF)
				return
			}
			ev.Reset()
		}
	}()
	resp.Body = pr
	return resp, nil
}

// TestMCPEverything starts the built-in catalog's reference server from
// npm (@modelcontextprotocol/server-everything in the tool-node image)
// with POST /v1/mcp/servers {"catalog": "everything"} under runc and
// runsc, with no network, and drives it with the official TypeScript MCP
// SDK's client (two clients at once, colliding ids) and the Go SDK's.
func TestMCPEverything(t *testing.T) {
	t.Parallel()
	root := testenv.ModuleRoot(t)
	if _, err := os.Stat(filepath.Join(root, "test", "mcpclient", "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Fatalf("the TypeScript MCP SDK is not installed (make test-deps): %v", err)
	}
	e := newEnv(t, "")
	e.requireImage(t, "tool-node")
	svc := e.start(t)
	c := svc.client()
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			var s mcpServer
			if code, body := apiJSON(t, svc, "POST", "/v1/mcp/servers", map[string]any{"catalog": "everything", "runtime": rt}, &s); code != 201 {
				t.Fatalf("create: %d %s", code, body)
			}
			t.Cleanup(func() { apiJSON(t, svc, "DELETE", "/v1/mcp/servers/"+s.ID, nil, nil) })
			if s.Runtime != rt || s.Network != "none" || s.Decision.Source != "builtin" || s.Server == nil || !strings.Contains(s.Server.Name, "everything") {
				t.Fatalf("instance %+v", s)
			}
			sb, err := c.GetSandbox(callCtx(t), s.SandboxID)
			if err != nil || sb.Runtime != rt || sb.Network != nil {
				t.Fatalf("the server's sandbox: %+v %v", sb, err)
			}

			// The TypeScript SDK's client, unmodified.
			ctx := callCtx(t)
			cmd := exec.CommandContext(ctx, "node", filepath.Join(root, "test", "mcpclient", "client.mjs"), svc.url()+s.Endpoint, s.Token)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("the TypeScript client: %v\n%s", err, stderr.String())
			}
			var ts struct {
				Protocol string   `json:"protocol"`
				Tools    []string `json:"tools"`
				Answers  []struct {
					Want string `json:"want"`
					Got  string `json:"got"`
				} `json:"answers"`
			}
			if err := json.Unmarshal(out, &ts); err != nil {
				t.Fatalf("TypeScript client output %q: %v", out, err)
			}
			if !strings.Contains(strings.Join(ts.Tools, ","), "echo") || len(ts.Answers) != 20 {
				t.Fatalf("TypeScript client saw %+v", ts)
			}
			for _, a := range ts.Answers {
				if a.Got != "Echo: "+a.Want {
					t.Errorf("TypeScript client asked %q, got %q", a.Want, a.Got)
				}
			}

			// The Go SDK's client.
			cs := mcpConnect(t, svc, &s, "2025-11-25", nil, nil)
			res, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "from go"}})
			if err != nil || toolText(res) != "Echo: from go" {
				t.Fatalf("Go client echo: %v %v", res, err)
			}

			// genesis mcp stdio: a stdio-only client's messages, line by
			// line, bridged to the endpoint; it ends when stdin ends and the
			// answers due have come.
			bridge := exec.CommandContext(callCtx(t), filepath.Join(binDir, "genesis"), "mcp", "stdio", s.ID)
			bridge.Env = append(os.Environ(), client.EnvURL+"="+svc.url(), client.EnvAPIKey+"="+svc.e.apiKey, "GENESIS_MCP_TOKEN="+s.Token)
			bridge.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"stdio-e2e","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"over stdio"}}}
{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"no-such-tool","arguments":{}}}
`)
			var bridgeErr bytes.Buffer
			bridge.Stderr = &bridgeErr
			bout, err := bridge.Output()
			if err != nil {
				t.Fatalf("genesis mcp stdio: %v\n%s", err, bridgeErr.String())
			}
			answers := map[string]string{}
			for _, line := range strings.Split(strings.TrimSpace(string(bout)), "\n") {
				var m struct {
					ID     json.RawMessage `json:"id"`
					Result json.RawMessage `json:"result"`
					Error  json.RawMessage `json:"error"`
				}
				if err := json.Unmarshal([]byte(line), &m); err != nil {
					t.Fatalf("genesis mcp stdio wrote %q: %v", line, err)
				}
				if m.ID != nil {
					answers[string(m.ID)] += string(m.Result) + string(m.Error)
				}
			}
			if len(answers) != 2 || !strings.Contains(answers["1"], "Echo: over stdio") || !strings.Contains(answers[`"x"`], "no-such-tool") {
				t.Fatalf("genesis mcp stdio answers %v (all: %s)", answers, bout)
			}

			// The server started with a lease, and stopped with it.
			var lease struct {
				LeaseID    string      `json:"lease_id"`
				SandboxID  string      `json:"sandbox_id"`
				MCPServers []mcpServer `json:"mcp_servers"`
			}
			if code, body := apiJSON(t, svc, "POST", "/v1/leases", map[string]any{"profile": "tool-node", "runtime": rt,
				"mcp": []map[string]any{{"catalog": "everything"}}}, &lease); code != 201 || len(lease.MCPServers) != 1 {
				t.Fatalf("lease with mcp: %d %s", code, body)
			}
			ls := lease.MCPServers[0]
			if ls.LeaseID != lease.LeaseID || ls.SandboxID != lease.SandboxID || ls.State != "ready" || ls.Token == "" {
				t.Fatalf("the lease's server %+v", ls)
			}
			lcs := mcpConnect(t, svc, &ls, "2025-11-25", nil, nil)
			res, err = lcs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "leased"}})
			if err != nil || toolText(res) != "Echo: leased" {
				t.Fatalf("the lease's server echo: %v %v", res, err)
			}
			if err := c.ReleaseLease(callCtx(t), lease.LeaseID); err != nil {
				t.Fatal(err)
			}
			eventually(t, 30*time.Second, "the lease's server to stop", func() (bool, string) {
				var got mcpServer
				apiJSON(t, svc, "GET", "/v1/mcp/servers/"+ls.ID, nil, &got)
				return got.State == "stopped", got.State
			})
			// A server that cannot start fails the acquire and releases the lease.
			code, body := apiJSON(t, svc, "POST", "/v1/leases", map[string]any{"profile": "tool-node", "runtime": rt,
				"mcp": []map[string]any{{"catalog": "no-such-server"}}}, nil)
			if code != 404 || !strings.Contains(body, "catalog_entry_not_found") {
				t.Fatalf("lease with an unknown server: %d %s", code, body)
			}
		})
	}
}

// TestMCPNetworkAllowlist: an unverified server that declares the one host
// it needs runs under runsc with an egress allowlist of exactly that host:
// from inside its sandbox the host answers and nothing else is reachable
// (the test's own "internet" on a Docker network it creates). A server that
// declares an operator tool reaches it through the gateway, which adds the
// credential: the secret is in no env, file or /proc entry of its sandbox.
func TestMCPNetworkAllowlist(t *testing.T) {
	t.Parallel()
	in := startInternet(t)
	secret := "gs-mcp-tool-secret-" + randomHex(t, 16)
	secretFile := filepath.Join(t.TempDir(), "echo.secret")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join(testenv.ModuleRoot(t), "test", "mcpfixture", "server.py"))
	if err != nil {
		t.Fatal(err)
	}
	cmd, _ := json.Marshal([]string{"python3", "-c", string(script)})
	e := newEnv(t, networkConfig(in, secretFile)+`mcp:
  catalog:
    - name: net-server
      source: unverified
      profile: code-python-basic
      command: `+string(cmd)+`
      permissions: {network: [allowed.test]}
    - name: tool-server
      source: verified
      profile: code-python-basic
      command: `+string(cmd)+`
      permissions: {tools: [echo]}
    - name: env-server
      source: verified
      profile: code-python-basic
      command: `+string(cmd)+`
      permissions: {env_secrets: [ECHO_TOKEN=echo]}
`)
	e.requireImage(t, "code-python-basic")
	t.Cleanup(func() {
		if inst := e.instance(); inst != "" {
			dockerCmdQuiet("rm", "-f", "genesis-egress-"+inst)
		}
	})
	if !strings.Contains(strings.Join(e.runtimes(t), ","), "runsc") {
		t.Fatal("runsc is not available; an unverified server needs it")
	}
	svc := e.start(t)
	c := svc.client()
	var s struct {
		mcpServer
		Decision struct {
			Risk  string   `json:"risk"`
			Hosts []string `json:"hosts"`
			Rule  string   `json:"rule"`
		} `json:"decision"`
	}
	if code, body := apiJSON(t, svc, "POST", "/v1/mcp/servers", map[string]any{"catalog": "net-server"}, &s); code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	t.Cleanup(func() { apiJSON(t, svc, "DELETE", "/v1/mcp/servers/"+s.ID, nil, nil) })
	if s.Runtime != "runsc" || s.Network != "allowlist" || s.Decision.Risk != "high" || strings.Join(s.Decision.Hosts, ",") != "allowed.test" {
		t.Fatalf("instance %+v", s)
	}
	sb, err := c.GetSandbox(callCtx(t), s.SandboxID)
	if err != nil || sb.Network == nil || sb.Network.Mode != client.NetworkAllowlist {
		t.Fatalf("the server's sandbox: %+v %v", sb, err)
	}
	got := probe(t, c, s.SandboxID, map[string]string{
		"http":       `get("http://allowed.test/")`,
		"other_name": `resolve("other.test")`,
		"other_http": `get("http://other.test/", t=3)`,
		"other_ip":   fmt.Sprintf(`tcp(%q, 80)`, in.other),
	})
	expect(t, "the MCP server's sandbox", got, map[string]string{
		"http": "=hello from allowed via http", "other_name": "!", "other_http": "!", "other_ip": "!",
	})
	cs := mcpConnect(t, svc, &s.mcpServer, "2025-11-25", nil, nil)
	res, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "net"}})
	if err != nil || toolText(res) != "echo: net" {
		t.Fatalf("echo: %v %v", res, err)
	}

	// The server's own traffic during a call is in that call's record: the
	// allowed fetch and the refused one, each joined to its own call.
	// In this order: the log's first fetch is the allowed one.
	for _, f := range []struct{ url, want string }{{"http://allowed.test/", "200 hello from allowed via http"}, {"http://other.test/", ""}} {
		url, want := f.url, f.want
		res, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "fetch", Arguments: map[string]any{"url": url}})
		if err != nil {
			t.Fatalf("fetch %s: %v", url, err)
		}
		if (want != "" && toolText(res) != want) || (want == "" && !res.IsError) {
			t.Fatalf("fetch %s: %q (error %v)", url, toolText(res), res.IsError)
		}
	}
	type egressEvent struct {
		Name, Proto, Decision string
		BytesDown             int64 `json:"bytes_down"`
	}
	eventually(t, 30*time.Second, "the fetches' egress events in their call records", func() (bool, string) {
		var log struct {
			Items []struct {
				Tool   string        `json:"tool"`
				Egress []egressEvent `json:"egress"`
			} `json:"items"`
		}
		if code, body := apiJSON(t, svc, "GET", "/v1/mcp/servers/"+s.ID+"/calls", nil, &log); code != 200 {
			t.Fatalf("calls: %d %s", code, body)
		}
		var allowed, denied, echoQuiet bool
		fetches := 0
		for _, c := range log.Items {
			switch c.Tool {
			case "echo":
				echoQuiet = len(c.Egress) == 0
			case "fetch":
				fetches++
				for _, ev := range c.Egress {
					allowed = allowed || (fetches == 1 && ev.Decision == "allow" && ev.Name == "allowed.test" && ev.Proto == "http" && ev.BytesDown > 0)
					denied = denied || (fetches == 2 && ev.Decision == "deny" && strings.TrimSuffix(ev.Name, ".") == "other.test")
				}
			}
		}
		return allowed && denied && echoQuiet, fmt.Sprintf("allowed fetch %v, refused fetch %v, echo without events %v: %+v", allowed, denied, echoQuiet, log.Items)
	})

	// The tenant cannot widen the server's sandbox afterwards.
	req, _ := http.NewRequestWithContext(callCtx(t), "PUT", svc.url()+"/v1/sandboxes/"+s.SandboxID+"/network",
		strings.NewReader(`{"mode":"allowlist","allow":[{"host":"allowed.test"},{"host":"other.test"}]}`))
	req.Header.Set("Authorization", "Bearer "+svc.e.apiKey)
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 409 || !strings.Contains(string(b), "network_wider_than_mcp_server") {
			t.Errorf("widening the server's sandbox: %d %s", resp.StatusCode, b)
		}
	}
	if got := probe(t, c, s.SandboxID, map[string]string{"other_http": `get("http://other.test/", t=3)`}); !strings.HasPrefix(got["other_http"], "ERR") {
		t.Errorf("after the refused change, other.test: %q", got["other_http"])
	}

	// In a tenant's lease whose sandbox reaches more than the decision
	// allows, the server is refused: the sandbox's network must be no
	// wider than the server's.
	var wide struct {
		LeaseID string `json:"lease_id"`
	}
	if code, body := apiJSON(t, svc, "POST", "/v1/leases", map[string]any{"profile": "code-python-basic", "runtime": "runsc",
		"network": map[string]any{"mode": "allowlist", "allow": []map[string]any{{"host": "other.test"}}}}, &wide); code != 201 {
		t.Fatalf("a networked lease: %d %s", code, body)
	}
	t.Cleanup(func() { _ = c.ReleaseLease(context.Background(), wide.LeaseID) })
	if code, body := apiJSON(t, svc, "POST", "/v1/mcp/servers", map[string]any{"catalog": "net-server", "lease_id": wide.LeaseID}, nil); code != 409 ||
		!strings.Contains(body, "lease_network_wider") {
		t.Errorf("a server in a wider lease: %d %s", code, body)
	}

	// A server that calls an operator tool: the gateway adds the tool's
	// credential outside the sandbox; the credential is nowhere inside.
	var ts struct {
		mcpServer
		Decision struct {
			Risk    string   `json:"risk"`
			Tools   []string `json:"tools"`
			Secrets string   `json:"secrets"`
		} `json:"decision"`
	}
	if code, body := apiJSON(t, svc, "POST", "/v1/mcp/servers", map[string]any{"catalog": "tool-server"}, &ts); code != 201 {
		t.Fatalf("create tool-server: %d %s", code, body)
	}
	t.Cleanup(func() { apiJSON(t, svc, "DELETE", "/v1/mcp/servers/"+ts.ID, nil, nil) })
	if ts.Runtime != "runsc" || ts.Network != "tool-proxy" || ts.Decision.Risk != "medium" || ts.Decision.Secrets != "gateway" {
		t.Fatalf("tool-server instance %+v", ts)
	}
	marker := "/mcp-" + randomHex(t, 6)
	got = probe(t, c, ts.SandboxID, map[string]string{
		"tool":  fmt.Sprintf(`get(os.environ["GENESIS_TOOL_ECHO_URL"] + %q)`, strings.TrimPrefix(marker, "/")),
		"other": `get("http://allowed.test/", t=3)`,
	})
	expect(t, "the tool-server's sandbox", got, map[string]string{"tool": "=tool ok", "other": "!"})
	eventually(t, 30*time.Second, "upstream saw the injected credential", func() (bool, string) {
		logs := dockerLogs(t, in.serverA)
		return strings.Contains(logs, "AUTH /tool"+marker+" Bearer "+secret), logs
	})
	half := len(secret) / 2
	got = probe(t, c, ts.SandboxID, map[string]string{"hits": fmt.Sprintf(`secret_hits(%q, %q)`, secret[:half], secret[half:])})
	if got["hits"] != "hits:" {
		t.Errorf("the MCP server's sandbox holds the tool secret: %s", got["hits"])
	}

	// A catalog entry that declares an env secret: risk high, runsc, in a
	// sandbox reserved to it (the tenant cannot look inside:
	// TestMCPEnvSecretsReserved walks every route), named in every call
	// record. A tenant's ad-hoc spec cannot ask for one.
	var es struct {
		mcpServer
		Secrets  []string `json:"secrets"`
		Decision struct {
			Risk    string `json:"risk"`
			Secrets string `json:"secrets"`
		} `json:"decision"`
	}
	if code, body := apiJSON(t, svc, "POST", "/v1/mcp/servers", map[string]any{"catalog": "env-server"}, &es); code != 201 {
		t.Fatalf("create env-server: %d %s", code, body)
	}
	t.Cleanup(func() { apiJSON(t, svc, "DELETE", "/v1/mcp/servers/"+es.ID, nil, nil) })
	if es.Runtime != "runsc" || es.Decision.Risk != "high" || es.Decision.Secrets != "env" || strings.Join(es.Secrets, ",") != "env:ECHO_TOKEN=echo" {
		t.Fatalf("env-server instance %+v", es)
	}
	if _, err := c.Exec(callCtx(t), es.SandboxID, client.ExecRequest{Command: []string{"cat", "/proc/1/environ"}}); err == nil || !strings.Contains(err.Error(), "sandbox_reserved") {
		t.Errorf("exec in the env-server's sandbox: %v, want sandbox_reserved", err)
	}
	ecs := mcpConnect(t, svc, &es.mcpServer, "2025-11-25", nil, nil)
	if res, err := ecs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "env"}}); err != nil || toolText(res) != "echo: env" {
		t.Fatalf("env-server echo: %v %v", res, err)
	}
	var calls struct {
		Items []struct {
			Tool    string   `json:"tool"`
			Secrets []string `json:"secrets"`
		} `json:"items"`
	}
	if code, body := apiJSON(t, svc, "GET", "/v1/mcp/servers/"+es.ID+"/calls", nil, &calls); code != 200 || len(calls.Items) != 1 ||
		strings.Join(calls.Items[0].Secrets, ",") != "env:ECHO_TOKEN=echo" {
		t.Errorf("env-server calls: %d %s", code, body)
	}
	if code, body := apiJSON(t, svc, "POST", "/v1/mcp/servers", map[string]any{"spec": map[string]any{"command": []string{"python3", "-c", "1"},
		"profile": "code-python-basic", "permissions": map[string]any{"env_secrets": []string{"echo"}}}}, nil); code != 403 || !strings.Contains(body, "env_secrets_catalog_only") {
		t.Errorf("an ad-hoc spec with env_secrets: %d %s", code, body)
	}
}

// TestMCPOutputRollover: a server's stdout passes through its job's log,
// which keeps at most the output limit. Near it the server is started
// again (planned: not counted as a failure), its clients reconnect, and
// calls go on; without it the server would fall silent.
func TestMCPOutputRollover(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "limits:\n  max_output_bytes: 1048576\n")
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	c := svc.client()
	lease := leaseWithFixture(t, c, client.AcquireLeaseRequest{Profile: "tool-basic", RiskLevel: "high"}, mcpFixtureBinary(t))
	var s mcpServer
	if code, body := apiJSON(t, svc, "POST", "/v1/mcp/servers", map[string]any{
		"spec": map[string]any{"command": []string{"/workspace/mcpfixture", "serve"}}, "lease_id": lease.LeaseID}, &s); code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	type state struct {
		State          string `json:"state"`
		Restarts       int    `json:"restarts"`
		OutputRestarts int    `json:"output_restarts"`
		JobID          string `json:"job_id"`
	}
	get := func() state {
		var st state
		apiJSON(t, svc, "GET", "/v1/mcp/servers/"+s.ID, nil, &st)
		return st
	}
	first := get().JobID
	text := strings.Repeat("x", 64<<10)
	cs := mcpConnect(t, svc, &s, "2025-11-25", nil, nil)
	ok, failed := 0, 0
	// 30 answers of 64 KiB are about twice the 1 MiB limit.
	for i := 0; i < 30; i++ {
		res, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
		if err == nil && toolText(res) == "echo: "+text {
			ok++
			continue
		}
		failed++
		if failed > 3 {
			t.Fatalf("call %d: %v (%d ok, %d failed; instance %+v)", i, err, ok, failed, get())
		}
		// The server was started again: its sessions ended with it.
		eventually(t, callTimeout, "the server to be ready again", func() (bool, string) {
			st := get()
			return st.State == "ready" && st.OutputRestarts >= failed, fmt.Sprint(st)
		})
		cs = mcpConnect(t, svc, &s, "2025-11-25", nil, nil)
	}
	st := get()
	if st.OutputRestarts < 1 || st.Restarts != 0 || st.State != "ready" || st.JobID == first || ok < 26 {
		t.Errorf("after %d ok and %d failed calls: %+v (first job %s)", ok, failed, st, first)
	}
}

// TestMCPOutputRolloverCutsALine: a server answer that crosses the output
// limit is cut there (the job's log keeps no more, and the planned stop
// kills the process). The cut line never reaches the bridge: the server
// is started again (output_restarts, not restarts; never failed with a
// protocol breach), and calls go on. Under runc and runsc.
func TestMCPOutputRolloverCutsALine(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `
limits:
  max_output_bytes: 1048576
mcp:
  catalog:
    - name: fixture
      description: the test fixture, trusted by this operator
      source: verified
      command: ["/workspace/mcpfixture", "serve"]
`)
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	c := svc.client()
	bin := mcpFixtureBinary(t)
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			risk := "low"
			if rt == "runsc" {
				risk = "high"
			}
			lease := leaseWithFixture(t, c, client.AcquireLeaseRequest{Profile: "tool-basic", RiskLevel: risk, Runtime: rt}, bin)
			var s mcpServer
			if code, body := apiJSON(t, svc, "POST", "/v1/mcp/servers", map[string]any{"catalog": "fixture", "lease_id": lease.LeaseID}, &s); code != 201 {
				t.Fatalf("create: %d %s", code, body)
			}
			type state struct {
				State          string `json:"state"`
				Restarts       int    `json:"restarts"`
				OutputRestarts int    `json:"output_restarts"`
				LastError      string `json:"last_error"`
				JobID          string `json:"job_id"`
			}
			get := func() state {
				var st state
				apiJSON(t, svc, "GET", "/v1/mcp/servers/"+s.ID, nil, &st)
				return st
			}
			first := get().JobID
			// Two answers of 600 KiB: the second crosses the 1 MiB limit in
			// its middle, so the log holds only its first part.
			text := strings.Repeat("y", 600<<10)
			cs := mcpConnect(t, svc, &s, "2025-11-25", nil, nil)
			if res, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}}); err != nil || toolText(res) != "echo: "+text {
				t.Fatalf("the first call: %v", err)
			}
			if res, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}}); err == nil && !res.IsError {
				t.Logf("the second call answered (%d bytes of text)", len(toolText(res)))
			}
			eventually(t, callTimeout, "the server to be started again", func() (bool, string) {
				st := get()
				if st.State == "failed" {
					t.Fatalf("the server failed: %+v", st)
				}
				return st.State == "ready" && st.OutputRestarts == 1 && st.JobID != first, fmt.Sprint(st)
			})
			if st := get(); st.Restarts != 0 || strings.Contains(st.LastError, "protocol breach") {
				t.Errorf("after the rollover: %+v", st)
			}
			cs = mcpConnect(t, svc, &s, "2025-11-25", nil, nil)
			if res, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "again"}}); err != nil || toolText(res) != "echo: again" {
				t.Fatalf("a call after the rollover: %v %v", res, err)
			}
		})
	}
}
