package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"genesis.dev/sandbox/client"
)

// TestFilesClientAndCLI drives the files API through the client package's
// typed methods and through the real genesis CLI (cp both ways with files
// and directories, ls, cat, find, replace, exec --artifact, artifacts
// ls/get), under runc and runsc.
func TestFilesClientAndCLI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	c := svc.client()
	eachRuntime(t, e, func(t *testing.T, rt string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*callTimeout)
		defer cancel()
		sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt})
		testFilesClient(ctx, t, c, sb.ID)
		testFilesCLI(t, svc, sb.ID)
	})
}

func testFilesClient(ctx context.Context, t *testing.T, c *client.Client, id string) {
	content := []byte("0123456789 hello client\n")
	w, err := c.WriteFile(ctx, id, "cl/a.txt", bytes.NewReader(content), client.WriteFileOptions{Mode: "0600", Size: int64(len(content))})
	if err != nil || w.Path != "/workspace/cl/a.txt" || w.Size != int64(len(content)) || w.SHA256 != sum(content) || w.Mode != "0600" {
		t.Fatalf("WriteFile: %+v %v", w, err)
	}
	if _, err := c.WriteFile(ctx, id, "cl/a.txt", strings.NewReader("x"), client.WriteFileOptions{NoOverwrite: true}); client.ErrorCode(err) != "file_exists" {
		t.Errorf("WriteFile without overwrite: %v", err)
	}
	d, err := c.ReadFile(ctx, id, "/workspace/cl/a.txt", &client.ByteRange{Offset: 11, Length: 5})
	if err != nil {
		t.Fatal(err)
	}
	part, _ := io.ReadAll(d.Body)
	d.Body.Close()
	if d.Status != http.StatusPartialContent || string(part) != "hello" || d.Size != int64(len(content)) || d.ETag == "" {
		t.Errorf("ReadFile range: %d %q size %d etag %q", d.Status, part, d.Size, d.ETag)
	}
	if _, err := c.ReadFile(ctx, id, "../etc/passwd", nil); client.ErrorCode(err) != "path_outside_root" {
		t.Errorf("ReadFile outside the root: %v", err)
	}
	if info, err := c.StatFile(ctx, id, "cl/a.txt"); err != nil || info.Type != "file" || info.Mode != "0600" || info.Size != int64(len(content)) {
		t.Errorf("StatFile: %+v %v", info, err)
	}
	if info, err := c.Mkdir(ctx, id, client.MkdirRequest{Path: "cl/x/y"}); err != nil || info.Type != "dir" {
		t.Errorf("Mkdir: %+v %v", info, err)
	}
	if info, err := c.MoveFile(ctx, id, client.MoveRequest{From: "cl/a.txt", To: "cl/x/y/b.txt"}); err != nil || info.Path != "/workspace/cl/x/y/b.txt" {
		t.Errorf("MoveFile: %+v %v", info, err)
	}
	if info, err := c.ChmodFile(ctx, id, client.ChmodRequest{Path: "cl/x/y/b.txt", Mode: "0640"}); err != nil || info.Mode != "0640" {
		t.Errorf("ChmodFile: %+v %v", info, err)
	}
	list, err := c.ListFiles(ctx, id, "cl", 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range list.Entries {
		paths = append(paths, e.Path)
	}
	if strings.Join(paths, ",") != "/workspace/cl/x,/workspace/cl/x/y,/workspace/cl/x/y/b.txt" {
		t.Errorf("ListFiles: %v", paths)
	}
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	for name, body := range map[string]string{"t/one.txt": "hello one\n", "t/two.md": "hello two\n"} {
		_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
		_, _ = tw.Write([]byte(body))
	}
	_ = tw.Close()
	if res, err := c.ExtractArchive(ctx, id, "cl/arch", bytes.NewReader(tarBuf.Bytes()), int64(tarBuf.Len())); err != nil || res.Files != 2 {
		t.Errorf("ExtractArchive: %+v %v", res, err)
	}
	rc, err := c.ReadArchive(ctx, id, "cl/arch")
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(rc)
	got := map[string]string{}
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		b, _ := io.ReadAll(tr)
		if h.Typeflag == tar.TypeReg {
			got[strings.TrimPrefix(h.Name, "./")] = string(b)
		}
	}
	rc.Close()
	if got["t/one.txt"] != "hello one\n" || got["t/two.md"] != "hello two\n" {
		t.Errorf("ReadArchive: %v", got)
	}
	sr, err := c.SearchFiles(ctx, id, client.SearchRequest{Path: "cl", Content: "hello", Glob: "*.txt"})
	if err != nil || len(sr.Matches) != 2 {
		t.Errorf("SearchFiles: %+v %v", sr, err)
	}
	rr, err := c.ReplaceInFiles(ctx, id, client.ReplaceRequest{Path: "cl", Glob: "*.txt", Find: "hello", Replace: "bye"})
	if err != nil || rr.Replacements != 2 || rr.FilesChanged != 2 {
		t.Errorf("ReplaceInFiles: %+v %v", rr, err)
	}
	if err := c.DeleteFile(ctx, id, client.DeleteFileRequest{Path: "cl", Recursive: true}); err != nil {
		t.Errorf("DeleteFile: %v", err)
	}
	if _, err := c.StatFile(ctx, id, "cl"); !client.IsNotFound(err) {
		t.Errorf("after DeleteFile: %v", err)
	}
}

