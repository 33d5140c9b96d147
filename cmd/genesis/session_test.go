package main

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const sessionJSON = `{"id":"ses-1","sandbox_id":"sb-1","kind":"shell","state":"active","last_job_id":"job-4",
"runs":2,"created_at":"2026-03-01T11:00:00Z","updated_at":"2026-03-01T11:30:00Z"}`

func TestSession(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, b []byte) {
		switch r.Method + " " + r.URL.Path {
		case "POST /v1/sandboxes/sb-1/sessions":
			reply(201, sessionJSON)(w, r, b)
		case "GET /v1/sessions/ses-1":
			reply(200, sessionJSON)(w, r, b)
		case "POST /v1/sessions/ses-1/exec":
			reply(200, `{"job_id":"job-5","exit_code":4,"exit_reason":"exited","stdout":"/tmp\n","stderr":"e"}`)(w, r, b)
		case "DELETE /v1/sessions/ses-1":
			w.WriteHeader(http.StatusNoContent)
		default:
			problem(404, "not_found", "no "+r.URL.Path)(w, r, b)
		}
	})

	r := cli(t, api.URL, "", nil, "session", "create", "sb-1")
	if r.code != 0 || r.stdout != "ses-1\n" {
		t.Errorf("create: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	if req := api.requests()[0]; req.Body != "" {
		t.Errorf("create sent a body %q", req.Body)
	}

	r = cli(t, api.URL, "", nil, "session", "get", "ses-1")
	for _, want := range []string{"ID:        ses-1\n", "Kind:      shell\n", "Runs:      2\n", "Last job:  job-4\n", "Updated:   2026-03-01T11:30:00Z\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("get output lacks %q:\n%s", want, r.stdout)
		}
	}

	r = cli(t, api.URL, "", nil, "session", "exec", "--env", "A=1", "ses-1", "--", "pwd")
	if r.code != 4 || r.stdout != "/tmp\n" || r.stderr != "e" {
		t.Errorf("exec: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	reqs := api.requests()
	jsonEqual(t, reqs[len(reqs)-1].Body, `{"command":["pwd"],"env":{"A":"1"}}`)

	r = cli(t, api.URL, "", nil, "session", "exec", "ses-1", "--script", "cd /tmp")
	jsonEqual(t, api.requests()[len(api.requests())-1].Body, `{"script":"cd /tmp"}`)

	r = cli(t, api.URL, "", nil, "session", "rm", "ses-1", "ses-9")
	if r.code != 1 || r.stdout != "ses-1\n" || !strings.Contains(r.stderr, "ses-9: no /v1/sessions/ses-9") {
		t.Errorf("rm: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	r = cli(t, api.URL, "", nil, "-o", "json", "session", "rm", "ses-1")
	jsonEqual(t, r.stdout, `{"deleted":["ses-1"]}`)
}

func TestContext(t *testing.T) {
	t.Parallel()
	ctxJSON := strings.ReplaceAll(strings.ReplaceAll(sessionJSON, "ses-1", "ctx-1"), `"shell"`, `"python"`)
	api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, b []byte) {
		switch r.Method + " " + r.URL.Path {
		case "POST /v1/sandboxes/sb-1/contexts":
			reply(201, ctxJSON)(w, r, b)
		case "POST /v1/sandboxes/sb-2/contexts":
			problem(409, "context_start_failed", "profile tool-basic has no python3; use a code-python-* profile")(w, r, b)
		case "GET /v1/contexts/ctx-1":
			reply(200, ctxJSON)(w, r, b)
		case "DELETE /v1/contexts/ctx-1":
			w.WriteHeader(http.StatusNoContent)
		default:
			problem(404, "not_found", "no "+r.URL.Path)(w, r, b)
		}
	})
	r := cli(t, api.URL, "", nil, "context", "create", "sb-1")
	if r.code != 0 || r.stdout != "ctx-1\n" {
		t.Errorf("create: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	jsonEqual(t, api.requests()[0].Body, `{"language":"python"}`)

	r = cli(t, api.URL, "", nil, "context", "create", "sb-2")
	if r.code != 1 || !strings.Contains(r.stderr, "has no python3; use a code-python-* profile (context_start_failed") {
		t.Errorf("create without python: exit %d stderr %q", r.code, r.stderr)
	}
	r = cli(t, api.URL, "", nil, "context", "get", "ctx-1")
	if r.code != 0 || !strings.Contains(r.stdout, "Kind:      python\n") {
		t.Errorf("get: exit %d stdout %q", r.code, r.stdout)
	}
	r = cli(t, api.URL, "", nil, "context", "rm", "ctx-1")
	if r.code != 0 || r.stdout != "ctx-1\n" {
		t.Errorf("rm: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestRunCode(t *testing.T) {
	t.Parallel()
	png := []byte("\x89PNG\r\n\x1a\n fake image bytes")
	okRun := `{"job_id":"job-1","status":"ok","stdout":"hello\n","stderr":"","value":"42","outputs":[
		{"mime":"image/png","data":"` + base64.StdEncoding.EncodeToString(png) + `"},{"mime":"image/svg+xml","data":"PHN2Zy8+"}],"duration_ms":3}`
	tb := []string{"Traceback (most recent call last):\n", "  File \"<cell>\", line 1, in <module>\n", "ZeroDivisionError: division by zero\n"}
	errRun := `{"job_id":"job-2","status":"error","stdout":"","stderr":"` + strings.ReplaceAll(strings.ReplaceAll(strings.Join(tb, ""), `"`, `\"`), "\n", `\n`) + `",
		"error":{"ename":"ZeroDivisionError","evalue":"division by zero","traceback":["Traceback (most recent call last):\n","  File \"<cell>\", line 1, in <module>\n","ZeroDivisionError: division by zero\n"]},"outputs":[],"duration_ms":1}`
	abortRun := `{"job_id":"job-3","status":"error","stdout":"partial","stderr":"","error":{"ename":"RunAborted","evalue":"the run ended by timeout","traceback":null},"outputs":[],"duration_ms":1000}`

	tests := []struct {
		name       string
		args       []string
		stdin      string
		run        string
		wantCode   int
		wantOut    string
		wantErr    string // substring
		wantCalls  []string
		wantBody   string
		wantFiles  map[string][]byte
		exactErr   bool
		createFail bool
	}{
		{
			name: "in a context", args: []string{"--context", "ctx-1", "print('hello'); 6*7"}, run: okRun,
			wantOut: "hello\n42\n", wantErr: "genesis: 2 rich output(s) not saved (image/png, image/svg+xml); use --save-dir DIR\n", exactErr: true,
			wantCalls: []string{"POST /v1/contexts/ctx-1/run"}, wantBody: `{"code":"print('hello'); 6*7"}`,
		},
		{
			name: "new context in a sandbox, closed after", args: []string{"--timeout", "5s", "sb-1", "6*7"}, run: okRun,
			wantOut:   "hello\n42\n",
			wantCalls: []string{"POST /v1/sandboxes/sb-1/contexts", "POST /v1/contexts/ctx-9/run", "DELETE /v1/contexts/ctx-9"},
			wantBody:  `{"code":"6*7","timeout_ms":5000}`,
		},
		{
			name: "kept context", args: []string{"--keep", "sb-1", "x = 1"}, run: okRun, wantOut: "hello\n42\n",
			wantErr:   "context ctx-9 kept; run more with --context ctx-9",
			wantCalls: []string{"POST /v1/sandboxes/sb-1/contexts", "POST /v1/contexts/ctx-9/run"},
		},
		{
			name: "code from stdin", args: []string{"--context", "ctx-1", "-"}, stdin: "import sys\nprint(1)\n", run: okRun, wantOut: "hello\n42\n",
			wantCalls: []string{"POST /v1/contexts/ctx-1/run"}, wantBody: `{"code":"import sys\nprint(1)\n"}`,
		},
		{
			name: "code from -f stdin", args: []string{"--context", "ctx-1", "-f", "-"}, stdin: "1+1", run: okRun, wantOut: "hello\n42\n",
			wantCalls: []string{"POST /v1/contexts/ctx-1/run"}, wantBody: `{"code":"1+1"}`,
		},
		{
			name: "saved outputs", args: []string{"--context", "ctx-1", "--save-dir", "OUT", "plot()"}, run: okRun, wantOut: "hello\n42\n",
			wantErr:   "saved OUT/out-1.png (image/png, 25 bytes)",
			wantCalls: []string{"POST /v1/contexts/ctx-1/run"},
			wantFiles: map[string][]byte{"out-1.png": png, "out-2.svg": []byte("<svg/>")},
		},
		{
			name: "exception: traceback once, exit 1", args: []string{"--context", "ctx-1", "1/0"}, run: errRun,
			wantCode: 1, wantErr: strings.Join(tb, ""), exactErr: true,
			wantCalls: []string{"POST /v1/contexts/ctx-1/run"},
		},
		{
			name: "aborted run in a new context is still closed", args: []string{"sb-1", "while True: pass"}, run: abortRun,
			wantCode: 1, wantOut: "partial", wantErr: "RunAborted: the run ended by timeout\n", exactErr: true,
			wantCalls: []string{"POST /v1/sandboxes/sb-1/contexts", "POST /v1/contexts/ctx-9/run", "DELETE /v1/contexts/ctx-9"},
		},
		{
			name: "context cannot start", args: []string{"sb-1", "1"}, createFail: true,
			wantCode: 1, wantErr: "no python3 (context_start_failed",
			wantCalls: []string{"POST /v1/sandboxes/sb-1/contexts"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, b []byte) {
				switch {
				case r.Method == "POST" && strings.HasSuffix(r.URL.Path, "/contexts"):
					if tc.createFail {
						problem(409, "context_start_failed", "no python3")(w, r, b)
						return
					}
					reply(201, `{"id":"ctx-9","sandbox_id":"sb-1","kind":"python","state":"active"}`)(w, r, b)
				case r.Method == "POST" && strings.HasSuffix(r.URL.Path, "/run"):
					reply(200, tc.run)(w, r, b)
				case r.Method == "DELETE":
					w.WriteHeader(http.StatusNoContent)
				default:
					problem(404, "not_found", r.URL.Path)(w, r, b)
				}
			})
			args := append([]string{"run-code"}, tc.args...)
			for i, a := range args {
				if a == "OUT" {
					args[i] = filepath.Join(dir, "out")
				}
			}
			r := cli(t, api.URL, tc.stdin, nil, args...)
			stderr := strings.ReplaceAll(r.stderr, filepath.Join(dir, "out"), "OUT")
			if r.code != tc.wantCode {
				t.Errorf("exit %d, want %d (stderr %q)", r.code, tc.wantCode, r.stderr)
			}
			if r.stdout != tc.wantOut {
				t.Errorf("stdout %q, want %q", r.stdout, tc.wantOut)
			}
			if tc.exactErr && stderr != tc.wantErr || !strings.Contains(stderr, tc.wantErr) {
				t.Errorf("stderr %q, want %q", stderr, tc.wantErr)
			}
			var calls []string
			for _, q := range api.requests() {
				calls = append(calls, q.Method+" "+q.Path)
				if strings.HasSuffix(q.Path, "/run") && tc.wantBody != "" {
					jsonEqual(t, q.Body, tc.wantBody)
				}
			}
			if !reflect.DeepEqual(calls, tc.wantCalls) {
				t.Errorf("calls %v, want %v", calls, tc.wantCalls)
			}
			for name, want := range tc.wantFiles {
				got, err := os.ReadFile(filepath.Join(dir, "out", name))
				if err != nil || !bytes.Equal(got, want) {
					t.Errorf("%s = %q, %v; want %q", name, got, err, want)
				}
			}
		})
	}
}

func TestRunCodeUsage(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "code.py")
	if err := os.WriteFile(file, []byte("print(1)"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"nothing", []string{"run-code"}, "want SANDBOX and the code"},
		{"sandbox without code", []string{"run-code", "sb-1"}, "no code"},
		{"context with two args", []string{"run-code", "--context", "ctx-1", "sb-1", "1"}, "with --context, give the code as the only argument"},
		{"code and file", []string{"run-code", "--context", "ctx-1", "-f", file, "1"}, "not both"},
		{"empty code", []string{"run-code", "--context", "ctx-1", "  \n"}, "the code is empty"},
		{"missing file", []string{"run-code", "--context", "ctx-1", "-f", "/nonexistent/c.py"}, "reading the code"},
		{"negative timeout", []string{"run-code", "--timeout", "-1s", "--context", "ctx-1", "1"}, "must not be negative"},
		{"stream and background", []string{"exec", "--stream", "--background", "sb-1", "--", "true"}, "do not go together"},
		{"bad cursor", []string{"logs", "--cursor", "abc", "job-1"}, "--cursor wants an event id"},
		{"logs without job", []string{"logs"}, "one job id"},
		{"cancel without job", []string{"cancel"}, "one job id"},
		{"session exec without command", []string{"session", "exec", "ses-1"}, "no command"},
		{"session exec dash first", []string{"session", "exec", "--", "ls"}, "SESSION must come before --"},
		{"session rm empty id", []string{"session", "rm", ""}, "argument 1 is empty"},
		{"context create without sandbox", []string{"context", "create"}, "one sandbox id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := newFakeAPI(t, reply(200, `{}`))
			r := cli(t, api.URL, "", nil, tc.args...)
			if r.code != 2 || !strings.Contains(r.stderr, tc.wantErr) {
				t.Errorf("exit %d stderr %q, want 2 and %q", r.code, r.stderr, tc.wantErr)
			}
			if n := len(api.requests()); n != 0 {
				t.Errorf("a usage error sent %d requests", n)
			}
		})
	}
	// A file gives the code.
	api := newFakeAPI(t, reply(200, `{"job_id":"j","status":"ok","stdout":"1\n","stderr":"","outputs":[]}`))
	r := cli(t, api.URL, "", nil, "run-code", "--context", "ctx-1", "-f", file)
	if r.code != 0 || r.stdout != "1\n" {
		t.Errorf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	jsonEqual(t, api.only(t).Body, `{"code":"print(1)"}`)
}
