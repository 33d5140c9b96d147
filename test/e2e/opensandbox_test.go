package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"genesis.dev/sandbox/internal/testenv"
)

// openSandboxConfig is the e2e config of the OpenSandbox tests: the E2B
// tests' (the two profiles, a tenant whose policy puts everything under
// runsc) and the images' table.
func openSandboxConfig(untrustedKey string) string {
	return e2bConfig(untrustedKey) + `opensandbox:
  images: {ubuntu: tool-basic, "python:3.11": code-python-data}
`
}

// runOpenSandboxFlow runs test/osclient/flow.mjs (the unmodified npm SDK)
// with the environment a user of OpenSandbox sets, and decodes what it saw;
// flow names a flow other than the core one.
func runOpenSandboxFlow(t *testing.T, svcURL, apiKey, image string, flow ...string) map[string]any {
	t.Helper()
	root := testenv.ModuleRoot(t)
	cmd := exec.CommandContext(callCtx(t), "node", append([]string{filepath.Join(root, "test", "osclient", "flow.mjs"), image}, flow...)...)
	cmd.Env = append(os.Environ(), "OPEN_SANDBOX_DOMAIN="+strings.TrimPrefix(svcURL, "http://")+"/opensandbox", "OPEN_SANDBOX_API_KEY="+apiKey)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("flow: %v\n%s", err, stderr.String())
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("flow output %q: %v", b, err)
	}
	if out["error"] != nil {
		t.Fatalf("flow failed: %v\n%v", out["error"], out["stack"])
	}
	return out
}

// TestOpenSandboxSDK drives the unmodified `@alibaba-group/opensandbox` npm
// SDK through /opensandbox under runc and runsc (a tenant whose policy
// puts everything under runsc): create (with its two endpoint calls and
// the health check), commands (stdout and stderr a line each, the exit
// code, a failing command's error, streaming, cwd, env), files (write,
// read, a range, info, list, mkdir, move, search, delete), list with a
// metadata filter, get, renew, kill and gone, and an unknown image's
// error.
func TestOpenSandboxSDK(t *testing.T) {
	t.Parallel()
	root := testenv.ModuleRoot(t)
	if _, err := os.Stat(filepath.Join(root, "test", "osclient", "node_modules", "@alibaba-group", "opensandbox")); err != nil {
		t.Fatalf("the OpenSandbox SDK is not installed (make test-deps): %v", err)
	}
	untrusted := "e2e_" + randomHex(t, 16)
	e := newEnv(t, openSandboxConfig(untrusted))
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	keys := map[string]string{"runc": e.apiKey, "runsc": untrusted}
	// The CLI checks the adapter with the key and prints the environment.
	if r := svc.cli(t, "opensandbox", "env"); r.code != 0 ||
		!strings.Contains(r.stdout, "export OPEN_SANDBOX_DOMAIN="+strings.TrimPrefix(svc.url(), "http://")+"/opensandbox\n") ||
		!strings.Contains(r.stdout, "export OPEN_SANDBOX_API_KEY="+e.apiKey+"\n") {
		t.Errorf("genesis opensandbox env: %s", r)
	}
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			out := runOpenSandboxFlow(t, svc.url(), keys[rt], "ubuntu")
			id, _ := out["id"].(string)
			sb, err := svc.client().GetSandbox(callCtx(t), id)
			if err == nil && sb.State != "destroyed" {
				t.Errorf("sandbox %s still there after kill: %+v", id, sb)
			}
			if err == nil && sb.Runtime != rt {
				t.Errorf("sandbox %s ran under %s, want %s", id, sb.Runtime, rt)
			}
			want := map[string]any{
				"first":     []any{"first"},
				"run":       map[string]any{"stdout": []any{"hello", "/workspace", "hola"}, "stderr": []any{"oops"}, "exitCode": float64(0), "error": nil},
				"fail":      map[string]any{"exitCode": float64(3), "errorName": "CommandExecError", "errorValue": "3", "stderr": []any{"bad"}},
				"streamed":  []any{"line1", "line2", "line3"},
				"cwd":       []any{"/tmp"},
				"read":      "hi from the sdk",
				"range":     "from",
				"catRead":   []any{"hi from the sdk"},
				"info":      map[string]any{"size": float64(len("hi from the sdk")), "type": "file", "mode": float64(644)},
				"listed":    []any{"/workspace/dir/hello.txt:file"},
				"moved":     "hi from the sdk",
				"found":     []any{"/workspace/made/moved.txt"},
				"inList":    true,
				"listState": "Running",
				"state":     "Running",
				"metadata":  map[string]any{"suite": "os-flow"},
				"healthy":   true,
				"afterKill": "Terminated",
				// OpenSandbox's words for a kill, not "Failed".
				"afterKillReason": "user_delete",
				"runAfterKill":    map[string]any{"code": "SANDBOX_NOT_RUNNING", "message": "sandbox " + id + " is destroyed: failed precondition", "name": "SandboxApiException", "status": float64(409)},
			}
			for k, v := range want {
				if got := out[k]; fmt.Sprint(got) != fmt.Sprint(v) {
					t.Errorf("%s: got %#v, want %#v", k, got, v)
				}
			}
			if ms, _ := out["renewedBy"].(float64); ms < 1000_000 {
				t.Errorf("renew(1800 s) moved the expiry by %v ms", out["renewedBy"])
			}
			if d, _ := out["readDeleted"].(map[string]any); d["status"] != float64(404) {
				t.Errorf("reading a deleted file: %v, want a 404", out["readDeleted"])
			}
			if u, _ := out["unknownImage"].(map[string]any); u["status"] != float64(400) || u["code"] != "INVALID_IMAGE" {
				t.Errorf("an unknown image: %v, want 400 INVALID_IMAGE", out["unknownImage"])
			}
			t.Logf("create %.0f ms, first output %.0f ms", out["createMs"], out["firstOutputMs"])
		})
	}
}

