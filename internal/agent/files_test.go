package agent_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/agent/agentclient"
	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// fileEnv is an agent whose allowed root is root, with a writable directory
// outside the root that holds a file "secret" the tests try to reach.
type fileEnv struct {
	c       *agentclient.Client
	root    string
	outside string // a sibling of root
}

const secret = "OUTSIDE-SECRET\n"

func (e *fileEnv) sh(t *testing.T, script string) string {
	t.Helper()
	res := execOK(t, e.c, agentproto.ExecRequest{Script: script, TimeoutMS: 20000})
	if res.ExitCode != 0 {
		t.Fatalf("script %q: exit %d: %s%s", script, res.ExitCode, res.Stdout, res.Stderr)
	}
	return string(res.Stdout)
}

func (e *fileEnv) p(rel string) string { return e.root + "/" + rel }

func fctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func write(t *testing.T, c *agentclient.Client, p, body string) (agentproto.FileWriteResult, error) {
	t.Helper()
	return c.WriteFile(fctx(t), agentclient.WriteFileRequest{Path: p, Overwrite: true, MaxBytes: -1, Size: int64(len(body))}, strings.NewReader(body))
}

func readAll(t *testing.T, c *agentclient.Client, p string, hdr http.Header) (int, http.Header, string, error) {
	t.Helper()
	fr, err := c.ReadFile(fctx(t), http.MethodGet, p, hdr)
	if err != nil {
		return 0, nil, "", err
	}
	defer fr.Body.Close()
	b, err := io.ReadAll(fr.Body)
	return fr.Status, fr.Header, string(b), err
}

// wantCode fails unless err has the class and problem code.
func wantCode(t *testing.T, what string, err error, class error, code string) {
	t.Helper()
	if !errors.Is(err, class) || errdefs.Code(err) != code {
		t.Errorf("%s: err = %v (code %q), want %v with code %s", what, err, errdefs.Code(err), class, code)
	}
}

func hostFileEnv(t *testing.T) *fileEnv {
	base := t.TempDir()
	root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	for _, d := range []string{root, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, agentproto.FileRootsEnv+"="+root)
	return &fileEnv{c: a.client, root: root, outside: outside}
}

func TestFilesOnHost(t *testing.T) {
	t.Parallel()
	e := hostFileEnv(t)
	t.Run("operations", func(t *testing.T) { testFileOperations(t, e) })
	t.Run("escapes", func(t *testing.T) { testFileEscapes(t, e) })
	t.Run("archives", func(t *testing.T) { testFileArchives(t, e) })
	t.Run("search", func(t *testing.T) { testFileSearchReplace(t, e) })
}

func TestFilesRefuseDevicesOnHost(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("mknod needs root")
	}
	e := hostFileEnv(t)
	// A character device like /dev/null (1,3) inside the root.
	if err := syscall.Mknod(e.p("null"), syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
		t.Skipf("mknod: %v", err)
	}
	_, _, _, err := readAll(t, e.c, e.p("null"), nil)
	wantCode(t, "read device", err, errdefs.ErrInvalidArgument, agentproto.CodeNotRegularFile)
	info, err := e.c.StatFile(fctx(t), e.p("null"))
	if err != nil || info.Type != agentproto.FileTypeDevice {
		t.Errorf("stat device: %+v %v", info, err)
	}
	// Writing replaces the node (rename), never writes into the device.
	if _, err := write(t, e.c, e.p("null"), "x"); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(e.p("null")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("after write: %v %v", fi, err)
	}
}

