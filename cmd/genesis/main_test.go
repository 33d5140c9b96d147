package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// testNow is the clock of every CLI test.
func testNow() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }

// seen is one request the fake API received.
type seen struct {
	Method string
	Path   string
	Query  map[string][]string
	Header http.Header
	Body   string
}

// fakeAPI is a loopback API server whose answers come from handle.
type fakeAPI struct {
	URL    string
	mu     sync.Mutex
	reqs   []seen
	handle func(w http.ResponseWriter, r *http.Request, body []byte)
}

func newFakeAPI(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, body []byte)) *fakeAPI {
	t.Helper()
	f := &fakeAPI{handle: handle}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, seen{r.Method, r.URL.EscapedPath(), r.URL.Query(), r.Header.Clone(), string(b)})
		f.mu.Unlock()
		f.handle(w, r, b)
	}))
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

func (f *fakeAPI) requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.reqs...)
}

func (f *fakeAPI) only(t *testing.T) seen {
	t.Helper()
	r := f.requests()
	if len(r) != 1 {
		t.Fatalf("server saw %d requests, want 1: %+v", len(r), r)
	}
	return r[0]
}

// reply answers with a JSON body.
func reply(status int, body string) func(http.ResponseWriter, *http.Request, []byte) {
	return func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// problem answers with a problem+json body and a request id.
func problem(status int, code, detail string) func(http.ResponseWriter, *http.Request, []byte) {
	return func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("X-Request-ID", "req-42")
		w.WriteHeader(status)
		b, _ := json.Marshal(client.Problem{Title: http.StatusText(status), Status: status, Code: code, Detail: detail})
		_, _ = w.Write(b)
	}
}

// result is the outcome of one CLI run.
type result struct {
	stdout string
	stderr string
	code   int
}

// cli runs genesis in-process against url with the given stdin and
// environment (GENESIS_URL defaults to url, GENESIS_API_KEY to "k").
func cli(t *testing.T, url, stdin string, env map[string]string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	vars := map[string]string{client.EnvURL: url, client.EnvAPIKey: "k"}
	for k, v := range env {
		vars[k] = v
	}
	a := &app{
		stdin:  strings.NewReader(stdin),
		stdout: &out,
		stderr: &errb,
		getenv: func(k string) string { return vars[k] },
		now:    testNow,
	}
	code := run(context.Background(), args, a)
	return result{out.String(), errb.String(), code}
}

func jsonEqual(t *testing.T, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("got %q: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want %q: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("JSON = %s\nwant   %s", got, want)
	}
}

const sandboxJSON = `{"id":"sb-1","state":"ready","profile":"tool-basic","runtime":"runsc","risk_level":"high",
"image":"genesis/tool-basic:abc","resources":{"cpu":0.5,"memory_mb":256,"pids":64},"env_keys":["A"],
"metadata":{"team":"x"},"resource_version":"3","resourceVersion":"3","created_at":"2026-03-01T11:55:00Z",
"updated_at":"2026-03-01T11:56:00Z","expires_at":"2026-03-01T12:10:00Z"}`