// crossTenantOpenSandbox walks the OpenSandbox adapter's routes that name a
// sandbox: a lifecycle route with another tenant's key answers exactly
// what a missing id gets (404 SANDBOX_NOT_FOUND), and an execd route with
// the other tenant's token (of its own sandbox), a forged one or the
// owner's token for a missing sandbox answers 401. The owner's sandbox
// stays as it was. A route this walk does not know fails it.
func crossTenantOpenSandbox(t *testing.T, e *env, svc *service, otherKey string, routes []string) {
	e.requireImage(t, "tool-basic")
	call := func(method, path, body string, headers map[string]string) (int, string) {
		return e2bRequest(t, method, svc.url()+path, body, headers)
	}
	create := func(key string) (id, token string) {
		code, body := call("POST", "/opensandbox/v1/sandboxes", `{"image":{"uri":"ubuntu"},"timeout":300,"entrypoint":["tail","-f","/dev/null"]}`,
			map[string]string{"OPEN-SANDBOX-API-KEY": key})
		if code != 202 {
			t.Fatalf("create: %d %s", code, body)
		}
		var c struct{ ID string }
		if err := json.Unmarshal([]byte(body), &c); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			call("DELETE", "/opensandbox/v1/sandboxes/"+c.ID, "", map[string]string{"OPEN-SANDBOX-API-KEY": key})
		})
		code, body = call("GET", "/opensandbox/v1/sandboxes/"+c.ID+"/endpoints/44772", "", map[string]string{"OPEN-SANDBOX-API-KEY": key})
		var ep struct{ Headers map[string]string }
		if code != 200 || json.Unmarshal([]byte(body), &ep) != nil || ep.Headers["X-Genesis-Sandbox-Token"] == "" {
			t.Fatalf("endpoint: %d %s", code, body)
		}
		return c.ID, ep.Headers["X-Genesis-Sandbox-Token"]
	}
	ownerID, ownerToken := create(e.apiKey)
	// Any other port's endpoint is its own preview origin, opened by the
	// token in the headers the SDK sends along.
	code, body := call("GET", "/opensandbox/v1/sandboxes/"+ownerID+"/endpoints/8000", "", map[string]string{"OPEN-SANDBOX-API-KEY": e.apiKey})
	var pep struct {
		Endpoint string
		Headers  map[string]string
	}
	if code != 200 || json.Unmarshal([]byte(body), &pep) != nil || pep.Endpoint != "8000-"+strings.TrimPrefix(ownerID, "sbx_")+".localhost:"+strings.TrimPrefix(svc.url(), "http://127.0.0.1:") {
		t.Fatalf("endpoint of port 8000: %d %s", code, body)
	}
	if code, _, body := previewDo(t, svc, "GET", "http://"+pep.Endpoint+"/", http.Header{"X-Genesis-Preview-Token": {pep.Headers["X-Genesis-Preview-Token"]}}); code != http.StatusBadGateway || !strings.Contains(body, "port_unreachable") {
		t.Errorf("the endpoint of port 8000 (nothing listens): %d %.200s; want 502 port_unreachable", code, body)
	}
	_, otherToken := create(otherKey)
	const missing = "sbx_00000000000000000000"
	bodies := map[string]string{
		"GET /opensandbox/v1/sandboxes/{id}":                                  "",
		"DELETE /opensandbox/v1/sandboxes/{id}":                               "",
		"POST /opensandbox/v1/sandboxes/{id}/renew-expiration":                `{"expiresAt":"2099-01-01T00:00:00Z"}`,
		"POST /opensandbox/v1/sandboxes/{id}/pause":                           "",
		"POST /opensandbox/v1/sandboxes/{id}/resume":                          "",
		"GET /opensandbox/v1/sandboxes/{id}/endpoints/{port}":                 "",
		"GET /opensandbox/sandboxes/{id}/execd/ping":                          "",
		"POST /opensandbox/sandboxes/{id}/execd/command":                      `{"command":"echo hi"}`,
		"DELETE /opensandbox/sandboxes/{id}/execd/command":                    "",
		"GET /opensandbox/sandboxes/{id}/execd/command/{a}/{b}":               "",
		"POST /opensandbox/sandboxes/{id}/execd/files/upload":                 "",
		"GET /opensandbox/sandboxes/{id}/execd/files/download":                "",
		"GET /opensandbox/sandboxes/{id}/execd/files/info":                    "",
		"DELETE /opensandbox/sandboxes/{id}/execd/files":                      "",
		"POST /opensandbox/sandboxes/{id}/execd/files/mv":                     `[]`,
		"GET /opensandbox/sandboxes/{id}/execd/files/search":                  "",
		"GET /opensandbox/sandboxes/{id}/execd/directories/list":              "",
		"POST /opensandbox/sandboxes/{id}/execd/directories":                  `{}`,
		"DELETE /opensandbox/sandboxes/{id}/execd/directories":                "",
		"POST /opensandbox/sandboxes/{id}/execd/code/context":                 `{"language":"python"}`,
		"GET /opensandbox/sandboxes/{id}/execd/code/contexts/{context_id}":    "",
		"DELETE /opensandbox/sandboxes/{id}/execd/code/contexts/{context_id}": "",
		"POST /opensandbox/sandboxes/{id}/execd/code":                         `{"code":"1"}`,
	}
	walked := 0
	for _, route := range routes {
		method, path, _ := strings.Cut(route, " ")
		if !strings.HasPrefix(path, "/opensandbox/") || !strings.Contains(path, "{") {
			continue
		}
		body, known := bodies[route]
		if !known {
			t.Errorf("%s names a resource this walk does not know: add it", route)
			continue
		}
		path = strings.NewReplacer("{port}", "44772", "{a}", "status", "{b}", "job_00000000000000000000", "{context_id}", "ses_00000000000000000000").Replace(path) + "?path=/workspace/x&id=job_00000000000000000000"
		if strings.HasPrefix(path, "/opensandbox/v1/") {
			foreignCode, foreign := call(method, strings.Replace(path, "{id}", ownerID, 1), body, map[string]string{"OPEN-SANDBOX-API-KEY": otherKey})
			missingCode, miss := call(method, strings.Replace(path, "{id}", missing, 1), body, map[string]string{"OPEN-SANDBOX-API-KEY": otherKey})
			if foreignCode != 404 || missingCode != 404 || strings.ReplaceAll(foreign, ownerID, missing) != miss {
				t.Errorf("%s with another tenant's key: %d %s; for a missing id: %d %s; want the same 404", route, foreignCode, foreign, missingCode, miss)
			}
			walked++
			continue
		}
		for _, tc := range []struct{ what, token, id string }{
			{"the other tenant's token", otherToken, ownerID},
			{"a forged token", ownerToken[:len(ownerToken)-4] + "AAAA", ownerID},
			{"the owner's token for a missing sandbox", ownerToken, missing},
		} {
			code, got := call(method, strings.Replace(path, "{id}", tc.id, 1), body, map[string]string{"X-Genesis-Sandbox-Token": tc.token})
			if code != 401 || !strings.Contains(got, `"code":"UNAUTHORIZED"`) {
				t.Errorf("%s %s with %s: %d %s; want 401", method, path, tc.what, code, got)
			}
		}
		walked++
	}
	if walked < 15 {
		t.Fatalf("walked only %d OpenSandbox routes", walked)
	}
	// The owner's sandbox still runs, and its token still works.
	code, got := call("GET", "/opensandbox/sandboxes/"+ownerID+"/execd/ping", "", map[string]string{"X-Genesis-Sandbox-Token": ownerToken})
	if code != 200 || got != "pong" {
		t.Errorf("the owner's ping after the walk: %d %s", code, got)
	}
}

