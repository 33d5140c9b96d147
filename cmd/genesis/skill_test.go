package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const skillRevisionJSON = `{"tenant":"acme","name":"pdf-form","revision":3,"digest":"sha256:ab12cd34ef56ab12cd34","size":812,"source":"tenant",
"manifest":{"name":"pdf-form","description":"Fill PDF forms\nwith data","license":"MIT","allowed_tools":["Bash"],
"metadata":{"network":"api.example.com:443"},"network":["api.example.com:443"]},
"files":[{"path":"SKILL.md","size":300,"sha256":"aa11"},{"path":"scripts/fill.py","executable":true,"size":512,"sha256":"bb22"}],
"report":{"scripts":{"python":["scripts/fill.py"]},"hosts":["api.example.com","evil.example"],
"urls":["https://api.example.com/v1","https://evil.example/x"],"secrets":[{"path":"scripts/fill.py","line":7,"kind":"api_key"}],
"undeclared_hosts":["evil.example"]},"created_at":"2026-03-01T11:57:00Z"}`

const skillRunJSON = `{"skill":"pdf-form","revision":3,"digest":"sha256:ab12","script":"scripts/fill.py",
"command":["python3","/skill/scripts/fill.py"],"sandbox_id":"sbx_1","job_id":"job_1","profile":"skill-python-basic",
"decision":{"source":"tenant","source_risk":"medium","permission_risk":"low","risk":"medium","ceiling":"high","runtime":"runsc",
"network":"none","rule":"risk = max(…)"},"state":"failed","exit_code":3,"exit_reason":"exited","stdout":"the out\n","stderr":"the err\n",
"stdout_truncated":false,"stderr_truncated":false,"duration_ms":1234,
"artifacts":[{"id":"art_1","job_id":"job_1","sandbox_id":"sbx_1","path":"out/filled.pdf","name":"filled.pdf",
"size":2048,"sha256":"cc","mime":"application/pdf","created_at":"2026-03-01T12:00:02Z","expires_at":"2026-03-02T12:00:02Z"}],
"started_at":"2026-03-01T12:00:00Z","finished_at":"2026-03-01T12:00:02Z"}`

// tarEntries reads a tar.gz: each entry's name, content and mode.
func tarEntries(t *testing.T, b []byte) map[string]*tar.Header {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("the body is not gzip: %v", err)
	}
	tr := tar.NewReader(zr)
	out := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("tar: %v", err)
		}
		data, _ := io.ReadAll(tr)
		h.PAXRecords = map[string]string{"content": string(data)}
		out[h.Name] = h
	}
}

func writeFile(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// TestSkillPushDir: a folder is packed as a tar.gz of exactly its regular
// files, relative to it, execute bits kept.
func TestSkillPushDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "SKILL.md"), "---\nname: pdf-form\ndescription: Fill PDF forms\n---\nUse scripts/x.py.\n", 0o644)
	writeFile(t, filepath.Join(dir, "scripts", "x.py"), "print('x')\n", 0o755)
	for _, tc := range []struct {
		name, args0 string
		status      int
		wantOut     string
	}{
		{"new revision", "", 201, "pdf-form 3 sha256:ab12cd34ef56ab12cd34\n"},
		{"unchanged", "", 200, "pdf-form 3 sha256:ab12cd34ef56ab12cd34 (unchanged)\n"},
		{"json", "-o=json", 201, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := newFakeAPI(t, reply(tc.status, skillRevisionJSON))
			args := []string{"skill", "push", dir}
			if tc.args0 != "" {
				args = append([]string{tc.args0}, args...)
			}
			r := cli(t, api.URL, "", nil, args...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			req := api.only(t)
			if req.Method != "POST" || req.Path != "/v1/skills" || req.Header.Get("Content-Type") != "application/gzip" ||
				req.Header.Get("Authorization") != "Bearer k" {
				t.Errorf("request %s %s type %q auth %q", req.Method, req.Path, req.Header.Get("Content-Type"), req.Header.Get("Authorization"))
			}
			entries := tarEntries(t, []byte(req.Body))
			names := make([]string, 0, len(entries))
			for n := range entries {
				names = append(names, n)
			}
			slices.Sort(names)
			if !slices.Equal(names, []string{"SKILL.md", "scripts/x.py"}) {
				t.Fatalf("entries %v, want exactly SKILL.md and scripts/x.py", names)
			}
			if h := entries["scripts/x.py"]; h.Typeflag != tar.TypeReg || h.Mode != 0o755 || h.PAXRecords["content"] != "print('x')\n" {
				t.Errorf("scripts/x.py: type %c mode %o content %q", h.Typeflag, h.Mode, h.PAXRecords["content"])
			}
			if h := entries["SKILL.md"]; h.Mode != 0o644 || !strings.HasPrefix(h.PAXRecords["content"], "---\nname: pdf-form") {
				t.Errorf("SKILL.md: mode %o content %q", h.Mode, h.PAXRecords["content"])
			}
			if tc.wantOut != "" && r.stdout != tc.wantOut {
				t.Errorf("stdout %q, want %q", r.stdout, tc.wantOut)
			}
			if tc.wantOut == "" && !strings.Contains(r.stdout, `"undeclared_hosts": [`) {
				t.Errorf("stdout is not the revision as JSON: %s", r.stdout)
			}
			for _, w := range []string{"scripts/fill.py:7", "api_key", "evil.example"} {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q: %s", w, r.stderr)
				}
			}
		})
	}
}

