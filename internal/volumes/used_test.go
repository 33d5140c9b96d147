package volumes_test

import (
	"bytes"
	"testing"

	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/volumes"
)

// TestUsedBytes: a ready volume's used bytes come from its filesystem:
// they grow by what is written, fall when it is deleted, stay within the
// size, and are unknown while the filesystem is not mounted (or the volume
// is not ready) rather than the figures of the filesystem below it.
func TestUsedBytes(t *testing.T) {
	e := newEnv(t, volumes.Config{})
	ctx := t.Context()
	v, err := e.m.Create(ctx, "a", "data", 16)
	if err != nil {
		t.Fatal(err)
	}
	empty, ok := e.m.UsedBytes(v)
	if !ok || empty <= 0 || empty >= 16<<20 {
		t.Fatalf("an empty 16 MiB volume uses %d bytes (known %v), want its metadata, less than its size", empty, ok)
	}
	const n = 4 << 20
	if _, err := e.m.WriteFile(ctx, "a", "data", "/blob", "", true, bytes.NewReader(bytes.Repeat([]byte{7}, n))); err != nil {
		t.Fatal(err)
	}
	full, ok := e.m.UsedBytes(v)
	if !ok || full-empty < n || full > 16<<20 {
		t.Errorf("after writing %d bytes: %d used (was %d, known %v)", n, full, empty, ok)
	}
	if err := e.m.DeleteFile(ctx, "a", "data", "/blob", false); err != nil {
		t.Fatal(err)
	}
	if after, ok := e.m.UsedBytes(v); !ok || after >= full-n/2 {
		t.Errorf("after deleting the file: %d used (was %d, known %v)", after, full, ok)
	}
	creating := *v
	creating.State = sandbox.VolumeCreating
	if _, ok := e.m.UsedBytes(&creating); ok {
		t.Error("a volume being created has known used bytes")
	}
	if out, err := exec(t, "umount", e.m.HostDir(v)); err != nil {
		t.Fatalf("umount: %v %s", err, out)
	}
	if used, ok := e.m.UsedBytes(v); ok {
		t.Errorf("an unmounted volume reports %d used bytes (those of the filesystem below it)", used)
	}
	// Its next use mounts it again, and the figure is back.
	if _, err := e.m.StatFile(ctx, "a", "data", "/"); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.m.UsedBytes(v); !ok {
		t.Error("used bytes unknown after the volume was mounted again")
	}
}
