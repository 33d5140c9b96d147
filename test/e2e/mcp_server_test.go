package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"genesis.dev/sandbox/client"

	"genesis.dev/sandbox/internal/testenv"
)

// sandboxMCP connects the Go SDK's client to the service's own MCP server
// (/v1/mcp/sandbox) with key.
func sandboxMCP(t *testing.T, svc *service, key string) (*sdk.ClientSession, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	cl := sdk.NewClient(&sdk.Implementation{Name: "e2e-sandbox-mcp", Version: "1"}, nil)
	return cl.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: svc.url() + "/v1/mcp/sandbox",
		HTTPClient: &http.Client{Transport: bearer{key, http.DefaultTransport}}}, nil)
}

// callTool calls a tool and decodes its structured output into out; it
// returns the result for its content and isError.
func callTool(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any, out any) *sdk.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if out != nil && !res.IsError {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: structured output %s: %v", name, b, err)
		}
	}
	return res
}

// SandboxState is the part of a sandbox tool's output the tests read.
type SandboxState struct {
	SandboxID string `json:"sandbox_id"`
	Runtime   string `json:"runtime"`
	State     string `json:"state"`
}

// sandboxStateAs is sandboxState with key.
func sandboxStateAs(t *testing.T, svc *service, key, id string) string {
	t.Helper()
	var sb struct {
		State string `json:"state"`
	}
	code, body := apiJSONAs(t, svc, key, "GET", "/v1/sandboxes/"+id, nil, &sb)
	if code != 200 {
		t.Fatalf("GET sandbox %s: %d %s", id, code, body)
	}
	return sb.State
}

// sandboxState is the sandbox's state through the HTTP API ("gone" when it
// is no longer found).
func sandboxState(t *testing.T, svc *service, id string) string {
	t.Helper()
	var sb struct {
		State string `json:"state"`
	}
	code, body := apiJSON(t, svc, "GET", "/v1/sandboxes/"+id, nil, &sb)
	switch code {
	case 200:
		return sb.State
	case 404:
		return "gone"
	}
	t.Fatalf("GET sandbox %s: %d %s", id, code, body)
	return ""
}