func TestSandboxCreate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		wantBody   string
		wantHeader map[string]string
		wantOut    string // exact, or "" to check JSON output
	}{
		{
			name:     "minimal",
			args:     []string{"sandbox", "create", "--profile", "tool-basic"},
			wantBody: `{"profile":"tool-basic"}`,
			wantHeader: map[string]string{
				"Authorization": "Bearer k", "Idempotency-Key": "", "Content-Type": "application/json",
			},
			wantOut: "sb-1\n",
		},
		{
			name: "all flags",
			args: []string{"sandbox", "create", "--profile", "tool-basic", "--runtime", "runsc", "--risk", "high",
				"--cpu", "1.5", "--memory-mb", "512", "--pids", "100", "--disk-mb", "256", "--env", "A=1", "--env", "B=x=y,z",
				"--meta", "team=core", "--ttl", "10m", "--idempotency-key", "idem-9", "--api-key", "flag-key"},
			wantBody: `{"profile":"tool-basic","runtime":"runsc","risk_level":"high",
				"resources":{"cpu":1.5,"memory_mb":512,"pids":100,"disk_mb":256},"env":{"A":"1","B":"x=y,z"},
				"metadata":{"team":"core"},"ttl_seconds":600}`,
			wantHeader: map[string]string{"Authorization": "Bearer flag-key", "Idempotency-Key": "idem-9"},
			wantOut:    "sb-1\n",
		},
		{
			name:       "fractional ttl rounds up, key from env",
			args:       []string{"sandbox", "create", "--profile", "p", "--ttl", "1500ms"},
			env:        map[string]string{client.EnvAPIKey: "env-key"},
			wantBody:   `{"profile":"p","ttl_seconds":2}`,
			wantHeader: map[string]string{"Authorization": "Bearer env-key"},
			wantOut:    "sb-1\n",
		},
		{
			name:       "wait for capacity rounds up",
			args:       []string{"sandbox", "create", "--profile", "p", "--wait", "2500ms"},
			wantBody:   `{"profile":"p","wait_seconds":3}`,
			wantHeader: map[string]string{"Authorization": "Bearer k"},
			wantOut:    "sb-1\n",
		},
		{
			name:     "json output",
			args:     []string{"-o", "json", "sandbox", "create", "--profile", "tool-basic"},
			wantBody: `{"profile":"tool-basic"}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := newFakeAPI(t, reply(201, sandboxJSON))
			r := cli(t, api.URL, "", tc.env, tc.args...)
			if r.code != 0 {
				t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
			}
			req := api.only(t)
			if req.Method != "POST" || req.Path != "/v1/sandboxes" {
				t.Errorf("request %s %s", req.Method, req.Path)
			}
			jsonEqual(t, req.Body, tc.wantBody)
			for k, v := range tc.wantHeader {
				if got := req.Header.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			if tc.wantOut != "" {
				if r.stdout != tc.wantOut {
					t.Errorf("stdout = %q, want %q", r.stdout, tc.wantOut)
				}
			} else {
				jsonEqual(t, r.stdout, sandboxJSON)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"missing profile", []string{"sandbox", "create"}, "--profile is required"},
		{"bad env", []string{"sandbox", "create", "--profile", "p", "--env", "NOEQUALS"}, "--env wants KEY=VALUE"},
		{"negative memory", []string{"sandbox", "create", "--profile", "p", "--memory-mb", "-1"}, "must not be negative"},
		{"negative disk", []string{"sandbox", "create", "--profile", "p", "--disk-mb", "-1"}, "must not be negative"},
		{"bad cpu", []string{"sandbox", "create", "--profile", "p", "--cpu", "lots"}, "invalid argument"},
		{"unknown flag", []string{"sandbox", "ls", "--bogus"}, "unknown flag: --bogus"},
		{"unknown command", []string{"frobnicate"}, "unknown command"},
		{"bad output", []string{"-o", "yaml", "profiles"}, "--output must be"},
		{"bad url", []string{"--url", "localhost:8080", "profiles"}, "scheme must be http or https"},
		{"get without id", []string{"sandbox", "get"}, "one sandbox id"},
		{"rm without id", []string{"sandbox", "rm"}, "at least one sandbox id"},
		{"exec without command", []string{"exec", "sb-1"}, "no command"},
		{"exec command and script", []string{"exec", "sb-1", "--script", "ls", "--", "ls"}, "not both"},
		{"exec dash first", []string{"exec", "--", "ls"}, "SANDBOX must come before --"},
		{"exec bad flag before dash", []string{"exec", "sb-1", "ls", "-la"}, "unknown shorthand flag"},
		{"exec bad stdin file", []string{"exec", "--stdin-file", "/nonexistent/x", "sb-1", "--", "cat"}, "--stdin-file"},
		{"empty sandbox id", []string{"sandbox", "get", ""}, "argument 1 is empty"},
		{"empty id among many", []string{"sandbox", "rm", "sb-1", ""}, "argument 2 is empty"},
		{"empty exec sandbox", []string{"exec", "", "--", "true"}, "argument 1 is empty"},
		{"bad meta filter", []string{"sandbox", "ls", "--meta", "=v"}, "--meta wants KEY=VALUE"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := newFakeAPI(t, reply(200, `{}`))
			r := cli(t, api.URL, "", nil, tc.args...)
			if r.code != 2 {
				t.Errorf("exit %d, want 2 (stderr %q)", r.code, r.stderr)
			}
			if !strings.HasPrefix(r.stderr, "genesis: ") || !strings.Contains(r.stderr, tc.wantErr) {
				t.Errorf("stderr = %q, want it to mention %q", r.stderr, tc.wantErr)
			}
			if n := len(api.requests()); n != 0 {
				t.Errorf("a usage error sent %d requests", n)
			}
		})
	}
}

func TestSandboxList(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, reply(200, `{"items":[`+sandboxJSON+`,{"id":"sb-2","state":"failed","profile":"p","metadata":{}}]}`))
	r := cli(t, api.URL, "", nil, "sandbox", "ls", "--state", "ready,idle", "--state", "failed",
		"--profile", "tool-basic", "--meta", "team=core", "--meta", "k=a=b")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	req := api.only(t)
	if req.Method != "GET" || req.Path != "/v1/sandboxes" {
		t.Errorf("request %s %s", req.Method, req.Path)
	}
	wantQuery := map[string][]string{
		"state":    {"ready", "idle", "failed"},
		"profile":  {"tool-basic"},
		"metadata": {"k=a=b", "team=core"},
	}
	if !reflect.DeepEqual(req.Query, wantQuery) {
		t.Errorf("query = %v, want %v", req.Query, wantQuery)
	}
	want := "" +
		"ID    STATE   PROFILE     RUNTIME  RISK  AGE  EXPIRES\n" +
		"sb-1  ready   tool-basic  runsc    high  5m   in 10m\n" +
		"sb-2  failed  p           -        -     -    -\n"
	if r.stdout != want {
		t.Errorf("table =\n%s\nwant\n%s", r.stdout, want)
	}
}

func TestSandboxGet(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, reply(200, sandboxJSON))
	r := cli(t, api.URL, "", nil, "sandbox", "get", "sb-1")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if req := api.only(t); req.Path != "/v1/sandboxes/sb-1" || req.Method != "GET" {
		t.Errorf("request %s %s", req.Method, req.Path)
	}
	for _, want := range []string{
		"ID:          sb-1\n", "State:       ready\n", "Resources:   cpu 0.5, memory 256 MiB, pids 64\n",
		"Metadata:    team=x\n", "Env keys:    A\n", "Version:     3\n",
		"Expires:     2026-03-01T12:10:00Z (in 10m)\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "Failure") {
		t.Errorf("empty field printed:\n%s", r.stdout)
	}

	r = cli(t, api.URL, "", nil, "sandbox", "get", "-o", "json", "sb-1")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	jsonEqual(t, r.stdout, sandboxJSON)
}

// TestSandboxGetReserved: a sandbox reserved to an MCP server that holds
// operator secrets says so.
func TestSandboxGetReserved(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, reply(200, strings.Replace(sandboxJSON, `"id":"sb-1"`, `"id":"sb-1","reserved":"mcp:mcp_x"`, 1)))
	r := cli(t, api.URL, "", nil, "sandbox", "get", "sb-1")
	if r.code != 0 || !regexp.MustCompile(`(?m)^Reserved: +mcp:mcp_x$`).MatchString(r.stdout) {
		t.Errorf("exit %d, output:\n%s", r.code, r.stdout)
	}
}

func TestAPIErrorReporting(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, problem(404, "not_found", "sandbox sb-9 not found"))
	r := cli(t, api.URL, "", nil, "sandbox", "get", "sb-9")
	if r.code != 1 {
		t.Errorf("exit %d, want 1", r.code)
	}
	if want := "genesis: sandbox sb-9 not found (not_found, request id req-42)\n"; r.stderr != want {
		t.Errorf("stderr = %q, want %q", r.stderr, want)
	}
	if r.stdout != "" {
		t.Errorf("stdout = %q", r.stdout)
	}

	api = newFakeAPI(t, reply(502, `<html>bad gateway</html>`))
	r = cli(t, api.URL, "", nil, "profiles")
	if r.code != 1 || !strings.Contains(r.stderr, "(http 502)") {
		t.Errorf("non-problem error: exit %d stderr %q", r.code, r.stderr)
	}
}

func TestCallTimeout(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		<-r.Context().Done() // never answers; the client must give up
	})
	start := time.Now()
	r := cli(t, api.URL, "", nil, "--timeout", "100ms", "profiles")
	if r.code != 1 || !strings.Contains(r.stderr, "see --timeout") {
		t.Errorf("exit %d stderr %q", r.code, r.stderr)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v", d)
	}
}

func TestSandboxRemove(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, b []byte) {
		if strings.HasSuffix(r.URL.Path, "/missing") {
			problem(404, "not_found", "sandbox missing not found")(w, r, b)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	r := cli(t, api.URL, "", nil, "sandbox", "rm", "sb-1", "missing", "sb-2")
	if r.code != 1 {
		t.Errorf("exit %d, want 1", r.code)
	}
	if r.stdout != "sb-1\nsb-2\n" {
		t.Errorf("stdout = %q", r.stdout)
	}
	if want := "genesis: missing: sandbox missing not found (not_found, request id req-42)\n"; r.stderr != want {
		t.Errorf("stderr = %q, want %q", r.stderr, want)
	}
	var paths []string
	for _, q := range api.requests() {
		if q.Method != "DELETE" {
			t.Errorf("method %s", q.Method)
		}
		paths = append(paths, q.Path)
	}
	if want := []string{"/v1/sandboxes/sb-1", "/v1/sandboxes/missing", "/v1/sandboxes/sb-2"}; !reflect.DeepEqual(paths, want) {
		t.Errorf("paths = %v", paths)
	}

	r = cli(t, api.URL, "", nil, "-o", "json", "sandbox", "rm", "sb-1")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	jsonEqual(t, r.stdout, `{"deleted":["sb-1"]}`)
}

func TestExecRequestMapping(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	inFile := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(inFile, []byte("from file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		args     []string
		stdin    string
		wantBody string
	}{
		{
			name:     "argv after dash",
			args:     []string{"exec", "sb-1", "--", "ls", "-la", "/tmp"},
			wantBody: `{"command":["ls","-la","/tmp"]}`,
		},
		{
			name:     "argv without dash",
			args:     []string{"exec", "sb-1", "true"},
			wantBody: `{"command":["true"]}`,
		},
		{
			name: "all flags",
			args: []string{"exec", "--timeout", "500ms", "--cwd", "/work", "--env", "A=1", "--env", "B=2",
				"--max-output-bytes", "4096", "sb-1", "--", "sh", "-c", "echo $A"},
			wantBody: `{"command":["sh","-c","echo $A"],"cwd":"/work","env":{"A":"1","B":"2"},"timeout_ms":500,"max_output_bytes":4096}`,
		},
		{
			name:     "script after sandbox",
			args:     []string{"exec", "sb-1", "--script", "echo hi | wc -c"},
			wantBody: `{"script":"echo hi | wc -c"}`,
		},
		{
			name:     "stdin from dash",
			args:     []string{"exec", "--stdin-file", "-", "sb-1", "--", "cat"},
			stdin:    "hello\x00world\n",
			wantBody: `{"command":["cat"],"stdin":"hello\u0000world\n"}`,
		},
		{
			name:     "stdin from file",
			args:     []string{"exec", "--stdin-file", inFile, "sb-1", "--", "cat"},
			wantBody: `{"command":["cat"],"stdin":"from file\n"}`,
		},
		{
			name:     "global timeout position still means the job timeout",
			args:     []string{"--timeout", "2s", "exec", "sb-1", "--", "true"},
			wantBody: `{"command":["true"],"timeout_ms":2000}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := newFakeAPI(t, reply(200, `{"job_id":"j-1","exit_code":0,"exit_reason":"exited","stdout":"","stderr":""}`))
			r := cli(t, api.URL, tc.stdin, nil, tc.args...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			req := api.only(t)
			if req.Method != "POST" || req.Path != "/v1/sandboxes/sb-1/exec" {
				t.Errorf("request %s %s", req.Method, req.Path)
			}
			jsonEqual(t, req.Body, tc.wantBody)
		})
	}
}

