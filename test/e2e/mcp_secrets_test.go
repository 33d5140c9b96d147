package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"genesis.dev/sandbox/client"
)

// envServerScript is a stdio MCP server in plain Python: echo; env (a
// variable of its own environment, as a tool result); env_digest (its
// SHA-256). It prints its token to stderr as it starts, as a careless
// server might.
const envServerScript = `
import hashlib, json, os, sys
sys.stderr.write("starting with ENV_TOKEN=%s\n" % os.environ.get("ENV_TOKEN", ""))
sys.stderr.flush()
def answer(i, result):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": i, "result": result}) + "\n")
    sys.stdout.flush()
def text(s):
    return {"content": [{"type": "text", "text": s}]}
schema = {"type": "object", "properties": {"name": {"type": "string"}, "text": {"type": "string"}}}
for line in sys.stdin:
    if not line.strip():
        continue
    m = json.loads(line)
    i, method = m.get("id"), m.get("method")
    if i is None:
        continue
    p = m.get("params") or {}
    a = p.get("arguments") or {}
    if method == "initialize":
        answer(i, {"protocolVersion": p.get("protocolVersion", "2025-11-25"), "capabilities": {"tools": {}},
                   "serverInfo": {"name": "envfixture", "version": "1"}})
    elif method == "tools/list":
        answer(i, {"tools": [{"name": n, "description": n, "inputSchema": schema} for n in ("echo", "env", "env_digest")]})
    elif method == "tools/call" and p.get("name") == "echo":
        answer(i, text("echo: " + a.get("text", "")))
    elif method == "tools/call" and p.get("name") == "env":
        answer(i, text(os.environ.get(a.get("name", ""), "")))
    elif method == "tools/call" and p.get("name") == "env_digest":
        answer(i, text(hashlib.sha256(os.environ.get(a.get("name", ""), "").encode()).hexdigest()))
    else:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": i, "error": {"code": -32601, "message": "no"}}) + "\n")
        sys.stdout.flush()
`

