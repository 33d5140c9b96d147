package volumes_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store/sqlite"
	"genesis.dev/sandbox/internal/store/sqlstore"
	"genesis.dev/sandbox/internal/volumes"
)

type env struct {
	m   *volumes.Manager
	st  *sqlstore.Store
	dir string
}

// newEnv builds a manager over a real SQLite store and real loop-mounted
// filesystems; it skips where this host cannot make them.
func newEnv(t *testing.T, cfg volumes.Config) *env {
	t.Helper()
	st, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "state.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	dir := t.TempDir()
	cfg.Store, cfg.Dir, cfg.UID, cfg.GID = st, filepath.Join(dir, "volumes"), 1000, 1000
	m, err := volumes.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if ok, why := m.Available(); !ok {
		t.Skip("loop-mounted volumes unavailable: " + why)
	}
	t.Cleanup(func() {
		list, _ := st.ListVolumes(context.Background(), storeAll())
		for _, v := range list {
			_ = m.Release(context.Background(), "")
			for _, mt := range v.Mounts {
				_ = m.Release(context.Background(), mt.SandboxID)
			}
			_ = m.Delete(context.Background(), v.Tenant, v.Name)
		}
	})
	return &env{m: m, st: st, dir: dir}
}

func code(err error) string { return errdefs.Code(err) }

func TestCreateValidatesAndCounts(t *testing.T) {
	e := newEnv(t, volumes.Config{MaxSizeMB: 64, MaxMBPerTenant: 40, MaxPerTenant: 3})
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		size int64
		code string
	}{
		{"", 8, volumes.CodeInvalidName},
		{"../x", 8, volumes.CodeInvalidName},
		{"a/b", 8, volumes.CodeInvalidName},
		{".hidden", 8, volumes.CodeInvalidName},
		{"UPPER", 8, volumes.CodeInvalidName},
		{"default", 8, volumes.CodeInvalidName},
		{strings.Repeat("a", 64), 8, volumes.CodeInvalidName},
		{"ok", 0, volumes.CodeInvalidSize},
		{"ok", -1, volumes.CodeInvalidSize},
		{"ok", 65, volumes.CodeInvalidSize},
	} {
		if _, err := e.m.Create(ctx, "a", tc.name, tc.size); !errors.Is(err, errdefs.ErrInvalidArgument) || code(err) != tc.code {
			t.Errorf("create %q %d: %v (code %q), want %s", tc.name, tc.size, err, code(err), tc.code)
		}
	}
	if list, _ := e.m.List(ctx, "a"); len(list) != 0 {
		t.Fatalf("bad input made volumes: %+v", list)
	}
	v, err := e.m.Create(ctx, "a", "data", 32)
	if err != nil || v.State != sandbox.VolumeReady || v.SizeMB != 32 {
		t.Fatalf("create: %+v %v", v, err)
	}
	if _, err := e.m.Create(ctx, "a", "data", 1); code(err) != volumes.CodeExists {
		t.Errorf("same name again: %v", err)
	}
	if _, err := e.m.Create(ctx, "a", "more", 16); code(err) != volumes.CodeQuotaExceeded || !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Errorf("over the tenant's MiB: %v", err)
	}
	if _, err := e.m.Get(ctx, "a", "more"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a refused create left a record: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Join(e.dir, "volumes"))
	if len(entries) != 1 {
		t.Errorf("volume dirs after a refused create: %d, want 1", len(entries))
	}
	// Another tenant has its own names and its own quota; a's is not seen.
	if _, err := e.m.Create(ctx, "b", "data", 8); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Get(ctx, "b", "other"); code(err) != volumes.CodeNotFound {
		t.Errorf("missing: %v", err)
	}
	if err := e.m.Delete(ctx, "a", "data"); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Delete(ctx, "a", "data"); err != nil {
		t.Errorf("delete twice: %v", err)
	}
	if got, err := e.m.Get(ctx, "b", "data"); err != nil || got.Tenant != "b" {
		t.Errorf("b's volume after a's delete: %+v %v", got, err)
	}
}

