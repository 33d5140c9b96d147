package snapshots

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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
	n, sum, err := WriteTree(context.Background(), src, &buf, TreeLimits{})
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
	_, sum, err := WriteTree(context.Background(), src, &buf, TreeLimits{})
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

// TestTreeHardLinksOnce: a file with many hard links is stored once and
// restored as links to one file, not as copies.
func TestTreeHardLinksOnce(t *testing.T) {
	t.Parallel()
	src, dst := t.TempDir(), t.TempDir()
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	if err := os.WriteFile(filepath.Join(src, "big"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if err := os.Link(filepath.Join(src, "big"), filepath.Join(src, fmt.Sprintf("h%02d", i))); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	n, sum, err := WriteTree(context.Background(), src, &buf, TreeLimits{MaxContent: 2 << 20})
	if err != nil || n > 1<<20+64<<10 {
		t.Fatalf("WriteTree of a file with 21 names: %d bytes, %v; want it stored once", n, err)
	}
	if err := ReadTree(context.Background(), &buf, dst, "workspace.tar", sum); err != nil {
		t.Fatal(err)
	}
	first, err := os.Stat(filepath.Join(dst, "big"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		fi, err := os.Stat(filepath.Join(dst, fmt.Sprintf("h%02d", i)))
		if err != nil || !os.SameFile(first, fi) {
			t.Fatalf("h%02d is not a link to big: %v %v", i, fi, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dst, "h07")); err != nil || !bytes.Equal(b, big) {
		t.Errorf("h07: %d bytes, %v", len(b), err)
	}
}

// TestTreeLinkTargets: a tar's hard link may name only a regular file
// the same tar wrote before it: never one outside the directory, one
// already there, a symbolic link, or a later entry.
func TestTreeLinkTargets(t *testing.T) {
	t.Parallel()
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("host"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{
		"outside":  "../secret",
		"absolute": outside,
		"present":  "present",
		"symlink":  "sym",
		"later":    "later",
		"dir":      "d",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "d/", Mode: 0o755}))
			must(tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "sym", Linkname: outside}))
			must(tw.WriteHeader(&tar.Header{Typeflag: tar.TypeLink, Name: "x", Linkname: target}))
			must(tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "later", Mode: 0o644}))
			must(tw.Close())
			sum := sha256.Sum256(buf.Bytes())
			dst := t.TempDir()
			must(os.WriteFile(filepath.Join(dst, "present"), []byte("mine"), 0o644))
			err := ReadTree(context.Background(), &buf, dst, "workspace.tar", hex.EncodeToString(sum[:]))
			if errdefs.Code(err) != "snapshot_corrupt" {
				t.Errorf("a link to %q: %v, want snapshot_corrupt", target, err)
			}
			if _, err := os.Lstat(filepath.Join(dst, "x")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the link was made: %v", err)
			}
		})
	}
}

// TestTreeLimits: a workspace over its limits is refused with 413
// snapshot_too_large, writing no more than the limit: a sparse file counts
// at its full length against the disk size, and the tar's bytes against
// MaxBytes.
func TestTreeLimits(t *testing.T) {
	t.Parallel()
	sparse := t.TempDir()
	if err := os.Truncate(mustCreate(t, filepath.Join(sparse, "sparse")), 2<<30); err != nil {
		t.Fatal(err)
	}
	var cw countWriter
	cw.w = io.Discard
	_, _, err := WriteTree(context.Background(), sparse, &cw, TreeLimits{MaxContent: 32 << 20})
	if errdefs.Code(err) != CodeTooLarge || errdefs.HTTPStatus(err) != 413 || cw.n > 4096 {
		t.Errorf("a 2 GiB sparse file in a 32 MiB disk: %v (%d bytes written)", err, cw.n)
	}
	dense := t.TempDir()
	if err := os.WriteFile(filepath.Join(dense, "f"), make([]byte, 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	cw = countWriter{w: io.Discard}
	_, _, err = WriteTree(context.Background(), dense, &cw, TreeLimits{MaxBytes: 1 << 20})
	if errdefs.Code(err) != CodeTooLarge || !errors.Is(err, errOverMax) || cw.n > 1<<20 {
		t.Errorf("3 MiB over a 1 MiB limit: %v (%d bytes written)", err, cw.n)
	}
	if strings.Contains(fmt.Sprint(err), dense) {
		t.Errorf("the error names a host path: %v", err)
	}
}

func mustCreate(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	return p
}

// TestTreeRestoreErrors: a restore's error names the entry, never the
// host's directory; a full disk is 413 no_space.
func TestTreeRestoreErrors(t *testing.T) {
	t.Parallel()
	err := restoreError("h10", &fs.PathError{Op: "write", Path: "/tmp/x/sandboxes/sbx_1/workspace/h10", Err: syscall.ENOSPC})
	if errdefs.Code(err) != "no_space" || errdefs.HTTPStatus(err) != 413 || strings.Contains(err.Error(), "/tmp") {
		t.Errorf("ENOSPC: %v (%d %s)", err, errdefs.HTTPStatus(err), errdefs.Code(err))
	}
	err = restoreError("x", &fs.PathError{Op: "openat", Path: "/tmp/x/workspace/x", Err: errors.New("path escapes from parent")})
	if !errors.Is(err, errdefs.ErrUnavailable) || strings.Contains(err.Error(), "/tmp") {
		t.Errorf("an error without an errno: %v", err)
	}
	src, dst := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "x"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_, sum, err := WriteTree(context.Background(), src, &buf, TreeLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dst, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	err = ReadTree(context.Background(), &buf, dst, "workspace.tar", sum)
	if err == nil || strings.Contains(err.Error(), dst) || !strings.Contains(err.Error(), "x") {
		t.Errorf("restoring over a directory: %v", err)
	}
}

// TestTreeModes: permission bits and a directory's sticky bit come back;
// setuid and setgid never do.
func TestTreeModes(t *testing.T) {
	t.Parallel()
	src, dst := t.TempDir(), t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(src, "suid"), []byte("x"), 0o755))
	must(os.Chmod(filepath.Join(src, "suid"), 0o755|fs.ModeSetuid|fs.ModeSetgid))
	must(os.Mkdir(filepath.Join(src, "tmp"), 0o777))
	must(os.Chmod(filepath.Join(src, "tmp"), 0o777|fs.ModeSticky))
	must(os.Mkdir(filepath.Join(src, "sgid"), 0o755))
	must(os.Chmod(filepath.Join(src, "sgid"), 0o755|fs.ModeSetgid))
	var buf bytes.Buffer
	_, sum, err := WriteTree(context.Background(), src, &buf, TreeLimits{})
	must(err)
	must(ReadTree(context.Background(), &buf, dst, "workspace.tar", sum))
	for name, want := range map[string]fs.FileMode{"suid": 0o755, "tmp": fs.ModeDir | fs.ModeSticky | 0o777, "sgid": fs.ModeDir | 0o755} {
		if fi, err := os.Lstat(filepath.Join(dst, name)); err != nil || fi.Mode() != want {
			t.Errorf("%s: %v %v, want %v", name, fi.Mode(), err, want)
		}
	}
}
