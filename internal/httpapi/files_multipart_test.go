package httpapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/config"
)

// The limits the tests below run under: small, so each is easy to cross.
const (
	testMaxFiles  = 3
	testMaxUpload = 1 << 20
	testMaxPath   = 200
)

// tuneFileLimits sets small file limits and adds the profile tool-tmp,
// tool-basic with /tmp as its only file root; tool-basic keeps the default
// roots (/workspace, /tmp and the sandbox user's home).
func tuneFileLimits(c *config.Config) {
	c.Limits.Files.MaxFilesPerCall = testMaxFiles
	c.Limits.Files.MaxUploadBytes = testMaxUpload
	c.Limits.Files.MaxPathBytes = testMaxPath
	p, _ := c.Profile("tool-basic")
	narrow := *p
	narrow.Name, narrow.FileRoots = "tool-tmp", []string{"/tmp"}
	c.Profiles = append(c.Profiles, narrow)
}

// part is one multipart part: a raw Content-Disposition filename parameter
// (already quoted or encoded) and its content.
type part struct {
	filename string
	body     string
}

// multipartBody builds a form-data body; filename is put as given.
func multipartBody(parts []part) (string, io.Reader) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for i, p := range parts {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="f%d"; %s`, i, p.filename))
		w, _ := mw.CreatePart(h)
		io.WriteString(w, p.body)
	}
	mw.Close()
	return mw.FormDataContentType(), &buf
}

func quoted(name string) string { return `filename="` + name + `"` }

func (a *filesAPI) upload(id, dir string, q url.Values, parts []part) (*http.Response, []byte) {
	a.t.Helper()
	if q == nil {
		q = url.Values{}
	}
	q.Set("path", dir)
	ct, body := multipartBody(parts)
	return a.call("POST", filesURL(id, "", q), body, map[string]string{"Content-Type": ct})
}

func TestFilesMultipartRootsLimits(t *testing.T) {
	t.Parallel()
	a := newFilesAPIWith(t, tuneFileLimits)
	for _, rt := range a.runtimes {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			a := *a
			a.t = t
			id := a.create(rt)
			t.Run("multipart", func(t *testing.T) { a.t = t; testMultipart(&a, id) })
			t.Run("multipart-bad", func(t *testing.T) { a.t = t; testMultipartBad(&a, id) })
			t.Run("roots", func(t *testing.T) { a.t = t; testFileRoots(&a, id, a.createProfile(rt, "tool-tmp")) })
			t.Run("odd-files", func(t *testing.T) { a.t = t; testOddFiles(&a, id) })
		})
	}
}

func testMultipart(a *filesAPI, id string) {
	t := a.t
	big := strings.Repeat("0123456789abcdef", testMaxUpload/16) // exactly the limit
	parts := []part{{quoted("a.txt"), "alpha"}, {quoted("sub/dir/b.bin"), big}, {`filename*=UTF-8''line%0Abreak%C3%A9`, "odd"}}
	resp, body := a.upload(id, "/workspace/up", url.Values{"mode": {"0600"}}, parts)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload: %d %s", resp.StatusCode, body)
	}
	res := decodeJSON[client.UploadFilesResult](t, body)
	want := []string{"/workspace/up/a.txt", "/workspace/up/sub/dir/b.bin", "/workspace/up/line\nbreak\u00e9"}
	if len(res.Files) != 3 {
		t.Fatalf("answer %s", body)
	}
	for i, f := range res.Files {
		sum := sha256.Sum256([]byte(parts[i].body))
		if f.Path != want[i] || f.Size != int64(len(parts[i].body)) || f.SHA256 != hex.EncodeToString(sum[:]) || f.Mode != "0600" {
			t.Errorf("file %d: %+v, want %s", i, f, want[i])
		}
	}
	got := a.sh(id, `cd /workspace/up && cat a.txt && sha256sum sub/dir/b.bin | cut -c1-64 && cat "line
breakÃ©" 2>/dev/null; cat "$(printf 'line\nbreak\303\251')"; stat -c %a a.txt; ls -A`)
	sum := sha256.Sum256([]byte(big))
	if got != fmt.Sprintf("alpha%x\nodd600\na.txt\nline?break\u00e9\nsub\n", sum) && got != fmt.Sprintf("alpha%x\nodd600\na.txt\nline\nbreak\u00e9\nsub\n", sum) {
		t.Errorf("inside the sandbox: %q", got)
	}

	// The client's UploadFiles streams the same shape.
	c := client.New(a.url, filesKey)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := c.UploadFiles(ctx, id, "/workspace/up2", []client.UploadFile{
		{Name: "x/y.txt", Body: strings.NewReader("why")}, {Name: "new\nline", Body: strings.NewReader("nl")},
	}, client.UploadOptions{})
	if err != nil || len(out.Files) != 2 || out.Files[0].Path != "/workspace/up2/x/y.txt" || out.Files[1].Path != "/workspace/up2/new\nline" {
		t.Fatalf("client upload: %+v %v", out, err)
	}
	_, err = c.UploadFiles(ctx, id, "/workspace/up2", []client.UploadFile{{Name: "x/y.txt", Body: strings.NewReader("again")}},
		client.UploadOptions{NoOverwrite: true})
	if client.ErrorCode(err) != "file_exists" {
		t.Errorf("client upload over an existing file without overwrite: %v", err)
	}
	if got := a.sh(id, "cat /workspace/up2/x/y.txt; ls -A /workspace/up2/x"); got != "whyy.txt\n" {
		t.Errorf("after a refused overwrite: %q", got)
	}
}