func TestOneWriterOrManyReaders(t *testing.T) {
	e := newEnv(t, volumes.Config{})
	ctx := t.Context()
	if _, err := e.m.Create(ctx, "a", "data", 8); err != nil {
		t.Fatal(err)
	}
	rw := []sandbox.VolumeRequest{{Volume: "data", Path: "/mnt/data"}}
	ro := []sandbox.VolumeRequest{{Volume: "data", Path: "/mnt/data", ReadOnly: true}}
	mounts, err := e.m.Acquire(ctx, "a", "sbx_w", rw, nil, 1000, 1000)
	if err != nil || len(mounts) != 1 || mounts[0].ReadOnly || mounts[0].Target != "/mnt/data" {
		t.Fatalf("writer: %+v %v", mounts, err)
	}
	if _, err := e.m.Acquire(ctx, "a", "sbx_w", rw, nil, 1000, 1000); err != nil {
		t.Errorf("the same sandbox again (a retry): %v", err)
	}
	for _, req := range [][]sandbox.VolumeRequest{rw, ro} {
		if _, err := e.m.Acquire(ctx, "a", "sbx_2", req, nil, 1000, 1000); code(err) != volumes.CodeBusy || !errors.Is(err, errdefs.ErrConflict) {
			t.Errorf("beside a writer %+v: %v", req, err)
		}
		if err := e.m.Check(ctx, "a", req, nil); code(err) != volumes.CodeBusy {
			t.Errorf("check beside a writer: %v", err)
		}
	}
	if err := e.m.Delete(ctx, "a", "data"); code(err) != volumes.CodeInUse {
		t.Errorf("delete in use: %v", err)
	}
	if _, err := e.m.WriteFile(ctx, "a", "data", "/x", "", true, strings.NewReader("x")); code(err) != volumes.CodeBusy {
		t.Errorf("upload beside a writer: %v", err)
	}
	if held, _ := e.m.Holds(ctx, "a", "sbx_w"); !held {
		t.Error("Holds: false for the writer")
	}
	if err := e.m.Release(ctx, "sbx_w"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"sbx_r1", "sbx_r2"} {
		if _, err := e.m.Acquire(ctx, "a", id, ro, nil, 1000, 1000); err != nil {
			t.Fatalf("reader %s: %v", id, err)
		}
	}
	if _, err := e.m.Acquire(ctx, "a", "sbx_w2", rw, nil, 1000, 1000); code(err) != volumes.CodeBusy {
		t.Errorf("a writer beside readers: %v", err)
	}
	// A failed acquire of two volumes takes neither.
	if _, err := e.m.Create(ctx, "a", "second", 8); err != nil {
		t.Fatal(err)
	}
	two := []sandbox.VolumeRequest{{Volume: "second", Path: "/mnt/second"}, {Volume: "data", Path: "/mnt/data"}}
	if _, err := e.m.Acquire(ctx, "a", "sbx_3", two, nil, 1000, 1000); code(err) != volumes.CodeBusy {
		t.Fatalf("two, the second busy: %v", err)
	}
	if v, _ := e.m.Get(ctx, "a", "second"); len(v.Mounts) != 0 {
		t.Errorf("a failed acquire kept a hold: %+v", v.Mounts)
	}
	// Another tenant cannot name a's volume.
	if _, err := e.m.Acquire(ctx, "b", "sbx_b", ro, nil, 1000, 1000); code(err) != volumes.CodeNotFound {
		t.Errorf("another tenant's volume: %v", err)
	}
}