// testFileOperations covers every operation on ordinary input.
func testFileOperations(t *testing.T, e *fileEnv) {
	c := e.c
	ctx := fctx(t)
	body := strings.Repeat("0123456789", 10000)
	sum := sha256.Sum256([]byte(body))
	res, err := c.WriteFile(ctx, agentclient.WriteFileRequest{Path: e.p("a/b/c.txt"), Mode: "0640", MaxBytes: -1, Size: -1, Overwrite: true}, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if res.Size != int64(len(body)) || res.SHA256 != hex.EncodeToString(sum[:]) || res.Mode != "0640" || res.Path != e.p("a/b/c.txt") {
		t.Errorf("write result %+v", res)
	}
	// Relative paths are relative to the first root.
	status, hdr, got, err := readAll(t, c, "a/b/c.txt", nil)
	if err != nil || status != 200 || got != body {
		t.Fatalf("read: %d %v (%d bytes)", status, err, len(got))
	}
	etag := hdr.Get("ETag")
	if etag == "" || hdr.Get(agentproto.HeaderFileSize) != "100000" || hdr.Get(agentproto.HeaderFileMode) != "0640" {
		t.Errorf("read headers %v", hdr)
	}
	status, hdr, got, err = readAll(t, c, e.p("a/b/c.txt"), http.Header{"Range": {"bytes=10-19"}})
	if err != nil || status != 206 || got != "0123456789" || hdr.Get("Content-Range") != "bytes 10-19/100000" {
		t.Errorf("range: %d %q %v %v", status, got, hdr, err)
	}
	status, hdr, _, err = readAll(t, c, e.p("a/b/c.txt"), http.Header{"Range": {"bytes=200000-"}})
	if err != nil || status != 416 || hdr.Get("Content-Range") != "bytes */100000" {
		t.Errorf("unsatisfiable range: %d %v %v", status, hdr, err)
	}
	status, _, got, err = readAll(t, c, e.p("a/b/c.txt"), http.Header{"If-None-Match": {etag}})
	if err != nil || status != 304 || got != "" {
		t.Errorf("if-none-match: %d %q %v", status, got, err)
	}
	// A rewrite changes the ETag; without overwrite an existing file is a conflict.
	if _, err := write(t, c, e.p("a/b/c.txt"), "new"); err != nil {
		t.Fatal(err)
	}
	status, hdr, got, _ = readAll(t, c, e.p("a/b/c.txt"), http.Header{"If-None-Match": {etag}})
	if status != 200 || got != "new" || hdr.Get("ETag") == etag {
		t.Errorf("after rewrite: %d %q etag %s (was %s)", status, got, hdr.Get("ETag"), etag)
	}
	_, err = c.WriteFile(ctx, agentclient.WriteFileRequest{Path: e.p("a/b/c.txt"), MaxBytes: -1, Size: 1}, strings.NewReader("x"))
	wantCode(t, "write without overwrite", err, errdefs.ErrConflict, agentproto.CodeFileExists)
	_, err = write(t, c, e.p("a/b"), "x")
	wantCode(t, "write over a directory", err, errdefs.ErrConflict, agentproto.CodeIsADirectory)
	_, err = write(t, c, e.p("a/b/c.txt/d"), "x")
	wantCode(t, "write below a file", err, errdefs.ErrConflict, agentproto.CodeNotADirectory)
	_, _, _, err = readAll(t, c, e.p("a/b"), nil)
	wantCode(t, "read a directory", err, errdefs.ErrConflict, agentproto.CodeIsADirectory)
	_, _, _, err = readAll(t, c, e.p("nope"), nil)
	wantCode(t, "read missing", err, errdefs.ErrNotFound, agentproto.CodeFileNotFound)
	if _, err := write(t, c, e.p("empty"), ""); err != nil {
		t.Errorf("empty file: %v", err)
	}

	// Oversize: announced (refused before writing) and streamed.
	_, err = c.WriteFile(ctx, agentclient.WriteFileRequest{Path: e.p("big"), MaxBytes: 10, Size: 11, Overwrite: true}, strings.NewReader("01234567890"))
	wantCode(t, "announced oversize", err, errdefs.ErrTooLarge, agentproto.CodeUploadTooLarge)
	_, err = c.WriteFile(ctx, agentclient.WriteFileRequest{Path: e.p("big"), MaxBytes: 10, Size: -1, Overwrite: true}, io.MultiReader(strings.NewReader("0123456789"), strings.NewReader("0")))
	wantCode(t, "streamed oversize", err, errdefs.ErrTooLarge, agentproto.CodeUploadTooLarge)
	// A body that fails half way leaves the old content.
	_, err = c.WriteFile(ctx, agentclient.WriteFileRequest{Path: e.p("a/b/c.txt"), MaxBytes: -1, Size: -1, Overwrite: true},
		io.MultiReader(strings.NewReader(strings.Repeat("x", 100000)), errReader{}))
	if err == nil {
		t.Errorf("failing body: no error")
	}
	// The agent removed its temporary file before it answered.
	if list, err := c.ListFiles(ctx, e.p("a/b"), 0, 0); err != nil || strings.Contains(names(list), ".genesis-upload-") {
		t.Errorf("a failed write left a temporary file when its error came: %q %v", names(list), err)
	}
	if _, _, got, _ := readAll(t, c, e.p("a/b/c.txt"), nil); got != "new" {
		t.Errorf("after a failed write the file holds %d bytes, want the old content", len(got))
	}
	if _, err := c.StatFile(ctx, e.p("big")); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("oversize upload left a file: %v", err)
	}

	// stat, list, mkdir, move, chmod, delete.
	info, err := c.StatFile(ctx, e.p("a/b/c.txt"))
	if err != nil || info.Type != "file" || info.Size != 3 || info.Name != "c.txt" || info.Mode != "0644" {
		t.Errorf("stat: %+v %v", info, err)
	}
	if info, err = c.Mkdir(ctx, agentproto.MkdirRequest{Path: e.p("m/n/o"), Mode: "0700"}); err != nil || info.Type != "dir" || info.Mode != "0700" {
		t.Errorf("mkdir -p: %+v %v", info, err)
	}
	if _, err = c.Mkdir(ctx, agentproto.MkdirRequest{Path: e.p("m/n/o")}); err != nil {
		t.Errorf("mkdir -p of an existing dir: %v", err)
	}
	no := false
	_, err = c.Mkdir(ctx, agentproto.MkdirRequest{Path: e.p("m/n/o"), Parents: &no})
	wantCode(t, "mkdir existing", err, errdefs.ErrConflict, agentproto.CodeFileExists)
	_, err = c.Mkdir(ctx, agentproto.MkdirRequest{Path: e.p("x/y"), Parents: &no})
	wantCode(t, "mkdir without parent", err, errdefs.ErrNotFound, agentproto.CodeFileNotFound)
	list, err := c.ListFiles(ctx, e.root, 0, 0)
	if err != nil || names(list) != "a empty m" || list.Truncated {
		t.Errorf("list depth 1: %q %+v %v", names(list), list, err)
	}
	list, err = c.ListFiles(ctx, e.p("a"), 5, 0)
	if err != nil || names(list) != "b b/c.txt" || list.Entries[1].Path != e.p("a/b/c.txt") {
		t.Errorf("list depth 5: %q %v", names(list), err)
	}
	list, err = c.ListFiles(ctx, e.root, 5, 3)
	if err != nil || len(list.Entries) != 3 || !list.Truncated {
		t.Errorf("list limit 3: %q truncated=%v %v", names(list), list.Truncated, err)
	}
	_, err = c.ListFiles(ctx, e.p("a/b/c.txt"), 0, 0)
	wantCode(t, "list a file", err, errdefs.ErrConflict, agentproto.CodeNotADirectory)

	_, err = c.Move(ctx, agentproto.MoveRequest{From: e.p("empty"), To: e.p("a/b/c.txt")})
	wantCode(t, "move onto existing", err, errdefs.ErrConflict, agentproto.CodeFileExists)
	if info, err = c.Move(ctx, agentproto.MoveRequest{From: e.p("empty"), To: e.p("a/b/c.txt"), Overwrite: true}); err != nil || info.Size != 0 {
		t.Errorf("move with overwrite: %+v %v", info, err)
	}
	if info, err = c.Move(ctx, agentproto.MoveRequest{From: e.p("a/b"), To: e.p("m/b2")}); err != nil || info.Type != "dir" || info.Path != e.p("m/b2") {
		t.Errorf("move dir: %+v %v", info, err)
	}
	_, err = c.Move(ctx, agentproto.MoveRequest{From: e.root, To: e.p("r")})
	wantCode(t, "move the root", err, errdefs.ErrInvalidArgument, agentproto.CodeRootNotAllowed)
	if info, err = c.Chmod(ctx, agentproto.ChmodRequest{Path: e.p("m/b2/c.txt"), Mode: "600"}); err != nil || info.Mode != "0600" {
		t.Errorf("chmod: %+v %v", info, err)
	}
	_, err = c.Chmod(ctx, agentproto.ChmodRequest{Path: e.p("m/b2/c.txt"), Mode: "8"})
	wantCode(t, "chmod bad mode", err, errdefs.ErrInvalidArgument, agentproto.CodeInvalidMode)
	err = c.DeleteFile(ctx, agentproto.DeleteRequest{Path: e.p("m")})
	wantCode(t, "delete non-empty dir", err, errdefs.ErrConflict, agentproto.CodeDirNotEmpty)
	if err = c.DeleteFile(ctx, agentproto.DeleteRequest{Path: e.p("m"), Recursive: true}); err != nil {
		t.Errorf("delete tree: %v", err)
	}
	err = c.DeleteFile(ctx, agentproto.DeleteRequest{Path: e.p("m"), Recursive: true})
	wantCode(t, "delete missing", err, errdefs.ErrNotFound, agentproto.CodeFileNotFound)
	err = c.DeleteFile(ctx, agentproto.DeleteRequest{Path: e.root, Recursive: true})
	wantCode(t, "delete the root", err, errdefs.ErrInvalidArgument, agentproto.CodeRootNotAllowed)

	// Odd names: a newline and spaces are just bytes of a name.
	odd := e.p("dir with space/line\nbreak.txt")
	if _, err := write(t, c, odd, "odd"); err != nil {
		t.Fatal(err)
	}
	if _, _, got, err := readAll(t, c, odd, nil); err != nil || got != "odd" {
		t.Errorf("read newline name: %q %v", got, err)
	}
	if list, err := c.ListFiles(ctx, e.p("dir with space"), 0, 0); err != nil || names(list) != "line\nbreak.txt" {
		t.Errorf("list newline name: %q %v", names(list), err)
	}
	// A name that is not UTF-8 (made by a command) is listed safely and
	// cannot be addressed.
	e.sh(t, `printf x > "`+e.root+`/dir with space/bad-$(printf '\377')"`)
	list, err = c.ListFiles(ctx, e.p("dir with space"), 0, 0)
	if err != nil || len(list.Entries) != 2 || !list.Entries[0].NameInvalidUTF8 || list.Entries[0].Name != "bad-\uFFFD" {
		t.Errorf("list invalid UTF-8 name: %+v %v", list, err)
	}
	_, err = c.StatFile(ctx, e.p("dir with space/bad-\xff"))
	wantCode(t, "stat invalid UTF-8", err, errdefs.ErrInvalidArgument, agentproto.CodeInvalidPath)
	if err := c.DeleteFile(ctx, agentproto.DeleteRequest{Path: e.p("dir with space"), Recursive: true}); err != nil {
		t.Errorf("delete odd names: %v", err)
	}
	// Nothing of the failed uploads is left behind.
	if list, err := c.ListFiles(ctx, e.root, agentproto.MaxListDepth, 0); err != nil || strings.Contains(names(list), ".genesis-upload-") {
		t.Errorf("temporary files left: %q %v", names(list), err)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("sender went away") }

// names joins the entry paths of a listing relative to its path.
func names(l agentproto.FileList) string {
	var out []string
	for _, e := range l.Entries {
		out = append(out, strings.TrimPrefix(e.Path, l.Path+"/"))
	}
	return strings.Join(out, " ")
}

// testFileEscapes tries every way out of the root the tests know and checks
// that each is refused and that nothing outside was read or changed.
func testFileEscapes(t *testing.T, e *fileEnv) {
	c := e.c
	ctx := fctx(t)
	var err error
	if filepath.Dir(e.root) != filepath.Dir(e.outside) {
		t.Fatalf("outside %s is not a sibling of root %s", e.outside, e.root)
	}
	up := "../../" + filepath.Base(e.outside) // from root/esc
	e.sh(t, `set -e; printf '`+strings.TrimSuffix(secret, "\n")+`\n' > `+e.outside+`/secret; chmod 644 `+e.outside+`/secret
cd `+e.root+`; rm -rf esc; mkdir esc; cd esc
ln -s `+e.outside+` abs
ln -s `+up+` rel
ln -s `+up+`/secret relfile
ln -s `+e.outside+`/secret absfile
ln -s /proc/self/root procroot
ln -s /etc etc
mkfifo fifo
mkdir tree; ln -s `+e.outside+` tree/out`)
	before := e.sh(t, "ls -la "+e.outside+"; cat "+e.outside+"/secret")

	outside := func(what string, err error) {
		t.Helper()
		wantCode(t, what, err, errdefs.ErrInvalidArgument, agentproto.CodePathOutsideRoot)
	}
	for _, p := range []string{
		e.root + "/../" + filepath.Base(e.outside) + "/secret", // plain ..
		"../" + filepath.Base(e.outside) + "/secret",           // relative ..
		e.outside + "/secret",                                  // absolute outside
		"/etc/passwd",
		"/proc/self/root/etc/passwd",
		"/dev/null", // a device outside the root
		e.p("esc/abs/secret"),
		e.p("esc/rel/secret"),
		e.p("esc/relfile"),
		e.p("esc/absfile"),
		e.p("esc/procroot/etc/passwd"),
		e.p("esc/etc/passwd"),
		e.p("esc/tree/out/secret"),
		e.root + "x/secret", // a sibling sharing the root's prefix
	} {
		_, _, got, err := readAll(t, c, p, nil)
		outside("read "+p, err)
		if strings.Contains(got, "OUTSIDE") || strings.Contains(got, "root:") {
			t.Errorf("read %s returned outside content %q", p, got)
		}
		_, err = c.StatFile(ctx, p+"/x")
		if err == nil {
			t.Errorf("stat %s/x succeeded", p)
		}
	}
	_, _, _, err = readAll(t, c, e.p("esc/fifo"), nil)
	wantCode(t, "read fifo", err, errdefs.ErrInvalidArgument, agentproto.CodeNotRegularFile)
	_, err = c.ListFiles(ctx, e.p("esc/abs"), 0, 0)
	outside("list through symlink", err)
	_, err = c.ListFiles(ctx, e.p("esc/procroot"), 0, 0)
	outside("list /proc/self/root", err)
	// Listing the escape directory shows the links without following them.
	list, err := c.ListFiles(ctx, e.p("esc"), 3, 0)
	if err != nil || strings.Contains(names(list), "secret") || strings.Contains(names(list), "passwd") {
		t.Errorf("list esc: %q %v", names(list), err)
	}
	if info, err := c.StatFile(ctx, e.p("esc/abs")); err != nil || info.Type != "symlink" || info.LinkTarget != e.outside {
		t.Errorf("stat of the link itself: %+v %v", info, err)
	}

	// Writes through links must not land outside.
	_, err = write(t, c, e.p("esc/abs/evil"), "evil")
	outside("write through dir link", err)
	_, err = write(t, c, e.p("esc/abs/new/evil"), "evil")
	outside("write with parents through dir link", err)
	_, err = write(t, c, e.p("esc/rel/evil"), "evil")
	outside("write through relative link", err)
	_, err = c.Mkdir(ctx, agentproto.MkdirRequest{Path: e.p("esc/abs/evildir")})
	outside("mkdir through link", err)
	_, err = c.Chmod(ctx, agentproto.ChmodRequest{Path: e.p("esc/absfile"), Mode: "0777"})
	outside("chmod through link", err)
	_, err = c.Move(ctx, agentproto.MoveRequest{From: e.p("esc/abs/secret"), To: e.p("stolen")})
	outside("move from outside", err)
	_, err = c.Move(ctx, agentproto.MoveRequest{From: e.p("esc/fifo"), To: e.p("esc/abs/evil")})
	outside("move to outside", err)
	err = c.DeleteFile(ctx, agentproto.DeleteRequest{Path: e.p("esc/abs/secret")})
	outside("delete through link", err)
	// Overwriting a file link replaces the link, not its target.
	if _, err := write(t, c, e.p("esc/absfile"), "replaced"); err != nil {
		t.Errorf("write over a link: %v", err)
	}
	if info, err := c.StatFile(ctx, e.p("esc/absfile")); err != nil || info.Type != "file" {
		t.Errorf("after write over a link: %+v %v", info, err)
	}
	// Deleting a link or a tree holding links leaves the targets alone.
	if err := c.DeleteFile(ctx, agentproto.DeleteRequest{Path: e.p("esc/abs")}); err != nil {
		t.Errorf("delete link: %v", err)
	}
	if err := c.DeleteFile(ctx, agentproto.DeleteRequest{Path: e.p("esc"), Recursive: true}); err != nil {
		t.Errorf("delete tree with links: %v", err)
	}
	if after := e.sh(t, "ls -la "+e.outside+"; cat "+e.outside+"/secret"); after != before {
		t.Errorf("outside directory changed:\nbefore %s\nafter %s", before, after)
	}

	// A symlink swapped in while reads run: each read gets the inside file
	// or an error, never the outside one.
	e.sh(t, `set -e; cd `+e.root+`; mkdir -p swap/real; printf inside > swap/real/secret; ln -s real swap/cur`)
	var wg sync.WaitGroup
	wg.Add(1)
	var swaps agentproto.ExecResult
	go func() {
		defer wg.Done()
		swaps, _ = c.Exec(context.Background(), agentproto.ExecRequest{TimeoutMS: 3000, Script: `cd ` + e.root + `/swap; n=0
while :; do ln -sfn real cur; ln -sfn ` + e.outside + ` cur; n=$((n+1)); echo $n > count; done`})
	}()
	seen := map[string]int{}
	deadline := time.Now().Add(2500 * time.Millisecond)
	for time.Now().Before(deadline) {
		_, _, got, err := readAll(t, c, e.p("swap/cur/secret"), nil)
		switch {
		case err == nil && got == "inside":
			seen["inside"]++
		case err != nil:
			seen[errdefs.Code(err)]++
		default:
			t.Fatalf("read during swaps returned %q", got)
		}
	}
	wg.Wait()
	if seen["inside"] == 0 || seen[agentproto.CodePathOutsideRoot] == 0 {
		t.Logf("swap race outcomes %v (exec %s): both sides were not hit", seen, swaps.ExitReason)
	} else {
		t.Logf("swap race outcomes %v", seen)
	}
}

// TestFilesProtocolErrors covers what the agent refuses before touching a
// file: bad queries, methods and bodies.
func TestFilesProtocolErrors(t *testing.T) {
	t.Parallel()
	e := hostFileEnv(t)
	ctx := fctx(t)
	_, _, _, err := readAll(t, e.c, "", nil)
	wantCode(t, "empty path", err, errdefs.ErrInvalidArgument, agentproto.CodeInvalidPath)
	_, _, _, err = readAll(t, e.c, e.p("a\x00b"), nil)
	wantCode(t, "NUL", err, errdefs.ErrInvalidArgument, agentproto.CodeInvalidPath)
	_, _, _, err = readAll(t, e.c, e.p(strings.Repeat("n", 256)), nil)
	wantCode(t, "long name", err, errdefs.ErrInvalidArgument, agentproto.CodePathTooLong)
	_, err = e.c.WriteFile(ctx, agentclient.WriteFileRequest{Path: e.p("m"), Mode: "99", MaxBytes: -1, Size: 0}, bytes.NewReader(nil))
	wantCode(t, "bad mode", err, errdefs.ErrInvalidArgument, agentproto.CodeInvalidMode)
	if _, err := e.c.ListFiles(ctx, e.root, agentproto.MaxListDepth+1, 0); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("depth over the max: %v", err)
	}
	if _, err := e.c.Chmod(ctx, agentproto.ChmodRequest{Path: e.root}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("chmod without mode: %v", err)
	}
}

