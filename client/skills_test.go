package client

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

const skillRevisionJSON = `{"tenant":"acme","name":"pdf-form","revision":3,"digest":"sha256:ab12","size":812,"source":"tenant",
"manifest":{"name":"pdf-form","description":"Fill PDF forms","license":"MIT","allowed_tools":["Bash"],
"metadata":{"network":"api.example.com:443"},"network":["api.example.com:443"]},
"files":[{"path":"SKILL.md","size":300,"sha256":"aa"},{"path":"scripts/fill.py","executable":true,"size":512,"sha256":"bb"}],
"report":{"scripts":{"python":["scripts/fill.py"]},"hosts":["api.example.com","evil.example"],
"urls":["https://api.example.com/v1","https://evil.example/x"],"secrets":[{"path":"scripts/fill.py","line":7,"kind":"api_key"}],
"undeclared_hosts":["evil.example"]},"created_at":"2026-03-01T12:00:00Z"}`

const skillRunJSON = `{"skill":"pdf-form","revision":3,"digest":"sha256:ab12","script":"scripts/fill.py",
"command":["python3","/skill/scripts/fill.py","--in","a.pdf"],"sandbox_id":"sbx_1","job_id":"job_1","profile":"skill-python-basic",
"decision":{"source":"tenant","source_risk":"medium","permission_risk":"low","risk":"medium","ceiling":"high","runtime":"runsc",
"network":"none","rule":"risk = max(…)"},"state":"failed","exit_code":3,"exit_reason":"exited","stdout":"out\n","stderr":"err\n",
"stdout_truncated":false,"stderr_truncated":true,"duration_ms":1234,
"artifacts":[{"id":"art_1","tenant":"acme","job_id":"job_1","sandbox_id":"sbx_1","path":"out/filled.pdf","name":"filled.pdf",
"size":2048,"sha256":"cc","mime":"application/pdf","created_at":"2026-03-01T12:00:02Z","expires_at":"2026-03-02T12:00:02Z"}],
"started_at":"2026-03-01T12:00:00Z","finished_at":"2026-03-01T12:00:02Z"}`

// pushResult is what PushSkill returns, as one value.
type pushResult struct {
	rev     *SkillRevision
	created bool
}