func TestMountValidation(t *testing.T) {
	e := newEnv(t, volumes.Config{})
	for _, tc := range []struct {
		name string
		reqs []sandbox.VolumeRequest
	}{
		{"relative", []sandbox.VolumeRequest{{Volume: "v", Path: "mnt/v"}}},
		{"traversal", []sandbox.VolumeRequest{{Volume: "v", Path: "/mnt/../etc"}}},
		{"a root itself", []sandbox.VolumeRequest{{Volume: "v", Path: "/mnt"}}},
		{"the workspace itself", []sandbox.VolumeRequest{{Volume: "v", Path: "/workspace"}}},
		{"outside the roots", []sandbox.VolumeRequest{{Volume: "v", Path: "/etc/v"}}},
		{"the agent", []sandbox.VolumeRequest{{Volume: "v", Path: "/.genesis/v"}}},
		{"a prefix that is not a root", []sandbox.VolumeRequest{{Volume: "v", Path: "/mntx/v"}}},
		{"colon", []sandbox.VolumeRequest{{Volume: "v", Path: "/mnt/a:b"}}},
		{"bad name", []sandbox.VolumeRequest{{Volume: "../v", Path: "/mnt/v"}}},
		{"twice", []sandbox.VolumeRequest{{Volume: "v", Path: "/mnt/a"}, {Volume: "v", Path: "/mnt/b"}}},
		{"nested", []sandbox.VolumeRequest{{Volume: "v", Path: "/mnt/a"}, {Volume: "w", Path: "/mnt/a/b"}}},
	} {
		if err := e.m.ValidateMounts(tc.reqs, nil); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if err := e.m.ValidateMounts([]sandbox.VolumeRequest{{Volume: "v", Path: "/workspace/cache"}, {Volume: "w", Path: "/mnt/w", ReadOnly: true}}, nil); err != nil {
		t.Errorf("good mounts: %v", err)
	}
	if err := e.m.ValidateMounts([]sandbox.VolumeRequest{{Volume: "v", Path: "/workspace/cache"}}, []string{"/mnt"}); err == nil {
		t.Error("a profile's narrower roots let /workspace through")
	}
	if err := e.m.ValidateMounts([]sandbox.VolumeRequest{{Volume: "v", Path: "/mnt/data/x"}}, []string{"/mnt/data"}); err != nil {
		t.Errorf("below a profile's root: %v", err)
	}
	if err := e.m.ValidateMounts([]sandbox.VolumeRequest{{Volume: "v", Path: "/opt/v"}}, []string{"/opt"}); err == nil {
		t.Error("a profile's root outside the service's let /opt through")
	}
}

func TestFilesConfinedAndLimited(t *testing.T) {
	e := newEnv(t, volumes.Config{})
	ctx := t.Context()
	v, err := e.m.Create(ctx, "a", "data", 4)
	if err != nil {
		t.Fatal(err)
	}
	w, err := e.m.WriteFile(ctx, "a", "data", "/dir/sub/hello.txt", "0640", false, strings.NewReader("hello"))
	if err != nil || w.Size != 5 || w.Path != "/dir/sub/hello.txt" || w.Mode != "0640" {
		t.Fatalf("write: %+v %v", w, err)
	}
	if _, err := e.m.WriteFile(ctx, "a", "data", "dir/sub/hello.txt", "", false, strings.NewReader("x")); code(err) != volumes.CodeFileExists {
		t.Errorf("no overwrite: %v", err)
	}
	fi, err := e.m.StatFile(ctx, "a", "data", "/dir/sub/hello.txt")
	if err != nil || fi.UID != 1000 || fi.GID != 1000 || fi.Type != "file" {
		t.Errorf("owner of an uploaded file: %+v %v", fi, err)
	}
	list, err := e.m.ListFiles(ctx, "a", "data", "/dir", 0)
	if err != nil || len(list.Entries) != 1 || list.Entries[0].Path != "/dir/sub" || list.Entries[0].Type != "dir" || list.Entries[0].UID != 1000 {
		t.Fatalf("list: %+v %v", list, err)
	}
	f, _, err := e.m.OpenFile(ctx, "a", "data", "/dir/sub/hello.txt")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(f)
	f.Close()
	if string(b) != "hello" {
		t.Errorf("read %q", b)
	}
	// A symlink planted inside (as a sandbox could) leads nowhere outside.
	host := e.m.HostDir(v)
	if err := os.Symlink("/etc", filepath.Join(host, "escape")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"../x", "/../../etc/passwd", "escape/passwd", "dir/../../x"} {
		if _, _, err := e.m.OpenFile(ctx, "a", "data", p); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("read %q: %v", p, err)
		}
		if _, err := e.m.WriteFile(ctx, "a", "data", p, "", true, strings.NewReader("x")); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("write %q: %v", p, err)
		}
	}
	if _, err := os.Stat("/etc/x"); err == nil {
		t.Fatal("a write escaped the volume")
	}
	// A FIFO (as a sandbox could leave) is refused at once, not waited on.
	if err := syscall.Mkfifo(filepath.Join(host, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, _, err := e.m.OpenFile(ctx, "a", "data", "/fifo"); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("read a FIFO: %v", err)
		}
		if _, err := e.m.ListFiles(ctx, "a", "data", "/fifo", 0); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("list a FIFO: %v", err)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("opening a FIFO on the volume blocked")
	}
	if err := os.Remove(filepath.Join(host, "fifo")); err != nil {
		t.Fatal(err)
	}
	// Past the size: refused, nothing partial left, the volume still usable.
	big := bytes.Repeat([]byte("z"), 6<<20)
	if _, err := e.m.WriteFile(ctx, "a", "data", "/big", "", true, bytes.NewReader(big)); code(err) != volumes.CodeFull || !errors.Is(err, errdefs.ErrTooLarge) {
		t.Fatalf("past the size: %v", err)
	}
	list, _ = e.m.ListFiles(ctx, "a", "data", "/", 0)
	for _, en := range list.Entries {
		if en.Name != "dir" && en.Name != "escape" {
			t.Errorf("left behind: %+v", en)
		}
	}
	if _, err := e.m.WriteFile(ctx, "a", "data", "/after", "", true, strings.NewReader("still fine")); err != nil {
		t.Errorf("write after a full one: %v", err)
	}
	if err := e.m.DeleteFile(ctx, "a", "data", "/dir", false); code(err) != "directory_not_empty" {
		t.Errorf("delete non-empty dir: %v", err)
	}
	if err := e.m.DeleteFile(ctx, "a", "data", "/dir", true); err != nil {
		t.Errorf("recursive delete: %v", err)
	}
	if err := e.m.DeleteFile(ctx, "a", "data", "/", true); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("delete the root: %v", err)
	}
	if _, err := e.m.ListFiles(ctx, "b", "data", "/", 0); code(err) != volumes.CodeNotFound {
		t.Errorf("another tenant's files: %v", err)
	}
}