// TestSkillPushRefused: a folder with a symbolic link (or no such path)
// is a usage error that sends nothing.
func TestSkillPushRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "SKILL.md"), "---\nname: s\ndescription: d\n---\n", 0o644)
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "passwd")); err != nil {
		t.Skipf("symlink: %v", err)
	}
	api := newFakeAPI(t, reply(201, skillRevisionJSON))
	r := cli(t, api.URL, "", nil, "skill", "push", dir)
	if r.code != 2 || !strings.Contains(r.stderr, "symbolic link") || !strings.Contains(r.stderr, "passwd") || len(api.requests()) != 0 {
		t.Errorf("exit %d stderr %q, %d requests", r.code, r.stderr, len(api.requests()))
	}
	r = cli(t, api.URL, "", nil, "skill", "push", filepath.Join(dir, "missing"))
	if r.code != 2 || len(api.requests()) != 0 {
		t.Errorf("missing path: exit %d stderr %q", r.code, r.stderr)
	}
	api = newFakeAPI(t, problem(400, "skill_manifest_missing", "the archive has no SKILL.md at its root"))
	empty := t.TempDir()
	writeFile(t, filepath.Join(empty, "README"), "x", 0o644)
	r = cli(t, api.URL, "", nil, "skill", "push", empty)
	if r.code != 1 || !strings.Contains(r.stderr, "skill_manifest_missing") {
		t.Errorf("service refusal: exit %d stderr %q", r.code, r.stderr)
	}
}

// TestSkillPushArchive: an archive file is sent as it is, its Content-Type
// from its extension.
func TestSkillPushArchive(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, want := range map[string]string{
		"s.zip": "application/zip", "s.tar": "application/x-tar", "s.tar.gz": "application/gzip",
		"S.TGZ": "application/gzip", "s.bin": "application/octet-stream",
	} {
		p := filepath.Join(dir, name)
		writeFile(t, p, "archive bytes of "+name, 0o644)
		api := newFakeAPI(t, reply(201, skillRevisionJSON))
		r := cli(t, api.URL, "", nil, "skill", "push", p)
		if r.code != 0 {
			t.Fatalf("%s: exit %d: %s", name, r.code, r.stderr)
		}
		req := api.only(t)
		if req.Header.Get("Content-Type") != want || req.Body != "archive bytes of "+name {
			t.Errorf("%s: type %q body %q", name, req.Header.Get("Content-Type"), req.Body)
		}
	}
}