// osEvents posts body to an execd streaming route and decodes its events.
func osEvents(t *testing.T, url, token, body string) (int, []map[string]any) {
	t.Helper()
	code, raw := e2bRequest(t, "POST", url, body, map[string]string{"X-Genesis-Sandbox-Token": token})
	if code != 200 {
		return code, []map[string]any{{"body": raw}}
	}
	var evs []map[string]any
	for _, line := range strings.Split(raw, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("event %q: %v", line, err)
		}
		if _, ok := ev["timestamp"].(float64); !ok {
			t.Errorf("event without an integer timestamp: %s", line)
		}
		evs = append(evs, ev)
	}
	return code, evs
}

// TestOpenSandboxCode drives the code interpreter part of OpenSandbox's
// execd API (what its code-interpreter SDK calls; that package is not
// published where this project's dependencies come from, so the wire
// calls are made here as the core SDK's schema describes them) under runc
// and runsc: a context made, code whose variables persist between runs,
// stdout and the value as a text/plain result, a Python error as the
// error event, the sandbox's default context when a run names none, and a
// deleted context refused.
func TestOpenSandboxCode(t *testing.T) {
	t.Parallel()
	untrusted := "e2e_" + randomHex(t, 16)
	e := newEnv(t, openSandboxConfig(untrusted))
	e.requireImage(t, "code-python-data")
	svc := e.start(t)
	keys := map[string]string{"runc": e.apiKey, "runsc": untrusted}
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			key := map[string]string{"OPEN-SANDBOX-API-KEY": keys[rt]}
			code, body := e2bRequest(t, "POST", svc.url()+"/opensandbox/v1/sandboxes", `{"image":{"uri":"python:3.11"},"timeout":300,"entrypoint":["tail","-f","/dev/null"]}`, key)
			var sb struct{ ID string }
			if code != 202 || json.Unmarshal([]byte(body), &sb) != nil {
				t.Fatalf("create: %d %s", code, body)
			}
			t.Cleanup(func() { e2bRequest(t, "DELETE", svc.url()+"/opensandbox/v1/sandboxes/"+sb.ID, "", key) })
			code, body = e2bRequest(t, "GET", svc.url()+"/opensandbox/v1/sandboxes/"+sb.ID+"/endpoints/44772", "", key)
			var ep struct {
				Endpoint string
				Headers  map[string]string
			}
			if code != 200 || json.Unmarshal([]byte(body), &ep) != nil {
				t.Fatalf("endpoint: %d %s", code, body)
			}
			base, token := "http://"+ep.Endpoint, ep.Headers["X-Genesis-Sandbox-Token"]
			code, body = e2bRequest(t, "POST", base+"/code/context", `{"language":"python"}`, map[string]string{"X-Genesis-Sandbox-Token": token})
			var cx struct{ ID, Language string }
			if code != 200 || json.Unmarshal([]byte(body), &cx) != nil || cx.ID == "" || cx.Language != "python" {
				t.Fatalf("context: %d %s", code, body)
			}
			run := func(ctxID, src string) []map[string]any {
				b, _ := json.Marshal(map[string]any{"context": map[string]string{"id": ctxID, "language": "python"}, "code": src})
				code, evs := osEvents(t, base+"/code", token, string(b))
				if code != 200 {
					t.Fatalf("run %q: %d %v", src, code, evs)
				}
				return evs
			}
			kinds := func(evs []map[string]any) string {
				var k []string
				for _, ev := range evs {
					k = append(k, fmt.Sprint(ev["type"]))
				}
				return strings.Join(k, ",")
			}
			evs := run(cx.ID, "x = 41\nprint('side')\nx + 1")
			if kinds(evs) != "init,stdout,result,execution_count,execution_complete" || evs[0]["text"] != cx.ID ||
				evs[1]["text"] != "side\n" || fmt.Sprint(evs[2]["results"]) != "map[text/plain:42]" {
				t.Errorf("first run: %v", evs)
			}
			if evs := run(cx.ID, "x * 2"); fmt.Sprint(evs[1]["results"]) != "map[text/plain:82]" {
				t.Errorf("the context kept no state: %v", evs)
			}
			evs = run(cx.ID, "1/0")
			if last := evs[len(evs)-1]; last["type"] != "error" || fmt.Sprint(last["error"].(map[string]any)["ename"]) != "ZeroDivisionError" {
				t.Errorf("an error: %v", evs)
			}
			// No context named: the sandbox's default one, kept between runs.
			run("", "y = 5")
			if evs := run("", "y + 1"); fmt.Sprint(evs[1]["results"]) != "map[text/plain:6]" {
				t.Errorf("the default context kept no state: %v", evs)
			}
			if code, body := e2bRequest(t, "DELETE", base+"/code/contexts/"+cx.ID, "", map[string]string{"X-Genesis-Sandbox-Token": token}); code != 200 {
				t.Fatalf("delete context: %d %s", code, body)
			}
			b, _ := json.Marshal(map[string]any{"context": map[string]string{"id": cx.ID}, "code": "x"})
			if code, evs := osEvents(t, base+"/code", token, string(b)); code != 404 || !strings.Contains(fmt.Sprint(evs), "CONTEXT_NOT_FOUND") {
				t.Errorf("a run in a deleted context: %d %v", code, evs)
			}
		})
	}
}

