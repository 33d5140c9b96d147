package storetest

import (
	"errors"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// testReturnSandbox checks that a claimed member goes back to its pool in
// one update (tenant, env, metadata and expiry cleared), only from the
// holder and state given, and that a claim can then take it again.
func testReturnSandbox(t *testing.T, s store.Store) {
	ctx := t.Context()
	now := base
	m := newPoolMember("p", sandbox.RuntimeRunc, "i1", now)
	mustCreateSandbox(t, s, m)
	l := newLease("a", now, time.Minute)
	c := poolClaim(l, "p", sandbox.RuntimeRunc, "i1", now.Add(time.Second))
	c.RiskLevel, c.Env, c.Metadata = sandbox.RiskHigh, map[string]string{"SECRET": "a"}, map[string]string{"run": "1"}
	if _, _, err := s.ClaimSandbox(ctx, c); err != nil {
		t.Fatal(err)
	}
	r := store.Return{SandboxID: m.ID, Tenant: "a", From: sandbox.StateDraining, RiskLevel: sandbox.RiskTrusted, Now: now.Add(time.Minute)}
	if _, err := s.ReturnSandbox(ctx, r); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("return of a leased (not draining) sandbox: %v, want conflict", err)
	}
	if _, err := s.UpdateSandbox(ctx, m.ID, 0, now, func(x *sandbox.Sandbox) error { x.State = sandbox.StateDraining; return nil }); err != nil {
		t.Fatal(err)
	}
	other := r
	other.Tenant = "b"
	if _, err := s.ReturnSandbox(ctx, other); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("return on behalf of another tenant: %v, want conflict", err)
	}
	missing := r
	missing.SandboxID = sandbox.NewID("sbx")
	if _, err := s.ReturnSandbox(ctx, missing); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("return of a missing sandbox: %v, want not found", err)
	}
	if got := mustGetSandbox(t, s, "a", m.ID); got.State != sandbox.StateDraining || got.Env["SECRET"] != "a" {
		t.Fatalf("refused returns changed the record: %+v", got)
	}
	got, err := s.ReturnSandbox(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	stored := mustGetSandbox(t, s, "", m.ID)
	for _, sb := range []*sandbox.Sandbox{got, stored} {
		if sb.Tenant != "" || sb.State != sandbox.StateIdle || sb.RiskLevel != sandbox.RiskTrusted || len(sb.Env) != 0 ||
			len(sb.Metadata) != 0 || sb.ExpiresAt != nil || !sb.UpdatedAt.Equal(r.Now) {
			t.Errorf("returned sandbox %+v, want an idle member without the holder's data", sb)
		}
	}
	if _, err := s.GetSandbox(ctx, "a", m.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("the previous holder still sees the returned sandbox: %v", err)
	}
	// The first lease is still active: the store refuses a second one.
	l2 := newLease("b", now, time.Minute)
	if _, _, err := s.ClaimSandbox(ctx, poolClaim(l2, "p", sandbox.RuntimeRunc, "i1", now.Add(2*time.Minute))); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("claim while the first lease is active: %v, want conflict", err)
	}
	ended := now.Add(time.Minute)
	if _, err := s.UpdateLease(ctx, l.ID, func(x *sandbox.Lease) error {
		x.State, x.EndedAt = sandbox.LeaseReleased, &ended
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	l2 = newLease("b", now, time.Minute)
	_, sb2, err := s.ClaimSandbox(ctx, poolClaim(l2, "p", sandbox.RuntimeRunc, "i1", now.Add(2*time.Minute)))
	if err != nil || sb2.ID != m.ID || sb2.Tenant != "b" || len(sb2.Env) != 0 {
		t.Fatalf("claim of the returned member: %+v %v", sb2, err)
	}
}

// testReturnSandboxReady: a reset sandbox may come back ready (nobody's,
// not claimable while its ready hooks run); no other state but idle.
func testReturnSandboxReady(t *testing.T, s store.Store) {
	ctx := t.Context()
	now := base
	m2 := newPoolMember("p", sandbox.RuntimeRunc, "i1", now)
	mustCreateSandbox(t, s, m2)
	c2 := poolClaim(newLease("a", now, time.Minute), "p", sandbox.RuntimeRunc, "i1", now.Add(time.Second))
	if _, _, err := s.ClaimSandbox(ctx, c2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateSandbox(ctx, m2.ID, 0, now, func(x *sandbox.Sandbox) error { x.State = sandbox.StateDraining; return nil }); err != nil {
		t.Fatal(err)
	}
	bad := store.Return{SandboxID: m2.ID, Tenant: "a", From: sandbox.StateDraining, To: sandbox.StateLeased, RiskLevel: sandbox.RiskTrusted, Now: now}
	if _, err := s.ReturnSandbox(ctx, bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("return to leased: %v, want invalid argument", err)
	}
	ready := bad
	ready.To = sandbox.StateReady
	got2, err := s.ReturnSandbox(ctx, ready)
	if err != nil {
		t.Fatal(err)
	}
	if got2.Tenant != "" || got2.State != sandbox.StateReady || len(got2.Env) != 0 {
		t.Errorf("returned ready: %+v", got2)
	}
	if st := mustGetSandbox(t, s, "", m2.ID).State; st != sandbox.StateReady {
		t.Errorf("stored state after a return to ready: %s", st)
	}
	if _, _, err := s.ClaimSandbox(ctx, poolClaim(newLease("b", now, time.Minute), "p", sandbox.RuntimeRunc, "i1", now.Add(time.Minute))); !errors.Is(err, errdefs.ErrNotFound) && !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("a claim took a ready (not idle) member: %v", err)
	}
}