// tarEntry is one entry of a test archive.
type tarEntry struct {
	name, body, link string
	typ              byte
	mode             int64
}

func mkTar(t *testing.T, gz bool, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.Writer = &buf
	var zw *gzip.Writer
	if gz {
		zw = gzip.NewWriter(&buf)
		w = zw
	}
	tw := tar.NewWriter(w)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: e.mode, Size: int64(len(e.body)), ModTime: time.Unix(1700000000, 0)}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			io.WriteString(tw, e.body)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if zw != nil {
		zw.Close()
	}
	return buf.Bytes()
}

func extract(t *testing.T, c *agentclient.Client, dir string, max int64, archive []byte) (agentproto.ExtractResult, error) {
	t.Helper()
	return c.ExtractArchive(fctx(t), dir, max, 0, int64(len(archive)), bytes.NewReader(archive))
}

// testFileArchives extracts good and hostile archives and streams a
// directory back as a tar.
func testFileArchives(t *testing.T, e *fileEnv) {
	c := e.c
	ctx := fctx(t)
	good := []tarEntry{
		{name: "./top/", typ: tar.TypeDir, mode: 0o750},
		{name: "top/a.txt", body: "alpha", mode: 0o600},
		{name: "top/sub/b.txt", body: "bravo"}, // parent made on the way
		{name: "top/link", typ: tar.TypeSymlink, link: "sub/b.txt"},
		{name: "top/up", typ: tar.TypeSymlink, link: "../top/a.txt"},
		{name: "top/hard", typ: tar.TypeLink, link: "top/a.txt"},
		{name: "top/fifo", typ: tar.TypeFifo},
		{name: "top/a.txt", body: "alpha2", mode: 0o640}, // a later entry replaces an earlier one
	}
	for _, gz := range []bool{false, true} {
		dest := e.p(fmt.Sprintf("x/gz-%v", gz))
		res, err := extract(t, c, dest, -1, mkTar(t, gz, good...))
		if err != nil {
			t.Fatalf("extract (gzip %v): %v", gz, err)
		}
		if res.Entries != 8 || res.Files != 3 || res.Dirs != 1 || res.Symlinks != 2 || res.Hardlinks != 1 || res.Skipped != 1 || res.Bytes != 16 {
			t.Errorf("extract (gzip %v) = %+v", gz, res)
		}
		for p, want := range map[string]string{"top/a.txt": "alpha2", "top/sub/b.txt": "bravo", "top/link": "bravo", "top/up": "alpha2", "top/hard": "alpha"} {
			if _, _, got, err := readAll(t, c, dest+"/"+p, nil); err != nil || got != want {
				t.Errorf("extracted %s = %q, %v; want %q", p, got, err, want)
			}
		}
		if info, err := c.StatFile(ctx, dest+"/top"); err != nil || info.Mode != "0750" {
			t.Errorf("extracted dir: %+v %v", info, err)
		}
		if info, err := c.StatFile(ctx, dest+"/top/a.txt"); err != nil || info.Mode != "0640" {
			t.Errorf("extracted file mode: %+v %v", info, err)
		}
	}

	// The directory back as a tar.
	rc, err := c.ReadArchive(ctx, e.p("x/gz-true"))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(rc)
	var got []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("archive stream: %v", err)
		}
		b, _ := io.ReadAll(tr)
		got = append(got, fmt.Sprintf("%s:%c:%s:%s", h.Name, h.Typeflag, h.Linkname, b))
	}
	rc.Close()
	want := "top/:5::|top/a.txt:0::alpha2|top/hard:0::alpha|top/link:2:sub/b.txt:|top/sub/:5::|top/sub/b.txt:0::bravo|top/up:2:../top/a.txt:"
	if strings.Join(got, "|") != want {
		t.Errorf("archive of the directory:\n got %s\nwant %s", strings.Join(got, "|"), want)
	}
	if _, err := c.ReadArchive(ctx, e.p("x/gz-true/top/a.txt")); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("archive of a file: %v", err)
	}

	// Hostile archives: each refused, nothing outside the root touched.
	e.sh(t, `set -e; printf '`+strings.TrimSuffix(secret, "\n")+`\n' > `+e.outside+`/secret; cd `+e.root+`/x; ln -sfn `+e.outside+` pre`)
	before := e.sh(t, "ls -la "+e.outside+"; cat "+e.outside+"/secret")
	up := "../../../" + filepath.Base(e.outside) // from root/x/evil
	for _, tc := range []struct {
		name    string
		entries []tarEntry
	}{
		{"zip slip", []tarEntry{{name: "../evil", body: "evil"}}},
		{"deep zip slip", []tarEntry{{name: "a/b/../../../evil", body: "evil"}}},
		{"absolute name", []tarEntry{{name: e.outside + "/evil", body: "evil"}}},
		{"absolute symlink", []tarEntry{{name: "l", typ: tar.TypeSymlink, link: e.outside}, {name: "l/evil", body: "evil"}}},
		{"relative symlink out", []tarEntry{{name: "l", typ: tar.TypeSymlink, link: up}, {name: "l/evil", body: "evil"}}},
		{"lone relative symlink out", []tarEntry{{name: "l", typ: tar.TypeSymlink, link: up}}},
		{"symlink through a link already there", []tarEntry{{name: "l", typ: tar.TypeSymlink, link: "../pre"}, {name: "l/evil", body: "evil"}}},
		{"lone symlink through a link already there", []tarEntry{{name: "l", typ: tar.TypeSymlink, link: "../pre"}}},
		{"symlink to /proc/self/root", []tarEntry{{name: "l", typ: tar.TypeSymlink, link: "/proc/self/root/etc"}}},
		{"hard link out", []tarEntry{{name: "h", typ: tar.TypeLink, link: up + "/secret"}}},
		{"hard link absolute", []tarEntry{{name: "h", typ: tar.TypeLink, link: e.outside + "/secret"}}},
		{"file through a link already there", []tarEntry{{name: "../pre/evil", body: "evil"}}},
	} {
		_, err := extract(t, c, e.p("x/evil"), -1, mkTar(t, false, tc.entries...))
		wantCode(t, tc.name, err, errdefs.ErrInvalidArgument, agentproto.CodePathOutsideRoot)
	}
	// Writing through a symlink already in the destination is confined too.
	e.sh(t, "ln -sfn "+e.outside+" "+e.root+"/x/evil/out")
	_, err = extract(t, c, e.p("x/evil"), -1, mkTar(t, false, tarEntry{name: "out/evil", body: "evil"}))
	wantCode(t, "file through a link in the destination", err, errdefs.ErrInvalidArgument, agentproto.CodePathOutsideRoot)
	if after := e.sh(t, "ls -la "+e.outside+"; cat "+e.outside+"/secret"); after != before {
		t.Errorf("outside directory changed:\nbefore %s\nafter %s", before, after)
	}
	if list, err := c.ListFiles(ctx, e.p("x/evil"), 5, 0); err != nil || names(list) != "out" {
		t.Errorf("refused archives left %q (%v)", names(list), err)
	}

	_, err = extract(t, c, e.p("x/big"), 10, mkTar(t, true, tarEntry{name: "a", body: "0123456789"}, tarEntry{name: "b", body: "0"}))
	wantCode(t, "over max bytes", err, errdefs.ErrTooLarge, agentproto.CodeUploadTooLarge)
	_, err = extract(t, c, e.p("x/bad"), -1, []byte("this is not a tar archive, not at all, no"))
	wantCode(t, "garbage", err, errdefs.ErrInvalidArgument, "invalid_archive")
	if err := c.DeleteFile(ctx, agentproto.DeleteRequest{Path: e.p("x"), Recursive: true}); err != nil {
		t.Errorf("cleanup: %v", err)
	}
}

