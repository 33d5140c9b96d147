package snapshots

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
)

// TestTreeRoundTrip copies a tree with files, an empty directory, modes,
// times and links (one pointing outside) into another directory; a damaged
// tar is refused with snapshot_corrupt.
func TestTreeRoundTrip(t *testing.T) {
	t.Parallel()
	src, dst := t.TempDir(), t.TempDir()
	mtime := time.Date(2026, 1, 2, 3, 4, 5, 678900000, time.UTC)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(src, "a/b"), 0o755))
	must(os.Mkdir(filepath.Join(src, "empty"), 0o700))
	must(os.WriteFile(filepath.Join(src, "a/b/f.txt"), []byte("hello"), 0o640))
	must(os.WriteFile(filepath.Join(src, "run.sh"), []byte("#!/bin/sh\n"), 0o755))
	must(os.Chtimes(filepath.Join(src, "a/b/f.txt"), mtime, mtime))
	must(os.Symlink("a/b/f.txt", filepath.Join(src, "link")))
	must(os.Symlink("/etc/passwd", filepath.Join(src, "escape")))
	var buf bytes.Buffer
	n, sum, err := WriteTree(context.Background(), src, &buf)
	if err != nil || n != int64(buf.Len()) || len(sum) != 64 {
		t.Fatalf("WriteTree: %d %q %v (%d bytes)", n, sum, err, buf.Len())
	}
	if err := ReadTree(context.Background(), bytes.NewReader(buf.Bytes()), dst, "workspace.tar", sum); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "a/b/f.txt")); err != nil || string(b) != "hello" {
		t.Errorf("file: %q %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(dst, "a/b/f.txt")); err != nil || fi.Mode().Perm() != 0o640 || !fi.ModTime().Equal(mtime) {
		t.Errorf("file mode/time: %v %v", fi, err)
	}
	if fi, err := os.Stat(filepath.Join(dst, "run.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("run.sh: %v %v", fi, err)
	}
	if fi, err := os.Stat(filepath.Join(dst, "empty")); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("empty dir: %v %v", fi, err)
	}
	for link, want := range map[string]string{"link": "a/b/f.txt", "escape": "/etc/passwd"} {
		if got, err := os.Readlink(filepath.Join(dst, link)); err != nil || got != want {
			t.Errorf("symlink %s: %q %v", link, got, err)
		}
	}
	// A flipped byte.
	bad := bytes.Clone(buf.Bytes())
	bad[600] ^= 1
	err = ReadTree(context.Background(), bytes.NewReader(bad), t.TempDir(), "workspace.tar", sum)
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || errdefs.Code(err) != "snapshot_corrupt" {
		t.Errorf("damaged tar: %v", err)
	}
}

// TestTreeNeverFollowsLinks: a link the sandbox made where the copy writes
// a file does not make the host write through it.
func TestTreeNeverFollowsLinks(t *testing.T) {
	t.Parallel()
	src, dst, outside := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "x"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_, sum, err := WriteTree(context.Background(), src, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "x"), filepath.Join(dst, "x")); err != nil {
		t.Fatal(err)
	}
	if err := ReadTree(context.Background(), &buf, dst, "workspace.tar", sum); err == nil {
		t.Error("extracting over a symbolic link succeeded")
	}
	if _, err := os.Stat(filepath.Join(outside, "x")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file was written outside the directory: %v", err)
	}
}

// TestDiskDraft: a committed draft has a manifest naming every file with
// its sum; Verify finds a damaged and a missing file; drafts left behind
// are listed.
func TestDiskDraft(t *testing.T) {
	t.Parallel()
	d := Disk{Dir: t.TempDir()}
	const id = "snap_0123456789abcdef"
	dr, err := d.Begin(id)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dr.Dir(), "memory"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dr.Dir(), "memory", "pages.img"), []byte("pages"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := d.Drafts(); len(got) != 1 || got[0] != id {
		t.Errorf("drafts: %v", got)
	}
	dr.Manifest().Memory = "memory"
	size, err := dr.Commit()
	if err != nil || size <= 5 {
		t.Fatalf("commit: %d %v", size, err)
	}
	m, err := d.Open(id)
	if err != nil || m.Memory != "memory" || len(m.Files) != 1 || m.Files[0].Name != "memory/pages.img" || m.Files[0].Size != 5 {
		t.Fatalf("manifest: %+v %v", m, err)
	}
	if err := d.Verify(m); err != nil {
		t.Errorf("verify: %v", err)
	}
	if len(d.Drafts()) != 0 || len(d.Complete()) != 1 {
		t.Errorf("after commit: drafts %v complete %v", d.Drafts(), d.Complete())
	}
	if err := os.WriteFile(filepath.Join(d.Path(id), "memory", "pages.img"), []byte("PAGES"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.Verify(m); errdefs.Code(err) != "snapshot_corrupt" {
		t.Errorf("damaged file: %v", err)
	}
	os.Remove(filepath.Join(d.Path(id), "memory", "pages.img"))
	if err := d.Verify(m); errdefs.Code(err) != "snapshot_corrupt" {
		t.Errorf("missing file: %v", err)
	}
	if err := d.Remove(id); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Open(id); errdefs.Code(err) != "snapshot_missing" {
		t.Errorf("removed snapshot: %v", err)
	}
}