// testMultipartBad sends uploads that must change nothing: the workspace
// directory /workspace/bad stays without files (and without staged ones).
func testMultipartBad(a *filesAPI, id string) {
	t := a.t
	a.sh(id, "mkdir -p /workspace/bad && printf keep > /workspace/bad/kept")
	good := part{quoted("first.txt"), "would be rolled back"}
	for _, c := range []struct {
		name   string
		parts  []part
		q      url.Values
		status int
		code   string
	}{
		{"parent escape", []part{good, {quoted("../evil"), "x"}}, nil, 400, "path_outside_root"},
		{"nested escape", []part{good, {quoted("a/../../evil"), "x"}}, nil, 400, "path_outside_root"},
		{"absolute name", []part{good, {quoted("/etc/evil"), "x"}}, nil, 400, "path_outside_root"},
		{"percent-encoded escape", []part{good, {`filename*=UTF-8''..%2F..%2Fevil`, "x"}}, nil, 400, "path_outside_root"},
		{"no filename", []part{good, {`x="y"`, "x"}}, nil, 400, "invalid_path"},
		{"invalid UTF-8", []part{good, {`filename*=UTF-8''a%FFb`, "x"}}, nil, 400, "invalid_path"},
		{"NUL", []part{good, {`filename*=UTF-8''a%00b`, "x"}}, nil, 400, "invalid_path"},
		{"too many files", []part{good, {quoted("2"), "x"}, {quoted("3"), "x"}, {quoted("4"), "x"}}, nil, 400, "too_many_files"},
		{"file over the limit", []part{good, {quoted("big"), strings.Repeat("x", testMaxUpload+1)}}, nil, 413, "upload_too_large"},
		{"same target twice", []part{good, {quoted("./first.txt"), "x"}}, nil, 400, "invalid_argument"},
		{"existing without overwrite", []part{good, {quoted("kept"), "x"}}, url.Values{"overwrite": {"false"}}, 409, "file_exists"},
		{"path too long", []part{good, {quoted(strings.Repeat("n", testMaxPath)), "x"}}, nil, 400, "path_too_long"},
	} {
		resp, body := a.upload(id, "/workspace/bad", c.q, c.parts)
		if resp.StatusCode != c.status || !strings.Contains(string(body), `"code":"`+c.code+`"`) {
			t.Errorf("%s: %d %s, want %d %s", c.name, resp.StatusCode, body, c.status, c.code)
		}
	}
	if got := a.sh(id, "ls -A /workspace/bad; cat /workspace/bad/kept; ls -A /workspace | grep -c evil || true"); got != "kept\nkeep0\n" {
		t.Errorf("after refused uploads: %q", got)
	}
	resp, body := a.call("POST", filesURL(id, "", url.Values{"path": {"/workspace/bad"}}), strings.NewReader("raw"), map[string]string{"Content-Type": "application/octet-stream"})
	checkProblem(t, resp, body, http.StatusBadRequest, "unsupported_media_type")
	resp, body = a.upload(id, "/workspace/../etc", nil, []part{good})
	checkProblem(t, resp, body, http.StatusBadRequest, "path_outside_root")
	resp, body = a.upload(id, "/workspace/bad", nil, nil)
	checkProblem(t, resp, body, http.StatusBadRequest, "invalid_argument")
	// Limits of single uploads and of the path come from the config too.
	resp, body = a.call("PUT", filesURL(id, "", url.Values{"path": {"/workspace/bad/big"}}), strings.NewReader(strings.Repeat("x", testMaxUpload+1)), nil)
	checkProblem(t, resp, body, http.StatusRequestEntityTooLarge, "upload_too_large")
	resp, body = a.call("GET", filesURL(id, "/stat", url.Values{"path": {"/workspace/" + strings.Repeat("n", testMaxPath)}}), "", nil)
	checkProblem(t, resp, body, http.StatusBadRequest, "path_too_long")
	resp, body = a.call("POST", filesURL(id, "/search", nil), `{"glob":"*","max_results":100000}`, nil)
	checkProblem(t, resp, body, http.StatusBadRequest, "invalid_argument")
	resp, body = a.call("POST", filesURL(id, "/replace", nil), `{"paths":["a","b","c","d"],"find":"x","replace":"y"}`, nil)
	checkProblem(t, resp, body, http.StatusBadRequest, "invalid_argument")
}

