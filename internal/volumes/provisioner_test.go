package volumes_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store/sqlite"
	"genesis.dev/sandbox/internal/volumes"
)

// provisioner keeps volumes in a map, as a cluster keeps claims.
type provisioner struct {
	mu      sync.Mutex
	why     string // not "": unavailable
	fail    error
	volumes map[string]driver.VolumeSpec
}

func (p *provisioner) VolumesAvailable(context.Context) (bool, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.why == "", p.why
}

func (p *provisioner) CreateVolume(_ context.Context, spec driver.VolumeSpec) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fail != nil {
		return p.fail
	}
	p.volumes[spec.ID] = spec
	return nil
}

func (p *provisioner) RemoveVolume(_ context.Context, id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.volumes, id)
	return nil
}

func (p *provisioner) ids() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for id := range p.volumes {
		out = append(out, id)
	}
	return out
}

// TestProvisionedVolumes: with a provisioner the manager keeps records,
// holds and limits, the provisioner the storage: create and delete reach
// it, a mount names the volume rather than a host path, one writer or many
// readers still holds, a failed create leaves nothing, the files API is
// 501 and no provisioner class is 501 volumes_unavailable.
func TestProvisionedVolumes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "state.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p := &provisioner{volumes: map[string]driver.VolumeSpec{}}
	m, err := volumes.New(volumes.Config{Store: st, Dir: filepath.Join(t.TempDir(), "volumes"), Provisioner: p})
	if err != nil {
		t.Fatal(err)
	}
	v, err := m.Create(ctx, "t1", "data", 64)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.volumes[v.ID]; got != (driver.VolumeSpec{ID: v.ID, Tenant: "t1", Name: "data", SizeMB: 64}) || v.State != sandbox.VolumeReady {
		t.Fatalf("provisioned %+v, state %s", got, v.State)
	}
	mounts, err := m.Acquire(ctx, "t1", "sb_w", []sandbox.VolumeRequest{{Volume: "data", Path: "/mnt/data"}}, nil, 1000, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if want := []driver.Mount{{Volume: v.ID, Target: "/mnt/data"}}; !slices.Equal(mounts, want) {
		t.Fatalf("mounts %+v, want %+v", mounts, want)
	}
	if _, err := m.Acquire(ctx, "t1", "sb_r", []sandbox.VolumeRequest{{Volume: "data", Path: "/mnt/data", ReadOnly: true}}, nil, 1000, 1000); errdefs.Code(err) != volumes.CodeBusy {
		t.Fatalf("a reader beside a writer: %v, want %s", err, volumes.CodeBusy)
	}
	if err := m.Delete(ctx, "t1", "data"); errdefs.Code(err) != volumes.CodeInUse {
		t.Fatalf("delete while mounted: %v, want %s", err, volumes.CodeInUse)
	}
	if _, err := m.ListFiles(ctx, "t1", "data", "/", 0); errdefs.Code(err) != volumes.CodeFilesUnsupported || !errors.Is(err, errdefs.ErrNotImplemented) {
		t.Fatalf("files of a provisioned volume: %v, want 501 %s", err, volumes.CodeFilesUnsupported)
	}
	if err := m.Release(ctx, "sb_w"); err != nil {
		t.Fatal(err)
	}
	if err := m.Delete(ctx, "t1", "data"); err != nil {
		t.Fatal(err)
	}
	if ids := p.ids(); len(ids) != 0 {
		t.Fatalf("after delete the provisioner keeps %v", ids)
	}

	p.fail = errors.New("the claim was refused")
	if _, err := m.Create(ctx, "t1", "broken", 64); err == nil {
		t.Fatal("a create the provisioner refused succeeded")
	}
	if _, err := m.Get(ctx, "t1", "broken"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("a failed create left its record: %v", err)
	}
	p.fail, p.why = nil, "the cluster has no default StorageClass"
	if ok, why := m.Available(); ok || why != p.why {
		t.Fatalf("Available() = %v, %q", ok, why)
	}
	if _, err := m.Create(ctx, "t1", "nothing", 64); errdefs.Code(err) != volumes.CodeUnavailable || !errors.Is(err, errdefs.ErrNotImplemented) {
		t.Fatalf("create without a class: %v, want 501 %s", err, volumes.CodeUnavailable)
	}
}