func TestExecBinaryStdinGoesAsBase64(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, reply(200, `{"job_id":"j-1","exit_code":0,"exit_reason":"exited","stdout":"","stderr":""}`))
	r := cli(t, api.URL, "\xff\xfe\x00a", nil, "exec", "--stdin-file", "-", "sb-1", "--", "cat")
	if r.code != 0 {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	jsonEqual(t, api.only(t).Body, `{"command":["cat"],"stdin_base64":"//4AYQ=="}`)
}

func TestExecOutputAndExitStatus(t *testing.T) {
	t.Parallel()
	binOut := []byte{0xff, 0x00, 'o', 'k', '\n'}
	tests := []struct {
		name       string
		args       []string
		res        client.ExecResult
		wantOut    string
		wantErr    string
		wantCode   int
		wantNoWarn bool
	}{
		{
			name:     "exited zero",
			res:      client.ExecResult{ExitReason: "exited", Stdout: "out\n", Stderr: "err\n"},
			wantOut:  "out\n",
			wantErr:  "err\n",
			wantCode: 0,
		},
		{
			name:     "exited non-zero",
			res:      client.ExecResult{ExitReason: "exited", ExitCode: 3, Stdout: "a", Stderr: "b"},
			wantOut:  "a",
			wantErr:  "b",
			wantCode: 3,
		},
		{
			name: "base64 preferred for exact bytes",
			res: client.ExecResult{
				ExitReason: "exited", Stdout: "\uFFFD\x00ok\n", StdoutBase64: base64.StdEncoding.EncodeToString(binOut),
				Stderr: "x", StderrBase64: base64.StdEncoding.EncodeToString([]byte{0xc3}),
			},
			wantOut: string(binOut),
			wantErr: "\xc3",
		},
		{
			name:     "timeout",
			args:     []string{"--timeout", "500ms"},
			res:      client.ExecResult{ExitReason: "timeout", ExitCode: 137, Stdout: "partial"},
			wantOut:  "partial",
			wantErr:  "genesis: job timed out after 500ms\n",
			wantCode: 124,
		},
		{
			name: "timeout without a flag uses the duration",
			res:  client.ExecResult{ExitReason: "timeout", ExitCode: -1, DurationMS: 1500},
			wantErr: "genesis: job timed out after 1.5s\n" +
				"hint: that is the service's default time limit: give a longer --timeout, or start a server or other long work with --background (no time limit)\n",
			wantCode: 124,
		},
		{
			name:     "signal name",
			res:      client.ExecResult{ExitReason: "signal", ExitCode: -1, Signal: "SIGKILL"},
			wantErr:  "genesis: job killed by signal SIGKILL\n",
			wantCode: 137,
		},
		{
			name:     "signal number",
			res:      client.ExecResult{ExitReason: "signal", Signal: "15"},
			wantErr:  "genesis: job killed by signal 15\n",
			wantCode: 143,
		},
		{
			name:     "signal only in exit code",
			res:      client.ExecResult{ExitReason: "signal", ExitCode: 139},
			wantErr:  "genesis: job killed by signal -\n",
			wantCode: 139,
		},
		{
			name:     "oom",
			res:      client.ExecResult{ExitReason: "oom", ExitCode: 137},
			wantErr:  "genesis: job killed: out of memory\n",
			wantCode: 137,
		},
		{
			name:     "canceled with zero code is not success",
			res:      client.ExecResult{ExitReason: "canceled"},
			wantErr:  "genesis: job canceled\n",
			wantCode: 1,
		},
		{
			name: "truncated",
			res: client.ExecResult{
				ExitReason: "exited", Stdout: "abc", StdoutTruncated: true, StdoutBytes: 10,
				Stderr: "e", StderrTruncated: true, StderrBytes: 99,
			},
			wantOut: "abc",
			wantErr: "e" +
				"genesis: stdout truncated: 10 bytes produced, the rest was dropped\n" +
				"genesis: stderr truncated: 99 bytes produced, the rest was dropped\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.res.JobID = "j-1"
			body, err := json.Marshal(tc.res)
			if err != nil {
				t.Fatal(err)
			}
			api := newFakeAPI(t, reply(200, string(body)))
			args := append([]string{"exec"}, tc.args...)
			r := cli(t, api.URL, "", nil, append(args, "sb-1", "--", "cmd")...)
			if r.code != tc.wantCode {
				t.Errorf("exit %d, want %d", r.code, tc.wantCode)
			}
			if r.stdout != tc.wantOut {
				t.Errorf("stdout = %q, want %q", r.stdout, tc.wantOut)
			}
			if r.stderr != tc.wantErr {
				t.Errorf("stderr = %q, want %q", r.stderr, tc.wantErr)
			}
		})
	}
}

