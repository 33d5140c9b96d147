package e2e

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/testenv"
)

// e2bConfig is a service whose E2B templates (the defaults: base →
// tool-basic, code-interpreter-v1 → code-python-data) map to profiles of
// low default risk (so runc), and whose tenant "untrusted" raises every
// request to high risk (so runsc): the runtime follows the tenant's policy,
// as the adapter promises.
func e2bConfig(untrustedKey string) string {
	return fmt.Sprintf(`profiles:
  - name: tool-basic
    recipe: tool-basic
    allowed_runtimes: [runc, runsc]
    default_risk_level: low
    resources: {cpu: 0.5, memory_mb: 256, pids: 128}
    network: none
    user: "1000:1000"
    lease: {default_ttl_seconds: 300, max_ttl_seconds: 3600}
  - name: code-python-data
    recipe: code-python-data
    allowed_runtimes: [runc, runsc]
    default_risk_level: low
    resources: {cpu: 1, memory_mb: 1024, pids: 256}
    network: none
    user: "1000:1000"
    lease: {default_ttl_seconds: 300, max_ttl_seconds: 3600}
tenants:
  untrusted: {min_risk_level: high, api_keys: [%q]}
e2b:
  enabled: true
`, untrustedKey)
}

// runE2BFlow runs test/e2bclient/flow.mjs (the unmodified npm SDKs) with
// the environment a user of E2B sets, and decodes what it saw.
func runE2BFlow(t *testing.T, svcURL, apiKey, flow string) map[string]any {
	t.Helper()
	return runE2BNode(t, flow, nil, "E2B_API_URL="+svcURL+"/e2b", "E2B_SANDBOX_URL="+svcURL+"/e2b", "E2B_API_KEY="+apiKey, "E2B_DOMAIN=")
}

// runE2BNode runs flow.mjs's flow with node's extra arguments and the
// environment env, and decodes what it saw.
func runE2BNode(t *testing.T, flow string, nodeArgs []string, env ...string) map[string]any {
	t.Helper()
	root := testenv.ModuleRoot(t)
	cmd := exec.CommandContext(callCtx(t), "node", append(nodeArgs, filepath.Join(root, "test", "e2bclient", "flow.mjs"), flow)...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("flow %s: %v\n%s", flow, err, stderr.String())
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("flow %s output %q: %v", flow, b, err)
	}
	if out["error"] != nil && flow != "interpreter" {
		t.Fatalf("flow %s failed: %v\n%v", flow, out["error"], out["stack"])
	}
	return out
}

