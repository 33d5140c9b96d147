package diskquota

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
)

// newManager returns a manager over a fresh root, skipping (failing in CI)
// when this host cannot loop-mount.
func newManager(t *testing.T) *Manager {
	t.Helper()
	m, err := New(Config{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if ok, why := m.Available(); !ok {
		if os.Getenv("CI") == "true" {
			t.Fatalf("disk quotas unavailable in CI: %s", why)
		}
		t.Skipf("disk quotas unavailable: %s", why)
	}
	return m
}

func (m *Manager) spec(name string, mb int64) Spec {
	dir := filepath.Join(m.root, name)
	return Spec{Image: dir + ".img", Dir: dir, SizeMB: mb, UID: 1000, GID: 1001}
}

func TestCreateFillRemove(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, b := m.spec("a", 16), m.spec("b", 16)
	for _, s := range []Spec{a, b} {
		if err := os.Mkdir(s.Dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := m.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { m.Remove(a.Image, a.Dir); m.Remove(b.Image, b.Dir) })
	mounts, err := m.Mounts()
	if err != nil || !slices.Contains(mounts, a.Dir) || !slices.Contains(mounts, b.Dir) {
		t.Fatalf("mounts %v, %v", mounts, err)
	}
	if loops, _ := m.LoopDevices(); len(loops) != 2 {
		t.Errorf("loop devices %v, want 2", loops)
	}
	st, err := os.Stat(a.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if sys := st.Sys().(*syscall.Stat_t); sys.Uid != 1000 || sys.Gid != 1001 {
		t.Errorf("workspace root owned by %d:%d", sys.Uid, sys.Gid)
	}
	if ents, _ := os.ReadDir(a.Dir); len(ents) != 0 {
		t.Errorf("a fresh workspace holds %v", ents)
	}

	// Writing 64 MiB into 16 MiB ends in ENOSPC; the image stays small.
	f, err := os.Create(filepath.Join(a.Dir, "big"))
	if err != nil {
		t.Fatal(err)
	}
	block := bytes.Repeat([]byte{1}, 1<<20)
	var werr error
	for range 64 {
		if _, werr = f.Write(block); werr != nil {
			break
		}
	}
	if werr == nil {
		werr = f.Sync()
	}
	f.Close()
	if !errors.Is(werr, syscall.ENOSPC) {
		t.Fatalf("writing 64 MiB into a 16 MiB workspace: %v, want ENOSPC", werr)
	}
	var sfs syscall.Stat_t
	if err := syscall.Stat(a.Image, &sfs); err != nil || sfs.Blocks*512 > 17<<20 {
		t.Errorf("image allocates %d bytes (%v), want at most its size", sfs.Blocks*512, err)
	}
	// The other workspace is unaffected.
	if err := os.WriteFile(filepath.Join(b.Dir, "f"), block, 0o644); err != nil {
		t.Errorf("the other workspace: %v", err)
	}

	if err := m.Remove(a.Image, a.Dir); err != nil {
		t.Fatal(err)
	}
	if err := m.Remove(a.Image, a.Dir); err != nil {
		t.Errorf("second remove: %v", err)
	}
	if _, err := os.Stat(a.Image); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("image left: %v", err)
	}
	mounts, _ = m.Mounts()
	if slices.Contains(mounts, a.Dir) || !slices.Contains(mounts, b.Dir) {
		t.Errorf("after remove mounts %v", mounts)
	}
	waitLoops(t, m, 1)

	// Recovery unmounts what keep does not claim.
	c := m.spec("c", 16)
	os.Mkdir(c.Dir, 0o755)
	if err := m.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	n, err := m.Recover(func(dir string) bool { return dir == b.Dir })
	if err != nil || n != 1 {
		t.Errorf("recover: %d %v", n, err)
	}
	mounts, _ = m.Mounts()
	if !slices.Equal(mounts, []string{b.Dir}) {
		t.Errorf("after recover mounts %v", mounts)
	}
	m.Remove(c.Image, c.Dir)
	m.Remove(b.Image, b.Dir)
	waitLoops(t, m, 0)
}

// waitLoops polls until the root's loop devices number n: an unmount
// detaches its device asynchronously.
func waitLoops(t *testing.T, m *Manager, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		loops, err := m.LoopDevices()
		if err == nil && len(loops) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("loop devices %v (%v), want %d", loops, err, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestCreateRollsBack(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	s := m.spec("nodir", 16) // the mount point does not exist: mount fails
	err := m.Create(context.Background(), s)
	if err == nil {
		t.Fatal("create without a mount point succeeded")
	}
	if _, err := os.Stat(s.Image); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("failed create left its image: %v", err)
	}
	waitLoops(t, m, 0)
}

func TestRefusesPathsOutsideRoot(t *testing.T) {
	t.Parallel()
	m, err := New(Config{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []Spec{
		{Image: "/tmp/x.img", Dir: filepath.Join(m.root, "d"), SizeMB: 16},
		{Image: filepath.Join(m.root, "x.img"), Dir: "/mnt", SizeMB: 16},
		{Image: filepath.Join(m.root, "x.img"), Dir: m.root, SizeMB: 16},
		{Image: filepath.Join(m.root, "../x.img"), Dir: filepath.Join(m.root, "d"), SizeMB: 16},
	} {
		if ok, _ := m.Available(); !ok {
			break
		}
		if err := m.Create(context.Background(), s); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("create %+v: %v", s, err)
		}
		if err := m.Remove(s.Image, s.Dir); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("remove %+v: %v", s, err)
		}
	}
	if _, err := New(Config{Root: "relative"}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("relative root: %v", err)
	}
}

func TestMountsBelow(t *testing.T) {
	t.Parallel()
	m, err := New(Config{Root: "/data/sandboxes"})
	if err != nil {
		t.Fatal(err)
	}
	got := m.below([]string{"/", "/data/sandboxes/sbx_a/workspace", "/data/sandboxes/sbx b/workspace", "/data/sandboxes", "/data/sandboxes2/x"})
	want := []string{"/data/sandboxes/sbx_a/workspace", "/data/sandboxes/sbx b/workspace"}
	if !slices.Equal(got, want) {
		t.Errorf("below = %q, want %q", got, want)
	}
}
