package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// testVolumes checks volume records: round trip, names unique within a
// tenant only, tenant isolation, updates keeping identity, the mounted
// filter, usage and deletion.
func testVolumes(t *testing.T, st store.Store) {
	ctx := context.Background()
	mk := func(tenant, name string, size int64) *sandbox.Volume {
		v := &sandbox.Volume{ID: sandbox.NewID("vol"), Tenant: tenant, Name: name, SizeMB: size, State: sandbox.VolumeReady,
			CreatedAt: base, UpdatedAt: base}
		if err := st.CreateVolume(ctx, v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	a1 := mk("a", "cache", 10)
	a2 := mk("a", "data", 20)
	b1 := mk("b", "cache", 5)

	if err := st.CreateVolume(ctx, &sandbox.Volume{ID: sandbox.NewID("vol"), Tenant: "a", Name: "cache", SizeMB: 1, CreatedAt: base}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("a second volume of one name in one tenant: %v", err)
	}
	if err := st.CreateVolume(ctx, a1); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("duplicate id: %v", err)
	}
	got, err := st.GetVolume(ctx, "a", "cache")
	if err != nil || got.ID != a1.ID || got.SizeMB != 10 || got.State != sandbox.VolumeReady || !got.CreatedAt.Equal(base) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	if got, err := st.GetVolume(ctx, "b", "cache"); err != nil || got.ID != b1.ID {
		t.Fatalf("b's cache: %+v %v", got, err)
	}
	if _, err := st.GetVolume(ctx, "b", "data"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another tenant's volume: %v", err)
	}

	later := base.Add(time.Minute)
	up, err := st.UpdateVolume(ctx, a2.ID, later, func(v *sandbox.Volume) error {
		v.Tenant, v.Name, v.SizeMB = "b", "stolen", 999 // identity: kept
		v.Mounts = append(v.Mounts, sandbox.VolumeMount{SandboxID: "sbx_1", Path: "/mnt/data", ReadOnly: true})
		return nil
	})
	if err != nil || up.Tenant != "a" || up.Name != "data" || up.SizeMB != 20 || !up.UpdatedAt.Equal(later) || len(up.Mounts) != 1 {
		t.Fatalf("update: %+v %v", up, err)
	}
	boom := errors.New("boom")
	if _, err := st.UpdateVolume(ctx, a2.ID, later, func(v *sandbox.Volume) error { v.Mounts = nil; return boom }); !errors.Is(err, boom) {
		t.Errorf("fn error: %v", err)
	}
	if _, err := st.UpdateVolume(ctx, "vol_nope", later, func(*sandbox.Volume) error { return nil }); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("update of a missing volume: %v", err)
	}

	names := func(list []*sandbox.Volume) []string {
		var out []string
		for _, v := range list {
			out = append(out, v.Tenant+"/"+v.Name)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		f    store.VolumeFilter
		want []string
	}{
		{"tenant, by name", store.VolumeFilter{Tenant: "a"}, []string{"a/cache", "a/data"}},
		{"all", store.VolumeFilter{}, []string{"a/cache", "a/data", "b/cache"}},
		{"mounted", store.VolumeFilter{Mounted: true}, []string{"a/data"}},
		{"none", store.VolumeFilter{Tenant: "c"}, nil},
	} {
		list, err := st.ListVolumes(ctx, tc.f)
		if err != nil {
			t.Fatal(err)
		}
		if got := names(list); !equalStrings(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if n, mb, err := st.VolumeUsage(ctx, "a"); err != nil || n != 2 || mb != 30 {
		t.Errorf("usage of a: %d %d %v", n, mb, err)
	}
	if n, mb, err := st.VolumeUsage(ctx, "nobody"); err != nil || n != 0 || mb != 0 {
		t.Errorf("usage of nobody: %d %d %v", n, mb, err)
	}
	if err := st.DeleteVolume(ctx, a1.ID); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteVolume(ctx, a1.ID); err != nil {
		t.Errorf("second delete: %v", err)
	}
	if _, err := st.GetVolume(ctx, "a", "cache"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("deleted volume: %v", err)
	}
	// The name is free again.
	mk("a", "cache", 1)
}

// testConcurrentVolumeMounts checks that UpdateVolume serializes: many
// concurrent writers each add a mount only when none is there, and exactly
// one succeeds (the one-writer rule rests on it).
func testConcurrentVolumeMounts(t *testing.T, st store.Store) {
	ctx := context.Background()
	v := &sandbox.Volume{ID: sandbox.NewID("vol"), Tenant: "a", Name: "w", SizeMB: 1, State: sandbox.VolumeReady, CreatedAt: base, UpdatedAt: base}
	if err := st.CreateVolume(ctx, v); err != nil {
		t.Fatal(err)
	}
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = st.UpdateVolume(ctx, v.ID, base, func(v *sandbox.Volume) error {
				if len(v.Mounts) > 0 {
					return errdefs.ErrConflict
				}
				v.Mounts = append(v.Mounts, sandbox.VolumeMount{SandboxID: sandbox.NewID("sbx"), Path: "/mnt/w"})
				return nil
			})
		})
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, errdefs.ErrConflict):
			t.Errorf("unexpected error: %v", err)
		}
	}
	got, err := st.GetVolume(ctx, "a", "w")
	if ok != 1 || err != nil || len(got.Mounts) != 1 {
		t.Fatalf("%d writers won; record %+v %v", ok, got, err)
	}
}