// TestE2BSDK drives the unmodified `e2b` and `@e2b/code-interpreter` npm
// SDKs through /e2b under runc and runsc: create, commands (stdout, stderr,
// exit code, a failing command's CommandExitError, streaming, stdin, kill),
// files (write, read, list, stat, mkdir, move, remove), list, setTimeout,
// kill and gone; runCode keeps state between calls.
func TestE2BSDK(t *testing.T) {
	t.Parallel()
	root := testenv.ModuleRoot(t)
	if _, err := os.Stat(filepath.Join(root, "test", "e2bclient", "node_modules", "e2b")); err != nil {
		t.Fatalf("the E2B SDK is not installed (make test-deps): %v", err)
	}
	untrusted := "e2e_" + randomHex(t, 16)
	e := newEnv(t, e2bConfig(untrusted))
	e.requireImage(t, "tool-basic")
	e.requireImage(t, "code-python-data")
	svc := e.start(t)
	keys := map[string]string{"runc": "e2b_" + e.apiKey, "runsc": untrusted}
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			t.Run("core", func(t *testing.T) {
				t.Parallel()
				out := runE2BFlow(t, svc.url(), keys[rt], "core")
				id, _ := out["id"].(string)
				// getHost names the port's preview origin on this service,
				// never a public domain.
				if h, _ := out["host8000"].(string); h != "8000-"+id+".localhost:"+strings.TrimPrefix(svc.url(), "http://127.0.0.1:") {
					t.Errorf("getHost(8000) = %q, want 8000-%s.localhost:PORT", h, id)
				}
				sb, err := svc.client().GetSandbox(callCtx(t), id)
				if err == nil && sb.State != "destroyed" {
					t.Errorf("sandbox %s still there after kill: %+v", id, sb)
				}
				want := map[string]any{
					"first":             "first\n",
					"run":               map[string]any{"stdout": "hello\n/workspace\n", "stderr": "oops\n", "exitCode": float64(0)},
					"fail":              map[string]any{"thrown": true, "commandExitError": true, "exitCode": float64(3), "stderr": "bad\n"},
					"streamed":          "line1\nline2\nline3\n",
					"envCwd2":           "hola /workspace/sub2\n",
					"connected":         "again\n",
					"listedProcs":       true,
					"stdinEcho":         "got:ping\n",
					"killProc":          true,
					"killedExit":        "CommandExitError",
					"written":           "/home/user/dir/hello.txt",
					"read":              "hi from the sdk",
					"catRead":           "hi from the sdk",
					"listed":            []any{"hello.txt:file"},
					"exists":            true,
					"made":              true,
					"info":              float64(len("hi from the sdk")),
					"existsAfterRemove": false,
					"readMissing":       "FileNotFoundError",
					"inList":            true,
					"templateId":        "base",
					"metadata":          map[string]any{"suite": "e2b-flow"},
					"running":           true,
					"killed":            true,
					"runningAfter":      false,
					"gone":              "SandboxNotFoundError",
					"killAgain":         false,
				}
				for k, v := range want {
					if got := out[k]; fmt.Sprint(got) != fmt.Sprint(v) {
						t.Errorf("%s: got %#v, want %#v", k, got, v)
					}
				}
				if ms, _ := out["timeoutExtendedMs"].(float64); ms < 60_000 {
					t.Errorf("setTimeout(600 s) moved the end by %v ms", out["timeoutExtendedMs"])
				}
				if s, _ := out["runAfterKill"].(string); s == "ran" || s == "" {
					t.Errorf("a command ran after kill: %v", out["runAfterKill"])
				}
				t.Logf("%s: a cwd that does not exist: %v", rt, out["envCwd"])
				t.Logf("%s: create %.0f ms, first output %.0f ms", rt, out["createMs"], out["firstOutputMs"])
			})
			t.Run("interpreter", func(t *testing.T) {
				t.Parallel()
				out := runE2BFlow(t, svc.url(), keys[rt], "interpreter")
				first, _ := out["first"].(map[string]any)
				if first == nil || first["text"] != "42" || fmt.Sprint(first["stdout"]) != "[side effect\n]" || first["error"] != nil {
					t.Errorf("first runCode: %#v", out)
				}
				if out["second"] != "82" {
					t.Errorf("state between runCode calls: x * 2 gave %#v", out["second"])
				}
				if e, _ := out["error"].(map[string]any); e == nil || e["name"] != "ZeroDivisionError" {
					t.Errorf("1/0: error %#v", out["error"])
				}
				// A context of its own: its own variables, cwd /home/user
				// (/workspace inside), gone once removed.
				if out["contextCwd"] != "/home/user" || out["ownContext"] != "'/workspace'" || out["separate"] != "7 41" {
					t.Errorf("createCodeContext: %#v", out)
				}
				if s, _ := out["afterRemove"].(string); s == "ran" || s == "" {
					t.Errorf("runCode in a removed context: %v", out["afterRemove"])
				}
				if out["killed"] != true {
					t.Errorf("kill: %#v", out)
				}
				// The template is the data profile: pandas and matplotlib
				// import and work, as in E2B's code interpreter (their
				// versions and a DataFrame's sum).
				dataVersions := regexp.MustCompile(`^'\d+\.\d+\S* \d+\.\d+\S* 6'$`)
				if data, _ := out["data"].(map[string]any); data == nil || data["error"] != nil || !dataVersions.MatchString(fmt.Sprint(data["text"])) {
					t.Errorf("import pandas, matplotlib: %#v", out["data"])
				}
				k := e.apiKey
				if rt == "runsc" {
					k = untrusted
				}
				id, _ := out["id"].(string)
				if sb, err := client.New(svc.url(), k).GetSandbox(callCtx(t), id); out["template"] != "code-interpreter-v1" || err != nil || sb.Profile != "code-python-data" {
					t.Errorf("CodeInterpreter.create made a %v sandbox %s: %+v %v, want profile code-python-data", out["template"], id, sb, err)
				}
				t.Logf("%s: interpreter steps at %v", rt, out["t"])
			})
			// The runtime is the tenant's policy's: look at a sandbox the
			// adapter made through /v1.
			t.Run("runtime", func(t *testing.T) {
				t.Parallel()
				code, body := e2bCall(t, svc.url(), keys[rt], "POST", "/e2b/sandboxes", `{"templateID":"base","timeout":60}`)
				if code != 201 {
					t.Fatalf("create: %d %s", code, body)
				}
				var c struct{ SandboxID, EnvdAccessToken string }
				_ = json.Unmarshal([]byte(body), &c)
				k := e.apiKey
				if rt == "runsc" {
					k = untrusted
				}
				sb, err := client.New(svc.url(), k).GetSandbox(callCtx(t), c.SandboxID)
				if err != nil || string(sb.Runtime) != rt {
					t.Errorf("sandbox %+v %v: want runtime %s", sb, err, rt)
				}
				if code, body := e2bCall(t, svc.url(), keys[rt], "DELETE", "/e2b/sandboxes/"+c.SandboxID, ""); code != 204 {
					t.Errorf("delete: %d %s", code, body)
				}
				if code, body := e2bCall(t, svc.url(), keys[rt], "DELETE", "/e2b/sandboxes/"+c.SandboxID, ""); code != 404 || !strings.Contains(body, `"code":404`) {
					t.Errorf("delete again: %d %s", code, body)
				}
				// The CLI checks the adapter with the key and prints the
				// environment for the SDKs.
				if r := svc.cli(t, "e2b", "env"); r.code != 0 || !strings.Contains(r.stdout, "export E2B_API_URL="+svc.url()+"/e2b\n") ||
					!strings.Contains(r.stdout, "export E2B_API_KEY=e2b_"+e.apiKey+"\n") {
					t.Errorf("genesis e2b env: %s", r)
				}
				// Errors in E2B's shape: an unknown template, a wrong key.
				if code, body := e2bCall(t, svc.url(), keys[rt], "POST", "/e2b/v2/sandboxes", `{"templateID":"no-such-template"}`); code != 400 ||
					!strings.Contains(body, `"code":400`) || !strings.Contains(body, "code-interpreter-v1") {
					t.Errorf("unknown template: %d %s", code, body)
				}
				if code, body := e2bCall(t, svc.url(), "e2b_wrong", "GET", "/e2b/v2/sandboxes", ""); code != 401 || !strings.Contains(body, `"code":401`) {
					t.Errorf("wrong key: %d %s", code, body)
				}
				// A sandbox made through /v1 (no lease): the SDK's
				// setTimeout renews the sandbox itself, kill deletes it.
				own := e.createSandbox(t, client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt})
				if code, body := e2bCall(t, svc.url(), "e2b_"+e.apiKey, "POST", "/e2b/sandboxes/"+own.ID+"/timeout", `{"timeout":1800}`); code != 204 {
					t.Errorf("timeout of a /v1 sandbox: %d %s", code, body)
				}
				if got, err := svc.client().GetSandbox(callCtx(t), own.ID); err != nil || got.ExpiresAt == nil || time.Until(*got.ExpiresAt) < 25*time.Minute {
					t.Errorf("after timeout 1800 s: %+v %v", got, err)
				}
				if code, body := e2bCall(t, svc.url(), "e2b_"+e.apiKey, "DELETE", "/e2b/sandboxes/"+own.ID, ""); code != 204 {
					t.Errorf("kill of a /v1 sandbox: %d %s", code, body)
				}
			})
		})
	}
}