// TestSkillVerbs: each verb calls its route and prints its answer.
func TestSkillVerbs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                 string
		args                 []string
		handle               func(http.ResponseWriter, *http.Request, []byte)
		wantMethod, wantPath string
		wantQuery            map[string][]string
		wantOut              []string
		wantExact            string
	}{
		{
			name: "ls", args: []string{"skill", "ls"}, handle: reply(200, `{"items":[`+skillRevisionJSON+`]}`),
			wantMethod: "GET", wantPath: "/v1/skills",
			wantOut: []string{"SKILL", "pdf-form", "3", "sha256:ab12cd34ef56", "812", "3m", "Fill PDF forms"},
		},
		{
			name: "ls json", args: []string{"-o", "json", "skill", "ls"}, handle: reply(200, `{"items":[]}`),
			wantMethod: "GET", wantPath: "/v1/skills", wantOut: []string{`"items": []`},
		},
		{
			name: "get", args: []string{"skill", "get", "pdf-form"}, handle: reply(200, skillRevisionJSON),
			wantMethod: "GET", wantPath: "/v1/skills/pdf-form",
			wantOut: []string{"Name:", "pdf-form", "Digest:", "sha256:ab12cd34ef56ab12cd34", "License:", "MIT", "api.example.com:443",
				"PATH", "scripts/fill.py", "512", "bb22", "python: scripts/fill.py", "Undeclared hosts:", "evil.example",
				"scripts/fill.py:7 (api_key)"},
		},
		{
			name: "get a revision", args: []string{"skill", "get", "pdf-form", "--revision", "2"}, handle: reply(200, skillRevisionJSON),
			wantMethod: "GET", wantPath: "/v1/skills/pdf-form/revisions/2", wantOut: []string{"pdf-form"},
		},
		{
			name: "revisions", args: []string{"skill", "revisions", "pdf-form"}, handle: reply(200, `{"items":[`+skillRevisionJSON+`]}`),
			wantMethod: "GET", wantPath: "/v1/skills/pdf-form/revisions",
			wantOut: []string{"REVISION", "3", "sha256:ab12cd34ef56ab12cd34", "2026-03-01T11:57:00Z"},
		},
		{
			name: "cat", args: []string{"skill", "cat", "pdf-form", "scripts/fill.py", "--revision", "2"},
			handle: func(w http.ResponseWriter, _ *http.Request, _ []byte) {
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				w.Header().Set("X-Skill-Revision", "2")
				_, _ = io.WriteString(w, "print('hi')\n")
			},
			wantMethod: "GET", wantPath: "/v1/skills/pdf-form/files/scripts/fill.py",
			wantQuery: map[string][]string{"revision": {"2"}}, wantExact: "print('hi')\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := newFakeAPI(t, tc.handle)
			r := cli(t, api.URL, "", nil, tc.args...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			req := api.only(t)
			if req.Method != tc.wantMethod || req.Path != tc.wantPath {
				t.Errorf("request %s %s, want %s %s", req.Method, req.Path, tc.wantMethod, tc.wantPath)
			}
			for k, v := range tc.wantQuery {
				if !slices.Equal(req.Query[k], v) {
					t.Errorf("query %s = %v, want %v", k, req.Query[k], v)
				}
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, r.stdout)
				}
			}
			if tc.wantExact != "" && r.stdout != tc.wantExact {
				t.Errorf("stdout %q, want %q", r.stdout, tc.wantExact)
			}
		})
	}
	api := newFakeAPI(t, problem(404, "skill_file_not_found", "no file"))
	if r := cli(t, api.URL, "", nil, "skill", "cat", "pdf-form", "nope"); r.code != 1 || !strings.Contains(r.stderr, "skill_file_not_found") {
		t.Errorf("cat missing: exit %d stderr %q", r.code, r.stderr)
	}
	for _, args := range [][]string{{"skill", "get", "s", "--revision", "-1"}, {"skill", "get"}, {"skill", "cat", "s"}} {
		if r := cli(t, api.URL, "", nil, args...); r.code != 2 {
			t.Errorf("%v: exit %d, want a usage error", args, r.code)
		}
	}
}

