package volumes_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/tenant"
	"genesis.dev/sandbox/internal/volumes"
)

func putTenant(t *testing.T, e *env, name string, q tenant.Quotas) {
	t.Helper()
	now := time.Now()
	if _, err := e.st.PutTenant(t.Context(), &tenant.Tenant{Name: name, Quotas: q, Source: tenant.SourceAPI, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
}

// TestTenantVolumeQuotas: a tenant's max_volume_mb and max_volumes narrow
// the service's per-tenant limits (never widen them), the refusal names
// the bound that holds, and a refused create stores nothing.
func TestTenantVolumeQuotas(t *testing.T) {
	e := newEnv(t, volumes.Config{MaxSizeMB: 64, MaxMBPerTenant: 48, MaxPerTenant: 4})
	ctx := t.Context()
	putTenant(t, e, "small", tenant.Quotas{MaxVolumeMB: 12, MaxVolumes: 2})
	putTenant(t, e, "big", tenant.Quotas{MaxVolumeMB: 1 << 20, MaxVolumes: 100})

	if _, err := e.m.Create(ctx, "small", "a", 8); err != nil {
		t.Fatal(err)
	}
	_, err := e.m.Create(ctx, "small", "b", 8)
	if code(err) != volumes.CodeQuotaExceeded || !errors.Is(err, errdefs.ErrResourceExhausted) || !strings.Contains(err.Error(), "max_volume_mb") {
		t.Fatalf("over the tenant's max_volume_mb: %v", err)
	}
	if _, err := e.m.Get(ctx, "small", "b"); code(err) != volumes.CodeNotFound {
		t.Errorf("a refused create left a record: %v", err)
	}
	if _, err := e.m.Create(ctx, "small", "b", 4); err != nil {
		t.Fatalf("within max_volume_mb: %v", err)
	}
	if _, err := e.m.Create(ctx, "small", "c", 1); code(err) != volumes.CodeQuotaExceeded || !strings.Contains(err.Error(), "max_volumes") {
		t.Errorf("over the tenant's max_volumes: %v", err)
	}
	// A same name is volume_exists, not a quota refusal.
	if _, err := e.m.Create(ctx, "small", "a", 1); code(err) != volumes.CodeExists {
		t.Errorf("a taken name at the quota: %v, want volume_exists", err)
	}
	// Raising the quota lets the next one in.
	putTenant(t, e, "small", tenant.Quotas{MaxVolumeMB: 20, MaxVolumes: 3})
	if _, err := e.m.Create(ctx, "small", "c", 8); err != nil {
		t.Errorf("after raising the quota: %v", err)
	}

	// The service's limit is the ceiling: 48 MiB for "big" too.
	for _, n := range []string{"x", "y", "z"} {
		if _, err := e.m.Create(ctx, "big", n, 16); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.m.Create(ctx, "big", "w", 1); code(err) != volumes.CodeQuotaExceeded || !strings.Contains(err.Error(), "volumes.max_mb_per_tenant") {
		t.Errorf("a tenant quota above the service's ceiling: %v, want the ceiling to hold", err)
	}
}

// TestConcurrentCreatesHoldTheQuota: parallel creates of one tenant pass
// its volume quota exactly as far as it allows (no overshoot, and no
// create refused that fitted), each check running under the tenant's
// quota lock.
func TestConcurrentCreatesHoldTheQuota(t *testing.T) {
	var held, maxHeld, calls atomic.Int32
	var mu sync.Mutex
	lock := func(_ context.Context, name string) (func(), error) {
		if name != "acme" {
			return nil, errors.New("locked the wrong tenant " + name)
		}
		mu.Lock()
		calls.Add(1)
		if n := held.Add(1); n > maxHeld.Load() {
			maxHeld.Store(n)
		}
		return func() { held.Add(-1); mu.Unlock() }, nil
	}
	e := newEnv(t, volumes.Config{MaxSizeMB: 64, LockTenant: lock})
	ctx := t.Context()
	putTenant(t, e, "acme", tenant.Quotas{MaxVolumeMB: 24})
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = e.m.Create(ctx, "acme", "v"+string(rune('a'+i)), 8)
		})
	}
	wg.Wait()
	made := 0
	for _, err := range errs {
		switch {
		case err == nil:
			made++
		case code(err) != volumes.CodeQuotaExceeded:
			t.Errorf("unexpected error: %v", err)
		}
	}
	list, err := e.m.List(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, v := range list {
		total += v.SizeMB
	}
	if made != 3 || len(list) != 3 || total != 24 {
		t.Errorf("%d parallel creates of 8 MiB under a 24 MiB quota: %d made, %d stored (%d MiB); want exactly 3 (24 MiB)", n, made, len(list), total)
	}
	if calls.Load() != n || maxHeld.Load() != 1 {
		t.Errorf("the tenant's lock was taken %d times (want %d), held by %d at once (want 1)", calls.Load(), n, maxHeld.Load())
	}
}
