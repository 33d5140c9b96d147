package storetest

import (
	"errors"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// testEndLease checks that ending a lease drains its sandbox in the same
// transaction: both change or neither does, a second end is refused as a
// precondition, and an end naming another sandbox changes nothing.
func testEndLease(t *testing.T, s store.Store) {
	ctx := t.Context()
	now := base
	m := newPoolMember("p", sandbox.RuntimeRunc, "i1", now)
	mustCreateSandbox(t, s, m)
	l := newLease("a", now, time.Minute)
	if _, _, err := s.ClaimSandbox(ctx, poolClaim(l, "p", sandbox.RuntimeRunc, "i1", now)); err != nil {
		t.Fatal(err)
	}
	endedAt := now.Add(time.Second)
	release := func(x *sandbox.Lease) error {
		x.State, x.EndedAt, x.EndReason = sandbox.LeaseReleased, &endedAt, "released"
		return nil
	}
	e := store.LeaseEnd{LeaseID: l.ID, SandboxID: m.ID, End: release, Now: endedAt}

	// Refusals change nothing.
	refused := errors.New("refused")
	bad := e
	bad.End = func(*sandbox.Lease) error { return refused }
	if _, _, err := s.EndLease(ctx, bad); !errors.Is(err, refused) {
		t.Fatalf("end refused by its func: %v, want it", err)
	}
	other := e
	other.SandboxID = sandbox.NewID("sbx")
	if _, _, err := s.EndLease(ctx, other); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("end naming another sandbox: %v, want conflict", err)
	}
	notFinal := e
	notFinal.End = func(*sandbox.Lease) error { return nil }
	if _, _, err := s.EndLease(ctx, notFinal); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("end leaving the lease active: %v, want invalid argument", err)
	}
	missing := e
	missing.LeaseID = sandbox.NewID("lse")
	if _, _, err := s.EndLease(ctx, missing); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("end of a missing lease: %v, want not found", err)
	}
	if got := mustGetSandbox(t, s, "a", m.ID); got.State != sandbox.StateLeased {
		t.Fatalf("refused ends changed the sandbox: %s", got.State)
	}
	if got, err := s.GetLease(ctx, "a", l.ID); err != nil || got.State != sandbox.LeaseActive {
		t.Fatalf("refused ends changed the lease: %+v %v", got, err)
	}

	ended, before, err := s.EndLease(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	if ended.State != sandbox.LeaseReleased || ended.EndReason != "released" || ended.ResourceVersion != 2 {
		t.Errorf("ended lease %+v", ended)
	}
	if before == nil || before.State != sandbox.StateLeased || before.Tenant != "a" {
		t.Fatalf("sandbox before the end: %+v, want the leased record", before)
	}
	stored := mustGetSandbox(t, s, "a", m.ID)
	if stored.State != sandbox.StateDraining || stored.ResourceVersion != before.ResourceVersion+1 || !stored.UpdatedAt.Equal(endedAt) {
		t.Errorf("sandbox after the end: %s v%d at %v, want draining v%d at %v", stored.State, stored.ResourceVersion,
			stored.UpdatedAt, before.ResourceVersion+1, endedAt)
	}
	if got, err := s.GetLease(ctx, "a", l.ID); err != nil || got.State != sandbox.LeaseReleased {
		t.Fatalf("stored lease: %+v %v", got, err)
	}
	// Ended once: a second end is a precondition failure and changes nothing.
	if _, _, err := s.EndLease(ctx, e); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("second end: %v, want failed precondition", err)
	}
	// A draining sandbox is not claimable.
	l2 := newLease("b", now, time.Minute)
	if _, _, err := s.ClaimSandbox(ctx, poolClaim(l2, "p", sandbox.RuntimeRunc, "i1", now.Add(2*time.Second))); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("claim while the only member drains: %v, want not found", err)
	}
	// It comes back through ReturnSandbox from draining, as a reset returns it.
	if _, err := s.ReturnSandbox(ctx, store.Return{SandboxID: m.ID, Tenant: "a", From: sandbox.StateDraining,
		RiskLevel: sandbox.RiskTrusted, Now: now.Add(3 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ClaimSandbox(ctx, poolClaim(l2, "p", sandbox.RuntimeRunc, "i1", now.Add(4*time.Second))); err != nil {
		t.Fatalf("claim of the returned member: %v", err)
	}
	if got := mustGetSandbox(t, s, "b", m.ID); got.Instance != "i1" {
		t.Fatalf("an end without an instance moved the sandbox to %q", got.Instance)
	}
	// An end by another instance drains the sandbox and takes it for that
	// instance in the same write.
	e2 := store.LeaseEnd{LeaseID: l2.ID, SandboxID: m.ID, End: release, Now: now.Add(5 * time.Second), Instance: "i2"}
	if _, _, err := s.EndLease(ctx, e2); err != nil {
		t.Fatal(err)
	}
	if got := mustGetSandbox(t, s, "b", m.ID); got.State != sandbox.StateDraining || got.Instance != "i2" {
		t.Fatalf("sandbox after an end by instance i2: %s of %q, want draining of i2", got.State, got.Instance)
	}

	// A destroyed sandbox stays destroyed; the lease still ends.
	d := newPoolMember("p", sandbox.RuntimeRunc, "i1", now)
	mustCreateSandbox(t, s, d)
	l3 := newLease("c", now, time.Minute)
	if _, _, err := s.ClaimSandbox(ctx, poolClaim(l3, "p", sandbox.RuntimeRunc, "i1", now.Add(5*time.Second))); err != nil {
		t.Fatal(err)
	}
	for _, st := range []sandbox.State{sandbox.StateDraining, sandbox.StateDestroyed} {
		if _, err := s.UpdateSandbox(ctx, d.ID, 0, now, func(x *sandbox.Sandbox) error { x.State = st; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	e3 := store.LeaseEnd{LeaseID: l3.ID, SandboxID: d.ID, End: release, Now: endedAt}
	if _, before, err := s.EndLease(ctx, e3); err != nil || before.State != sandbox.StateDestroyed {
		t.Fatalf("end of a lease whose sandbox is destroyed: %+v %v", before, err)
	}
	if got := mustGetSandbox(t, s, "c", d.ID); got.State != sandbox.StateDestroyed {
		t.Errorf("destroyed sandbox became %s", got.State)
	}
}