// TestSkillRun: the arguments and flags become the run request; the
// script's output is relayed and its exit code is genesis's.
func TestSkillRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.pdf"), "%PDF\xff\xfe", 0o644)
	writeFile(t, filepath.Join(dir, "data.json"), `{"a":1}`, 0o644)
	tests := []struct {
		name     string
		args     []string
		stdin    string
		answer   string
		wantBody string
		wantCode int
	}{
		{
			name: "args, files, stdin file and timeout",
			args: []string{"pdf-form", "scripts/fill.py", "--revision", "3", "--file", filepath.Join(dir, "a.pdf") + "=in/a.pdf",
				"--file", filepath.Join(dir, "data.json"), "--stdin-file", filepath.Join(dir, "data.json"), "--timeout", "1500us", "--", "--out", "x"},
			answer: skillRunJSON,
			wantBody: `{"revision":3,"script":"scripts/fill.py","args":["--out","x"],"stdin":"{\"a\":1}",
				"files":[{"path":"in/a.pdf","content_base64":"JVBERv/+"},{"path":"data.json","content":"{\"a\":1}"}],"timeout_ms":2}`,
			wantCode: 3,
		},
		{
			name: "stdin with -i", args: []string{"pdf-form", "scripts/fill.py", "-i"}, stdin: "hello\n",
			answer:   strings.Replace(strings.Replace(skillRunJSON, `"exit_code":3`, `"exit_code":0`, 1), `"failed"`, `"succeeded"`, 1),
			wantBody: `{"script":"scripts/fill.py","stdin":"hello\n"}`,
		},
		{
			name: "binary stdin as base64", args: []string{"pdf-form", "scripts/fill.py", "-i"}, stdin: "\xff\xfe",
			answer:   strings.Replace(strings.Replace(skillRunJSON, `"exit_code":3`, `"exit_code":0`, 1), `"failed"`, `"succeeded"`, 1),
			wantBody: `{"script":"scripts/fill.py","stdin_base64":"//4="}`,
		},
		{
			name: "timed out", args: []string{"pdf-form", "scripts/fill.py"},
			answer:   strings.Replace(strings.Replace(skillRunJSON, `"exit_code":3,`, ``, 1), `"exit_reason":"exited"`, `"exit_reason":"timeout"`, 1),
			wantBody: `{"script":"scripts/fill.py"}`, wantCode: 124,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := newFakeAPI(t, reply(200, tc.answer))
			r := cli(t, api.URL, tc.stdin, nil, append([]string{"skill", "run"}, tc.args...)...)
			if r.code != tc.wantCode {
				t.Fatalf("exit %d, want %d: %s", r.code, tc.wantCode, r.stderr)
			}
			req := api.only(t)
			if req.Method != "POST" || req.Path != "/v1/skills/pdf-form/runs" {
				t.Errorf("request %s %s", req.Method, req.Path)
			}
			jsonEqual(t, req.Body, tc.wantBody)
			if r.stdout != "the out\n" {
				t.Errorf("stdout %q", r.stdout)
			}
			if !strings.HasPrefix(r.stderr, "the err\n") || !strings.Contains(r.stderr, "art_1 out/filled.pdf (2048 bytes)") {
				t.Errorf("stderr %q", r.stderr)
			}
		})
	}
	api := newFakeAPI(t, reply(200, skillRunJSON))
	r := cli(t, api.URL, "", nil, "-o", "json", "skill", "run", "pdf-form", "scripts/fill.py")
	if r.code != 3 || !strings.Contains(r.stdout, `"exit_code": 3`) || !strings.Contains(r.stdout, `"runtime": "runsc"`) {
		t.Errorf("json: exit %d stdout %s", r.code, r.stdout)
	}
	api = newFakeAPI(t, problem(403, "skill_network_not_allowed", "skill pdf-form declares network"))
	r = cli(t, api.URL, "", nil, "skill", "run", "pdf-form", "scripts/fill.py")
	if r.code != 1 || !strings.Contains(r.stderr, "skill_network_not_allowed") || !strings.Contains(r.stderr, "req-42") {
		t.Errorf("refused: exit %d stderr %q", r.code, r.stderr)
	}
}

// TestSkillRunUsage: mistakes are usage errors that send nothing.
func TestSkillRunUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	writeFile(t, bin, "\xff\xfe", 0o644)
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"pdf-form"}, "a skill name and a script"},
		{[]string{"pdf-form", "x.py", "-i", "--stdin-file", bin}, "not both"},
		{[]string{"pdf-form", "x.py", "--file", "=a"}, "LOCAL=REMOTE"},
		{[]string{"pdf-form", "x.py", "--file", bin + "="}, "LOCAL=REMOTE"},
		{[]string{"pdf-form", "x.py", "--file", filepath.Join(dir, "missing") + "=a"}, "--file"},
		{[]string{"pdf-form", "x.py", "--timeout", "-1s"}, "--timeout"},
		{[]string{"pdf-form", "x.py", "--revision", "-2"}, "--revision"},
	} {
		api := newFakeAPI(t, reply(200, skillRunJSON))
		r := cli(t, api.URL, "", nil, append([]string{"skill", "run"}, tc.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.wantErr) || len(api.requests()) != 0 {
			t.Errorf("%v: exit %d stderr %q, %d requests; want usage error %q", tc.args, r.code, r.stderr, len(api.requests()), tc.wantErr)
		}
	}
}
