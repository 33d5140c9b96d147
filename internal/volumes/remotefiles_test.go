package volumes_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store/sqlite"
	"genesis.dev/sandbox/internal/volumes"
)

// helpers is a provisioner with files helpers that never start: each
// start records the volume's holds as it finds them and fails.
type helpers struct {
	provisioner
	mu     sync.Mutex
	seen   [][]sandbox.VolumeMount // the volume's holds at each start
	opened []string
	closed []string
	ro     []bool
	exist  []string // VolumeFilesHelpers' answer
	holds  func(id string) []sandbox.VolumeMount
}

var errNoStart = errors.New("the helper did not start")

func (h *helpers) OpenVolumeFiles(_ context.Context, holder, id string, readOnly bool) (driver.Dialer, error) {
	seen := h.holds(id)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.opened, h.ro, h.seen = append(h.opened, holder), append(h.ro, readOnly), append(h.seen, seen)
	return nil, fmt.Errorf("%w: %w", errNoStart, errdefs.ErrUnavailable)
}

func (h *helpers) CloseVolumeFiles(_ context.Context, holder string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = append(h.closed, holder)
	return nil
}

func (h *helpers) VolumeFilesHelpers(context.Context) ([]string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.exist), nil
}

// TestVolumeFilesHelpers: with a provisioner that has files helpers, each
// files call holds the volume for its own helper (read-only for a read,
// writable for a write) while the helper runs, closes the helper and drops
// the hold however the call ends; one writer or any number of readers
// counts the helper (an upload or a read beside a sandbox's writable mount
// is 409 volume_busy, a read beside a reader is not); a path leaving the
// volume is 400 before any helper starts; Sweep removes helpers and holds
// older than any call, and leaves a fresh one.
func TestVolumeFilesHelpers(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "state.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h := &helpers{provisioner: provisioner{volumes: map[string]driver.VolumeSpec{}}}
	h.holds = func(id string) []sandbox.VolumeMount {
		v, err := st.GetVolume(ctx, "t1", "data")
		if err != nil || v.ID != id {
			t.Errorf("the helper's volume %s: %+v, %v", id, v, err)
			return nil
		}
		return v.Mounts
	}
	m, err := volumes.New(volumes.Config{Store: st, Dir: filepath.Join(t.TempDir(), "volumes"), Provisioner: h})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, "t1", "data", 64); err != nil {
		t.Fatal(err)
	}
	unheld := func(what string) {
		t.Helper()
		v, err := m.Get(ctx, "t1", "data")
		if err != nil || len(v.Mounts) != 0 {
			t.Fatalf("%s: holds %+v, %v; want none", what, v.Mounts, err)
		}
	}

	if _, err := m.WriteFile(ctx, "t1", "data", "/a.txt", "", true, strings.NewReader("x")); !errors.Is(err, errNoStart) {
		t.Fatalf("an upload whose helper fails: %v", err)
	}
	if _, err := m.StatFile(ctx, "t1", "data", "/a.txt"); !errors.Is(err, errNoStart) {
		t.Fatalf("a stat whose helper fails: %v", err)
	}
	if len(h.opened) != 2 || h.ro[0] || !h.ro[1] || !slices.Equal(h.closed, h.opened) {
		t.Fatalf("helpers opened %v (read-only %v), closed %v", h.opened, h.ro, h.closed)
	}
	for i, seen := range h.seen {
		if len(seen) != 1 || seen[0].SandboxID != h.opened[i] || seen[0].ReadOnly != h.ro[i] || seen[0].Path != driver.VolumeFilesRoot {
			t.Fatalf("holds while helper %s ran: %+v", h.opened[i], seen)
		}
	}
	unheld("after the calls")

	if _, err := m.ListFiles(ctx, "t1", "data", "../x", 0); errdefs.Code(err) != volumes.CodeInvalidPath {
		t.Fatalf("a listing of ../x: %v; want %s", err, volumes.CodeInvalidPath)
	}
	if len(h.opened) != 2 {
		t.Fatalf("a refused path started a helper: %v", h.opened)
	}

	// A sandbox's writable mount: no helper, reading or writing.
	if _, err := m.Acquire(ctx, "t1", "sb_w", []sandbox.VolumeRequest{{Volume: "data", Path: "/mnt/data"}}, nil, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	if _, err := m.WriteFile(ctx, "t1", "data", "/a.txt", "", true, strings.NewReader("x")); errdefs.Code(err) != volumes.CodeBusy {
		t.Fatalf("an upload beside a writer: %v; want %s", err, volumes.CodeBusy)
	}
	if err := m.DeleteFile(ctx, "t1", "data", "/a.txt", false); errdefs.Code(err) != volumes.CodeBusy {
		t.Fatalf("a delete beside a writer: %v; want %s", err, volumes.CodeBusy)
	}
	if _, err := m.StatFile(ctx, "t1", "data", "/a.txt"); errdefs.Code(err) != volumes.CodeBusy {
		t.Fatalf("a read beside a writer: %v; want %s", err, volumes.CodeBusy)
	}
	if len(h.opened) != 2 {
		t.Fatalf("a refused call started a helper: %v", h.opened)
	}
	if err := m.Release(ctx, "sb_w"); err != nil {
		t.Fatal(err)
	}
	// A reader: a read shares with it.
	if _, err := m.Acquire(ctx, "t1", "sb_r", []sandbox.VolumeRequest{{Volume: "data", Path: "/mnt/data", ReadOnly: true}}, nil, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	if _, err := m.StatFile(ctx, "t1", "data", "/a.txt"); !errors.Is(err, errNoStart) || len(h.opened) != 3 || len(h.seen[2]) != 2 {
		t.Fatalf("a read beside a reader: %v, holds %+v", err, h.seen)
	}
	if err := m.Release(ctx, "sb_r"); err != nil {
		t.Fatal(err)
	}

	// What a crash left: a helper hold and Pod older than any call go, a
	// fresh one stays.
	now := time.Now()
	stale := fmt.Sprintf("volfiles-%d-old", now.Add(-time.Hour).Unix())
	fresh := fmt.Sprintf("volfiles-%d-new", now.Unix())
	v, err := m.Get(ctx, "t1", "data")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpdateVolume(ctx, v.ID, now, func(x *sandbox.Volume) error {
		x.Mounts = append(x.Mounts, sandbox.VolumeMount{SandboxID: stale, Path: driver.VolumeFilesRoot},
			sandbox.VolumeMount{SandboxID: fresh, Path: driver.VolumeFilesRoot, ReadOnly: true})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	h.exist = []string{stale, fresh}
	h.closed = nil
	m.Sweep(ctx, now, false)
	if v, err = m.Get(ctx, "t1", "data"); err != nil || len(v.Mounts) != 1 || v.Mounts[0].SandboxID != fresh {
		t.Fatalf("after the sweep: holds %+v, %v; want only %s", v.Mounts, err, fresh)
	}
	if !slices.Equal(h.closed, []string{stale}) {
		t.Fatalf("the sweep closed %v; want %s", h.closed, stale)
	}
}