func TestExecJSONOutputKeepsExitStatus(t *testing.T) {
	t.Parallel()
	body := `{"job_id":"j-1","exit_code":7,"exit_reason":"exited","stdout":"x","stderr":"","stdout_truncated":false,"stderr_truncated":false,"stdout_bytes":1,"stderr_bytes":0,"duration_ms":5}`
	api := newFakeAPI(t, reply(200, body))
	r := cli(t, api.URL, "", nil, "-o", "json", "exec", "sb-1", "--", "x")
	if r.code != 7 {
		t.Errorf("exit %d, want 7", r.code)
	}
	jsonEqual(t, r.stdout, body)
}

func TestExecSandboxNotRunning(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, problem(409, "failed_precondition", "sandbox sb-1 is draining"))
	r := cli(t, api.URL, "", nil, "exec", "sb-1", "--", "true")
	if r.code != 1 {
		t.Errorf("exit %d, want 1", r.code)
	}
	if want := "genesis: sandbox sb-1 is draining (failed_precondition, request id req-42)\n"; r.stderr != want {
		t.Errorf("stderr = %q, want %q", r.stderr, want)
	}
}

func TestJobGet(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, reply(200, `{"id":"j-1","sandbox_id":"sb-1","state":"failed",
		"command":["sh","-c","sleep 5; echo 'x'"],"exit_code":137,"exit_reason":"timeout",
		"stdout_bytes":12,"stderr_bytes":0,"stdout_truncated":true,"timeout_ms":500,
		"created_at":"2026-03-01T11:00:00Z","started_at":"2026-03-01T11:00:01Z","finished_at":"2026-03-01T11:00:01.5Z"}`))
	r := cli(t, api.URL, "", nil, "job", "get", "j-1")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if req := api.only(t); req.Path != "/v1/jobs/j-1" {
		t.Errorf("path %s", req.Path)
	}
	for _, want := range []string{
		"Sandbox:   sb-1\n",
		`Command:   sh -c 'sleep 5; echo '\''x'\'''` + "\n",
		"Exit:      137 (timeout)\n",
		"Stdout:    12 bytes (truncated)\n",
		"Timeout:   500ms\n",
		"Duration:  500ms\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
}

