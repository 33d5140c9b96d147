package httpapi_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/images"
	"genesis.dev/sandbox/internal/assemble"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/httpapi"
	"genesis.dev/sandbox/internal/store/sqlite"
	"genesis.dev/sandbox/internal/testenv"
)

// The file routes are tested end to end against real Docker: the service
// and the HTTP API run in the test process, sandboxes are real containers
// of the tool-basic profile under runc and runsc, and every file operation
// runs in the in-sandbox agent.

const filesKey = "files-key-0123456789abcdef"

// filesAPI is an in-process service over the Docker driver, served on
// loopback.
type filesAPI struct {
	t        *testing.T
	url      string
	hc       *http.Client
	dataDir  string
	instance string
	runtimes []string
}

func newFilesAPI(t *testing.T) *filesAPI {
	t.Helper()
	return newFilesAPIWith(t, nil)
}

// newFilesAPIWith is newFilesAPI with the configuration changed by tune.
func newFilesAPIWith(t *testing.T, tune func(*config.Config)) *filesAPI {
	t.Helper()
	drv := testenv.DockerWithAgent(t)
	var rts []string
	for _, r := range testenv.Runtimes(t, drv) {
		rts = append(rts, string(r))
	}
	rec, ok := images.Lookup("tool-basic")
	if !ok {
		t.Fatal("no image recipe tool-basic")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if ok, err := drv.ImagePresent(ctx, rec.Ref()); err != nil || !ok {
		if os.Getenv("CI") == "true" {
			t.Fatalf("image %s is not built (make test-images): %v", rec.Ref(), err)
		}
		t.Skipf("image %s is not built (make test-images): %v", rec.Ref(), err)
	}
	dir, err := os.MkdirTemp("", "gf") // short: sandbox dirs hold Unix sockets
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Default()
	if err != nil {
		t.Fatal(err)
	}
	cfg.WarmPools = false // tests that want pools set them up
	cfg.DataDir = dir
	cfg.Intervals.Reconcile = time.Hour
	cfg.Intervals.OrphanGrace = 720 * time.Hour // never judge another test's containers
	if tune != nil {
		tune(cfg)
	}
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(dir, "state.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var rnd [4]byte
	rand.Read(rnd[:])
	inst := "gs-files-" + hex.EncodeToString(rnd[:])
	stack, err := assemble.Build(context.Background(), assemble.Config{Settings: cfg, Store: st, Driver: drv, Images: drv, AgentDir: testenv.AgentDir(t), InstanceID: inst})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stack.Close() })
	if err := stack.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv, err := httpapi.New(httpapi.Config{PublicURL: testPublicURL, Control: stack.Control, Terminals: stack.Terminals, Files: stack.Files, Jobs: stack.Jobs,
		Artifacts: stack.Artifacts, Keys: map[string]string{filesKey: "default"}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	a := &filesAPI{t: t, url: ts.URL, hc: ts.Client(), dataDir: dir, instance: inst, runtimes: rts}
	t.Cleanup(func() { a.checkNoContainers(drv) })
	return a
}

// checkNoContainers fails the test if a container of the instance is left.
func (a *filesAPI) checkNoContainers(drv driver.Driver) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := drv.List(ctx)
	if err != nil {
		a.t.Errorf("listing containers: %v", err)
		return
	}
	for _, c := range list {
		if c.Labels[driver.LabelInstance] == a.instance {
			a.t.Errorf("container %s of the test's instance left behind", c.Name)
			rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
			_ = drv.Remove(rctx, c.ID)
			rcancel()
		}
	}
}

// call sends one request; body may be a string (JSON) or an io.Reader
// (raw). rawQuery is appended to path as is.
func (a *filesAPI) call(method, path string, body any, header map[string]string) (*http.Response, []byte) {
	a.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case string:
		if b != "" {
			rd = strings.NewReader(b)
		}
	case io.Reader:
		rd = b
	}
	hr, err := http.NewRequest(method, a.url+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	hr.Header.Set("Authorization", "Bearer "+filesKey)
	if _, ok := body.(string); ok && body != "" {
		hr.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		hr.Header.Set(k, v)
	}
	resp, err := a.hc.Do(hr)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatalf("%s %s: body: %v", method, path, err)
	}
	return resp, b
}