// testFileRoots checks that a profile's file roots bound the file API:
// tool-basic here has the default roots — /workspace, /tmp and the sandbox
// user's home (/home/sandbox in the profile images) —, tool-tmp only /tmp.
func testFileRoots(a *filesAPI, wide, narrow string) {
	t := a.t
	_, body := a.call("GET", "/v1/profiles", "", nil)
	roots := map[string][]string{}
	for _, p := range decodeJSON[client.ProfileList](t, body).Items {
		roots[p.Name] = p.FileRoots
	}
	if fmt.Sprint(roots["tool-basic"], roots["tool-tmp"], roots["code-python-basic"]) != "[/workspace /tmp ~] [/tmp] [/workspace /tmp ~]" {
		t.Errorf("profiles show file roots %v", roots)
	}
	if resp, body := a.call("PUT", filesURL(wide, "", url.Values{"path": {"/tmp/rooted"}}), strings.NewReader("tmp"), nil); resp.StatusCode != 201 {
		t.Errorf("put into the second root: %d %s", resp.StatusCode, body)
	}
	if got := a.sh(wide, "cat /tmp/rooted"); got != "tmp" {
		t.Errorf("/tmp/rooted holds %q", got)
	}
	home := strings.TrimSpace(a.sh(wide, "getent passwd $(id -u) | cut -d: -f6"))
	if home != "/home/sandbox" {
		t.Fatalf("the sandbox user's home is %q", home)
	}
	if resp, body := a.call("PUT", filesURL(wide, "", url.Values{"path": {home + "/.config/app/rc"}}), strings.NewReader("home"), nil); resp.StatusCode != 201 {
		t.Errorf("put into the home: %d %s", resp.StatusCode, body)
	}
	if got := a.sh(wide, "cat ~/.config/app/rc; stat -c %u ~/.config/app/rc"); got != "home1000\n" {
		t.Errorf("~/.config/app/rc holds %q, want home, owned by the sandbox user", got)
	}
	if resp, body := a.call("GET", filesURL(wide, "/list", url.Values{"path": {home + "/.config"}}), "", nil); resp.StatusCode != 200 || !strings.Contains(string(body), `"name":"app"`) {
		t.Errorf("list the home: %d %s", resp.StatusCode, body)
	}
	a.sh(wide, "ln -s /etc/passwd ~/abs; ln -s ../../etc/passwd ~/rel; ln -s ../workspace /tmp/ws")
	for _, p := range []string{"/etc/passwd", "/proc/self/root/etc/passwd", "/proc/1/environ", "/run/genesis/agent.sock", "/.genesis/genesis-agent",
		"/home", home + "/../../etc/passwd", home + "/abs", home + "/rel", "/tmp/ws/x", "/dev/shm/x", "/"} {
		resp, body := a.call("GET", filesURL(wide, "", url.Values{"path": {p}}), "", nil)
		checkProblem(t, resp, body, http.StatusBadRequest, "path_outside_root")
	}
	resp, body := a.call("POST", filesURL(wide, "/delete", nil), `{"path":"/run/genesis/agent.sock"}`, nil)
	checkProblem(t, resp, body, http.StatusBadRequest, "path_outside_root")

	resp, body = a.call("PUT", filesURL(narrow, "", url.Values{"path": {"/workspace/x"}}), strings.NewReader("no"), nil)
	checkProblem(t, resp, body, http.StatusBadRequest, "path_outside_root")
	resp, body = a.call("PUT", filesURL(narrow, "", url.Values{"path": {"rel.txt"}}), strings.NewReader("rel"), nil)
	if resp.StatusCode != 201 || !strings.Contains(string(body), `"path":"/tmp/rel.txt"`) {
		t.Errorf("relative path under a profile rooted at /tmp: %d %s", resp.StatusCode, body)
	}
	if got := a.sh(narrow, "cat /tmp/rel.txt; ls -A /workspace"); got != "rel" {
		t.Errorf("inside the /tmp-rooted sandbox: %q", got)
	}
	// The roots also reach the agent itself: its own policy refuses
	// /workspace in the narrow sandbox even for a search walking from /.
	resp, body = a.call("POST", filesURL(narrow, "/search", nil), `{"path":"/workspace","glob":"*"}`, nil)
	checkProblem(t, resp, body, http.StatusBadRequest, "path_outside_root")
	if got := a.sh(narrow, "printf '%s' \"$GENESIS_AGENT_FILE_ROOTS\""); got != "" {
		t.Errorf("the agent's roots variable leaks into jobs: %q", got)
	}
}