// TestCompatTokensSurviveRestart: the adapters' per-sandbox tokens are
// keyed by a file of the data dir, so a token given before the service
// crashed opens its sandbox (adopted on restart) afterwards.
func TestCompatTokensSurviveRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, openSandboxConfig("e2e_"+randomHex(t, 16)))
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	key := map[string]string{"OPEN-SANDBOX-API-KEY": e.apiKey}
	code, body := e2bRequest(t, "POST", svc.url()+"/opensandbox/v1/sandboxes", `{"image":{"uri":"ubuntu"},"timeout":300,"entrypoint":["tail","-f","/dev/null"]}`, key)
	var sb struct{ ID string }
	if code != 202 || json.Unmarshal([]byte(body), &sb) != nil {
		t.Fatalf("create: %d %s", code, body)
	}
	code, body = e2bRequest(t, "GET", svc.url()+"/opensandbox/v1/sandboxes/"+sb.ID+"/endpoints/44772", "", key)
	var ep struct{ Headers map[string]string }
	if code != 200 || json.Unmarshal([]byte(body), &ep) != nil {
		t.Fatalf("endpoint: %d %s", code, body)
	}
	token := map[string]string{"X-Genesis-Sandbox-Token": ep.Headers["X-Genesis-Sandbox-Token"]}
	ping := func(s *service) (int, string) {
		return e2bRequest(t, "GET", s.url()+"/opensandbox/sandboxes/"+sb.ID+"/execd/ping", "", token)
	}
	if code, body := ping(svc); code != 200 {
		t.Fatalf("ping before: %d %s", code, body)
	}
	svc.kill(t)
	svc2 := e.start(t)
	t.Cleanup(func() { e2bRequest(t, "DELETE", svc2.url()+"/opensandbox/v1/sandboxes/"+sb.ID, "", key) })
	if code, body := ping(svc2); code != 200 || body != "pong" {
		t.Fatalf("the token after a restart: %d %s", code, body)
	}
}
