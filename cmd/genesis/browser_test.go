package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// TestBrowserActions: the actions come from stdin or a file, as an object
// or a bare array; a run that stops at a failing action exits 1.
func TestBrowserActions(t *testing.T) {
	t.Parallel()
	failed := `{"ok":false,"url":"https://example.com/","title":"Example","tab":"t1","results":[
		{"index":0,"type":"navigate","ok":true,"ms":120},
		{"index":1,"type":"click","ok":false,"ms":5000,"error":"no element matches \"#missing\""}]}`
	passed := `{"ok":true,"url":"https://example.com/","title":"Example","tab":"t1","results":[
		{"index":0,"type":"text","ok":true,"ms":3,"value":"Example Domain"},
		{"index":1,"type":"screenshot","ok":true,"ms":40,"artifact":{"id":"art-1","name":"screenshot-1.png"}}]}`

	api := newFakeAPI(t, reply(200, failed))
	r := cli(t, api.URL, `[{"type":"navigate","url":"https://example.com"},{"type":"click","selector":"#missing"}]`, nil,
		"browser", "actions", "sb-1")
	if r.code != 1 {
		t.Errorf("failed run: exit %d, want 1 (stderr %q)", r.code, r.stderr)
	}
	req := api.only(t)
	if req.Method != "POST" || req.Path != "/v1/sandboxes/sb-1/browser/actions" {
		t.Errorf("request %s %s", req.Method, req.Path)
	}
	jsonEqual(t, req.Body, `{"actions":[{"type":"navigate","url":"https://example.com"},{"type":"click","selector":"#missing"}]}`)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "INDEX") ||
		!reflect.DeepEqual(strings.Fields(lines[1]), []string{"0", "navigate", "true", "120", "-", "-", "-"}) ||
		!strings.Contains(lines[2], "click") || !strings.Contains(lines[2], "false") || !strings.Contains(lines[2], `no element matches "#missing"`) {
		t.Errorf("stdout %q", r.stdout)
	}
	if !strings.Contains(r.stderr, "action 1 (click) failed") {
		t.Errorf("stderr %q", r.stderr)
	}

	// -o json keeps the exit status.
	api = newFakeAPI(t, reply(200, failed))
	r = cli(t, api.URL, `{"actions":[{"type":"click","selector":"#missing"}]}`, nil, "-o", "json", "browser", "actions", "sb-1", "-")
	if r.code != 1 || !strings.Contains(r.stdout, `"ok": false`) {
		t.Errorf("json failed run: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}

	file := filepath.Join(t.TempDir(), "actions.json")
	if err := os.WriteFile(file, []byte(`{"actions":[{"type":"text"},{"type":"screenshot"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	api = newFakeAPI(t, reply(200, passed))
	r = cli(t, api.URL, "", nil, "browser", "actions", "sb-1", file)
	if r.code != 0 || !strings.Contains(r.stdout, `"Example Domain"`) || !strings.Contains(r.stdout, "art-1") {
		t.Errorf("passed run: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	jsonEqual(t, api.only(t).Body, `{"actions":[{"type":"text"},{"type":"screenshot"}]}`)

	// Mistakes in the input are usage errors that send nothing.
	for _, in := range []string{``, `[]`, `{"actions":[{"type":"click","selectr":"a"}]}`, `[{"url":"x"}]`, `not json`} {
		api = newFakeAPI(t, reply(200, passed))
		r = cli(t, api.URL, in, nil, "browser", "actions", "sb-1")
		if r.code != 2 || len(api.requests()) != 0 {
			t.Errorf("input %q: exit %d, %d requests, stderr %q; want a usage error", in, r.code, len(api.requests()), r.stderr)
		}
	}
}

// TestBrowserScreenshot: navigate and screenshot, then the artifact's
// content is written to the -O file and its id printed.
func TestBrowserScreenshot(t *testing.T) {
	t.Parallel()
	png := []byte("\x89PNG\r\n\x1a\n fake screenshot")
	sum := sha256.Sum256(png)
	hexSum := hex.EncodeToString(sum[:])
	api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, b []byte) {
		switch {
		case r.Method == "POST" && r.URL.Path == "/v1/sandboxes/sb-1/browser/actions":
			reply(200, `{"ok":true,"url":"https://example.com/","title":"Example","tab":"t1","results":[
				{"index":0,"type":"navigate","ok":true,"ms":100},
				{"index":1,"type":"screenshot","ok":true,"ms":30,"artifact":{"id":"art-7","name":"page.png",
				"size":`+strconv.Itoa(len(png))+`,"sha256":"`+hexSum+`","mime":"image/png"}}]}`)(w, r, b)
		case r.Method == "GET" && r.URL.Path == "/v1/artifacts/art-7":
			w.Header().Set("Content-Type", "image/png")
			w.Header().Set("ETag", `"`+hexSum+`"`)
			_, _ = w.Write(png)
		default:
			problem(404, "not_found", r.URL.Path)(w, r, b)
		}
	})
	dest := filepath.Join(t.TempDir(), "page.png")
	r := cli(t, api.URL, "", nil, "browser", "screenshot", "sb-1", "--url", "https://example.com", "--full-page", "-O", dest)
	if r.code != 0 || r.stdout != "art-7\n" {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	got, err := os.ReadFile(dest)
	if err != nil || !bytes.Equal(got, png) {
		t.Errorf("%s = %q, %v; want %q", dest, got, err, png)
	}
	reqs := api.requests()
	if len(reqs) != 2 || reqs[1].Method != "GET" || reqs[1].Path != "/v1/artifacts/art-7" {
		t.Fatalf("requests %+v", reqs)
	}
	jsonEqual(t, reqs[0].Body, `{"actions":[{"type":"navigate","url":"https://example.com"},
		{"type":"screenshot","format":"png","full_page":true,"name":"page.png"}]}`)

	// A failing screenshot writes nothing and exits 1.
	api = newFakeAPI(t, reply(200, `{"ok":false,"results":[{"index":0,"type":"screenshot","ok":false,"ms":1,"error":"the page crashed"}]}`))
	other := filepath.Join(t.TempDir(), "none.png")
	r = cli(t, api.URL, "", nil, "browser", "screenshot", "sb-1", "-O", other)
	if r.code != 1 || !strings.Contains(r.stderr, "the page crashed") {
		t.Errorf("failed screenshot: exit %d stderr %q", r.code, r.stderr)
	}
	if _, err := os.Stat(other); !os.IsNotExist(err) {
		t.Errorf("failed screenshot left %s: %v", other, err)
	}
}