// testOddFiles covers device files, names with newlines and names that are
// not valid UTF-8 made inside the workspace behind the API's back.
func testOddFiles(a *filesAPI, id string) {
	t := a.t
	ws := filepath.Join(a.dataDir, "sandboxes", id, "workspace")
	if err := os.MkdirAll(filepath.Join(ws, "odd"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(ws, "odd"), 1000, 1000); err != nil { // the sandbox user's
		t.Fatal(err)
	}
	// A device node, as root on the host would leave it: never opened.
	if err := syscall.Mknod(filepath.Join(ws, "odd", "null"), syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
		t.Skipf("mknod: %v", err)
	}
	resp, body := a.call("GET", filesURL(id, "", url.Values{"path": {"/workspace/odd/null"}}), "", nil)
	checkProblem(t, resp, body, http.StatusBadRequest, "not_regular_file")
	resp, body = a.call("GET", filesURL(id, "/stat", url.Values{"path": {"/workspace/odd/null"}}), "", nil)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"type":"device"`) {
		t.Errorf("stat of a device: %d %s", resp.StatusCode, body)
	}
	// An upload onto it replaces the node; nothing is written through it.
	if resp, body := a.call("PUT", filesURL(id, "", url.Values{"path": {"/workspace/odd/null"}}), strings.NewReader("data"), nil); resp.StatusCode != 201 {
		t.Errorf("put over a device: %d %s", resp.StatusCode, body)
	}
	if got := a.sh(id, "test -f /workspace/odd/null && cat /workspace/odd/null"); got != "data" {
		t.Errorf("after the put the path holds %q", got)
	}
	// Names with a newline and with invalid UTF-8, made inside the sandbox.
	a.sh(id, `cd /workspace/odd && printf 1 > "$(printf 'new\nline')" && printf 2 > "$(printf 'bad\377name')"`)
	resp, body = a.call("GET", filesURL(id, "/list", url.Values{"path": {"/workspace/odd"}}), "", nil)
	list := decodeJSON[struct {
		Entries []struct {
			Name            string `json:"name"`
			NameInvalidUTF8 bool   `json:"name_invalid_utf8"`
		} `json:"entries"`
	}](t, body)
	var names []string
	for _, e := range list.Entries {
		names = append(names, fmt.Sprintf("%q:%v", e.Name, e.NameInvalidUTF8))
	}
	if want := fmt.Sprintf("%q:true %q:false %q:false", "bad\ufffdname", "new\nline", "null"); resp.StatusCode != 200 || strings.Join(names, " ") != want {
		t.Errorf("list: %d %s, want %s", resp.StatusCode, strings.Join(names, " "), want)
	}
	if resp, body = a.call("GET", filesURL(id, "", url.Values{"path": {"/workspace/odd/new\nline"}}), "", nil); resp.StatusCode != 200 || string(body) != "1" {
		t.Errorf("get a newline name: %d %q", resp.StatusCode, body)
	}
	resp, body = a.call("GET", "/v1/sandboxes/"+id+"/files?path=/workspace/odd/bad%FFname", "", nil)
	checkProblem(t, resp, body, http.StatusBadRequest, "invalid_path")
	resp, body = a.call("PUT", "/v1/sandboxes/"+id+"/files?path=/workspace/odd/made%FFhere", strings.NewReader("x"), nil)
	checkProblem(t, resp, body, http.StatusBadRequest, "invalid_path")
	resp, body = a.call("POST", filesURL(id, "/mkdir", nil), `{"path":"/workspace/odd/a\nb/c"}`, nil)
	if resp.StatusCode != 200 {
		t.Errorf("mkdir with a newline: %d %s", resp.StatusCode, body)
	}
	// Percent-encoded ../ in every route's path, not only in downloads.
	for _, raw := range []string{"%2e%2e%2fetc%2fpasswd", "/workspace/%2e%2e/etc", "/workspace/odd/..%2F..%2F..%2Fetc"} {
		for _, sub := range []string{"/stat", "/list", "/archive"} {
			resp, body := a.call("GET", "/v1/sandboxes/"+id+"/files"+sub+"?path="+raw, "", nil)
			checkProblem(t, resp, body, http.StatusBadRequest, "path_outside_root")
		}
		resp, body := a.call("PUT", "/v1/sandboxes/"+id+"/files?path="+raw, strings.NewReader("x"), nil)
		checkProblem(t, resp, body, http.StatusBadRequest, "path_outside_root")
	}
	if got := a.sh(id, "ls /etc | grep -c '^passwd$'; test ! -e /etc/x && echo clean"); got != "1\nclean\n" {
		t.Errorf("outside the workspace: %q", got)
	}
}
