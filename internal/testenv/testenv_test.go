package testenv

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestInstallByHashReusesIdenticalBuilds(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	write := func(content string) string {
		p := filepath.Join(t.TempDir(), "tool")
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, err := installByHash(write("one"), "x")
	if err != nil {
		t.Fatal(err)
	}
	b, err := installByHash(write("one"), "x")
	if err != nil || a != b {
		t.Fatalf("second install = %s, %v; want %s", b, err, a)
	}
	c, err := installByHash(write("two"), "x")
	if err != nil || c == a {
		t.Fatalf("different content installed at %s, %v", c, err)
	}
	fi, err := os.Stat(filepath.Join(a, "tool"))
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("installed tool: %v, %v; want mode 0755", fi, err)
	}
	if di, err := os.Stat(a); err != nil || di.Mode().Perm() != 0o755 {
		t.Errorf("install dir: %v, %v; want mode 0755", di, err)
	}
}

func TestBusyboxRootfs(t *testing.T) {
	t.Parallel()
	rootfs, err := busyboxRootfs([]byte("binary"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*tar.Header{}
	tr := tar.NewReader(bytes.NewReader(rootfs))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = h
	}
	for name, mode := range map[string]int64{"tmp/": 0o1777, "workspace/": 0o1777, "bin/busybox": 0o755, "etc/passwd": 0o644} {
		if h := got[name]; h == nil || h.Mode != mode {
			t.Errorf("%s: %+v; want mode %o", name, h, mode)
		}
	}
	if h := got["bin/sh"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "busybox" {
		t.Errorf("bin/sh = %+v; want symlink to busybox", h)
	}
	if !bytes.Contains([]byte(busyboxRecipe), []byte("sandbox:x:1000:1000:")) {
		t.Error("passwd lacks the sandbox user")
	}
}

func TestCheckStatic(t *testing.T) {
	t.Parallel()
	if err := checkStatic([]byte("not elf")); err == nil {
		t.Error("non-ELF accepted")
	}
	self, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Skip("no /bin/sh to test a dynamic binary")
	}
	if err := checkStatic(self); err == nil {
		t.Error("/bin/sh (dynamically linked on Debian) accepted as static")
	}
}
