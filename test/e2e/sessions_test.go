package e2e

import (
	"bytes"
	"encoding/base64"
	"image/png"
	"net/http"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// sessionExec runs a script in a shell session (200 expected).
func sessionExec(t *testing.T, raw *rawAPI, sessionID, script string) client.ExecResult {
	t.Helper()
	var res client.ExecResult
	status, p := raw.call(t, http.MethodPost, "/v1/sessions/"+sessionID+"/exec", execBody{Script: script, TimeoutMS: 60_000}, &res)
	if status != http.StatusOK {
		t.Fatalf("session exec %q: %d %s %s", script, status, p.Code, p.Detail)
	}
	return res
}

// testShellSessions checks that a shell session carries its cwd and
// exported variables from call to call, also across a call that exits
// non-zero, and that a deleted session refuses further calls.
// TestJobsSurviveRestart checks that sessions survive a service crash.
func testShellSessions(t *testing.T, e *env, svc *service) {
	eachRuntime(t, e, func(t *testing.T, rt string) {
		raw := svc.raw()
		sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt})
		se := createSession(t, raw, sb.ID)
		steps := []struct {
			script, stdout string
			code           int
		}{
			{"cd /tmp && export A=1", "", 0},
			{`pwd; echo "$A"`, "/tmp\n1\n", 0},
			{"cd /; export B=2; exit 5", "", 5},
			{`pwd; echo "$A $B"`, "/\n1 2\n", 0},
		}
		var res client.ExecResult
		for _, s := range steps {
			res = sessionExec(t, raw, se.ID, s.script)
			if res.ExitCode != s.code || res.ExitReason != "exited" || res.Stdout != s.stdout {
				t.Fatalf("session exec %q: exit %d (%s) stdout %q stderr %q; want exit %d stdout %q", s.script, res.ExitCode, res.ExitReason, res.Stdout, res.Stderr, s.code, s.stdout)
			}
		}
		var got client.Session
		raw.call(t, http.MethodGet, "/v1/sessions/"+se.ID, nil, &got)
		if got.State != "active" || got.Runs != int64(len(steps)) || got.LastJobID != res.JobID {
			t.Errorf("GET session: %+v; want active, %d runs, last job %s", got, len(steps), res.JobID)
		}

		if status, p := raw.call(t, http.MethodDelete, "/v1/sessions/"+se.ID, nil, nil); status != http.StatusNoContent {
			t.Fatalf("delete session: %d %s", status, p.Code)
		}
		status, p, err := raw.try(http.MethodPost, "/v1/sessions/"+se.ID+"/exec", execBody{Script: "pwd"}, nil)
		if err != nil || status != http.StatusConflict || p.Code != "session_closed" {
			t.Errorf("exec in a deleted session: %d %q (%v); want 409 session_closed", status, p.Code, err)
		}
		if status, p := raw.call(t, http.MethodDelete, "/v1/sessions/"+se.ID, nil, nil); status != http.StatusNoContent {
			t.Errorf("deleting a deleted session again: %d %s; want 204", status, p.Code)
		}
		raw.call(t, http.MethodGet, "/v1/sessions/"+se.ID, nil, &got)
		if got.State != "closed" {
			t.Errorf("GET deleted session: state %q, want closed", got.State)
		}
		if res := raw.exec(t, sb.ID, "ls -a /tmp/.genesis-sessions"); strings.Contains(res.Stdout, se.ID) {
			t.Errorf("the deleted session's saved state is still in the sandbox: %q", res.Stdout)
		}
	})
}

// createSession opens a shell session on a sandbox (201 expected).
func createSession(t *testing.T, raw *rawAPI, sandboxID string) client.Session {
	t.Helper()
	var se client.Session
	if status, p := raw.call(t, http.MethodPost, "/v1/sandboxes/"+sandboxID+"/sessions", nil, &se); status != http.StatusCreated || se.ID == "" || se.State != "active" {
		t.Fatalf("create session: %d %s %s (%+v)", status, p.Code, p.Detail, se)
	}
	return se
}

// runCode runs code in a context (200 expected).
func runCode(t *testing.T, raw *rawAPI, contextID, code string) client.RunCodeResult {
	t.Helper()
	var res client.RunCodeResult
	status, p := raw.call(t, http.MethodPost, "/v1/contexts/"+contextID+"/run", client.RunCodeRequest{Code: code, TimeoutMS: 180_000}, &res)
	if status != http.StatusOK {
		t.Fatalf("run %q: %d %s %s", code, status, p.Code, p.Detail)
	}
	return res
}