func TestRemountAfterUnmount(t *testing.T) {
	e := newEnv(t, volumes.Config{})
	ctx := t.Context()
	v, err := e.m.Create(ctx, "a", "data", 4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.WriteFile(ctx, "a", "data", "/keep", "", true, strings.NewReader("kept")); err != nil {
		t.Fatal(err)
	}
	// As after a host restart: the filesystem is not mounted.
	if out, err := exec(t, "umount", e.m.HostDir(v)); err != nil {
		t.Fatalf("umount: %v %s", err, out)
	}
	f, _, err := e.m.OpenFile(ctx, "a", "data", "/keep")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if b, _ := io.ReadAll(f); string(b) != "kept" {
		t.Errorf("after a remount: %q", b)
	}
}

func TestSweepReleasesEndedSandboxes(t *testing.T) {
	e := newEnv(t, volumes.Config{})
	ctx := t.Context()
	if _, err := e.m.Create(ctx, "a", "data", 4); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	live := &sandbox.Sandbox{ID: "sbx_live", Tenant: "a", State: sandbox.StateReady, CreatedAt: now, UpdatedAt: now}
	if err := e.st.CreateSandbox(ctx, live); err != nil {
		t.Fatal(err)
	}
	ro := []sandbox.VolumeRequest{{Volume: "data", Path: "/mnt/data", ReadOnly: true}}
	for _, id := range []string{"sbx_live", "sbx_gone"} {
		if _, err := e.m.Acquire(ctx, "a", id, ro, nil, 1000, 1000); err != nil {
			t.Fatal(err)
		}
	}
	e.m.Sweep(ctx, now, false)
	v, _ := e.m.Get(ctx, "a", "data")
	if len(v.Mounts) != 1 || v.Mounts[0].SandboxID != "sbx_live" {
		t.Errorf("after the sweep: %+v", v.Mounts)
	}
}
