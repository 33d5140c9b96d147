package snapshots_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/controltest"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/snapshots"
)

const poolSnap = "snap_0123456789abcdef"

// withSnapshotPools gives the test profile a plain runc pool, a runc pool
// fed from poolSnap and a runsc pool fed from it too (whose runtime is not
// the snapshot's), checked often; released sandboxes are to be reset.
func withSnapshotPools(c *config.Config) {
	c.WarmPools = true
	c.Intervals.PoolCheck = 200 * time.Millisecond
	for i := range c.Profiles {
		if c.Profiles[i].Name == controltest.Profile {
			c.Profiles[i].Pools = []config.PoolSpec{
				{Runtime: sandbox.RuntimeRunc, MinIdle: 1, MaxTotal: 2},
				{Runtime: sandbox.RuntimeRunc, MinIdle: 1, MaxTotal: 2, SnapshotID: poolSnap},
				{Runtime: sandbox.RuntimeRunsc, MinIdle: 1, MaxTotal: 1, SnapshotID: poolSnap},
			}
			c.Profiles[i].Lease = config.LeasePolicy{DefaultTTLSeconds: 60, MaxTTLSeconds: 600, OnRelease: config.ReleaseReset}
		}
	}
}

// waitPool polls until the pool called name satisfies ok.
func waitPool(t *testing.T, h *controltest.Harness, name, what string, ok func(control.PoolView) bool) control.PoolView {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last control.PoolView
	for {
		views, err := h.Svc.Pools(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range views {
			if v.Name == name {
				last = v
				if ok(v) {
					return v
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool %s: %s: last %+v", name, what, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// writeSnapshot puts a files-only snapshot of tenant a's on disk and in
// the store: its workspace holds hello.txt.
func writeSnapshot(t *testing.T, h *controltest.Harness, id string) {
	t.Helper()
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "hello.txt"), []byte("from the snapshot\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dr, err := snapshots.Disk{Dir: filepath.Join(h.Dir, "snapshots")}.Begin(id)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dr.Dir(), "workspace.tar"))
	if err != nil {
		t.Fatal(err)
	}
	n, sum, err := snapshots.WriteTree(context.Background(), src, f, snapshots.TreeLimits{})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	dr.AddSummed("workspace.tar", n, sum)
	dr.Manifest().Workspace = "workspace.tar"
	size, err := dr.Commit()
	if err != nil {
		t.Fatal(err)
	}
	now := h.Clock.Now()
	if err := h.St.CreateSnapshot(context.Background(), &sandbox.Snapshot{ID: id, Tenant: "a", SandboxID: "sbx_0123456789abcdef",
		State: sandbox.SnapshotReady, Profile: controltest.Profile, Runtime: sandbox.RuntimeRunc, Image: controltest.Image,
		RiskLevel: sandbox.RiskLow, Resources: sandbox.Resources{CPU: 0.5, MemoryMB: 256, Pids: 64}, SizeBytes: size,
		CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
}

// TestPoolFromSnapshot: a pool whose snapshot does not exist reports
// failing (and keeps trying) while the profile's plain pool fills; once
// the snapshot is there its members are made from it, a lease that names
// it (of its tenant only) takes one warm while a plain lease never does,
// the snapshot cannot be deleted while the pool uses it, a released
// member is destroyed and replaced rather than wiped, and a pool of
// another runtime than its snapshot's says why it makes nothing.
func TestPoolFromSnapshot(t *testing.T) {
	t.Parallel()
	h := controltest.New(t, withSnapshotPools)
	ctx := context.Background()
	plain := controltest.Profile + "-runc"
	fed := controltest.Profile + "-runc-" + poolSnap
	wrongRuntime := controltest.Profile + "-runsc-" + poolSnap

	v := waitPool(t, h, fed, "failing for its missing snapshot", func(v control.PoolView) bool { return v.State == control.PoolFailing })
	if !strings.Contains(v.LastError, poolSnap) || !strings.Contains(v.LastError, "does not exist") || v.SnapshotID != poolSnap {
		t.Errorf("a pool without its snapshot: %+v", v)
	}
	waitPool(t, h, plain, "ready", func(v control.PoolView) bool { return v.State == control.PoolReady })

	writeSnapshot(t, h, poolSnap)
	v = waitPool(t, h, fed, "ready once its snapshot exists", func(v control.PoolView) bool {
		return v.State == control.PoolReady && v.Starting == 0
	})
	if v.LastError != "" || v.Counts[sandbox.StateIdle] != 1 {
		t.Errorf("the fed pool: %+v", v)
	}
	w := waitPool(t, h, wrongRuntime, "failing for the snapshot's runtime", func(v control.PoolView) bool {
		return v.State == control.PoolFailing && strings.Contains(v.LastError, "under runc")
	})
	if w.Total != 0 {
		t.Errorf("a pool of another runtime than its snapshot's made members: %+v", w)
	}

	// Another tenant cannot name the snapshot.
	if _, _, err := h.Stack.Snapshots.LeaseFrom(ctx, poolSnap, control.AcquireLeaseInput{Tenant: "b"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("tenant b leased from tenant a's snapshot: %v", err)
	}
	out, made, err := h.Stack.Snapshots.LeaseFrom(ctx, poolSnap, control.AcquireLeaseInput{Tenant: "a"})
	if err != nil {
		t.Fatal(err)
	}
	sb := out.Sandbox
	if !out.Lease.Warm || sb.Pool != poolSnap || sb.Tenant != "a" || sb.Metadata[snapshots.ParentKey] != poolSnap || made.Memory {
		t.Errorf("a lease from the snapshot: warm %v, sandbox %+v, memory %v", out.Lease.Warm, sb, made.Memory)
	}
	// Plain leases take the plain pool's members, never the fed pool's
	// (the second finds the plain pool empty while the fed one refills).
	waitPool(t, h, fed, "refilled after the claim", func(v control.PoolView) bool { return v.Counts[sandbox.StateIdle] == 1 })
	for i := range 2 {
		pl, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "a", Profile: controltest.Profile, Runtime: "runc"})
		if err != nil {
			t.Fatal(err)
		}
		if pl.Sandbox.Pool != "" || pl.Sandbox.Metadata[snapshots.ParentKey] != "" || (i == 0 && !pl.Lease.Warm) {
			t.Errorf("plain lease %d got %+v (lease %+v)", i, pl.Sandbox, pl.Lease)
		}
	}
	ws, err := h.Svc.WorkspaceDir(sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "hello.txt")); err != nil || string(b) != "from the snapshot\n" {
		t.Errorf("the member's workspace: %q %v", b, err)
	}

	err = h.Stack.Snapshots.Delete(ctx, "a", poolSnap)
	if !errors.Is(err, errdefs.ErrConflict) || errdefs.Code(err) != "snapshot_in_use" || !strings.Contains(err.Error(), fed) {
		t.Errorf("deleting the pool's snapshot: %v", err)
	}
	if _, err := h.Stack.Snapshots.Get(ctx, "a", poolSnap); err != nil {
		t.Errorf("the snapshot after a refused delete: %v", err)
	}

	// Released, the member is destroyed (the profile resets released
	// sandboxes, but a wipe would lose the snapshot's state); the pool's
	// other member, made from the snapshot, stays idle.
	if err := h.Svc.ReleaseLease(ctx, "a", out.Lease.ID); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for h.Record(sb.ID).State != sandbox.StateDestroyed {
		if time.Now().After(deadline) {
			t.Fatalf("the released member is %s, want destroyed", h.Record(sb.ID).State)
		}
		time.Sleep(20 * time.Millisecond)
	}
	v = waitPool(t, h, fed, "one idle member and none leased", func(v control.PoolView) bool {
		return v.Counts[sandbox.StateIdle] == 1 && v.Total == 1 && v.Starting == 0
	})
	if v.Recycled != 0 || v.ResetFailed != 0 || v.Made != 2 {
		t.Errorf("a snapshot pool's member was reset: %+v", v)
	}
}