func testFilesCLI(t *testing.T, svc *service, id string) {
	local := t.TempDir()
	tree := map[string]string{"proj/a.txt": "alpha hello\n", "proj/sub/b.txt": "beta hello\n", "proj/sub/c.md": "gamma\n"}
	for name, body := range tree {
		p := filepath.Join(local, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(local, "run.sh"), []byte("#!/bin/sh\necho ok\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	must := func(r cliResult) cliResult {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("%v", r)
		}
		return r
	}

	// Host → sandbox: a directory (into an existing directory) and a file.
	must(svc.cli(t, "cp", filepath.Join(local, "proj"), id+":/workspace/"))
	must(svc.cli(t, "cp", filepath.Join(local, "run.sh"), id+":bin/run.sh"))
	r := must(svc.cli(t, "ls", id+":proj", "--depth", "2"))
	for _, want := range []string{"/workspace/proj/a.txt", "/workspace/proj/sub/", "/workspace/proj/sub/b.txt", "/workspace/proj/sub/c.md"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("ls lacks %s: %v", want, r)
		}
	}
	if r := must(svc.cli(t, "cat", id+":proj/sub/b.txt", id+":/workspace/proj/a.txt")); r.stdout != "beta hello\nalpha hello\n" {
		t.Errorf("cat: %v", r)
	}
	if r := execOK(t, svc.client(), id, "/workspace/bin/run.sh"); r.Stdout != "ok\n" {
		t.Errorf("uploaded script (mode kept) ran: %+v", r)
	}

	// find by name and by content; replace.
	r = must(svc.cli(t, "find", id+":proj", "--name", "*.txt"))
	if r.stdout != "/workspace/proj/a.txt\n/workspace/proj/sub/b.txt\n" {
		t.Errorf("find --name: %v", r)
	}
	r = must(svc.cli(t, "find", id, "--content", "beta"))
	if r.stdout != "/workspace/proj/sub/b.txt:1:beta hello\n" {
		t.Errorf("find --content: %v", r)
	}
	if r := svc.cli(t, "find", id, "--content", "nothing-like-this"); r.code != 1 || r.stdout != "" {
		t.Errorf("find with no match: %v", r)
	}
	r = must(svc.cli(t, "replace", id+":proj", "hello", "bye", "--glob", "*.txt"))
	if !hasRow(r.stdout, "/workspace/proj/a.txt", "1") || !strings.Contains(r.stderr, "replaced 2 occurrences in 2 files") {
		t.Errorf("replace: %v", r)
	}

	// Sandbox → host: a directory and a file, and a file to stdout.
	back := filepath.Join(local, "back")
	must(svc.cli(t, "cp", id+":proj", back))
	for name, body := range map[string]string{"a.txt": "alpha bye\n", "sub/b.txt": "beta bye\n", "sub/c.md": "gamma\n"} {
		if got, err := os.ReadFile(filepath.Join(back, name)); err != nil || string(got) != body {
			t.Errorf("copied back %s: %q %v", name, got, err)
		}
	}
	must(svc.cli(t, "cp", id+":proj/a.txt", local))
	if got, _ := os.ReadFile(filepath.Join(local, "a.txt")); string(got) != "alpha bye\n" {
		t.Errorf("file copied into a directory: %q", got)
	}
	if r := must(svc.cli(t, "cp", id+":proj/sub/c.md", "-")); r.stdout != "gamma\n" {
		t.Errorf("cp to stdout: %v", r)
	}

	// Bad input.
	if r := svc.cli(t, "cp", filepath.Join(local, "run.sh"), filepath.Join(local, "x")); r.code != 2 {
		t.Errorf("cp between two local paths: %v", r)
	}
	if r := svc.cli(t, "cat", id+":../etc/passwd"); r.code != 1 || !strings.Contains(r.stderr, "path_outside_root") || r.stdout != "" {
		t.Errorf("cat outside the root: %v", r)
	}

	// exec --artifact, then artifacts ls/get.
	r = svc.cli(t, "exec", "--artifact", "proj/sub/*", id, "--", "true")
	m := regexp.MustCompile(`artifacts of job (job_[a-z0-9]+): 2 kept`).FindStringSubmatch(r.stderr)
	if r.code != 0 || m == nil {
		t.Fatalf("exec --artifact: %v", r)
	}
	r = must(svc.cli(t, "artifacts", "ls", m[1]))
	if !strings.Contains(r.stdout, "proj/sub/b.txt") || !strings.Contains(r.stdout, "proj/sub/c.md") {
		t.Fatalf("artifacts ls: %v", r)
	}
	artID := strings.Fields(strings.Split(r.stdout, "\n")[1])[0]
	if r := must(svc.cli(t, "artifacts", "get", artID)); r.stdout != "beta bye\n" && r.stdout != "gamma\n" {
		t.Errorf("artifacts get to stdout: %v", r)
	}
}
