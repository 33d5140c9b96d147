package nofollow

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"genesis.dev/sandbox/internal/errdefs"
)

// listen serves one greeting per connection on a socket at path.
func listen(t *testing.T, path, greeting string) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte(greeting))
			c.Close()
		}
	}()
}

func greeting(t *testing.T, c net.Conn) string {
	t.Helper()
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDialUnix is not parallel: it counts the process's descriptors,
// which a test running beside it (TestCreateFile opens files) would move
// (it failed so: "descriptors grew from 12 to 15 over 40 dials").
func TestDialUnix(t *testing.T) {
	dir := t.TempDir()
	own := filepath.Join(dir, "own.sock")
	other := filepath.Join(dir, "other.sock")
	listen(t, own, "own")
	listen(t, other, "other")
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.sock")
	if err := os.Symlink(other, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	c, err := DialUnix(ctx, nil, own)
	if err != nil {
		t.Fatalf("dial a real socket: %v", err)
	}
	if got := greeting(t, c); got != "own" {
		t.Fatalf("the real socket answered %q", got)
	}
	for _, tc := range []struct {
		name, path string
		class      error
		notSocket  bool
	}{
		{"symlink to another socket", link, errdefs.ErrFailedPrecondition, true},
		{"regular file", file, errdefs.ErrFailedPrecondition, true},
		{"directory", dir, errdefs.ErrFailedPrecondition, true},
		{"fifo", fifo, errdefs.ErrFailedPrecondition, true},
		{"missing", filepath.Join(dir, "missing.sock"), errdefs.ErrUnavailable, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := DialUnix(ctx, nil, tc.path)
			if err == nil {
				t.Fatalf("dial %s succeeded, answered %q", tc.path, greeting(t, c))
			}
			if !errors.Is(err, tc.class) || errors.Is(err, ErrNotSocket) != tc.notSocket {
				t.Fatalf("dial %s: %v: want class %v, ErrNotSocket %v", tc.path, err, tc.class, tc.notSocket)
			}
		})
	}
	// No descriptor is left open by the refused and the successful dials.
	before := openFDs(t)
	for range 20 {
		DialUnix(ctx, nil, link)
		if c, err := DialUnix(ctx, nil, own); err == nil {
			greeting(t, c)
		}
	}
	if after := openFDs(t); after > before+2 {
		t.Fatalf("descriptors grew from %d to %d over 40 dials", before, after)
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func TestCreateFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	check := func(name string) {
		t.Helper()
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil || !fi.Mode().IsRegular() || fi.Size() != 0 || fi.Mode().Perm() != 0o644 {
			t.Fatalf("%s after CreateFile: %v, %v", name, fi, err)
		}
	}
	// Fresh, then again over itself.
	for range 2 {
		if err := CreateFile(dir, "resume", 0o644); err != nil {
			t.Fatal(err)
		}
		check("resume")
	}
	// A symlink to a host file is replaced, the file untouched.
	if err := os.Symlink(victim, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := CreateFile(dir, "link", 0o644); err != nil {
		t.Fatal(err)
	}
	check("link")
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Fatalf("the symlink's target was written: %q", b)
	}
	// A FIFO (which would block a writer) and a directory are refused.
	if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"fifo", "sub"} {
		if err := CreateFile(dir, name, 0o644); !errors.Is(err, ErrNotRegular) {
			t.Fatalf("CreateFile over %s: %v, want ErrNotRegular", name, err)
		}
	}
	// The directory itself is not followed either.
	linkDir := filepath.Join(t.TempDir(), "dirlink")
	if err := os.Symlink(dir, linkDir); err != nil {
		t.Fatal(err)
	}
	if err := CreateFile(linkDir, "x", 0o644); err == nil {
		t.Fatal("CreateFile followed a symlinked directory")
	}
	for _, name := range []string{"", ".", "..", "a/b"} {
		if err := CreateFile(dir, name, 0o644); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Fatalf("CreateFile(%q): %v, want ErrInvalidArgument", name, err)
		}
	}
}