func TestSkillRequests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name       string
		ans        answer
		call       func(c *Client) (any, error)
		wantMethod string
		wantPath   string
		wantQuery  map[string][]string
		wantHeader map[string]string
		wantRaw    string // the exact body, for a raw request
		wantBody   string // JSON, compared semantically
		check      func(t *testing.T, got any)
	}{
		{
			name: "push a new revision",
			ans:  answer{Status: 201, Body: skillRevisionJSON, Header: map[string]string{"Location": "/v1/skills/pdf-form/revisions/3"}},
			call: func(c *Client) (any, error) {
				rev, created, err := c.PushSkill(ctx, strings.NewReader("\x1f\x8barchive"), SkillArchiveGzip)
				return pushResult{rev, created}, err
			},
			wantMethod: "POST", wantPath: "/v1/skills",
			wantHeader: map[string]string{"Content-Type": "application/gzip", "Content-Length": "9"},
			wantRaw:    "\x1f\x8barchive",
			check: func(t *testing.T, got any) {
				p := got.(pushResult)
				r := p.rev
				if !p.created || r.Name != "pdf-form" || r.Revision != 3 || r.Digest != "sha256:ab12" || r.Tenant != "acme" ||
					r.Manifest.License != "MIT" || !reflect.DeepEqual(r.Manifest.Network, []string{"api.example.com:443"}) ||
					len(r.Files) != 2 || !r.Files[1].Executable || r.Files[0].Executable || r.Report.Secrets[0].Line != 7 ||
					!reflect.DeepEqual(r.Report.UndeclaredHosts, []string{"evil.example"}) || r.Report.Scripts["python"][0] != "scripts/fill.py" ||
					r.CreatedAt.IsZero() {
					t.Errorf("revision = %+v", r)
				}
			},
		},
		{
			name: "push the same content again",
			ans:  answer{Status: 200, Body: skillRevisionJSON},
			call: func(c *Client) (any, error) {
				rev, created, err := c.PushSkill(ctx, strings.NewReader("PK\x03\x04"), "")
				return pushResult{rev, created}, err
			},
			wantMethod: "POST", wantPath: "/v1/skills",
			wantHeader: map[string]string{"Content-Type": "application/octet-stream"},
			wantRaw:    "PK\x03\x04",
			check: func(t *testing.T, got any) {
				if p := got.(pushResult); p.created || p.rev.Revision != 3 {
					t.Errorf("push = %+v %v", p.rev, p.created)
				}
			},
		},
		{
			name:       "list",
			ans:        answer{Body: `{"items":[` + skillRevisionJSON + `]}`},
			call:       func(c *Client) (any, error) { return c.ListSkills(ctx) },
			wantMethod: "GET", wantPath: "/v1/skills",
			check: func(t *testing.T, got any) {
				if l := got.([]SkillRevision); len(l) != 1 || l[0].Name != "pdf-form" {
					t.Errorf("list = %+v", l)
				}
			},
		},
		{
			name:       "get escapes the name",
			ans:        answer{Body: skillRevisionJSON},
			call:       func(c *Client) (any, error) { return c.GetSkill(ctx, "pdf form") },
			wantMethod: "GET", wantPath: "/v1/skills/pdf%20form",
		},
		{
			name:       "revisions",
			ans:        answer{Body: `{"items":[` + skillRevisionJSON + `,` + strings.Replace(skillRevisionJSON, `"revision":3`, `"revision":2`, 1) + `]}`},
			call:       func(c *Client) (any, error) { return c.SkillRevisions(ctx, "pdf-form") },
			wantMethod: "GET", wantPath: "/v1/skills/pdf-form/revisions",
			check: func(t *testing.T, got any) {
				if l := got.([]SkillRevision); len(l) != 2 || l[0].Revision != 3 || l[1].Revision != 2 {
					t.Errorf("revisions = %+v", l)
				}
			},
		},
		{
			name:       "one revision",
			ans:        answer{Body: skillRevisionJSON},
			call:       func(c *Client) (any, error) { return c.GetSkillRevision(ctx, "pdf-form", 3) },
			wantMethod: "GET", wantPath: "/v1/skills/pdf-form/revisions/3",
		},
		{
			name: "a file of a revision",
			ans: answer{ContentType: "text/plain; charset=utf-8", Body: "print('hi')\n",
				Header: map[string]string{"X-Skill-Revision": "2", "X-Skill-Digest": "sha256:ab12"}},
			call:       func(c *Client) (any, error) { return c.SkillFile(ctx, "pdf-form", "scripts/my fill.py", 2) },
			wantMethod: "GET", wantPath: "/v1/skills/pdf-form/files/scripts/my%20fill.py",
			wantQuery: map[string][]string{"revision": {"2"}},
			check: func(t *testing.T, got any) {
				if b := got.([]byte); string(b) != "print('hi')\n" {
					t.Errorf("file = %q", b)
				}
			},
		},
		{
			name:       "a file of the latest revision",
			ans:        answer{ContentType: "application/octet-stream", Body: "\x00\x01"},
			call:       func(c *Client) (any, error) { return c.SkillFile(ctx, "pdf-form", "/SKILL.md", 0) },
			wantMethod: "GET", wantPath: "/v1/skills/pdf-form/files/SKILL.md",
			wantQuery: map[string][]string{},
		},
		{
			name: "run",
			ans:  answer{Body: skillRunJSON},
			call: func(c *Client) (any, error) {
				return c.RunSkill(ctx, "pdf-form", SkillRunRequest{Revision: 3, Script: "scripts/fill.py", Args: []string{"--in", "a.pdf"},
					Stdin: "x", Files: []SkillInputFile{{Path: "a.pdf", ContentBase64: "JVBERg=="}, {Path: "b.txt", Content: "b"}}, TimeoutMS: 5000})
			},
			wantMethod: "POST", wantPath: "/v1/skills/pdf-form/runs",
			wantBody: `{"revision":3,"script":"scripts/fill.py","args":["--in","a.pdf"],"stdin":"x",
				"files":[{"path":"a.pdf","content_base64":"JVBERg=="},{"path":"b.txt","content":"b"}],"timeout_ms":5000}`,
			check: func(t *testing.T, got any) {
				r := got.(*SkillRun)
				if r.State != "failed" || r.ExitCode == nil || *r.ExitCode != 3 || r.Decision.Runtime != "runsc" || !r.StderrTruncated ||
					len(r.Artifacts) != 1 || r.Artifacts[0].ID != "art_1" || r.Artifacts[0].Size != 2048 || r.Stdout != "out\n" ||
					len(r.Command) != 4 || r.FinishedAt.IsZero() {
					t.Errorf("run = %+v", r)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, f := newTestClient(t, tc.ans)
			got, err := tc.call(c)
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			r := f.last(t)
			if r.Method != tc.wantMethod || r.Path != tc.wantPath {
				t.Errorf("request = %s %s, want %s %s", r.Method, r.Path, tc.wantMethod, tc.wantPath)
			}
			if tc.wantQuery != nil && !reflect.DeepEqual(r.Query, tc.wantQuery) {
				t.Errorf("query = %v, want %v", r.Query, tc.wantQuery)
			}
			if r.Header.Get("Authorization") != "Bearer key-123" {
				t.Errorf("Authorization = %q", r.Header.Get("Authorization"))
			}
			for k, v := range tc.wantHeader {
				if got := r.Header.Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			if tc.wantRaw != "" {
				if r.Body != tc.wantRaw {
					t.Errorf("body = %q, want %q", r.Body, tc.wantRaw)
				}
			} else {
				assertJSONEqual(t, r.Body, tc.wantBody)
			}
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
}

func TestSkillErrorsAndURL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		status int
		code   string
		call   func(c *Client) error
	}{
		{400, "skill_link_refused", func(c *Client) error {
			_, _, err := c.PushSkill(ctx, strings.NewReader("x"), SkillArchiveTar)
			return err
		}},
		{413, "skill_too_large", func(c *Client) error {
			_, _, err := c.PushSkill(ctx, strings.NewReader("x"), SkillArchiveZip)
			return err
		}},
		{404, "skill_file_not_found", func(c *Client) error { _, err := c.SkillFile(ctx, "s", "nope.txt", 0); return err }},
		{403, "skill_network_not_allowed", func(c *Client) error {
			_, err := c.RunSkill(ctx, "s", SkillRunRequest{Script: "x.py"})
			return err
		}},
		{404, "skill_not_found", func(c *Client) error { _, err := c.GetSkill(ctx, "s"); return err }},
	} {
		c, _ := newTestClient(t, answer{Status: tc.status, ContentType: "application/problem+json",
			Body: `{"title":"x","status":` + jsonInt(tc.status) + `,"code":"` + tc.code + `","detail":"refused"}`})
		err := tc.call(c)
		var ae *APIError
		if !errors.As(err, &ae) || ae.Status != tc.status || ErrorCode(err) != tc.code {
			t.Errorf("%s: err = %v", tc.code, err)
		}
	}
	c, f := newTestClient(t, answer{Body: "{}"})
	for name, call := range map[string]func() error{
		"get":          func() error { _, err := c.GetSkill(ctx, ""); return err },
		"revisions":    func() error { _, err := c.SkillRevisions(ctx, ""); return err },
		"revision 0":   func() error { _, err := c.GetSkillRevision(ctx, "s", 0); return err },
		"no name":      func() error { _, err := c.GetSkillRevision(ctx, "", 1); return err },
		"file no path": func() error { _, err := c.SkillFile(ctx, "s", "", 0); return err },
		"file no name": func() error { _, err := c.SkillFile(ctx, "", "a", 0); return err },
		"file rev -1":  func() error { _, err := c.SkillFile(ctx, "s", "a", -1); return err },
		"run":          func() error { _, err := c.RunSkill(ctx, "", SkillRunRequest{Script: "x"}); return err },
		"push nil":     func() error { _, _, err := c.PushSkill(ctx, nil, ""); return err },
	} {
		if err := call(); err == nil {
			t.Errorf("%s succeeded", name)
		}
	}
	f.mu.Lock()
	if len(f.reqs) != 0 {
		t.Errorf("refused calls sent %d requests", len(f.reqs))
	}
	f.mu.Unlock()
	if u := New("http://h:1/base/", "k").SkillsMCPURL(); u != "http://h:1/base/v1/mcp/skills" {
		t.Errorf("SkillsMCPURL = %q", u)
	}
	b, _ := json.Marshal(SkillRunRequest{Script: "a.py"})
	if string(b) != `{"script":"a.py"}` {
		t.Errorf("minimal run request = %s", b)
	}
}

func jsonInt(n int) string { b, _ := json.Marshal(n); return string(b) }