const capsJSON = `{"driver":"docker","healthy":true,"daemon_version":"27.3.1","api_version":"1.47",
"kernel_version":"6.8.0","cgroup_version":"2",
"runtimes":[{"name":"runc","version":"1.1.12","healthy":true,"smoke_ms":80,"checked_at":"2026-03-01T11:00:00Z",
"features":{"pause":{"supported":true},"fs_snapshot":{"supported":true},"memory_checkpoint":{"supported":false,"reason":"runc keeps files only"}}},
{"name":"runsc","healthy":false,"error":"runsc not found in PATH","checked_at":"2026-03-01T11:00:00Z"}],
"checkpoint":{"supported":false,"enforced":false,"reason":"criu missing"},
"disk_quota":{"supported":true,"enforced":true,"method":"xfs-prjquota"},
"risk_policy":{"high":["runsc"],"low":["runc","runsc"],"untrusted":[]},
"profiles":[{"name":"tool-basic","description":"shell tools","image":"genesis/tool-basic:1","image_status":"present",
"allowed_runtimes":["runc","runsc"],"usable_runtimes":["runc"],"default_resources":{},"network":"none","user":"1000","read_only_root":true},
{"name":"python","description":"CPython","image":"genesis/python:1","image_status":"not_built","build_command":"make image-python",
"allowed_runtimes":["runsc"],"usable_runtimes":[],"default_resources":{},"network":"none","user":"1000","read_only_root":true}],
"checked_at":"2026-03-01T11:00:00Z"}`