func (a *filesAPI) create(rt string) string {
	a.t.Helper()
	return a.createProfile(rt, "tool-basic")
}

func (a *filesAPI) createProfile(rt, profile string) string {
	a.t.Helper()
	resp, body := a.call("POST", "/v1/sandboxes", fmt.Sprintf(`{"profile":%q,"runtime":%q}`, profile, rt), nil)
	if resp.StatusCode != http.StatusCreated {
		a.t.Fatalf("create %s: %d %s", rt, resp.StatusCode, body)
	}
	sb := decodeJSON[client.Sandbox](a.t, body)
	a.t.Cleanup(func() {
		if resp, body := a.call("DELETE", "/v1/sandboxes/"+sb.ID, "", nil); resp.StatusCode/100 != 2 {
			a.t.Errorf("delete sandbox: %d %s", resp.StatusCode, body)
		}
	})
	return sb.ID
}

// sh runs a script in the sandbox and returns its stdout; it must exit 0.
func (a *filesAPI) sh(id, script string) string {
	a.t.Helper()
	b, _ := json.Marshal(client.ExecRequest{Script: script, TimeoutMS: 30000})
	resp, body := a.call("POST", "/v1/sandboxes/"+id+"/exec", string(b), nil)
	res := decodeJSON[client.ExecResult](a.t, body)
	if resp.StatusCode != 200 || res.ExitCode != 0 {
		a.t.Fatalf("exec %q: %d %s", script, resp.StatusCode, body)
	}
	return res.Stdout
}

func filesURL(id, sub string, q url.Values) string {
	p := "/v1/sandboxes/" + id + "/files" + sub
	if q != nil {
		p += "?" + q.Encode()
	}
	return p
}

func TestFilesHTTP(t *testing.T) {
	t.Parallel()
	a := newFilesAPI(t)
	for _, rt := range a.runtimes {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			a := *a
			a.t = t
			id := a.create(rt)
			t.Run("operations", func(t *testing.T) { a.t = t; testFilesHTTPOperations(&a, id) })
			t.Run("escapes", func(t *testing.T) { a.t = t; testFilesHTTPEscapes(&a, id) })
			t.Run("archives", func(t *testing.T) { a.t = t; testFilesHTTPArchives(&a, id) })
			t.Run("search", func(t *testing.T) { a.t = t; testFilesHTTPSearch(&a, id) })
			t.Run("oversize", func(t *testing.T) { a.t = t; testFilesHTTPOversize(&a, id) })
		})
	}
}

