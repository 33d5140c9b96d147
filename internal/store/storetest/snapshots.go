package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// testSnapshots checks snapshot records: round trip, tenant isolation,
// updates keeping identity, filters and their order, usage and deletion.
func testSnapshots(t *testing.T, st store.Store) {
	ctx := context.Background()
	mk := func(tenant, sbx string, at time.Time, state sandbox.SnapshotState, internal bool, size int64) *sandbox.Snapshot {
		sn := &sandbox.Snapshot{ID: sandbox.NewID("snap"), Tenant: tenant, SandboxID: sbx, State: state, Internal: internal, SizeBytes: size,
			Profile: "p", Runtime: sandbox.RuntimeRunsc, Image: "img", RiskLevel: sandbox.RiskMedium, Resources: sandbox.Resources{CPU: 1, MemoryMB: 512},
			Memory: true, CreatedAt: at, UpdatedAt: at}
		if err := st.CreateSnapshot(ctx, sn); err != nil {
			t.Fatal(err)
		}
		return sn
	}
	a1 := mk("a", "sbx_1", base, sandbox.SnapshotReady, false, 100)
	a2 := mk("a", "sbx_2", base.Add(time.Second), sandbox.SnapshotCreating, false, 0)
	ai := mk("a", "sbx_1", base.Add(2*time.Second), sandbox.SnapshotReady, true, 1000)
	af := mk("a", "sbx_1", base.Add(3*time.Second), sandbox.SnapshotFailed, false, 7)
	b1 := mk("b", "sbx_3", base.Add(4*time.Second), sandbox.SnapshotReady, false, 50)

	if err := st.CreateSnapshot(ctx, a1); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("duplicate snapshot: %v", err)
	}
	got, err := st.GetSnapshot(ctx, "a", a1.ID)
	if err != nil || got.Profile != "p" || !got.Memory || got.Resources.MemoryMB != 512 || !got.CreatedAt.Equal(base) || got.State != sandbox.SnapshotReady {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	if _, err := st.GetSnapshot(ctx, "b", a1.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another tenant's snapshot: %v", err)
	}
	if _, err := st.GetSnapshot(ctx, "", "snap_nope"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("unknown snapshot: %v", err)
	}

	ids := func(list []*sandbox.Snapshot) []string {
		var out []string
		for _, s := range list {
			out = append(out, s.ID)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		f    store.SnapshotFilter
		want []string
	}{
		{"tenant, newest first, no internal", store.SnapshotFilter{Tenant: "a"}, []string{af.ID, a2.ID, a1.ID}},
		{"with internal", store.SnapshotFilter{Tenant: "a", Internal: true}, []string{af.ID, ai.ID, a2.ID, a1.ID}},
		{"ready", store.SnapshotFilter{Tenant: "a", States: []sandbox.SnapshotState{sandbox.SnapshotReady}}, []string{a1.ID}},
		{"of a sandbox", store.SnapshotFilter{SandboxID: "sbx_1", Internal: true}, []string{af.ID, ai.ID, a1.ID}},
		{"everyone's", store.SnapshotFilter{}, []string{b1.ID, af.ID, a2.ID, a1.ID}},
		{"limit", store.SnapshotFilter{Tenant: "a", Limit: 1}, []string{af.ID}},
	} {
		list, err := st.ListSnapshots(ctx, tc.f)
		if err != nil || !equalStrings(ids(list), tc.want) {
			t.Errorf("%s: %v %v, want %v", tc.name, ids(list), err, tc.want)
		}
	}

	later := base.Add(time.Hour)
	up, err := st.UpdateSnapshot(ctx, a2.ID, later, func(s *sandbox.Snapshot) error {
		s.State, s.SizeBytes, s.Tenant, s.SandboxID = sandbox.SnapshotReady, 42, "evil", "sbx_evil"
		exp := later.Add(time.Hour)
		s.ExpiresAt = &exp
		return nil
	})
	if err != nil || up.State != sandbox.SnapshotReady || up.SizeBytes != 42 || up.Tenant != "a" || up.SandboxID != "sbx_2" || !up.UpdatedAt.Equal(later) {
		t.Fatalf("update: %+v %v", up, err)
	}
	boom := errors.New("boom")
	if _, err := st.UpdateSnapshot(ctx, a2.ID, later, func(s *sandbox.Snapshot) error { s.SizeBytes = 9; return boom }); !errors.Is(err, boom) {
		t.Errorf("fn error: %v", err)
	}
	if again, _ := st.GetSnapshot(ctx, "", a2.ID); again.SizeBytes != 42 {
		t.Errorf("an aborted update was stored: %+v", again)
	}
	if _, err := st.UpdateSnapshot(ctx, "snap_nope", later, func(*sandbox.Snapshot) error { return nil }); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("update of an unknown snapshot: %v", err)
	}
	exp, err := st.ListSnapshots(ctx, store.SnapshotFilter{ExpiredAt: later.Add(2 * time.Hour), Internal: true})
	if err != nil || !equalStrings(ids(exp), []string{a2.ID}) {
		t.Errorf("expired: %v %v", ids(exp), err)
	}
	if exp, _ := st.ListSnapshots(ctx, store.SnapshotFilter{ExpiredAt: later}); len(exp) != 0 {
		t.Errorf("expired before its time: %v", ids(exp))
	}

	n, bytes, err := st.SnapshotUsage(ctx, "a")
	if err != nil || n != 2 || bytes != 142 { // a1 and a2; not internal, not failed
		t.Errorf("usage of a: %d %d %v", n, bytes, err)
	}
	if n, bytes, err := st.SnapshotUsage(ctx, "nobody"); err != nil || n != 0 || bytes != 0 {
		t.Errorf("usage of nobody: %d %d %v", n, bytes, err)
	}
	if err := st.DeleteSnapshot(ctx, a1.ID); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteSnapshot(ctx, a1.ID); err != nil {
		t.Errorf("deleting a deleted snapshot: %v", err)
	}
	if _, err := st.GetSnapshot(ctx, "", a1.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("deleted snapshot: %v", err)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