func TestCapabilities(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, reply(200, capsJSON))
	r := cli(t, api.URL, "", nil, "capabilities")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if req := api.only(t); req.Path != "/v1/capabilities" || req.Header.Get("Authorization") != "Bearer k" {
		t.Errorf("request %s auth %q", req.Path, req.Header.Get("Authorization"))
	}
	for _, want := range []string{
		"Driver:          docker (healthy)\n",
		"Daemon version:  27.3.1 (API 1.47)\n",
		"Cgroup:          v2\n",
		"Checkpoint:      not supported: criu missing\n",
		"Disk quota:      supported, enforced (xfs-prjquota)\n",
		"  runc   healthy    1.1.12  smoke test 80ms; keeps state: pause, files\n",
		"  runsc  unhealthy  -       runsc not found in PATH\n",
		"  low        runc, runsc\n  high       runsc\n  untrusted  none on this host\n", // by risk, not by name
		"  tool-basic  present    runc (unusable: runsc)  none     shell tools\n",
		"  python      not built  - (unusable: runsc)     none     CPython\n",
		"  python: image genesis/python:1 is not built (make image-python)\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}

	r = cli(t, api.URL, "", nil, "capabilities", "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var got client.Capabilities
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatal(err)
	}
	if got.Driver != "docker" || len(got.Profiles) != 2 || got.DiskQuota.Method != "xfs-prjquota" {
		t.Errorf("json = %+v", got)
	}
}

