package storetest

import (
	"testing"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// testReservedSandbox checks the reservation of a sandbox to a workload:
// stored by a create and by a claim (with the lease), kept by every
// update, refused to a claim for anything else, and never returned to a
// pool.
func testReservedSandbox(t *testing.T, s store.Store) {
	ctx := t.Context()
	// A cold sandbox reserved from its create on, claimed by its lease.
	sb := newSandbox(sandbox.NewID("sbx"), "a", base)
	sb.Reserved = "mcp:one"
	mustCreateSandbox(t, s, sb)
	if got := mustGetSandbox(t, s, "a", sb.ID); got.Reserved != "mcp:one" {
		t.Fatalf("created reserved sandbox reads reserved %q", got.Reserved)
	}
	_, _, err := s.ClaimSandbox(ctx, store.Claim{Lease: newLease("a", base, time.Minute), SandboxID: sb.ID, Now: base})
	wantClass(t, "a claim without the reservation", err, errdefs.ErrConflict)
	other := newLease("a", base, time.Minute)
	other.Reserved = "mcp:two"
	_, _, err = s.ClaimSandbox(ctx, store.Claim{Lease: other, SandboxID: sb.ID, Now: base})
	wantClass(t, "a claim for another reservation", err, errdefs.ErrConflict)
	l := newLease("a", base, time.Minute)
	l.Reserved = "mcp:one"
	if _, got, err := s.ClaimSandbox(ctx, store.Claim{Lease: l, SandboxID: sb.ID, Now: base}); err != nil || got.Reserved != "mcp:one" {
		t.Fatalf("claim with the reservation: %+v %v", got, err)
	}
	if got, err := s.GetLease(ctx, "a", l.ID); err != nil || got.Reserved != "mcp:one" {
		t.Fatalf("the lease: %+v %v", got, err)
	}
	upd, err := s.UpdateSandbox(ctx, sb.ID, 0, base, func(x *sandbox.Sandbox) error {
		x.Reserved, x.State = "", sandbox.StateDraining
		return nil
	})
	if err != nil || upd.Reserved != "mcp:one" || mustGetSandbox(t, s, "a", sb.ID).Reserved != "mcp:one" {
		t.Fatalf("an update cleared the reservation: %+v %v", upd, err)
	}
	if got, err := s.UpdateLease(ctx, l.ID, func(x *sandbox.Lease) error { x.Reserved = ""; return nil }); err != nil || got.Reserved != "mcp:one" {
		t.Fatalf("a lease update cleared the reservation: %+v %v", got, err)
	}
	_, err = s.ReturnSandbox(ctx, store.Return{SandboxID: sb.ID, Tenant: "a", From: sandbox.StateDraining, RiskLevel: sandbox.RiskTrusted, Now: base})
	wantClass(t, "return of a reserved sandbox to a pool", err, errdefs.ErrConflict)

	// A pool member becomes reserved by the claim of a reserved lease.
	m := newPoolMember("p", sandbox.RuntimeRunc, "i1", base)
	mustCreateSandbox(t, s, m)
	wl := newLease("b", base, time.Minute)
	wl.Reserved = "mcp:three"
	if _, got, err := s.ClaimSandbox(ctx, poolClaim(wl, "p", sandbox.RuntimeRunc, "i1", base)); err != nil || got.ID != m.ID || got.Reserved != "mcp:three" {
		t.Fatalf("warm claim with a reservation: %+v %v", got, err)
	}
	if got := mustGetSandbox(t, s, "b", m.ID); got.Reserved != "mcp:three" {
		t.Errorf("claimed member reads reserved %q", got.Reserved)
	}
}
