package volumes_test

import (
	"bytes"
	"errors"
	"testing"

	"genesis.dev/sandbox/internal/errdefs"
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

// TestMakeDirAndSetAttrs: directories are made with their mode and the
// root's owner (parents only when asked; an existing one is no error
// then, file_exists otherwise); attributes change mode and owner, refuse
// set-id bits and bad ids, stay inside the volume, and are refused beside
// a writable mount.
func TestMakeDirAndSetAttrs(t *testing.T) {
	e := newEnv(t, volumes.Config{})
	ctx := t.Context()
	if _, err := e.m.Create(ctx, "a", "data", 8); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.MakeDir(ctx, "a", "data", "/x/y", "", false); code(err) != volumes.CodeFileNotFound {
		t.Errorf("a dir without its parent: %v, want file_not_found", err)
	}
	fi, err := e.m.MakeDir(ctx, "a", "data", "/x/y", "0750", true)
	if err != nil || fi.Type != "dir" || fi.Mode != "0750" || fi.UID != 1000 || fi.GID != 1000 || fi.Path != "/x/y" {
		t.Fatalf("MakeDir with parents: %+v %v", fi, err)
	}
	if _, err := e.m.MakeDir(ctx, "a", "data", "/x/y", "", true); err != nil {
		t.Errorf("an existing dir with parents: %v", err)
	}
	if _, err := e.m.MakeDir(ctx, "a", "data", "/x/y", "", false); code(err) != volumes.CodeFileExists {
		t.Errorf("an existing dir without parents: %v, want file_exists", err)
	}
	if _, err := e.m.MakeDir(ctx, "a", "data", "/../escape", "", true); code(err) != volumes.CodeInvalidPath {
		t.Errorf("a dir outside the volume: %v, want invalid_path", err)
	}
	if _, err := e.m.WriteFile(ctx, "a", "data", "/x/f", "", true, bytes.NewReader([]byte("f"))); err != nil {
		t.Fatal(err)
	}
	mode, uid, gid := "0600", 1234, 2345
	fi, err = e.m.SetAttrs(ctx, "a", "data", "/x/f", volumes.Attrs{Mode: &mode, UID: &uid, GID: &gid})
	if err != nil || fi.Mode != "0600" || fi.UID != 1234 || fi.GID != 2345 {
		t.Errorf("SetAttrs: %+v %v", fi, err)
	}
	setuid, bad := "4755", -2
	if _, err := e.m.SetAttrs(ctx, "a", "data", "/x/f", volumes.Attrs{Mode: &setuid}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a set-uid mode: %v, want invalid", err)
	}
	if _, err := e.m.SetAttrs(ctx, "a", "data", "/x/f", volumes.Attrs{UID: &bad}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a negative uid: %v, want invalid", err)
	}
	if _, err := e.m.SetAttrs(ctx, "a", "data", "/missing", volumes.Attrs{Mode: &mode}); code(err) != volumes.CodeFileNotFound {
		t.Errorf("a missing file: %v, want file_not_found", err)
	}
	if _, err := e.m.Acquire(ctx, "a", "sbx_w", []sandbox.VolumeRequest{{Volume: "data", Path: "/mnt/d"}}, nil, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.MakeDir(ctx, "a", "data", "/z", "", true); code(err) != volumes.CodeBusy {
		t.Errorf("MakeDir beside a writer: %v, want volume_busy", err)
	}
	if _, err := e.m.SetAttrs(ctx, "a", "data", "/x/f", volumes.Attrs{Mode: &mode}); code(err) != volumes.CodeBusy {
		t.Errorf("SetAttrs beside a writer: %v, want volume_busy", err)
	}
}

// TestCheckAttrs: what SetAttrs refuses, CheckAttrs refuses first (so a
// write followed by SetAttrs can refuse bad owners before it writes), and
// a volume the cluster keeps takes no attributes at all.
func TestCheckAttrs(t *testing.T) {
	t.Parallel()
	bad, big, ok, mode, badMode := -1, 1<<31, 1000, "0640", "4755"
	local := &volumes.Manager{}
	for _, c := range []struct {
		a    volumes.Attrs
		code string
	}{
		{volumes.Attrs{UID: &bad}, "invalid_owner"},
		{volumes.Attrs{GID: &big}, "invalid_owner"},
		{volumes.Attrs{Mode: &badMode}, "invalid_mode"},
		{volumes.Attrs{UID: &ok, GID: &ok, Mode: &mode}, ""},
		{volumes.Attrs{}, ""},
	} {
		if err := local.CheckAttrs("data", c.a); (err == nil) != (c.code == "") || (err != nil && code(err) != c.code) {
			t.Errorf("CheckAttrs(%+v) = %v, want code %q", c.a, err, c.code)
		}
	}
}