func TestProfiles(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, reply(200, `{"items":[{"name":"tool-basic","image":"i","image_status":"present",
		"allowed_runtimes":["runc"],"usable_runtimes":["runc"],"network":"none","description":"d"}]}`))
	r := cli(t, api.URL, "", nil, "profiles")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	want := "NAME        IMAGE    RUNTIMES  NETWORK  DESCRIPTION\n" +
		"tool-basic  present  runc      none     d\n"
	if r.stdout != want {
		t.Errorf("stdout =\n%q\nwant\n%q", r.stdout, want)
	}
	if req := api.only(t); req.Path != "/v1/profiles" {
		t.Errorf("path %s", req.Path)
	}
}

func TestURLFlagOverridesEnv(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, reply(200, `{"items":[]}`))
	r := cli(t, "http://127.0.0.1:1", "", nil, "--url", api.URL, "profiles")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	api.only(t)
}

func TestVersion(t *testing.T) {
	t.Parallel()
	r := cli(t, "http://127.0.0.1:1", "", nil, "version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "genesis ") {
		t.Errorf("exit %d stdout %q", r.code, r.stdout)
	}
	r = cli(t, "http://127.0.0.1:1", "", nil, "version", "-o", "json")
	var v versionInfo
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.Version == "" || v.Go == "" {
		t.Errorf("json %q: %v", r.stdout, err)
	}
}

func TestJobExitStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		res  client.ExecResult
		want int
	}{
		{client.ExecResult{ExitReason: "exited", ExitCode: 0}, 0},
		{client.ExecResult{ExitReason: "exited", ExitCode: 255}, 255},
		{client.ExecResult{ExitReason: "exited", ExitCode: 256}, 1},
		{client.ExecResult{ExitReason: "exited", ExitCode: -3}, 1},
		{client.ExecResult{ExitReason: "timeout", ExitCode: 0}, 124},
		{client.ExecResult{ExitReason: "signal", Signal: "SIGSEGV"}, 139},
		{client.ExecResult{ExitReason: "signal", Signal: "hup"}, 129},
		{client.ExecResult{ExitReason: "signal", Signal: "weird"}, 1},
		{client.ExecResult{ExitReason: "lost"}, 1},
		{client.ExecResult{ExitReason: "oom", ExitCode: 137}, 137},
	}
	for _, tc := range tests {
		if got := jobExitStatus(endOfResult(&tc.res)); got != tc.want {
			t.Errorf("jobExitStatus(%+v) = %d, want %d", tc.res, got, tc.want)
		}
	}
}

func TestE2B(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, reply(200, `[{"sandboxID":"sbx_1","templateID":"base","state":"running","endAt":"2026-03-01T12:10:00Z"}]`))
	r := cli(t, api.URL, "", nil, "e2b", "env")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	req := api.only(t)
	if req.Method != "GET" || req.Path != "/e2b/v2/sandboxes" || req.Header.Get("X-API-KEY") != "k" {
		t.Errorf("request %s %s key %q", req.Method, req.Path, req.Header.Get("X-API-KEY"))
	}
	want := "export E2B_API_KEY=e2b_k\nexport E2B_API_URL=" + api.URL + "/e2b\nexport E2B_SANDBOX_URL=" + api.URL + "/e2b\nexport E2B_VALIDATE_API_KEY=false\n"
	if r.stdout != want {
		t.Errorf("env =\n%s\nwant\n%s", r.stdout, want)
	}
	if r := cli(t, api.URL, "", nil, "e2b", "ls"); r.code != 0 || !strings.Contains(r.stdout, "sbx_1") || !strings.Contains(r.stdout, "base") {
		t.Errorf("ls: %d %q %s", r.code, r.stdout, r.stderr)
	}
	gone := newFakeAPI(t, reply(404, `{"code":404,"message":"no such route"}`))
	if r := cli(t, gone.URL, "", nil, "e2b", "env"); r.code == 0 || r.stdout != "" {
		t.Errorf("env against a service without the adapter: exit %d, stdout %q", r.code, r.stdout)
	}
}