// testCodeContexts runs Python in a code context of the code-python-data
// profile (runsc at the profile's risk level, runc for low-risk code):
// variables persist between runs, stdout is captured, an exception comes
// back as an error with its traceback, and a matplotlib figure comes back
// as a PNG. A context in an image without Python is refused.
func testCodeContexts(t *testing.T, e *env, svc *service) {
	e.requireImage(t, "code-python-data")
	eachRuntime(t, e, func(t *testing.T, rt string) {
		raw := svc.raw()
		req := client.CreateSandboxRequest{Profile: "code-python-data", Runtime: rt}
		if rt == "runc" {
			req.RiskLevel = "low"
		}
		sb := e.createSandbox(t, req)
		var cx client.Session
		if status, p := raw.call(t, http.MethodPost, "/v1/sandboxes/"+sb.ID+"/contexts", client.CreateContextRequest{Language: "python"}, &cx); status != http.StatusCreated || cx.ID == "" {
			t.Fatalf("create context: %d %s %s", status, p.Code, p.Detail)
		}

		if res := runCode(t, raw, cx.ID, "x = 41"); res.Status != "ok" || res.Value != nil {
			t.Errorf("x = 41: %+v; want ok with no value", res)
		}
		if res := runCode(t, raw, cx.ID, "x + 1"); res.Status != "ok" || res.Value == nil || *res.Value != "42" {
			t.Errorf("x + 1: %+v; want value 42", res)
		}
		if res := runCode(t, raw, cx.ID, "print('hello', x)"); res.Status != "ok" || res.Stdout != "hello 41\n" {
			t.Errorf("print: status %s stdout %q; want hello 41", res.Status, res.Stdout)
		}
		res := runCode(t, raw, cx.ID, "1/0")
		if res.Status != "error" || res.Error == nil || res.Error.Name != "ZeroDivisionError" || !strings.Contains(strings.Join(res.Error.Traceback, "\n"), "ZeroDivisionError") {
			t.Errorf("1/0: %+v (error %+v); want status error, ZeroDivisionError with its traceback", res, res.Error)
		}
		start := time.Now()
		res = runCode(t, raw, cx.ID, "import matplotlib.pyplot as plt; plt.plot([1,2]);")
		t.Logf("matplotlib run took %v", time.Since(start).Round(time.Millisecond))
		if res.Status != "ok" || len(res.Outputs) == 0 || res.Outputs[0].MIME != "image/png" {
			t.Fatalf("matplotlib figure: status %s outputs %d error %+v stderr %q; want an image/png output", res.Status, len(res.Outputs), res.Error, res.Stderr)
		}
		img, err := base64.StdEncoding.DecodeString(res.Outputs[0].Data)
		if err != nil {
			t.Fatalf("figure data is not base64: %v", err)
		}
		if !bytes.HasPrefix(img, []byte("\x89PNG\r\n\x1a\n")) {
			t.Fatalf("figure is not a PNG: starts %q", img[:min(len(img), 16)])
		}
		cfg, err := png.DecodeConfig(bytes.NewReader(img))
		if err != nil || cfg.Width < 50 || cfg.Height < 50 {
			t.Errorf("figure PNG: %v, %dx%d; want a decodable image", err, cfg.Width, cfg.Height)
		}
		if res := runCode(t, raw, cx.ID, "x"); res.Value == nil || *res.Value != "41" {
			t.Errorf("x after the other runs: %+v; want 41", res)
		}

		if status, p := raw.call(t, http.MethodDelete, "/v1/contexts/"+cx.ID, nil, nil); status != http.StatusNoContent {
			t.Fatalf("delete context: %d %s", status, p.Code)
		}
		status, p, err := raw.try(http.MethodPost, "/v1/contexts/"+cx.ID+"/run", client.RunCodeRequest{Code: "x"}, nil)
		if err != nil || status != http.StatusConflict || p.Code != "session_closed" {
			t.Errorf("run in a deleted context: %d %q (%v); want 409 session_closed", status, p.Code, err)
		}

		// No Python in the image: the context cannot start.
		tb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt})
		status, p, err = raw.try(http.MethodPost, "/v1/sandboxes/"+tb.ID+"/contexts", client.CreateContextRequest{Language: "python"}, nil)
		if err != nil || status != http.StatusConflict || p.Code != "context_start_failed" {
			t.Errorf("context on tool-basic: %d %q %q (%v); want 409 context_start_failed", status, p.Code, p.Detail, err)
		}
	})
}