// e2bCall sends one request to the adapter's control plane (X-API-KEY).
func e2bCall(t *testing.T, base, key, method, path, body string) (int, string) {
	t.Helper()
	return e2bRequest(t, method, base+path, body, map[string]string{"X-API-KEY": key})
}

// e2bRequest sends one JSON request with headers and answers the status
// and body.
func e2bRequest(t *testing.T, method, url, body string, headers map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(callCtx(t), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// crossTenantE2B walks the E2B adapter's routes that name a sandbox with
// another tenant's key: each answers exactly what a missing id gets (404
// {code: 404}); and its sandbox traffic with the other tenant's access
// token (of its own sandbox) or a forged one: 401 as for a missing
// sandbox. Nothing of the owner's changes. A route this walk does not know
// fails it.
func crossTenantE2B(t *testing.T, e *env, svc *service, otherKey string, routes []string) {
	e.requireImage(t, "tool-basic")
	create := func(key string) (id, token string) {
		code, body := e2bCall(t, svc.url(), key, "POST", "/e2b/v2/sandboxes", `{"templateID":"base","timeout":300}`)
		if code != 201 {
			t.Fatalf("create: %d %s", code, body)
		}
		var c struct{ SandboxID, EnvdAccessToken string }
		if err := json.Unmarshal([]byte(body), &c); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e2bCall(t, svc.url(), key, "DELETE", "/e2b/sandboxes/"+c.SandboxID, "") })
		return c.SandboxID, c.EnvdAccessToken
	}
	ownerID, ownerToken := create(e.apiKey)
	_, otherToken := create(otherKey)
	const missing, missingSnap = "sbx_00000000000000000000", "snap_00000000000000000000"
	code, body := e2bCall(t, svc.url(), e.apiKey, "POST", "/e2b/sandboxes/"+ownerID+"/snapshots", `{"name":"owners"}`)
	var snap struct{ SnapshotID string }
	if code != 201 || json.Unmarshal([]byte(body), &snap) != nil || snap.SnapshotID == "" {
		t.Fatalf("the owner's snapshot: %d %s", code, body)
	}
	ownerSnap := snap.SnapshotID
	t.Cleanup(func() { e2bCall(t, svc.url(), e.apiKey, "DELETE", "/e2b/templates/"+ownerSnap, "") })
	// Another tenant neither lists it nor makes a sandbox from it.
	if code, body := e2bCall(t, svc.url(), otherKey, "GET", "/e2b/snapshots", ""); code != 200 || strings.Contains(body, ownerSnap) {
		t.Errorf("another tenant's list of snapshots: %d %s", code, body)
	}
	if code, body := e2bCall(t, svc.url(), otherKey, "POST", "/e2b/v2/sandboxes", `{"templateID":"`+ownerSnap+`"}`); code != 400 || !strings.Contains(body, `"code":400`) {
		t.Errorf("another tenant's create from the owner's snapshot: %d %s; want 400 as for an unknown template", code, body)
	}
	// The owner's volume: another tenant reaches it as it reaches a volume
	// nobody has.
	code, body = e2bCall(t, svc.url(), e.apiKey, "POST", "/e2b/volumes", `{"name":"owners-e2b"}`)
	var vol struct{ VolumeID string }
	if code != 201 || json.Unmarshal([]byte(body), &vol) != nil || vol.VolumeID == "" {
		t.Fatalf("the owner's volume: %d %s", code, body)
	}
	t.Cleanup(func() { e2bCall(t, svc.url(), e.apiKey, "DELETE", "/e2b/volumes/"+vol.VolumeID, "") })
	const missingVol = "vol_00000000000000000000"
	bodies := map[string]string{
		"GET /e2b/volumes/{volumeID}":               "",
		"DELETE /e2b/volumes/{volumeID}":            "",
		"GET /e2b/volumecontent/{volumeID}/file":    "",
		"PUT /e2b/volumecontent/{volumeID}/file":    "pwned",
		"GET /e2b/volumecontent/{volumeID}/dir":     "",
		"POST /e2b/volumecontent/{volumeID}/dir":    "",
		"GET /e2b/volumecontent/{volumeID}/path":    "",
		"PATCH /e2b/volumecontent/{volumeID}/path":  `{}`,
		"DELETE /e2b/volumecontent/{volumeID}/path": "",
		"GET /e2b/sandboxes/{id}":                   "",
		"DELETE /e2b/sandboxes/{id}":                "",
		"POST /e2b/sandboxes/{id}/timeout":          `{"timeout":5}`,
		"POST /e2b/v2/sandboxes/{id}/connect":       `{"timeout":5}`,
		"POST /e2b/sandboxes/{id}/pause":            `{}`,
		"POST /e2b/sandboxes/{id}/snapshots":        `{"name":"other"}`,
		"POST /e2b/sandboxes/{id}/fork":             `{"count":1}`,
		"DELETE /e2b/templates/{templateID}":        "",
		"POST /e2b/process.Process/{method}":        `{}`,
		"POST /e2b/filesystem.Filesystem/{method}":  `{"path":"/home/user"}`,
		"DELETE /e2b/contexts/{id}":                 "",
	}
	for _, m := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"} {
		bodies[m+" /e2b/ports/{port}/{path}"] = ""
	}
	walked := 0
	for _, route := range routes {
		method, path, _ := strings.Cut(route, " ")
		if !strings.HasPrefix(path, "/e2b/") {
			continue
		}
		body, known := bodies[route]
		if strings.Contains(path, "{") && !known {
			t.Errorf("%s names a resource this walk does not know: add it", route)
			continue
		}
		if strings.Contains(path, "{volumeID}") {
			// Volumes and their contents: 404 for a volume this tenant
			// does not have.
			want := 404
			foreignCode, foreign := e2bCall(t, svc.url(), otherKey, method, strings.Replace(path, "{volumeID}", vol.VolumeID, 1), body)
			missingCode, miss := e2bCall(t, svc.url(), otherKey, method, strings.Replace(path, "{volumeID}", missingVol, 1), body)
			if foreignCode != want || missingCode != want || strings.ReplaceAll(foreign, vol.VolumeID, missingVol) != miss {
				t.Errorf("%s with another tenant's key: %d %s; for a missing id: %d %s; want the same %d", route, foreignCode, foreign, missingCode, miss, want)
			}
			walked++
			continue
		}
		if strings.Contains(path, "/templates/{templateID}") {
			// A snapshot of the owner's, as a template.
			foreignCode, foreign := e2bCall(t, svc.url(), otherKey, method, strings.Replace(path, "{templateID}", ownerSnap, 1), body)
			missingCode, miss := e2bCall(t, svc.url(), otherKey, method, strings.Replace(path, "{templateID}", missingSnap, 1), body)
			if foreignCode != 404 || missingCode != 404 || strings.ReplaceAll(foreign, ownerSnap, missingSnap) != miss {
				t.Errorf("%s with another tenant's key: %d %s; for a missing id: %d %s; want the same 404", route, foreignCode, foreign, missingCode, miss)
			}
			walked++
			continue
		}
		if strings.Contains(path, "/sandboxes/{id}") {
			foreignCode, foreign := e2bCall(t, svc.url(), otherKey, method, strings.Replace(path, "{id}", ownerID, 1), body)
			missingCode, miss := e2bCall(t, svc.url(), otherKey, method, strings.Replace(path, "{id}", missing, 1), body)
			if foreignCode != 404 || missingCode != 404 || strings.ReplaceAll(foreign, ownerID, missing) != miss {
				t.Errorf("%s with another tenant's key: %d %s; for a missing id: %d %s; want the same 404", route, foreignCode, foreign, missingCode, miss)
			}
			walked++
			continue
		}
		// Sandbox traffic: the token is the credential.
		path = strings.Replace(path, "{id}", "ctx_00000000000000000000", 1)
		path = strings.Replace(strings.Replace(path, "{port}", "8000", 1), "{path}", "x", 1)
		path = strings.Replace(path, "{method}", map[bool]string{true: "List", false: "Stat"}[strings.Contains(path, "process")], 1)
		if method == "GET" && path == "/e2b/files" {
			path += "?path=/home/user/x"
		}
		for _, tc := range []struct{ what, token, id string }{
			{"the other tenant's token", otherToken, ownerID},
			{"a forged token", ownerToken[:len(ownerToken)-4] + "AAAA", ownerID},
			{"the owner's token for a missing sandbox", ownerToken, missing},
		} {
			code, got := sandboxCall(t, svc.url(), tc.token, tc.id, method, path, body)
			if code != 401 || (method != "HEAD" && !strings.Contains(got, `"code":401`)) { // a HEAD answer has no body
				t.Errorf("%s %s with %s: %d %s; want 401", method, path, tc.what, code, got)
			}
		}
		walked++
	}
	if walked < 12 {
		t.Fatalf("walked only %d E2B routes", walked)
	}
	// The owner's sandbox is as it was: running, its timeout unchanged by
	// the other tenant's calls.
	if code, body := e2bCall(t, svc.url(), e.apiKey, "GET", "/e2b/sandboxes/"+ownerID, ""); code != 200 || !strings.Contains(body, `"state":"running"`) {
		t.Errorf("owner's sandbox after the walk: %d %s", code, body)
	}
	if code, body := e2bCall(t, svc.url(), e.apiKey, "GET", "/e2b/snapshots?name="+ownerSnap, ""); code != 200 || !strings.Contains(body, ownerSnap) {
		t.Errorf("owner's snapshot after the walk: %d %s", code, body)
	}
	if code, body := e2bCall(t, svc.url(), e.apiKey, "GET", "/e2b/volumes/"+vol.VolumeID, ""); code != 200 || !strings.Contains(body, vol.VolumeID) {
		t.Errorf("owner's volume after the walk: %d %s", code, body)
	}
	if code, _ := sandboxCall(t, svc.url(), ownerToken, ownerID, "GET", "/e2b/health", ""); code != 204 {
		t.Errorf("owner's health after the walk: %d", code)
	}
}