// TestMCPEnvSecretsReserved: a catalog server that declares an env secret
// runs (under runsc: the risk rule's least runtime for it) in a sandbox of
// its own reserved to it. Its tools work and its process holds exactly
// the secret, while the tenant reaches nothing inside that sandbox by any
// route — exec, run-code, a session, files, a terminal, a port (HTTP and
// TCP), browser and desktop actions, the stdin and cancel of the server's
// job, a second server on its lease, a trace replay into it, the E2B and
// OpenSandbox adapters — each refused with sandbox_reserved; the value is
// masked in the server's log and tool results. lease_id and a lease's mcp
// with such an entry are refused under runc and runsc; releasing the
// server's lease ends it and destroys its sandbox, and so does a start-up
// after the service was killed.
func TestMCPEnvSecretsReserved(t *testing.T) {
	t.Parallel()
	secret := "gs-mcp-env-secret-" + randomHex(t, 16)
	secretFile := filepath.Join(t.TempDir(), "env.secret")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd, _ := json.Marshal([]string{"python3", "-c", envServerScript})
	e := newEnv(t, `network:
  secrets:
    envtok: {file: `+secretFile+`}
mcp:
  catalog:
    - name: env-server
      source: verified
      profile: code-python-basic
      command: `+string(cmd)+`
      permissions: {env_secrets: [ENV_TOKEN=envtok]}
`)
	e.requireImage(t, "code-python-basic")
	runtimes := e.runtimes(t)
	if !strings.Contains(strings.Join(runtimes, ","), "runsc") {
		t.Fatal("runsc is not available; a server with env secrets needs it")
	}
	svc := e.start(t)
	c := svc.client()
	stars := strings.Repeat("*", len(secret))

	leases := func() int {
		l, err := c.ListLeases(callCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		return len(l)
	}
	// Refused before anything is read, leased or started: the tenant's own
	// lease (runc and runsc), and a lease's mcp option.
	var tenantSandboxes []string
	for _, rt := range runtimes {
		l, err := c.AcquireLease(callCtx(t), client.AcquireLeaseRequest{Profile: "code-python-basic", Runtime: rt, RiskLevel: "low"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.ReleaseLease(callCtx(t), l.LeaseID) })
		tenantSandboxes = append(tenantSandboxes, l.SandboxID)
		execOK(t, c, l.SandboxID, "true") // a trace to replay
		if code, body := apiJSON(t, svc, "POST", "/v1/mcp/servers", map[string]any{"catalog": "env-server", "lease_id": l.LeaseID}, nil); code != 400 ||
			!strings.Contains(body, "env_secrets_need_own_sandbox") {
			t.Errorf("%s: env-server with lease_id: %d %s", rt, code, body)
		}
		before := leases()
		if code, body := apiJSON(t, svc, "POST", "/v1/leases", map[string]any{"profile": "code-python-basic", "runtime": rt, "risk_level": "low",
			"mcp": []map[string]any{{"catalog": "env-server"}}}, nil); code != 400 || !strings.Contains(body, "env_secrets_need_own_sandbox") {
			t.Errorf("%s: a lease with env-server in mcp: %d %s", rt, code, body)
		}
		if after := leases(); after != before {
			t.Errorf("%s: the refused lease left %d leases, want %d", rt, after, before)
		}
	}
	var none struct {
		Items []mcpServer `json:"items"`
	}
	if code, _ := apiJSON(t, svc, "GET", "/v1/mcp/servers", nil, &none); code != 200 || len(none.Items) != 0 {
		t.Errorf("servers after the refusals: %d, %d servers", code, len(none.Items))
	}

	// The server: its own lease and sandbox, reserved to it.
	var s mcpServer
	if code, body := apiJSON(t, svc, "POST", "/v1/mcp/servers", map[string]any{"catalog": "env-server"}, &s); code != 201 {
		t.Fatalf("create env-server: %d %s", code, body)
	}
	if s.Runtime != "runsc" || !s.OwnLease || s.State != "ready" {
		t.Fatalf("env-server instance %+v", s)
	}
	reservation := "mcp:" + s.ID
	cs := mcpConnect(t, svc, &s, "2025-11-25", nil, nil)
	call := func(tool string, args map[string]any) string {
		t.Helper()
		res, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: tool, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %v", tool, res, err)
		}
		return toolText(res)
	}
	if got := call("echo", map[string]any{"text": "hi"}); got != "echo: hi" {
		t.Errorf("echo: %q", got)
	}
	sum := sha256.Sum256([]byte(secret))
	if got := call("env_digest", map[string]any{"name": "ENV_TOKEN"}); got != hex.EncodeToString(sum[:]) {
		t.Errorf("the server's ENV_TOKEN digest %s, want the secret's", got)
	}
	if got := call("env", map[string]any{"name": "ENV_TOKEN"}); got != stars {
		t.Errorf("the server's ENV_TOKEN as a tool result: %q, want it masked (%d *)", got, len(secret))
	}
	sb, err := c.GetSandbox(callCtx(t), s.SandboxID)
	if err != nil {
		t.Fatal(err)
	}
	if sb.Reserved != reservation {
		t.Errorf("the server's sandbox is reserved to %q, want %q", sb.Reserved, reservation)
	}
	list, err := c.ListLeases(callCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, l := range list {
		listed = listed || (l.LeaseID == s.LeaseID && l.Reserved == reservation && l.Holder == reservation && l.State == "active")
	}
	if !listed {
		t.Errorf("the server's lease in GET /v1/leases: %+v", list)
	}
	if _, body := apiJSON(t, svc, "GET", "/v1/mcp/servers/"+s.ID, nil, nil); strings.Contains(body, secret) {
		t.Errorf("the instance view holds the secret: %s", body)
	}
	var stderr, stdout strings.Builder
	eventually(t, callTimeout, "the server's start-up line in its log", func() (bool, string) {
		stderr.Reset()
		stdout.Reset()
		err := c.StreamLogs(callCtx(t), s.JobID, client.StreamOptions{}, func(ev client.LogEvent) error {
			switch ev.Event {
			case "stderr":
				stderr.Write(ev.Data)
			case "stdout":
				stdout.Write(ev.Data)
			}
			return nil
		})
		return err == nil && strings.Contains(stderr.String(), "ENV_TOKEN="), fmt.Sprint(err, stderr.String())
	})
	if !strings.Contains(stderr.String(), "starting with ENV_TOKEN="+stars+"\n") || strings.Contains(stderr.String()+stdout.String(), secret) {
		t.Errorf("the server's log shows the secret (stderr %q)", stderr.String())
	}

	// Every way in is refused, with the tenant's own key.
	refused := func(what string, code int, body, want string) {
		t.Helper()
		if code != 403 || !strings.Contains(body, want) {
			t.Errorf("%s: %d %s, want 403 %s", what, code, body, want)
		}
		if strings.Contains(body, secret) {
			t.Errorf("%s answered the secret", what)
		}
	}
	tenantCall := func(method, path string, body any) (int, string) {
		t.Helper()
		return apiJSON(t, svc, method, path, body, nil)
	}
	base := "/v1/sandboxes/" + s.SandboxID
	for _, tc := range []struct {
		what, method, path string
		body               any
	}{
		{"exec", "POST", base + "/exec", map[string]any{"command": []string{"sh", "-c", "cat /proc/*/environ"}}},
		{"background exec", "POST", base + "/exec", map[string]any{"command": []string{"true"}, "background": true}},
		{"run-code context", "POST", base + "/contexts", map[string]any{"language": "python"}},
		{"session", "POST", base + "/sessions", map[string]any{}},
		{"file read", "GET", base + "/files?path=/workspace/x", nil},
		{"file list", "GET", base + "/files/list?path=/workspace", nil},
		{"file write", "PUT", base + "/files?path=/workspace/x", "x"},
		{"port", "GET", base + "/ports/8000/", nil},
		{"browser actions", "POST", base + "/browser/actions", map[string]any{"actions": []map[string]any{{"type": "screenshot"}}}},
		{"computer actions", "POST", base + "/computer/actions", client.ComputerActionsRequest{Actions: []client.ComputerAction{{Action: "screenshot"}}}},
		{"cancel the server's job", "POST", "/v1/jobs/" + s.JobID + "/cancel", nil},
		{"close the server's stdin", "POST", "/v1/jobs/" + s.JobID + "/stdin/close", nil},
		{"a second server on its lease", "POST", "/v1/mcp/servers", map[string]any{"lease_id": s.LeaseID,
			"spec": map[string]any{"command": []string{"sh", "-c", "cat /proc/*/environ >&2"}}}},
		{"a trace replay into it", "POST", "/v1/traces/" + tenantSandboxes[0] + "/replay", map[string]any{"target_sandbox": s.SandboxID}},
	} {
		code, body := tenantCall(tc.method, tc.path, tc.body)
		refused(tc.what, code, body, `"code":"sandbox_reserved"`)
	}
	for _, tc := range []struct{ what, path string }{
		{"terminal", base + "/terminal"},
		{"tcp port", base + "/ports/8000/tcp"},
	} {
		code, body := upgrade(t, svc.url()+tc.path, map[string]string{"Authorization": "Bearer " + e.apiKey})
		refused(tc.what, code, body, `"code":"sandbox_reserved"`)
	}
	code, body := e2bRequest(t, "PUT", svc.url()+"/v1/jobs/"+s.JobID+"/stdin", `{"jsonrpc":"2.0","id":99,"method":"tools/list"}`+"\n",
		map[string]string{"Authorization": "Bearer " + e.apiKey})
	refused("write the server's stdin", code, body, `"code":"sandbox_reserved"`)

	// The E2B adapter: its access token for the sandbox opens nothing.
	var det struct{ EnvdAccessToken string }
	code, body = e2bCall(t, svc.url(), e.apiKey, "GET", "/e2b/sandboxes/"+s.SandboxID, "")
	if code != 200 || json.Unmarshal([]byte(body), &det) != nil || det.EnvdAccessToken == "" {
		t.Fatalf("E2B get of the server's sandbox: %d %s", code, body)
	}
	code, body = sandboxCall(t, svc.url(), det.EnvdAccessToken, s.SandboxID, "GET", "/e2b/files?path=/home/user/x", "")
	refused("E2B file read", code, body, "reserved")
	code, body = sandboxCall(t, svc.url(), det.EnvdAccessToken, s.SandboxID, "POST", "/e2b/filesystem.Filesystem/ListDir", `{"path":"/home/user"}`)
	refused("E2B ListDir", code, body, "reserved")
	code, body = e2bRequest(t, "POST", svc.url()+"/e2b/execute", `{"code":"import os; print(open('/proc/1/environ').read())"}`,
		map[string]string{"X-Access-Token": det.EnvdAccessToken, "E2b-Sandbox-Id": s.SandboxID, "E2b-Sandbox-Port": "49999"})
	refused("E2B run code", code, body, "reserved")

	// The OpenSandbox adapter: its execd token for the sandbox opens
	// nothing either.
	code, body = e2bRequest(t, "GET", svc.url()+"/opensandbox/v1/sandboxes/"+s.SandboxID+"/endpoints/44772", "", map[string]string{"OPEN-SANDBOX-API-KEY": e.apiKey})
	var ep struct {
		Endpoint string            `json:"endpoint"`
		Headers  map[string]string `json:"headers"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &ep) != nil || ep.Endpoint == "" {
		t.Fatalf("OpenSandbox endpoint of the server's sandbox: %d %s", code, body)
	}
	execd := ep.Endpoint
	if !strings.Contains(execd, "://") {
		execd = "http://" + execd
	}
	code, body = e2bRequest(t, "POST", execd+"/command", `{"command":"cat /proc/*/environ"}`, ep.Headers)
	refused("OpenSandbox command", code, body, `"code":"SANDBOX_RESERVED"`)
	code, body = e2bRequest(t, "GET", execd+"/files/download?path=/workspace/x", "", ep.Headers)
	refused("OpenSandbox download", code, body, `"code":"SANDBOX_RESERVED"`)
	code, body = e2bRequest(t, "DELETE", execd+"/command?id="+s.JobID, "", ep.Headers)
	refused("OpenSandbox interrupt of the server's job", code, body, `"code":"SANDBOX_RESERVED"`)

	// None of it touched the server.
	if got := call("echo", map[string]any{"text": "still"}); got != "echo: still" {
		t.Errorf("echo after the attempts: %q", got)
	}

	// Releasing its lease ends the server and destroys its sandbox.
	if err := c.ReleaseLease(callCtx(t), s.LeaseID); err != nil {
		t.Fatalf("release the server's lease: %v", err)
	}
	eventually(t, callTimeout, "the server stopped with its lease", func() (bool, string) {
		var now mcpServer
		apiJSON(t, svc, "GET", "/v1/mcp/servers/"+s.ID, nil, &now)
		return now.State == "stopped" && strings.Contains(now.LastError, "lease released"), fmt.Sprintf("%+v", now)
	})
	// The release answers before its sandbox is recycled (draining, then
	// destroyed: docs/architecture.md, leases).
	eventually(t, callTimeout, "the server's sandbox destroyed after its lease's release", func() (bool, string) {
		sb, err := c.GetSandbox(callCtx(t), s.SandboxID)
		if err != nil {
			return client.IsNotFound(err), err.Error()
		}
		return sb.State == "destroyed", sb.State
	})
	eventually(t, callTimeout, "the server's container removed", func() (bool, string) {
		left := sandboxContainers(t, s.SandboxID)
		return len(left) == 0, fmt.Sprint(left)
	})

	// A server whose service process dies: the instance died with it, so
	// the next start-up destroys its reserved sandbox at once rather than
	// leave the process that holds the secret running until its lease
	// expires.
	var s2 mcpServer
	if code, body := apiJSON(t, svc, "POST", "/v1/mcp/servers", map[string]any{"catalog": "env-server"}, &s2); code != 201 {
		t.Fatalf("create a second env-server: %d %s", code, body)
	}
	svc.kill(t)
	svc = e.start(t)
	c = svc.client()
	if sb, err := c.GetSandbox(callCtx(t), s2.SandboxID); err != nil || sb.State != "destroyed" {
		t.Errorf("the reserved sandbox after a crash and a start-up: %+v %v", sb, err)
	}
	if l, err := c.GetLease(callCtx(t), s2.LeaseID); err != nil || l.State == "active" {
		t.Errorf("its lease after a crash and a start-up: %+v %v", l, err)
	}
	if left := sandboxContainers(t, s2.SandboxID); len(left) != 0 {
		t.Errorf("its container after a crash and a start-up: %v", left)
	}
}

// upgrade asks for a WebSocket at url and answers the status and body of
// a refusal (101 when the upgrade was made).
func upgrade(t *testing.T, url string, headers map[string]string) (int, string) {
	t.Helper()
	h := map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
		"Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
	for k, v := range headers {
		h[k] = v
	}
	ctx := callCtx(t)
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return resp.StatusCode, ""
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
