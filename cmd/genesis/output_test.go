package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestArtifactFileFlags: -O/--output-file writes an artifact to a file,
// as the screenshot commands do; the former -o/--output still does.
func TestArtifactFileFlags(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("ETag", `"not-a-sha256"`)
		_, _ = w.Write([]byte("content"))
	})
	dir := t.TempDir()
	for _, flag := range []string{"-O", "--output-file", "-o", "--output"} {
		out := filepath.Join(dir, strings.TrimLeft(flag, "-")+".bin")
		r := cli(t, api.URL, "", nil, "artifacts", "get", "art_1", flag, out)
		b, err := os.ReadFile(out)
		if r.code != 0 || err != nil || string(b) != "content" || r.stdout != "" {
			t.Errorf("%s: exit %d, stderr %q, stdout %q, file %q (%v)", flag, r.code, r.stderr, r.stdout, b, err)
		}
	}
	r := cli(t, api.URL, "", nil, "artifacts", "get", "--help")
	if !strings.Contains(r.stdout, "--output-file") || strings.Contains(r.stdout, "--output string") {
		t.Errorf("help shows the former flag or not the new one:\n%s", r.stdout)
	}
}

// TestRemovalsSayWhatWasRemoved: a removal prints what it removed, as
// sandbox rm does, rather than nothing.
func TestRemovalsSayWhatWasRemoved(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) { w.WriteHeader(http.StatusNoContent) })
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"tenant", "rm", "acme"}, "acme\n"},
		{[]string{"tenant", "key", "revoke", "acme", "key_1"}, "key_1\n"},
		{[]string{"mcp", "catalog", "rm", "mine"}, "mine\n"},
	} {
		if r := cli(t, api.URL, "", nil, c.args...); r.code != 0 || r.stdout != c.want {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %q", c.args, r.code, r.stdout, r.stderr, c.want)
		}
	}
}

// TestDetailViewsAreAlignedFields: the desktop control and recording
// views are "Key: value" lines like every other detail view, not tab
// dumps.
func TestDetailViewsAreAlignedFields(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, b []byte) {
		if strings.HasSuffix(r.URL.Path, "/control") {
			reply(200, `{"holder":"human:ann","reason":"fixing","since":"2026-03-01T11:00:00Z","allow_screenshots":false,"version":3,
				"requests":[{"at":"2026-03-01T11:01:00Z","reason":"stuck"}]}`)(w, r, b)
			return
		}
		reply(200, `{"id":"rec_1","state":"recording","fps":5,"segment_seconds":2,"segments":4,"bytes":1024}`)(w, r, b)
	})
	r := cli(t, api.URL, "", nil, "desktop", "control", "sbx_1")
	want := "Holder:       human:ann\nReason:       fixing\nSince:        2026-03-01T11:00:00Z\nScreenshots:  false\nVersion:      3\nRequest:      2026-03-01T11:01:00Z stuck\n"
	if r.code != 0 || r.stdout != want {
		t.Errorf("desktop control: exit %d stderr %q\n%s\nwant\n%s", r.code, r.stderr, r.stdout, want)
	}
	r = cli(t, api.URL, "", nil, "desktop", "record", "sbx_1", "status")
	if r.code != 0 || !strings.Contains(r.stdout, "Recording:  rec_1\n") || !strings.Contains(r.stdout, "Segments:   4\n") || strings.Contains(r.stdout, "\t") {
		t.Errorf("desktop record status: exit %d stderr %q\n%s", r.code, r.stderr, r.stdout)
	}
}

// TestJobGetSaysABackgroundJobHasNoTimeLimit: a background job without
// timeout_ms shows that it has none, rather than no Timeout line.
func TestJobGetSaysABackgroundJobHasNoTimeLimit(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, reply(200, `{"id":"j-1","sandbox_id":"sb-1","state":"running","mode":"background",
		"command":["python3","-m","http.server"],"stdout_bytes":0,"stderr_bytes":0,"stdout_truncated":false,"stderr_truncated":false,
		"created_at":"2026-03-01T11:00:00Z","started_at":"2026-03-01T11:00:01Z"}`))
	r := cli(t, api.URL, "", nil, "job", "get", "j-1")
	if r.code != 0 || !strings.Contains(r.stdout, "Timeout:  none (runs until it ends, is cancelled, or its sandbox ends)\n") {
		t.Errorf("exit %d stderr %q\n%s", r.code, r.stderr, r.stdout)
	}
}