func testFilesHTTPOperations(a *filesAPI, id string) {
	t := a.t
	content := strings.Repeat("genesis ", 4096) // 32 KiB
	sum := sha256.Sum256([]byte(content))
	resp, body := a.call("PUT", filesURL(id, "", url.Values{"path": {"/workspace/dir/sub/f.txt"}, "mode": {"0600"}}), strings.NewReader(content), nil)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("put: %d %s", resp.StatusCode, body)
	}
	var w struct {
		Path, SHA256, Mode string
		Size               int64
	}
	json.Unmarshal(body, &w)
	if w.Path != "/workspace/dir/sub/f.txt" || w.Size != int64(len(content)) || w.SHA256 != hex.EncodeToString(sum[:]) || w.Mode != "0600" {
		t.Errorf("put answer %s", body)
	}
	if got := a.sh(id, "stat -c '%a %u %s' /workspace/dir/sub/f.txt; sha256sum /workspace/dir/sub/f.txt | cut -d' ' -f1"); got != fmt.Sprintf("600 1000 %d\n%x\n", len(content), sum) {
		t.Errorf("inside the sandbox the file is %q", got)
	}

	resp, body = a.call("GET", filesURL(id, "", url.Values{"path": {"dir/sub/f.txt"}}), "", nil)
	etag := resp.Header.Get("ETag")
	if resp.StatusCode != 200 || string(body) != content || etag == "" || resp.Header.Get("Content-Length") != fmt.Sprint(len(content)) {
		t.Errorf("get: %d %d bytes etag %q headers %v", resp.StatusCode, len(body), etag, resp.Header)
	}
	resp, body = a.call("GET", filesURL(id, "", url.Values{"path": {"/workspace/dir/sub/f.txt"}}), "", map[string]string{"Range": "bytes=8-14"})
	if resp.StatusCode != 206 || string(body) != "genesis" || resp.Header.Get("Content-Range") != fmt.Sprintf("bytes 8-14/%d", len(content)) {
		t.Errorf("range: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	resp, body = a.call("GET", filesURL(id, "", url.Values{"path": {"/workspace/dir/sub/f.txt"}}), "", map[string]string{"Range": "bytes=-4"})
	if resp.StatusCode != 206 || string(body) != "sis " {
		t.Errorf("suffix range: %d %q", resp.StatusCode, body)
	}
	resp, body = a.call("GET", filesURL(id, "", url.Values{"path": {"/workspace/dir/sub/f.txt"}}), "", map[string]string{"Range": "bytes=999999-"})
	checkProblem(t, resp, body, http.StatusRequestedRangeNotSatisfiable, "range_not_satisfiable")
	if cr := resp.Header.Get("Content-Range"); cr != fmt.Sprintf("bytes */%d", len(content)) {
		t.Errorf("416 Content-Range %q", cr)
	}
	resp, body = a.call("GET", filesURL(id, "", url.Values{"path": {"/workspace/dir/sub/f.txt"}}), "", map[string]string{"If-None-Match": etag})
	if resp.StatusCode != 304 || len(body) != 0 || resp.Header.Get("ETag") != etag {
		t.Errorf("if-none-match: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	resp, body = a.call("HEAD", filesURL(id, "", url.Values{"path": {"/workspace/dir/sub/f.txt"}}), "", nil)
	if resp.StatusCode != 200 || len(body) != 0 || resp.Header.Get("ETag") != etag || resp.ContentLength != int64(len(content)) {
		t.Errorf("head: %d %v", resp.StatusCode, resp.Header)
	}

	resp, body = a.call("GET", filesURL(id, "/stat", url.Values{"path": {"/workspace/dir/sub/f.txt"}}), "", nil)
	info := decodeJSON[map[string]any](t, body)
	if resp.StatusCode != 200 || info["type"] != "file" || info["mode"] != "0600" || info["uid"] != 1000.0 || info["name"] != "f.txt" {
		t.Errorf("stat: %d %s", resp.StatusCode, body)
	}
	resp, body = a.call("POST", filesURL(id, "/mkdir", nil), `{"path":"/workspace/m/n","mode":"0750"}`, nil)
	if info := decodeJSON[map[string]any](t, body); resp.StatusCode != 200 || info["type"] != "dir" || info["mode"] != "0750" {
		t.Errorf("mkdir: %d %s", resp.StatusCode, body)
	}
	resp, body = a.call("POST", filesURL(id, "/move", nil), `{"from":"/workspace/dir/sub/f.txt","to":"/workspace/m/n/g.txt"}`, nil)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"path":"/workspace/m/n/g.txt"`) {
		t.Errorf("move: %d %s", resp.StatusCode, body)
	}
	resp, body = a.call("PUT", filesURL(id, "", url.Values{"path": {"/workspace/dir/x"}}), strings.NewReader("x"), nil)
	if resp.StatusCode != 201 {
		t.Errorf("put x: %d %s", resp.StatusCode, body)
	}
	resp, body = a.call("POST", filesURL(id, "/move", nil), `{"from":"/workspace/dir/x","to":"/workspace/m/n/g.txt"}`, nil)
	checkProblem(t, resp, body, http.StatusConflict, "file_exists")
	resp, body = a.call("PUT", filesURL(id, "", url.Values{"path": {"/workspace/dir/x"}, "overwrite": {"false"}}), strings.NewReader("y"), nil)
	checkProblem(t, resp, body, http.StatusConflict, "file_exists")
	resp, body = a.call("POST", filesURL(id, "/chmod", nil), `{"path":"/workspace/m/n/g.txt","mode":"0444"}`, nil)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"mode":"0444"`) {
		t.Errorf("chmod: %d %s", resp.StatusCode, body)
	}
	resp, body = a.call("GET", filesURL(id, "/list", url.Values{"path": {"/workspace"}, "depth": {"3"}}), "", nil)
	var list struct {
		Path    string
		Entries []struct{ Path, Type string }
	}
	json.Unmarshal(body, &list)
	var paths []string
	for _, e := range list.Entries {
		paths = append(paths, e.Path+":"+e.Type)
	}
	if want := "/workspace/dir:dir /workspace/dir/sub:dir /workspace/dir/x:file /workspace/m:dir /workspace/m/n:dir /workspace/m/n/g.txt:file"; resp.StatusCode != 200 || strings.Join(paths, " ") != want {
		t.Errorf("list: %d %q, want %q", resp.StatusCode, strings.Join(paths, " "), want)
	}
	resp, body = a.call("POST", filesURL(id, "/delete", nil), `{"path":"/workspace/m"}`, nil)
	checkProblem(t, resp, body, http.StatusConflict, "directory_not_empty")
	for _, p := range []string{"/workspace/m", "/workspace/dir"} {
		if resp, body = a.call("POST", filesURL(id, "/delete", nil), `{"path":"`+p+`","recursive":true}`, nil); resp.StatusCode != 204 {
			t.Errorf("delete %s: %d %s", p, resp.StatusCode, body)
		}
	}
	resp, body = a.call("GET", filesURL(id, "/stat", url.Values{"path": {"/workspace/m"}}), "", nil)
	checkProblem(t, resp, body, http.StatusNotFound, "file_not_found")
	resp, body = a.call("POST", filesURL(id, "/delete", nil), `{"path":"/workspace/m","bogus":1}`, nil)
	checkProblem(t, resp, body, http.StatusBadRequest, "invalid_argument")
	resp, body = a.call("GET", "/v1/sandboxes/sbx_nope/files/stat?path=/workspace", "", nil)
	if resp.StatusCode != 404 {
		t.Errorf("unknown sandbox: %d %s", resp.StatusCode, body)
	}

	// A name with a newline round-trips.
	odd := "/workspace/line\nbreak.txt"
	if resp, body = a.call("PUT", filesURL(id, "", url.Values{"path": {odd}}), strings.NewReader("odd"), nil); resp.StatusCode != 201 {
		t.Errorf("put newline name: %d %s", resp.StatusCode, body)
	}
	if resp, body = a.call("GET", filesURL(id, "", url.Values{"path": {odd}}), "", nil); resp.StatusCode != 200 || string(body) != "odd" {
		t.Errorf("get newline name: %d %q", resp.StatusCode, body)
	}
	a.sh(id, `rm -f "/workspace/line
break.txt"`)
}

// testFilesHTTPEscapes tries the ways out of /workspace over HTTP, with
// symlinks made by a command inside the sandbox, and checks that nothing
// outside was read or written. The writable place outside is /var/tmp
// (/tmp is a file root of its own).
func testFilesHTTPEscapes(a *filesAPI, id string) {
	t := a.t
	a.sh(id, `set -e; cd /workspace; mkdir -p esc; cd esc
ln -s /etc etc; ln -s /proc/self/root root; ln -s /var/tmp tmp; ln -s ../../etc rel; ln -s /etc/passwd passwd
ln -s /dev/zero zero; mkfifo fifo; printf inside > plain`)
	snapshot := `ls -la /var/tmp /etc | md5sum; md5sum /etc/passwd; ls -la /workspace/esc`
	before := a.sh(id, snapshot)

	outside := func(raw string) {
		t.Helper()
		resp, body := a.call("GET", "/v1/sandboxes/"+id+"/files?path="+raw, "", nil)
		checkProblem(t, resp, body, http.StatusBadRequest, "path_outside_root")
		if strings.Contains(string(body), "root:x:0:0") {
			t.Errorf("GET %s leaked /etc/passwd", raw)
		}
	}
	for _, raw := range []string{
		"../etc/passwd",
		"%2e%2e%2fetc%2fpasswd",
		"%2E%2E/%2E%2E/etc/passwd",
		"/workspace/%2e%2e/etc/passwd",
		"/workspace/..%2f..%2fetc%2fpasswd",
		"/etc/passwd",
		"%2Fetc%2Fpasswd",
		"/proc/self/root/etc/passwd",
		"/dev/zero",
		"/run/genesis/agent.sock",
		"/workspace/esc/etc/passwd",
		"/workspace/esc/root/etc/passwd",
		"/workspace/esc/rel/passwd",
		"/workspace/esc/passwd",
		"/workspace/esc/zero",
	} {
		outside(raw)
	}
	// Double encoding is a literal name inside the workspace, not a way out.
	resp, body := a.call("GET", "/v1/sandboxes/"+id+"/files?path=%252e%252e%252fetc%252fpasswd", "", nil)
	checkProblem(t, resp, body, http.StatusNotFound, "file_not_found")
	resp, body = a.call("GET", filesURL(id, "", url.Values{"path": {"/workspace/esc/fifo"}}), "", nil)
	checkProblem(t, resp, body, http.StatusBadRequest, "not_regular_file")
	resp, body = a.call("GET", filesURL(id, "/list", url.Values{"path": {"/workspace/esc/etc"}}), "", nil)
	checkProblem(t, resp, body, http.StatusBadRequest, "path_outside_root")
	resp, body = a.call("GET", filesURL(id, "/stat", url.Values{"path": {"/workspace/esc/root/etc"}}), "", nil)
	checkProblem(t, resp, body, http.StatusBadRequest, "path_outside_root")
	resp, body = a.call("GET", filesURL(id, "", url.Values{"path": {"/workspace/a\xffb"}}), "", nil)
	checkProblem(t, resp, body, http.StatusBadRequest, "invalid_path")
	resp, body = a.call("GET", "/v1/sandboxes/"+id+"/files?path=/workspace/a%00b", "", nil)
	checkProblem(t, resp, body, http.StatusBadRequest, "invalid_path")

	// Writes through links fail and leave /var/tmp and /etc alone.
	for _, p := range []string{"/workspace/esc/tmp/evil", "/workspace/esc/tmp/new/evil", "/workspace/esc/root/var/tmp/evil", "/var/tmp/evil"} {
		resp, body := a.call("PUT", filesURL(id, "", url.Values{"path": {p}}), strings.NewReader("evil"), nil)
		checkProblem(t, resp, body, http.StatusBadRequest, "path_outside_root")
	}
	for _, c := range []struct{ route, body string }{
		{"/mkdir", `{"path":"/workspace/esc/tmp/evil"}`},
		{"/move", `{"from":"/workspace/esc/plain","to":"/workspace/esc/tmp/evil"}`},
		{"/move", `{"from":"/workspace/esc/etc/hostname","to":"/workspace/stolen"}`},
		{"/chmod", `{"path":"/workspace/esc/passwd","mode":"0777"}`},
		{"/delete", `{"path":"/workspace/esc/etc/hostname"}`},
		{"/delete", `{"path":"/workspace/esc/tmp/x","recursive":true}`},
		{"/mkdir", `{"path":"/workspace/../var/tmp/evil"}`},
	} {
		resp, body := a.call("POST", filesURL(id, c.route, nil), c.body, nil)
		checkProblem(t, resp, body, http.StatusBadRequest, "path_outside_root")
	}
	// Removing the tree removes the links, not their targets.
	if resp, body := a.call("POST", filesURL(id, "/delete", nil), `{"path":"/workspace/esc","recursive":true}`, nil); resp.StatusCode != 204 {
		t.Errorf("delete esc: %d %s", resp.StatusCode, body)
	}
	after := a.sh(id, snapshot+" 2>/dev/null || true")
	beforeOutside, _, _ := strings.Cut(before, "total") // the esc listing is gone now
	if !strings.HasPrefix(after, beforeOutside) {
		t.Errorf("outside the workspace changed:\nbefore %s\nafter %s", before, after)
	}
}

func testFilesHTTPOversize(a *filesAPI, id string) {
	t := a.t
	// Announced: refused from the headers, before the body is read.
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(a.url, "http://"), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(60 * time.Second))
	fmt.Fprintf(conn, "PUT %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n",
		filesURL(id, "", url.Values{"path": {"/workspace/huge"}}), filesKey, int64(8)<<30)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("oversize PUT: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	checkProblem(t, resp, body, http.StatusRequestEntityTooLarge, "upload_too_large")

	// A body cut short (the client goes away): nothing written, and an
	// existing file keeps its content.
	if resp, body := a.call("PUT", filesURL(id, "", url.Values{"path": {"/workspace/kept"}}), strings.NewReader("old"), nil); resp.StatusCode != 201 {
		t.Fatalf("put kept: %d %s", resp.StatusCode, body)
	}
	for _, p := range []string{"/workspace/cut", "/workspace/kept"} {
		conn, err := net.DialTimeout("tcp", strings.TrimPrefix(a.url, "http://"), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(60 * time.Second))
		fmt.Fprintf(conn, "PUT %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 1000000\r\n\r\n%s",
			filesURL(id, "", url.Values{"path": {p}}), filesKey, strings.Repeat("x", 300000))
		conn.(*net.TCPConn).CloseWrite() // the body ends 700000 bytes early
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("upload cut short: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		conn.Close()
		checkProblem(t, resp, body, http.StatusBadRequest, "invalid_argument")
	}
	if got := a.sh(id, "ls -A /workspace; cat /workspace/kept"); strings.Contains(got, "cut") || !strings.HasSuffix(got, "old") || strings.Contains(got, ".genesis-upload") {
		t.Errorf("after uploads cut short the workspace holds %.300q", got)
	}

	// Streamed (chunked) past the limit: cut off, nothing written.
	if testing.Short() {
		t.Log("skipping the streamed 1 GiB oversize upload in -short mode")
	} else {
		limit := defaultLimits(t).Files.MaxUploadBytes
		resp, body = a.call("PUT", filesURL(id, "", url.Values{"path": {"/workspace/huge"}}), io.LimitReader(zeros{}, limit+1), nil)
		checkProblem(t, resp, body, http.StatusRequestEntityTooLarge, "upload_too_large")
	}
	if got := a.sh(id, "ls -A /workspace"); strings.Contains(got, "huge") || strings.Contains(got, ".genesis-upload") {
		t.Errorf("an oversize upload left files: %q", got)
	}
}

// zeros is an endless reader of zero bytes (chunked: no length announced).
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func testFilesHTTPArchives(a *filesAPI, id string) {
	t := a.t
	mk := func(gz bool, entries ...*tar.Header) []byte {
		var buf bytes.Buffer
		var w io.Writer = &buf
		var zw *gzip.Writer
		if gz {
			zw = gzip.NewWriter(&buf)
			w = zw
		}
		tw := tar.NewWriter(w)
		for _, h := range entries {
			body := h.Name
			if h.Typeflag == tar.TypeReg {
				h.Size = int64(len(body))
			}
			if h.Mode == 0 {
				h.Mode = 0o644
			}
			tw.WriteHeader(h)
			if h.Size > 0 {
				io.WriteString(tw, body)
			}
		}
		tw.Close()
		if zw != nil {
			zw.Close()
		}
		return buf.Bytes()
	}
	good := mk(true,
		&tar.Header{Name: "proj/", Typeflag: tar.TypeDir, Mode: 0o755},
		&tar.Header{Name: "proj/main.py", Typeflag: tar.TypeReg},
		&tar.Header{Name: "proj/lib/util.py", Typeflag: tar.TypeReg},
		&tar.Header{Name: "proj/current", Typeflag: tar.TypeSymlink, Linkname: "lib"},
	)
	resp, body := a.call("POST", filesURL(id, "/extract", url.Values{"path": {"/workspace/arch"}}), bytes.NewReader(good), nil)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"files":2`) || !strings.Contains(string(body), `"symlinks":1`) {
		t.Fatalf("extract: %d %s", resp.StatusCode, body)
	}
	if got := a.sh(id, "cat /workspace/arch/proj/current/util.py"); got != "proj/lib/util.py" {
		t.Errorf("extracted through the symlink: %q", got)
	}
	resp, body = a.call("GET", filesURL(id, "/archive", url.Values{"path": {"/workspace/arch"}}), "", nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-tar" {
		t.Fatalf("archive: %d %s", resp.StatusCode, resp.Header)
	}
	tr := tar.NewReader(bytes.NewReader(body))
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("archive: %v", err)
		}
		names = append(names, h.Name)
	}
	if got := strings.Join(names, " "); got != "proj/ proj/current proj/lib/ proj/lib/util.py proj/main.py" {
		t.Errorf("archive entries: %s", got)
	}

	before := a.sh(id, "ls -la /tmp /etc | md5sum")
	for name, archive := range map[string][]byte{
		"zip slip":        mk(false, &tar.Header{Name: "../../tmp/evil", Typeflag: tar.TypeReg}),
		"absolute":        mk(true, &tar.Header{Name: "/tmp/evil", Typeflag: tar.TypeReg}),
		"symlink to /etc": mk(false, &tar.Header{Name: "etc", Typeflag: tar.TypeSymlink, Linkname: "/etc"}, &tar.Header{Name: "etc/evil", Typeflag: tar.TypeReg}),
		"symlink up":      mk(false, &tar.Header{Name: "up", Typeflag: tar.TypeSymlink, Linkname: "../../../tmp"}, &tar.Header{Name: "up/evil", Typeflag: tar.TypeReg}),
		"hard link out":   mk(false, &tar.Header{Name: "pw", Typeflag: tar.TypeLink, Linkname: "../../../etc/passwd"}),
	} {
		resp, body := a.call("POST", filesURL(id, "/extract", url.Values{"path": {"/workspace/evil"}}), bytes.NewReader(archive), nil)
		if resp.StatusCode != 400 || !strings.Contains(string(body), `"code":"path_outside_root"`) {
			t.Errorf("%s: %d %s", name, resp.StatusCode, body)
		}
	}
	if after := a.sh(id, "ls -la /tmp /etc | md5sum"); after != before {
		t.Errorf("outside the workspace changed by hostile archives")
	}
	resp, body = a.call("GET", filesURL(id, "/archive", url.Values{"path": {"/etc"}}), "", nil)
	checkProblem(t, resp, body, http.StatusBadRequest, "path_outside_root")
	a.sh(id, "rm -rf /workspace/arch /workspace/evil")
}

func testFilesHTTPSearch(a *filesAPI, id string) {
	t := a.t
	a.sh(id, `set -e; mkdir -p /workspace/s/d; cd /workspace/s; printf 'x = "old"\n' > a.py; printf 'old\n' > d/b.py; printf 'old\n' > c.txt; ln -s /etc etc`)
	resp, body := a.call("POST", filesURL(id, "/search", nil), `{"path":"/workspace/s","content":"old","glob":"*.py"}`, nil)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `{"path":"/workspace/s/a.py","line":1,"text":"x = \"old\""},{"path":"/workspace/s/d/b.py","line":1,"text":"old"}]`) {
		t.Errorf("search: %d %s", resp.StatusCode, body)
	}
	resp, body = a.call("POST", filesURL(id, "/search", nil), `{"path":"/workspace/s/etc","glob":"passwd"}`, nil)
	checkProblem(t, resp, body, http.StatusBadRequest, "path_outside_root")
	resp, body = a.call("POST", filesURL(id, "/search", nil), `{"path":"/workspace/s"}`, nil)
	checkProblem(t, resp, body, http.StatusBadRequest, "invalid_argument")
	resp, body = a.call("POST", filesURL(id, "/replace", nil), `{"path":"/workspace/s","glob":"*.py","find":"old","replace":"new","dry_run":true}`, nil)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"replacements":2,"files_changed":2,"failed":0`) {
		t.Errorf("replace dry run: %d %s", resp.StatusCode, body)
	}
	resp, body = a.call("POST", filesURL(id, "/replace", nil), `{"paths":["/workspace/s/a.py","/workspace/s/c.txt"],"find":"old","replace":"new"}`, nil)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"replacements":2,"files_changed":2`) {
		t.Errorf("replace: %d %s", resp.StatusCode, body)
	}
	if got := a.sh(id, "cat /workspace/s/a.py /workspace/s/d/b.py /workspace/s/c.txt"); got != "x = \"new\"\nold\nnew\n" {
		t.Errorf("after replace: %q", got)
	}
	resp, body = a.call("POST", filesURL(id, "/replace", nil), `{"paths":["/etc/passwd"],"find":"root","replace":"toor"}`, nil)
	checkProblem(t, resp, body, http.StatusBadRequest, "path_outside_root")
	resp, body = a.call("POST", filesURL(id, "/replace", nil), `{"paths":["/workspace/s/etc/passwd"],"find":"root","replace":"toor"}`, nil)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"code":"path_outside_root"`) {
		t.Errorf("replace through a link out: %d %s", resp.StatusCode, body)
	}
	a.sh(id, "rm -rf /workspace/s")
}

// defaultLimits are the limits of the embedded default config.
func defaultLimits(t *testing.T) config.Limits {
	t.Helper()
	c, err := config.Default()
	if err != nil {
		t.Fatal(err)
	}
	return c.Limits
}