// testFileSearchReplace covers search by name and content and batch
// replace, including links that lead out (never followed).
func testFileSearchReplace(t *testing.T, e *fileEnv) {
	c := e.c
	ctx := fctx(t)
	for p, body := range map[string]string{
		"s/src/a.py":      "import os\nprint('hello')\n",
		"s/src/b.py":      "print('hello world')\n",
		"s/src/sub/c.txt": "Hello\n",
		"s/src/bin.dat":   "hello\x00binary",
	} {
		if _, err := write(t, c, e.p(p), body); err != nil {
			t.Fatal(err)
		}
	}
	e.sh(t, `set -e; printf 'hello from outside\n' > `+e.outside+`/out.py; cd `+e.root+`/s/src; ln -s `+e.outside+` out; ln -s a.py alias.py; chmod 750 a.py`)
	matches := func(r agentproto.SearchResult) string {
		var out []string
		for _, m := range r.Matches {
			s := strings.TrimPrefix(m.Path, e.root+"/s/src/")
			if m.Line > 0 {
				s += fmt.Sprintf(":%d:%s", m.Line, m.Text)
			}
			out = append(out, s)
		}
		return strings.Join(out, "|")
	}
	for _, tc := range []struct {
		req  agentproto.SearchRequest
		want string
	}{
		{agentproto.SearchRequest{Glob: "*.py"}, "a.py|b.py"},
		{agentproto.SearchRequest{Glob: "sub/*.txt"}, "sub/c.txt"},
		{agentproto.SearchRequest{Content: "hello"}, "a.py:2:print('hello')|b.py:1:print('hello world')"},
		{agentproto.SearchRequest{Content: "HELLO", IgnoreCase: true, Glob: "*.txt"}, "sub/c.txt:1:Hello"},
		{agentproto.SearchRequest{Content: `print\('\w+ \w+`, Regex: true}, "b.py:1:print('hello world')"},
	} {
		tc.req.Path = e.p("s/src")
		res, err := c.SearchFiles(ctx, tc.req)
		if err != nil || matches(res) != tc.want || res.Truncated {
			t.Errorf("search %+v = %q %v, want %q", tc.req, matches(res), err, tc.want)
		}
	}
	res, err := c.SearchFiles(ctx, agentproto.SearchRequest{Path: e.p("s/src"), Content: "hello", MaxResults: 1})
	if err != nil || len(res.Matches) != 1 || !res.Truncated {
		t.Errorf("search capped: %+v %v", res, err)
	}
	res, err = c.SearchFiles(ctx, agentproto.SearchRequest{Path: e.p("s/src"), Content: "hello"})
	if err != nil || res.FilesScanned != 3 || res.FilesSkipped != 1 { // a.py b.py sub/c.txt; bin.dat is binary
		t.Errorf("search counts: %+v %v", res, err)
	}
	_, err = c.SearchFiles(ctx, agentproto.SearchRequest{Path: e.p("s/src"), Content: "(", Regex: true})
	wantCode(t, "bad regex", err, errdefs.ErrInvalidArgument, "invalid_pattern")
	_, err = c.SearchFiles(ctx, agentproto.SearchRequest{Path: e.p("s/src/out"), Glob: "*"})
	wantCode(t, "search through a link out", err, errdefs.ErrInvalidArgument, agentproto.CodePathOutsideRoot)

	// Batch replace: dry run, then for real; modes kept, links not followed out.
	rr, err := c.ReplaceInFiles(ctx, agentproto.ReplaceRequest{Path: e.p("s/src"), Glob: "*.py", Find: "hello", Replace: "bye", DryRun: true})
	if err != nil || rr.Replacements != 2 || rr.FilesChanged != 2 || len(rr.Files) != 2 {
		t.Errorf("dry run: %+v %v", rr, err)
	}
	if _, _, got, _ := readAll(t, c, e.p("s/src/a.py"), nil); got != "import os\nprint('hello')\n" {
		t.Errorf("dry run changed a.py: %q", got)
	}
	rr, err = c.ReplaceInFiles(ctx, agentproto.ReplaceRequest{Path: e.p("s/src"), Glob: "*.py", Find: `print\('(\w+)`, Replace: "log('${1}!", Regex: true})
	if err != nil || rr.Replacements != 2 || rr.Failed != 0 {
		t.Errorf("regex replace: %+v %v", rr, err)
	}
	if _, _, got, _ := readAll(t, c, e.p("s/src/b.py"), nil); got != "log('hello! world')\n" {
		t.Errorf("b.py after replace: %q", got)
	}
	if info, err := c.StatFile(ctx, e.p("s/src/a.py")); err != nil || info.Mode != "0750" {
		t.Errorf("a.py mode after replace: %+v %v", info, err)
	}
	rr, err = c.ReplaceInFiles(ctx, agentproto.ReplaceRequest{Paths: []string{e.p("s/src/alias.py"), e.p("s/src/bin.dat")}, Find: "log", Replace: "say"})
	if err != nil || rr.Replacements != 1 || rr.Failed != 1 || rr.Files[1].Code != "binary_file" {
		t.Errorf("replace by paths: %+v %v", rr, err)
	}
	if info, err := c.StatFile(ctx, e.p("s/src/alias.py")); err != nil || info.Type != "symlink" {
		t.Errorf("the link replaced through became %+v %v", info, err)
	}
	if _, _, got, _ := readAll(t, c, e.p("s/src/a.py"), nil); got != "import os\nsay('hello!')\n" {
		t.Errorf("a.py after replace through its link: %q", got)
	}
	_, err = c.ReplaceInFiles(ctx, agentproto.ReplaceRequest{Paths: []string{e.p("s/src/b.py"), e.outside + "/out.py"}, Find: "hello", Replace: "pwned"})
	wantCode(t, "replace outside", err, errdefs.ErrInvalidArgument, agentproto.CodePathOutsideRoot)
	rr, err = c.ReplaceInFiles(ctx, agentproto.ReplaceRequest{Paths: []string{e.p("s/src/out/out.py")}, Find: "hello", Replace: "pwned"})
	if err != nil || rr.Failed != 1 || rr.Files[0].Code != agentproto.CodePathOutsideRoot {
		t.Errorf("replace through a link out: %+v %v", rr, err)
	}
	if got := e.sh(t, "cat "+e.outside+"/out.py"); got != "hello from outside\n" {
		t.Errorf("outside file changed: %q", got)
	}
	if err := c.DeleteFile(ctx, agentproto.DeleteRequest{Path: e.p("s"), Recursive: true}); err != nil {
		t.Errorf("cleanup: %v", err)
	}
}
