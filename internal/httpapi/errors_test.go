package httpapi_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/controltest"
	"genesis.dev/sandbox/internal/sandbox"
)

// TestWrongMethodIs405: a path that is a route with other methods answers
// 405 method_not_allowed with an Allow header listing them; a path that is
// no route at all stays 404 route_not_found, without Allow.
func TestWrongMethodIs405(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	job := "/v1/jobs/" + sandbox.NewID("job")
	for _, c := range []struct {
		method, path string
		allow        string
	}{
		{"PUT", "/v1/sandboxes", "GET, HEAD, POST"},
		{"DELETE", job, "GET, HEAD"},
		{"GET", job + "/cancel", "POST"},
		{"POST", "/healthz", "GET, HEAD"},
	} {
		resp, body := a.do(req{method: c.method, path: c.path, key: keyA})
		p := checkProblem(t, resp, body, http.StatusMethodNotAllowed, "method_not_allowed")
		if got := resp.Header.Get("Allow"); got != c.allow {
			t.Errorf("%s %s: Allow %q, want %q", c.method, c.path, got, c.allow)
		}
		if !strings.Contains(p.Detail, c.allow) || !strings.Contains(p.Detail, c.method) {
			t.Errorf("%s %s: detail %q does not name the method and the allowed ones", c.method, c.path, p.Detail)
		}
	}
	resp, body := a.do(req{method: "GET", path: "/v1/no-such-thing", key: keyA})
	p := checkProblem(t, resp, body, http.StatusNotFound, "route_not_found")
	if resp.Header.Get("Allow") != "" {
		t.Errorf("404 carries Allow %q", resp.Header.Get("Allow"))
	}
	checkSentence(t, "unknown route", p.Detail)
}

// TestProblemDetailsAreSentences: the problems a person meets first read
// as one clean sentence: no class text said twice, no internal route or
// client name of the service's own calls, no config key where a flag or
// environment variable is what a person sets.
func TestProblemDetailsAreSentences(t *testing.T) {
	t.Parallel()
	// The agents of the fake driver run on this host: a directory of its
	// own (not an ancestor of the sandboxes' directories, which the file
	// API never reaches) is a root they can reach, so a missing file is
	// the agent's own answer.
	root := t.TempDir()
	for _, d := range []string{filepath.Dir(root), root} { // the agents run as another user
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	a := newAPI(t, func(c *config.Config) {
		p, _ := c.Profile(controltest.Profile)
		p.FileRoots = []string{root}
	})
	sb, _ := a.createHTTP(keyA, client.CreateSandboxRequest{})
	files := "/v1/sandboxes/" + sb.ID + "/files"
	missing := root + "/" + sandbox.NewID("nope")
	for _, c := range []struct {
		name       string
		r          req
		status     int
		code, want string
	}{
		{"unknown sandbox", req{method: "GET", path: "/v1/sandboxes/" + sandbox.NewID("sbx"), key: keyA}, 404, "not_found", "not found"},
		{"unknown profile", req{method: "POST", path: "/v1/sandboxes", key: keyA, body: `{"profile":"nope"}`}, 404, "profile_not_found",
			`unknown profile "nope"; the profiles are `},
		{"missing file", req{method: "GET", path: files + "?path=" + missing, key: keyA}, 404, "file_not_found",
			`"` + missing + `": no such file or directory`},
		{"stat of a missing file", req{method: "GET", path: files + "/stat?path=" + missing, key: keyA}, 404, "file_not_found",
			`"` + missing + `": no such file or directory`},
		{"admin route", req{method: "GET", path: "/v1/tenants", key: keyA}, 403, "admin_required", "this needs an admin key: the service's --admin-key (GENESIS_ADMIN_KEY)"},
		{"no key", req{method: "GET", path: "/v1/sandboxes"}, 401, "unauthenticated", "no API key"},
		{"wrong key", req{method: "GET", path: "/v1/sandboxes", key: "not-a-key-0123456789"}, 401, "unauthenticated", "invalid API key"},
		{"misnamed field", req{method: "POST", path: "/v1/sandboxes", key: keyA, body: `{"snapshot":"snap_x"}`}, 400, "invalid_argument",
			`unknown field "snapshot"; did you mean "snapshot_id"?`},
		{"field of the wrong type", req{method: "POST", path: "/v1/sandboxes/" + sb.ID + "/exec", key: keyA, body: `{"command":"ls"}`}, 400, "invalid_argument",
			`field "command": want an array of strings, got string`},
		{"exec out of range", req{method: "POST", path: "/v1/sandboxes/" + sb.ID + "/exec", key: keyA, body: `{"command":["true"],"timeout_ms":-1}`}, 400, "invalid_argument",
			`timeout_ms must be between 1 and `},
		{"no profile", req{method: "POST", path: "/v1/sandboxes", key: keyA, body: `{}`}, 400, "invalid_argument", "profile is required"},
		{"create out of range", req{method: "POST", path: "/v1/sandboxes", key: keyA, body: `{"profile":"` + controltest.Profile + `","ttl_seconds":-5}`}, 400, "invalid_argument",
			`ttl_seconds must be between 1 and `},
	} {
		resp, body := a.do(c.r)
		p := checkProblem(t, resp, body, c.status, c.code)
		if !strings.Contains(p.Detail, c.want) {
			t.Errorf("%s: detail %q, want it to say %q", c.name, p.Detail, c.want)
		}
		checkSentence(t, c.name, p.Detail)
	}
}

// checkSentence fails t when detail repeats a part, ends in the text of an
// error class after a part that already said it, or names the service's
// internals.
func checkSentence(t *testing.T, name, detail string) {
	t.Helper()
	parts := strings.Split(detail, ": ")
	for i := 1; i < len(parts); i++ {
		if parts[i] == parts[i-1] {
			t.Errorf("%s: %q says %q twice", name, detail, parts[i])
		}
	}
	for _, bad := range []string{"agentclient", "agent answered", "GET GET", "admin_api_key", "errdefs", "%!", "Go value", "Go struct", "json:"} {
		if strings.Contains(detail, bad) {
			t.Errorf("%s: %q contains %q", name, detail, bad)
		}
	}
	for _, class := range []string{"invalid argument", "too large", "failed precondition", "unauthenticated", "permission denied"} {
		if strings.HasSuffix(detail, ": "+class) {
			t.Errorf("%s: %q ends in the class text %q", name, detail, class)
		}
	}
}

// TestProblemInstanceIsBounded: a problem names the request's path as its
// instance, but does not echo a huge one back whole.
func TestProblemInstanceIsBounded(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	long := "/v1/snapshots/snap_" + strings.Repeat("x", 20000)
	resp, body := a.do(req{method: "GET", path: long, key: keyA})
	p := checkProblem(t, resp, body, http.StatusNotFound, "not_found")
	if len(p.Instance) > 260 || !strings.HasPrefix(p.Instance, "/v1/snapshots/snap_xxx") {
		t.Errorf("instance of %d bytes: %.80q…", len(p.Instance), p.Instance)
	}
	if len(body) > 2000 {
		t.Errorf("a problem of %d bytes for a long path", len(body))
	}
}