// TestMCPServer: the Go SDK's client connects to the service's own MCP
// server with the tenant's key, lists the tools, and under each runtime
// creates a sandbox, runs code twice in one context (state kept), runs a
// command, writes, reads and lists a file, and destroys the sandbox; a
// refusal by the risk policy is an isError result; a wrong key is 401
// before any MCP exchange; the session's sandboxes end with it unless kept;
// cancelling a long exec cancels its job.
func TestMCPServer(t *testing.T) {
	t.Parallel()
	const cappedKey = "capped-key-0123456789"
	e := newEnv(t, "tenants: {capped: {min_risk_level: high, quotas: {max_sandboxes: 1}, api_keys: ["+cappedKey+"]}}\n")
	e.requireImage(t, "code-python-data")
	svc := e.start(t)

	t.Run("wrong key", func(t *testing.T) {
		req, _ := http.NewRequest("POST", svc.url()+"/v1/mcp/sandbox", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
		req.Header.Set("Authorization", "Bearer wrong-key-0123456789")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 || resp.Header.Get("Mcp-Session-Id") != "" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
			t.Errorf("a wrong key: %d %v", resp.StatusCode, resp.Header)
		}
		if cs, err := sandboxMCP(t, svc, "wrong-key-0123456789"); err == nil {
			cs.Close()
			t.Error("the Go SDK's client connected with a wrong key")
		}
	})

	cs, err := sandboxMCP(t, svc, e.apiKey)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	tools, err := cs.ListTools(ctx, nil)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*sdk.Tool{}
	for _, tl := range tools.Tools {
		byName[tl.Name] = tl
	}
	for _, name := range []string{"create_sandbox", "destroy_sandbox", "exec", "run_code", "write_file", "read_file", "list_files", "search_files", "start_job", "job_logs", "browser", "preview_link", "snapshot_sandbox", "fork_sandbox", "rollback_sandbox", "pause_sandbox", "resume_sandbox", "computer"} {
		tl := byName[name]
		if tl == nil || tl.Description == "" || tl.InputSchema == nil || tl.Annotations == nil {
			t.Fatalf("tool %s: %+v", name, tl)
		}
	}
	if a := byName["destroy_sandbox"].Annotations; a.DestructiveHint == nil || !*a.DestructiveHint || !a.IdempotentHint || a.ReadOnlyHint {
		t.Errorf("destroy_sandbox annotations %+v", a)
	}
	if a := byName["read_file"].Annotations; !a.ReadOnlyHint {
		t.Errorf("read_file annotations %+v", a)
	}

	// The risk policy, as on HTTP: high risk never runs under runc.
	if res := callTool(t, cs, "create_sandbox", map[string]any{"profile": "code-python-data", "runtime": "runc", "risk_level": "high"}, nil); !res.IsError ||
		!strings.HasPrefix(toolText(res), "runtime_not_allowed:") {
		t.Errorf("high risk under runc: isError=%v %q", res.IsError, toolText(res))
	}

	// A tenant's own ceilings, as on HTTP: its minimum risk level keeps it
	// off runc, and its quota of one sandbox refuses a second.
	t.Run("tenant ceiling", func(t *testing.T) {
		capped, err := sandboxMCP(t, svc, cappedKey)
		if err != nil {
			t.Fatal(err)
		}
		defer capped.Close()
		if res := callTool(t, capped, "create_sandbox", map[string]any{"profile": "code-python-data", "runtime": "runc"}, nil); !res.IsError ||
			!strings.HasPrefix(toolText(res), "runtime_not_allowed:") {
			t.Errorf("runc for a tenant of min_risk_level high: %v %q", res.IsError, toolText(res))
		}
		var one struct {
			SandboxID string `json:"sandbox_id"`
			Runtime   string `json:"runtime"`
			RiskLevel string `json:"risk_level"`
		}
		callTool(t, capped, "create_sandbox", map[string]any{"profile": "code-python-data"}, &one)
		if one.Runtime != "runsc" || one.RiskLevel != "high" {
			t.Errorf("the capped tenant's sandbox %+v", one)
		}
		if res := callTool(t, capped, "create_sandbox", map[string]any{"profile": "code-python-data"}, nil); !res.IsError ||
			!strings.HasPrefix(toolText(res), "quota_exceeded:") {
			t.Errorf("a second sandbox over the tenant's quota: %v %q", res.IsError, toolText(res))
		}
		// Another tenant's sandbox is not found through this tenant's key.
		if res := callTool(t, cs, "destroy_sandbox", map[string]any{"sandbox_id": one.SandboxID}, nil); !res.IsError || !strings.Contains(toolText(res), "not_found") {
			t.Errorf("destroying another tenant's sandbox: %v %q", res.IsError, toolText(res))
		}
		if st := sandboxStateAs(t, svc, cappedKey, one.SandboxID); st != "ready" {
			t.Errorf("another tenant's destroy reached the capped tenant's sandbox: %s", st)
		}
	})

	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			var sb struct {
				SandboxID string `json:"sandbox_id"`
				Runtime   string `json:"runtime"`
				State     string `json:"state"`
			}
			callTool(t, cs, "create_sandbox", map[string]any{"profile": "code-python-data", "runtime": rt, "risk_level": "low"}, &sb)
			if sb.SandboxID == "" || sb.Runtime != rt || sb.State != "ready" {
				t.Fatalf("created %+v", sb)
			}
			defer apiJSON(t, svc, "DELETE", "/v1/sandboxes/"+sb.SandboxID, nil, nil)

			type run struct {
				ContextID string `json:"context_id"`
				Status    string `json:"status"`
				Value     string `json:"value"`
				Stdout    string `json:"stdout"`
			}
			var r1, r2 run
			callTool(t, cs, "run_code", map[string]any{"sandbox_id": sb.SandboxID, "code": "x = 41\nprint('set')"}, &r1)
			callTool(t, cs, "run_code", map[string]any{"sandbox_id": sb.SandboxID, "code": "x + 1"}, &r2)
			if r1.Status != "ok" || r1.ContextID == "" || !strings.Contains(r1.Stdout, "set") || r2.Status != "ok" || r2.ContextID != r1.ContextID || r2.Value != "42" {
				t.Errorf("runs %+v then %+v: want one context and 42", r1, r2)
			}

			var ex struct {
				ExitCode int    `json:"exit_code"`
				Stdout   string `json:"stdout"`
				Stderr   string `json:"stderr"`
			}
			res := callTool(t, cs, "exec", map[string]any{"sandbox_id": sb.SandboxID, "script": "echo out; echo err >&2; exit 3"}, &ex)
			if res.IsError || ex.ExitCode != 3 || ex.Stdout != "out\n" || ex.Stderr != "err\n" || !strings.Contains(toolText(res), "exit code 3") {
				t.Errorf("exec: %+v %q", ex, toolText(res))
			}

			callTool(t, cs, "write_file", map[string]any{"sandbox_id": sb.SandboxID, "path": "notes/hello.txt", "content": "hello from MCP\n"}, nil)
			var rf struct {
				Content string `json:"content"`
				Size    int64  `json:"size"`
			}
			callTool(t, cs, "read_file", map[string]any{"sandbox_id": sb.SandboxID, "path": "notes/hello.txt"}, &rf)
			if rf.Content != "hello from MCP\n" || rf.Size != 15 {
				t.Errorf("read back %+v", rf)
			}
			var ls struct {
				Entries []struct {
					Path string `json:"path"`
					Type string `json:"type"`
				} `json:"entries"`
			}
			callTool(t, cs, "list_files", map[string]any{"sandbox_id": sb.SandboxID, "path": "notes"}, &ls)
			if len(ls.Entries) != 1 || !strings.HasSuffix(ls.Entries[0].Path, "/notes/hello.txt") || ls.Entries[0].Type != "file" {
				t.Errorf("listing %+v", ls)
			}
			var found struct {
				Matches []struct {
					Path string `json:"path"`
					Line int    `json:"line"`
					Text string `json:"text"`
				} `json:"matches"`
			}
			callTool(t, cs, "search_files", map[string]any{"sandbox_id": sb.SandboxID, "path": "notes", "content": "from MCP"}, &found)
			if len(found.Matches) != 1 || !strings.HasSuffix(found.Matches[0].Path, "notes/hello.txt") || found.Matches[0].Line != 1 || found.Matches[0].Text != "hello from MCP" {
				t.Errorf("search %+v", found)
			}
			// The session's sandbox is listed as a resource, and its files
			// are read through the template.
			rctx, rcancel := context.WithTimeout(context.Background(), callTimeout)
			defer rcancel()
			resources, err := cs.ListResources(rctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			listed := false
			for _, r := range resources.Resources {
				listed = listed || r.URI == "sandbox://"+sb.SandboxID+"/"
			}
			if !listed {
				t.Errorf("the sandbox is not a listed resource: %+v", resources.Resources)
			}
			rr, err := cs.ReadResource(rctx, &sdk.ReadResourceParams{URI: "sandbox://" + sb.SandboxID + "/notes/hello.txt"})
			if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "hello from MCP\n" {
				t.Errorf("reading the file as a resource: %v %+v", err, rr)
			}
			dir, err := cs.ReadResource(rctx, &sdk.ReadResourceParams{URI: "sandbox://" + sb.SandboxID + "/notes/"})
			if err != nil || len(dir.Contents) != 1 || !strings.Contains(dir.Contents[0].Text, "hello.txt") {
				t.Errorf("reading the directory as a resource: %v %+v", err, dir)
			}
			if _, err := cs.ReadResource(rctx, &sdk.ReadResourceParams{URI: "sandbox://" + sb.SandboxID + "/notes/missing.txt"}); err == nil {
				t.Error("a missing file read as a resource")
			}
			// The file is the sandbox's, as the HTTP API sees it.
			if out := callTool(t, cs, "exec", map[string]any{"sandbox_id": sb.SandboxID, "command": []string{"cat", "notes/hello.txt"}}, &ex); ex.Stdout != "hello from MCP\n" {
				t.Errorf("cat: %q", toolText(out))
			}

			var job struct {
				JobID string `json:"job_id"`
			}
			callTool(t, cs, "start_job", map[string]any{"sandbox_id": sb.SandboxID, "script": "echo one; sleep 1; echo two"}, &job)
			var logs struct {
				Finished   bool   `json:"finished"`
				State      string `json:"state"`
				ExitCode   *int   `json:"exit_code"`
				Stdout     string `json:"stdout"`
				NextCursor int64  `json:"next_cursor"`
			}
			callTool(t, cs, "job_logs", map[string]any{"job_id": job.JobID, "wait_ms": 60000}, &logs)
			if !logs.Finished || logs.State != "succeeded" || logs.ExitCode == nil || *logs.ExitCode != 0 || logs.Stdout != "one\ntwo\n" || logs.NextCursor == 0 {
				t.Errorf("job logs %+v", logs)
			}

			var d struct {
				Destroyed bool `json:"destroyed"`
			}
			callTool(t, cs, "destroy_sandbox", map[string]any{"sandbox_id": sb.SandboxID}, &d)
			if st := sandboxState(t, svc, sb.SandboxID); !d.Destroyed || (st != "destroyed" && st != "gone") {
				t.Errorf("destroyed %v, state %s", d.Destroyed, st)
			}
			// A tool on a sandbox that is gone is an error the model reads.
			if res := callTool(t, cs, "exec", map[string]any{"sandbox_id": sb.SandboxID, "command": []string{"true"}}, nil); !res.IsError || toolText(res) == "" {
				t.Errorf("exec in a destroyed sandbox: %v %q", res.IsError, toolText(res))
			}
		})
	}

	// A preview link of a port a job serves opens it without the API key.
	t.Run("preview", func(t *testing.T) {
		var sb struct {
			SandboxID string `json:"sandbox_id"`
		}
		callTool(t, cs, "create_sandbox", map[string]any{"profile": "code-python-data", "runtime": "runsc"}, &sb)
		defer apiJSON(t, svc, "DELETE", "/v1/sandboxes/"+sb.SandboxID, nil, nil)
		callTool(t, cs, "write_file", map[string]any{"sandbox_id": sb.SandboxID, "path": "site/index.html", "content": "<h1>served from the sandbox</h1>"}, nil)
		callTool(t, cs, "start_job", map[string]any{"sandbox_id": sb.SandboxID, "command": []string{"python3", "-m", "http.server", "8000", "--directory", "site"}}, nil)
		var link struct {
			URL string `json:"url"`
		}
		callTool(t, cs, "preview_link", map[string]any{"sandbox_id": sb.SandboxID, "port": 8000, "ttl_seconds": 300}, &link)
		if !strings.Contains(link.URL, "8000-") {
			t.Fatalf("link %q", link.URL)
		}
		jar, _ := cookiejar.New(nil)
		hc := previewClient(svc)
		hc.Jar, hc.CheckRedirect = jar, nil
		testenv.Eventually(t, callTimeout, 200*time.Millisecond, "the preview link opens the port", func() (bool, string) {
			resp, err := hc.Get(link.URL)
			if err != nil {
				return false, err.Error()
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode == 200 && strings.Contains(string(b), "served from the sandbox"), fmt.Sprintf("%d %.200s", resp.StatusCode, b)
		})
	})

	// Under gVisor a fork keeps the code context's variables, and a sandbox
	// from a snapshot has the snapshot's files.
	t.Run("fork", func(t *testing.T) {
		var sb struct {
			SandboxID string `json:"sandbox_id"`
		}
		callTool(t, cs, "create_sandbox", map[string]any{"profile": "code-python-data", "runtime": "runsc"}, &sb)
		defer apiJSON(t, svc, "DELETE", "/v1/sandboxes/"+sb.SandboxID, nil, nil)
		var r struct {
			ContextID string `json:"context_id"`
			Status    string `json:"status"`
			Value     string `json:"value"`
		}
		callTool(t, cs, "run_code", map[string]any{"sandbox_id": sb.SandboxID, "code": "x = 41"}, &r)
		callTool(t, cs, "write_file", map[string]any{"sandbox_id": sb.SandboxID, "path": "state.txt", "content": "before"}, nil)
		var fork struct {
			Sandboxes []struct {
				SandboxID string `json:"sandbox_id"`
				Runtime   string `json:"runtime"`
			} `json:"sandboxes"`
			Errors []string `json:"errors"`
		}
		if res := callTool(t, cs, "fork_sandbox", map[string]any{"sandbox_id": sb.SandboxID}, &fork); res.IsError || len(fork.Sandboxes) != 1 {
			t.Fatalf("fork: %q %+v", toolText(res), fork)
		}
		child := fork.Sandboxes[0].SandboxID
		defer apiJSON(t, svc, "DELETE", "/v1/sandboxes/"+child, nil, nil)
		var rc struct {
			ContextID string `json:"context_id"`
			Status    string `json:"status"`
			Value     string `json:"value"`
		}
		callTool(t, cs, "run_code", map[string]any{"sandbox_id": child, "code": "x + 1"}, &rc)
		if rc.Status != "ok" || rc.Value != "42" || rc.ContextID == r.ContextID {
			t.Errorf("run in the fork: %+v (the source's context %s)", rc, r.ContextID)
		}

		var snap struct {
			SnapshotID string `json:"snapshot_id"`
		}
		if res := callTool(t, cs, "snapshot_sandbox", map[string]any{"sandbox_id": sb.SandboxID, "name": "mcp"}, &snap); res.IsError || snap.SnapshotID == "" {
			t.Fatalf("snapshot: %q %+v", toolText(res), snap)
		}
		defer apiJSON(t, svc, "DELETE", "/v1/snapshots/"+snap.SnapshotID, nil, nil)
		var from struct {
			SandboxID string `json:"sandbox_id"`
		}
		if res := callTool(t, cs, "create_sandbox", map[string]any{"snapshot_id": snap.SnapshotID}, &from); res.IsError || from.SandboxID == "" {
			t.Fatalf("create from the snapshot: %q", toolText(res))
		}
		defer apiJSON(t, svc, "DELETE", "/v1/sandboxes/"+from.SandboxID, nil, nil)
		var rf struct {
			Content string `json:"content"`
		}
		callTool(t, cs, "read_file", map[string]any{"sandbox_id": from.SandboxID, "path": "state.txt"}, &rf)
		if rf.Content != "before" {
			t.Errorf("the snapshot's file: %q", rf.Content)
		}
	})

	// snapshot → change a file → rollback: the file is the snapshot's
	// again under the same id; pause and resume keep the sandbox's files,
	// and a paused sandbox runs nothing. Under runc and runsc.
	t.Run("rollback", func(t *testing.T) {
		for _, rt := range e.runtimes(t) {
			t.Run(rt, func(t *testing.T) {
				var sb SandboxState
				callTool(t, cs, "create_sandbox", map[string]any{"profile": "code-python-data", "runtime": rt, "risk_level": "low"}, &sb)
				if sb.SandboxID == "" || sb.Runtime != rt {
					t.Fatalf("created %+v", sb)
				}
				defer apiJSON(t, svc, "DELETE", "/v1/sandboxes/"+sb.SandboxID, nil, nil)
				callTool(t, cs, "write_file", map[string]any{"sandbox_id": sb.SandboxID, "path": "state.txt", "content": "saved"}, nil)
				var snap struct {
					SnapshotID string `json:"snapshot_id"`
				}
				if res := callTool(t, cs, "snapshot_sandbox", map[string]any{"sandbox_id": sb.SandboxID}, &snap); res.IsError || snap.SnapshotID == "" {
					t.Fatalf("snapshot: %q", toolText(res))
				}
				defer apiJSON(t, svc, "DELETE", "/v1/snapshots/"+snap.SnapshotID, nil, nil)
				callTool(t, cs, "write_file", map[string]any{"sandbox_id": sb.SandboxID, "path": "state.txt", "content": "changed"}, nil)
				callTool(t, cs, "write_file", map[string]any{"sandbox_id": sb.SandboxID, "path": "after.txt", "content": "new"}, nil)
				var rb struct {
					SandboxState
					MemoryRestored *bool `json:"memory_restored"`
				}
				if res := callTool(t, cs, "rollback_sandbox", map[string]any{"sandbox_id": sb.SandboxID, "snapshot_id": snap.SnapshotID}, &rb); res.IsError ||
					rb.SandboxID != sb.SandboxID || rb.MemoryRestored == nil {
					t.Fatalf("rollback: %q %+v", toolText(res), rb)
				}
				var rf struct {
					Content string `json:"content"`
				}
				callTool(t, cs, "read_file", map[string]any{"sandbox_id": sb.SandboxID, "path": "state.txt"}, &rf)
				if rf.Content != "saved" {
					t.Errorf("state.txt after the rollback: %q, want the snapshot's", rf.Content)
				}
				if res := callTool(t, cs, "read_file", map[string]any{"sandbox_id": sb.SandboxID, "path": "after.txt"}, nil); !res.IsError || !strings.Contains(toolText(res), "not_found") {
					t.Errorf("a file made after the snapshot survived the rollback: %q", toolText(res))
				}
				if res := callTool(t, cs, "rollback_sandbox", map[string]any{"sandbox_id": sb.SandboxID, "snapshot_id": "snap_doesnotexist"}, nil); !res.IsError || !strings.Contains(toolText(res), "not_found") {
					t.Errorf("a rollback to a missing snapshot: %q", toolText(res))
				}

				var st SandboxState
				if res := callTool(t, cs, "pause_sandbox", map[string]any{"sandbox_id": sb.SandboxID}, &st); res.IsError || st.State != "paused" {
					t.Fatalf("pause: %q %+v", toolText(res), st)
				}
				if got := sandboxState(t, svc, sb.SandboxID); got != "paused" {
					t.Errorf("the API says %s after pause_sandbox", got)
				}
				if res := callTool(t, cs, "pause_sandbox", map[string]any{"sandbox_id": sb.SandboxID}, &st); res.IsError || st.State != "paused" {
					t.Errorf("pausing a paused sandbox: %q %+v", toolText(res), st)
				}
				if res := callTool(t, cs, "resume_sandbox", map[string]any{"sandbox_id": sb.SandboxID}, &st); res.IsError || st.State == "paused" {
					t.Fatalf("resume: %q %+v", toolText(res), st)
				}
				var ex struct {
					ExitCode int    `json:"exit_code"`
					Stdout   string `json:"stdout"`
				}
				if res := callTool(t, cs, "exec", map[string]any{"sandbox_id": sb.SandboxID, "command": []string{"cat", "state.txt"}}, &ex); res.IsError || ex.Stdout != "saved" {
					t.Errorf("exec after resume: %q %+v", toolText(res), ex)
				}
			})
		}
	})

	// The browser tool: actions in a browser profile's sandbox, the
	// screenshot as image content that decodes.
	t.Run("browser", func(t *testing.T) {
		e.requireImage(t, "browser-playwright")
		var sb struct {
			SandboxID string `json:"sandbox_id"`
			Runtime   string `json:"runtime"`
		}
		callTool(t, cs, "create_sandbox", map[string]any{"profile": "browser-playwright", "runtime": "runsc"}, &sb)
		defer apiJSON(t, svc, "DELETE", "/v1/sandboxes/"+sb.SandboxID, nil, nil)
		var out struct {
			OK      bool `json:"ok"`
			Results []struct {
				Type  string `json:"type"`
				OK    bool   `json:"ok"`
				Value any    `json:"value"`
			} `json:"results"`
		}
		res := callTool(t, cs, "browser", map[string]any{"sandbox_id": sb.SandboxID, "actions": []map[string]any{
			{"type": "evaluate", "expression": "document.body.innerHTML = '<h1 style=\"font-size:80px\">MCP</h1>'; document.body.style.background = 'rgb(255, 0, 0)'; 6 * 7"},
			{"type": "screenshot"},
		}}, &out)
		if res.IsError || !out.OK || len(out.Results) != 2 || out.Results[0].Value != float64(42) || out.Results[1].Value != "image 1" {
			t.Fatalf("browser: %v %q %+v", res.IsError, toolText(res), out)
		}
		var img *sdk.ImageContent
		for _, c := range res.Content {
			if ic, ok := c.(*sdk.ImageContent); ok {
				img = ic
			}
		}
		if img == nil || img.MIMEType != "image/png" {
			t.Fatalf("no PNG image content: %+v", res.Content)
		}
		pic, err := png.Decode(bytes.NewReader(img.Data))
		if err != nil {
			t.Fatalf("the screenshot does not decode: %v", err)
		}
		if r, g, b, _ := pic.At(pic.Bounds().Max.X-5, pic.Bounds().Max.Y-5).RGBA(); r>>8 != 255 || g>>8 != 0 || b>>8 != 0 {
			t.Errorf("the screenshot's corner is %d,%d,%d, want the page's red", r>>8, g>>8, b>>8)
		}
		// A sandbox of another profile has no browser: an error the model reads.
		var plain struct {
			SandboxID string `json:"sandbox_id"`
		}
		callTool(t, cs, "create_sandbox", map[string]any{"profile": "code-python-data"}, &plain)
		defer apiJSON(t, svc, "DELETE", "/v1/sandboxes/"+plain.SandboxID, nil, nil)
		if res := callTool(t, cs, "browser", map[string]any{"sandbox_id": plain.SandboxID, "actions": []map[string]any{{"type": "screenshot"}}}, nil); !res.IsError ||
			!strings.HasPrefix(toolText(res), "not_a_browser_profile:") {
			t.Errorf("browser in a code sandbox: %v %q", res.IsError, toolText(res))
		}
	})

	// The computer tool: a screenshot of the desktop as image content; a
	// person holding the control refuses the agent's actions with an
	// error the model reads.
	t.Run("computer", func(t *testing.T) {
		e.requireImage(t, "desktop-vnc")
		var sb struct {
			SandboxID string `json:"sandbox_id"`
		}
		callTool(t, cs, "create_sandbox", map[string]any{"profile": "desktop-vnc", "runtime": "runsc"}, &sb)
		defer apiJSON(t, svc, "DELETE", "/v1/sandboxes/"+sb.SandboxID, nil, nil)
		var out struct {
			OK     bool `json:"ok"`
			Width  int  `json:"width"`
			Height int  `json:"height"`
		}
		res := callTool(t, cs, "computer", map[string]any{"sandbox_id": sb.SandboxID, "actions": []map[string]any{{"action": "mouse_move", "coordinate": []int{10, 10}}}, "screenshot": true}, &out)
		if res.IsError || !out.OK || out.Width == 0 {
			t.Fatalf("computer: %v %q %+v", res.IsError, toolText(res), out)
		}
		var img *sdk.ImageContent
		for _, c := range res.Content {
			if ic, ok := c.(*sdk.ImageContent); ok {
				img = ic
			}
		}
		if img == nil {
			t.Fatalf("no image content: %q", toolText(res))
		}
		pic, err := png.Decode(bytes.NewReader(img.Data))
		if err != nil || pic.Bounds().Dx() != out.Width || pic.Bounds().Dy() != out.Height {
			t.Fatalf("the screenshot: %v %v, display %dx%d", err, pic, out.Width, out.Height)
		}
		if code, body := apiJSON(t, svc, "POST", "/v1/sandboxes/"+sb.SandboxID+"/control", map[string]any{"holder": "human:alice", "reason": "captcha"}, nil); code != 200 {
			t.Fatalf("take control: %d %s", code, body)
		}
		res = callTool(t, cs, "computer", map[string]any{"sandbox_id": sb.SandboxID, "actions": []map[string]any{{"action": "left_click", "coordinate": []int{10, 10}}}}, nil)
		if !res.IsError || !strings.HasPrefix(toolText(res), "control_held:") {
			t.Errorf("an action while a person holds the control: %v %q", res.IsError, toolText(res))
		}
	})

	// The official TypeScript SDK's client, unmodified.
	t.Run("typescript", func(t *testing.T) {
		root := testenv.ModuleRoot(t)
		if _, err := os.Stat(filepath.Join(root, "test", "mcpclient", "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
			t.Fatalf("the TypeScript MCP SDK is not installed (make test-deps): %v", err)
		}
		for _, rt := range e.runtimes(t) {
			cmd := exec.CommandContext(callCtx(t), "node", filepath.Join(root, "test", "mcpclient", "sandbox.mjs"), svc.url()+"/v1/mcp/sandbox", e.apiKey, rt)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("the TypeScript client under %s: %v\n%s", rt, err, stderr.String())
			}
			var ts struct {
				Tools       []string                  `json:"tools"`
				Annotations map[string]map[string]any `json:"annotations"`
				Sandbox     struct {
					SandboxID string `json:"sandbox_id"`
					Runtime   string `json:"runtime"`
				} `json:"sandbox"`
				Contexts  []string `json:"contexts"`
				Value     string   `json:"value"`
				Read      string   `json:"read"`
				Destroyed bool     `json:"destroyed"`
				WrongKey  string   `json:"wrongKey"`
			}
			if err := json.Unmarshal(out, &ts); err != nil {
				t.Fatalf("TypeScript client output %q: %v", out, err)
			}
			if len(ts.Tools) != 18 || ts.Annotations["read_file"]["readOnlyHint"] != true || ts.Annotations["destroy_sandbox"]["destructiveHint"] != true ||
				ts.Annotations["rollback_sandbox"]["destructiveHint"] != true || ts.Annotations["pause_sandbox"]["idempotentHint"] != true {
				t.Errorf("TypeScript client's tools %v %v", ts.Tools, ts.Annotations)
			}
			if ts.Sandbox.Runtime != rt || len(ts.Contexts) != 2 || ts.Contexts[0] == "" || ts.Contexts[0] != ts.Contexts[1] || ts.Value != "42" ||
				ts.Read != "from typescript" || !ts.Destroyed || !strings.Contains(ts.WrongKey, "401") {
				t.Errorf("TypeScript client under %s saw %+v", rt, ts)
			}
			if st := sandboxState(t, svc, ts.Sandbox.SandboxID); st != "destroyed" && st != "gone" {
				t.Errorf("the TypeScript client's sandbox is %s", st)
			}
		}
	})

	// genesis mcp serve: a stdio-only client's session, bridged with the API
	// key; stdin's end ends the session and the sandbox it made.
	t.Run("stdio bridge", func(t *testing.T) {
		bridge := exec.CommandContext(callCtx(t), filepath.Join(binDir, "genesis"), "mcp", "serve")
		bridge.Env = append(os.Environ(), client.EnvURL+"="+svc.url(), client.EnvAPIKey+"="+e.apiKey)
		bridge.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"stdio-e2e","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"create_sandbox","arguments":{"profile":"code-python-data"}}}
`)
		var stderr bytes.Buffer
		bridge.Stderr = &stderr
		out, err := bridge.Output()
		if err != nil {
			t.Fatalf("genesis mcp serve: %v\n%s", err, stderr.String())
		}
		var created struct {
			ID     int `json:"id"`
			Result struct {
				IsError           bool `json:"isError"`
				StructuredContent struct {
					SandboxID string `json:"sandbox_id"`
				} `json:"structuredContent"`
			} `json:"result"`
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &created); err != nil || created.ID != 2 || created.Result.IsError || created.Result.StructuredContent.SandboxID == "" {
			t.Fatalf("bridge output %s: %v", out, err)
		}
		testenv.Eventually(t, callTimeout, 100*time.Millisecond, "the bridged session's sandbox ends with it", func() (bool, string) {
			st := sandboxState(t, svc, created.Result.StructuredContent.SandboxID)
			return st == "destroyed" || st == "gone", st
		})
		// A wrong key is refused before any MCP exchange.
		bad := exec.CommandContext(callCtx(t), filepath.Join(binDir, "genesis"), "mcp", "serve")
		bad.Env = append(os.Environ(), client.EnvURL+"="+svc.url(), client.EnvAPIKey+"=wrong-key-0123456789")
		bad.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"stdio-e2e","version":"1"}}}
`)
		if out, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(out), "API key is not valid") {
			t.Errorf("a wrong key through the bridge: %v %s", err, out)
		}
	})

	t.Run("session end", func(t *testing.T) {
		cs2, err := sandboxMCP(t, svc, e.apiKey)
		if err != nil {
			t.Fatal(err)
		}
		var owned, kept struct {
			SandboxID string `json:"sandbox_id"`
			Kept      bool   `json:"kept"`
		}
		callTool(t, cs2, "create_sandbox", map[string]any{"profile": "code-python-data"}, &owned)
		callTool(t, cs2, "create_sandbox", map[string]any{"profile": "code-python-data", "keep": true}, &kept)
		defer apiJSON(t, svc, "DELETE", "/v1/sandboxes/"+kept.SandboxID, nil, nil)
		if owned.SandboxID == "" || owned.Kept || !kept.Kept {
			t.Fatalf("created %+v and %+v", owned, kept)
		}

		// A long exec, cancelled by the client (notifications/cancelled),
		// cancels its job.
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := cs2.CallTool(ctx, &sdk.CallToolParams{Name: "exec", Arguments: map[string]any{"sandbox_id": owned.SandboxID, "command": []string{"sleep", "600"}}})
			done <- err
		}()
		var jobs struct {
			Items []struct {
				ID    string `json:"id"`
				State string `json:"state"`
			} `json:"items"`
		}
		testenv.Eventually(t, callTimeout, 100*time.Millisecond, "the exec's job runs", func() (bool, string) {
			code, body := apiJSON(t, svc, "GET", "/v1/sandboxes/"+owned.SandboxID+"/jobs?state=running", nil, &jobs)
			return len(jobs.Items) == 1, fmt.Sprintf("%d %s", code, body)
		})
		cancel()
		if err := <-done; err == nil {
			t.Error("the cancelled call returned no error")
		}
		jobID := jobs.Items[0].ID
		testenv.Eventually(t, callTimeout, 100*time.Millisecond, "the cancelled exec's job is canceled", func() (bool, string) {
			var j struct {
				State string `json:"state"`
			}
			code, body := apiJSON(t, svc, "GET", "/v1/jobs/"+jobID, nil, &j)
			return j.State == "canceled", fmt.Sprintf("%d %s", code, body)
		})

		// Ending the session (DELETE) destroys what it owned, not what it kept.
		if err := cs2.Close(); err != nil {
			t.Errorf("closing the session: %v", err)
		}
		testenv.Eventually(t, callTimeout, 100*time.Millisecond, "the session's sandbox ends with it", func() (bool, string) {
			st := sandboxState(t, svc, owned.SandboxID)
			return st == "destroyed" || st == "gone", st
		})
		if st := sandboxState(t, svc, kept.SandboxID); st != "ready" {
			t.Errorf("the kept sandbox is %s", st)
		}
		// Each tool call is in the audit log.
		var audit struct {
			Items []struct {
				Action string `json:"action"`
				Target string `json:"target"`
			} `json:"items"`
		}
		apiJSON(t, svc, "GET", "/v1/audit?action=mcp+create_sandbox", nil, &audit)
		found := false
		for _, a := range audit.Items {
			found = found || a.Target == kept.SandboxID
		}
		if !found {
			t.Errorf("no audit record of create_sandbox %s: %+v", kept.SandboxID, audit.Items)
		}
	})
}