// sandboxCall sends one request of sandbox traffic (E2B_SANDBOX_URL form).
func sandboxCall(t *testing.T, base, token, id, method, path, body string) (int, string) {
	t.Helper()
	return e2bRequest(t, method, base+path, body, map[string]string{"X-Access-Token": token, "E2b-Sandbox-Id": id, "E2b-Sandbox-Port": "49983"})
}

// TestE2BHostMode runs the unmodified SDKs in E2B's host-based mode under
// runc and runsc: no E2B_SANDBOX_URL; create answers the domain, and every
// port of the sandbox is https://{port}-{id}.{domain} on the service's TLS
// listener (a wildcard certificate of a CA made here, its names resolved to
// loopback by the test's preload): commands (agent port), files, runCode
// (interpreter port) and a server of the sandbox's own on port 8000 through
// getHost(8000), which needs the sandbox's traffic token.
func TestE2BHostMode(t *testing.T) {
	t.Parallel()
	root := testenv.ModuleRoot(t)
	dir := t.TempDir()
	caFile, certFile, keyFile := writeWildcardCert(t, dir, "e2b.test")
	hostAddr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(hostAddr)
	domain := "e2b.test:" + port
	untrusted := "e2e_" + randomHex(t, 16)
	e := newEnv(t, e2bConfig(untrusted)+fmt.Sprintf("  sandbox_domain: %q\n  listen: %q\n  tls_cert_file: %q\n  tls_key_file: %q\n", domain, hostAddr, certFile, keyFile))
	e.requireImage(t, "code-python-data")
	svc := e.start(t)
	keys := map[string]string{"runc": "e2b_" + e.apiKey, "runsc": untrusted}
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			out := runE2BNode(t, "host", []string{"--import", filepath.Join(root, "test", "e2bclient", "loopback-dns.mjs")},
				"E2B_API_URL="+svc.url()+"/e2b", "E2B_SANDBOX_URL=", "E2B_API_KEY="+keys[rt], "E2B_DOMAIN=",
				"NODE_EXTRA_CA_CERTS="+caFile, "GENESIS_LOOPBACK_DOMAIN=e2b.test")
			id, _ := out["id"].(string)
			want := map[string]any{
				"host":           "49983-" + id + "." + domain,
				"run":            "host-mode\n",
				"read":           "via host",
				"code":           "42",
				"portBody":       "via host",
				"portNoToken":    float64(401),
				"portOtherToken": float64(401),
				"killed":         true,
			}
			for k, v := range want {
				if got := out[k]; fmt.Sprint(got) != fmt.Sprint(v) {
					t.Errorf("%s: got %#v, want %#v", k, got, v)
				}
			}
			sb, err := svc.client().GetSandbox(callCtx(t), id)
			if err == nil && sb.State != "destroyed" {
				t.Errorf("sandbox %s still there after kill: %+v", id, sb)
			}
			if err == nil && sb.Runtime != rt {
				t.Errorf("sandbox %s ran under %s, want %s", id, sb.Runtime, rt)
			}
		})
	}
	// A host that is not {port}-{id}.{domain} is 404, in E2B's shape.
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the test's own listener
	resp, err := c.Get("https://" + hostAddr + "/health")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), `"code":404`) {
		t.Errorf("a bare host: %d %s", resp.StatusCode, body)
	}
}

// writeWildcardCert makes a CA and a certificate for *.domain and domain
// signed by it, and writes the CA's certificate and the leaf's certificate
// and key (PEM) into dir.
func writeWildcardCert(t *testing.T, dir, domain string) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "genesis test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "*." + domain},
		DNSNames: []string{"*." + domain, domain}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("cert.pem", "CERTIFICATE", leafDER), write("key.pem", "EC PRIVATE KEY", keyDER)
}
