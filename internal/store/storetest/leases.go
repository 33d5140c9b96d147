package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/tenant"
)

// newPoolMember returns an idle, tenant-less sandbox of a pool.
func newPoolMember(profile string, rt sandbox.Runtime, instance string, created time.Time) *sandbox.Sandbox {
	sb := newSandbox(sandbox.NewID("sbx"), "", created)
	sb.Profile, sb.Runtime, sb.Instance, sb.State = profile, rt, instance, sandbox.StateIdle
	sb.Env = map[string]string{"BASE": "1", "KEEP": "k"}
	return sb
}

func newLease(tenant string, now time.Time, ttl time.Duration) *sandbox.Lease {
	return &sandbox.Lease{ID: sandbox.NewID("lse"), Tenant: tenant, State: sandbox.LeaseActive, Holder: "agent-1",
		TTLSeconds: int64(ttl / time.Second), CreatedAt: now, RenewedAt: now, ExpiresAt: now.Add(ttl)}
}

func poolClaim(l *sandbox.Lease, profile string, rt sandbox.Runtime, instance string, now time.Time) store.Claim {
	return store.Claim{Lease: l, Profile: profile, Runtime: rt, Instance: instance, Now: now}
}

// testClaimFromPool checks that a pool claim takes the oldest idle member of
// exactly the (profile, runtime, instance) asked for, hands it to the
// tenant with env and metadata merged, and records the lease.
func testClaimFromPool(t *testing.T, s store.Store) {
	ctx := t.Context()
	now := base
	old := newPoolMember("p", sandbox.RuntimeRunc, "i1", now)
	young := newPoolMember("p", sandbox.RuntimeRunc, "i1", now.Add(time.Second))
	for _, sb := range []*sandbox.Sandbox{
		newPoolMember("p", sandbox.RuntimeRunc, "other", now.Add(-time.Hour)),
		newPoolMember("p", sandbox.RuntimeRunsc, "i1", now.Add(-time.Hour)),
		newPoolMember("q", sandbox.RuntimeRunc, "i1", now.Add(-time.Hour)),
		young, old,
	} {
		mustCreateSandbox(t, s, sb)
	}
	l := newLease("a", now, time.Minute)
	l.Warm = true
	c := poolClaim(l, "p", sandbox.RuntimeRunc, "i1", now.Add(time.Minute))
	c.RiskLevel = sandbox.RiskTrusted
	c.Env = map[string]string{"KEEP": "over", "NEW": "n"}
	c.Metadata = map[string]string{"run": "7"}
	gotL, gotSB, err := s.ClaimSandbox(ctx, c)
	if err != nil {
		t.Fatalf("ClaimSandbox: %v", err)
	}
	if gotL.SandboxID != old.ID || gotSB.ID != old.ID {
		t.Fatalf("claimed %s / %s, want the oldest member %s", gotL.SandboxID, gotSB.ID, old.ID)
	}
	stored := mustGetSandbox(t, s, "a", old.ID)
	var d differ
	d.eq("Tenant", stored.Tenant, "a")
	d.eq("State", stored.State, sandbox.StateLeased)
	d.eq("RiskLevel", stored.RiskLevel, sandbox.RiskTrusted)
	d.strMap("Env", stored.Env, map[string]string{"BASE": "1", "KEEP": "over", "NEW": "n"})
	d.strMap("Metadata", stored.Metadata, map[string]string{"run": "7"})
	d.optTime("ExpiresAt", stored.ExpiresAt, ptr(l.ExpiresAt))
	d.eq("ResourceVersion", stored.ResourceVersion, old.ResourceVersion+1)
	d.eq("Instance", stored.Instance, "i1")
	d.report(t, "claimed sandbox")
	checkSandbox(t, "returned sandbox", gotSB, stored)

	got, err := s.GetLease(ctx, "a", l.ID)
	if err != nil {
		t.Fatalf("GetLease: %v", err)
	}
	d = differ{}
	d.eq("SandboxID", got.SandboxID, old.ID)
	d.eq("State", got.State, sandbox.LeaseActive)
	d.eq("Warm", got.Warm, true)
	d.eq("Holder", got.Holder, "agent-1")
	d.eq("ResourceVersion", got.ResourceVersion, int64(1))
	d.time("ExpiresAt", got.ExpiresAt, l.ExpiresAt)
	d.time("CreatedAt", got.CreatedAt, l.CreatedAt)
	d.report(t, "lease")
	if _, err := s.GetLease(ctx, "b", l.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another tenant's GetLease: %v, want not found", err)
	}
	if _, err := s.GetSandbox(ctx, "b", old.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another tenant's GetSandbox of the claimed member: %v, want not found", err)
	}

	// The next claim takes the younger member; then the pool is empty.
	l2 := newLease("b", now, time.Minute)
	if _, sb, err := s.ClaimSandbox(ctx, poolClaim(l2, "p", sandbox.RuntimeRunc, "i1", now)); err != nil || sb.ID != young.ID {
		t.Fatalf("second claim: %v, %v; want %s", sb, err, young.ID)
	}
	_, _, err = s.ClaimSandbox(ctx, poolClaim(newLease("b", now, time.Minute), "p", sandbox.RuntimeRunc, "i1", now))
	wantClass(t, "claim from an empty pool", err, errdefs.ErrNotFound)
	if errdefs.Code(err) != "pool_empty" {
		t.Errorf("empty pool code %q, want pool_empty", errdefs.Code(err))
	}
	_, _, err = s.ClaimSandbox(ctx, store.Claim{Lease: newLease("", now, time.Minute), Profile: "p", Runtime: "runc"})
	wantClass(t, "claim without tenant", err, errdefs.ErrInvalidArgument)
}

// testClaimSandboxByID checks the cold path: a named ready sandbox of the
// tenant becomes leased once; other tenants and other states are refused.
func testClaimSandboxByID(t *testing.T, s store.Store) {
	ctx := t.Context()
	sb := newSandbox(sandbox.NewID("sbx"), "a", base)
	mustCreateSandbox(t, s, sb)
	_, _, err := s.ClaimSandbox(ctx, store.Claim{Lease: newLease("b", base, time.Minute), SandboxID: sb.ID, Now: base})
	wantClass(t, "claim of another tenant's sandbox", err, errdefs.ErrNotFound)
	l, got, err := s.ClaimSandbox(ctx, store.Claim{Lease: newLease("a", base, time.Minute), SandboxID: sb.ID, Now: base})
	if err != nil || got.State != sandbox.StateLeased || l.SandboxID != sb.ID {
		t.Fatalf("cold claim: %+v %v", got, err)
	}
	_, _, err = s.ClaimSandbox(ctx, store.Claim{Lease: newLease("a", base, time.Minute), SandboxID: sb.ID, Now: base})
	wantClass(t, "second claim of a leased sandbox", err, errdefs.ErrConflict)
	_, _, err = s.ClaimSandbox(ctx, store.Claim{Lease: newLease("a", base, time.Minute), SandboxID: "sbx_missing", Now: base})
	wantClass(t, "claim of a missing sandbox", err, errdefs.ErrNotFound)
	if list, _ := s.ListLeases(ctx, store.LeaseFilter{SandboxID: sb.ID}); len(list) != 1 {
		t.Errorf("leases of %s: %d, want 1 (failed claims must not insert)", sb.ID, len(list))
	}
}

// testOneActiveLeasePerSandbox checks the hard guarantee below the claim
// logic: a second active lease on one sandbox is refused by the store.
func testOneActiveLeasePerSandbox(t *testing.T, s store.Store) {
	ctx := t.Context()
	sb := newSandbox(sandbox.NewID("sbx"), "a", base)
	mustCreateSandbox(t, s, sb)
	first, _, err := s.ClaimSandbox(ctx, store.Claim{Lease: newLease("a", base, time.Minute), SandboxID: sb.ID, Now: base})
	if err != nil {
		t.Fatal(err)
	}
	end := base.Add(time.Second)
	if _, err := s.UpdateLease(ctx, first.ID, func(l *sandbox.Lease) error {
		l.State, l.EndedAt, l.EndReason = sandbox.LeaseReleased, &end, "released"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The sandbox is made ready again and leased a second time.
	if _, err := s.UpdateSandbox(ctx, sb.ID, 0, end, func(x *sandbox.Sandbox) error { x.State = sandbox.StateReady; return nil }); err != nil {
		t.Fatal(err)
	}
	second, _, err := s.ClaimSandbox(ctx, store.Claim{Lease: newLease("a", end, time.Minute), SandboxID: sb.ID, Now: end})
	if err != nil {
		t.Fatalf("claim after release: %v", err)
	}
	_, err = s.UpdateLease(ctx, first.ID, func(l *sandbox.Lease) error { l.State = sandbox.LeaseActive; return nil })
	wantClass(t, "reactivating a lease while another is active", err, errdefs.ErrConflict)
	if got, _ := s.GetLease(ctx, "", first.ID); got.State != sandbox.LeaseReleased {
		t.Errorf("refused update was stored: %s", got.State)
	}
	up, err := s.UpdateLease(ctx, second.ID, func(l *sandbox.Lease) error {
		l.ExpiresAt, l.Tenant, l.SandboxID = end.Add(time.Hour), "evil", "sbx_other"
		return nil
	})
	if err != nil || !up.ExpiresAt.Equal(end.Add(time.Hour)) || up.Tenant != "a" || up.SandboxID != sb.ID || up.ResourceVersion != 2 {
		t.Fatalf("renew-like update: %+v %v", up, err)
	}
	boom := errors.New("boom")
	if _, err := s.UpdateLease(ctx, second.ID, func(l *sandbox.Lease) error { l.Holder = "x"; return boom }); !errors.Is(err, boom) {
		t.Errorf("fn error: %v", err)
	}
	_, err = s.UpdateLease(ctx, "lse_missing", func(*sandbox.Lease) error { return nil })
	wantClass(t, "update of a missing lease", err, errdefs.ErrNotFound)
}

// testListLeases checks the lease filters and order.
func testListLeases(t *testing.T, s store.Store) {
	ctx := t.Context()
	var ids []string
	for i, tenant := range []string{"a", "b", "a"} {
		sb := newSandbox(sandbox.NewID("sbx"), tenant, base)
		mustCreateSandbox(t, s, sb)
		now := base.Add(time.Duration(i) * time.Second)
		l, _, err := s.ClaimSandbox(ctx, store.Claim{Lease: newLease(tenant, now, time.Duration(i+1)*time.Minute), SandboxID: sb.ID, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, l.ID)
	}
	if _, err := s.UpdateLease(ctx, ids[2], func(l *sandbox.Lease) error { l.State = sandbox.LeaseExpired; return nil }); err != nil {
		t.Fatal(err)
	}
	list := func(f store.LeaseFilter) string {
		got, err := s.ListLeases(ctx, f)
		if err != nil {
			t.Fatalf("ListLeases(%+v): %v", f, err)
		}
		out := ""
		for _, l := range got {
			for i, id := range ids {
				if l.ID == id {
					out += fmt.Sprint(i)
				}
			}
		}
		return out
	}
	for _, tc := range []struct {
		f    store.LeaseFilter
		want string
	}{
		{store.LeaseFilter{}, "012"},
		{store.LeaseFilter{Tenant: "a"}, "02"},
		{store.LeaseFilter{States: []sandbox.LeaseState{sandbox.LeaseActive}}, "01"},
		{store.LeaseFilter{ExpiresBefore: base.Add(2 * time.Minute)}, "0"},
		{store.LeaseFilter{Limit: 2}, "01"},
	} {
		if got := list(tc.f); got != tc.want {
			t.Errorf("ListLeases(%+v) = %q, want %q", tc.f, got, tc.want)
		}
	}
	if _, err := s.ListLeases(ctx, store.LeaseFilter{Limit: -1}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("negative limit: %v", err)
	}
}

// testConcurrentClaims races many claims for few members on one store.
func testConcurrentClaims(t *testing.T, s store.Store) { ClaimStorm(t, s, s) }

// ClaimStorm races 40 pool claims through a and b (two handles on one
// database, or the same one) for 10 idle members: exactly 10 succeed, each
// on a different sandbox, the rest find the pool empty, and the store holds
// one active lease per claimed sandbox.
func ClaimStorm(t *testing.T, a, b store.Store) {
	t.Helper()
	ctx := t.Context()
	const members, claims = 10, 40
	for i := range members {
		mustCreateSandbox(t, a, newPoolMember("storm", sandbox.RuntimeRunc, "i1", base.Add(time.Duration(i)*time.Millisecond)))
	}
	var mu sync.Mutex
	won := map[string]string{} // sandbox → lease
	empty := 0
	var wg sync.WaitGroup
	for i := range claims {
		st := a
		if i%2 == 1 {
			st = b
		}
		wg.Go(func() {
			l, sb, err := st.ClaimSandbox(ctx, poolClaim(newLease(fmt.Sprintf("t%d", i%3), base, time.Minute), "storm", sandbox.RuntimeRunc, "i1", base))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				if prev, dup := won[sb.ID]; dup {
					t.Errorf("sandbox %s claimed by leases %s and %s", sb.ID, prev, l.ID)
				}
				won[sb.ID] = l.ID
			case errors.Is(err, errdefs.ErrNotFound):
				empty++
			default:
				t.Errorf("claim %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if len(won) != members || empty != claims-members {
		t.Errorf("%d claims won, %d found the pool empty; want %d and %d", len(won), empty, members, claims-members)
	}
	active, err := b.ListLeases(ctx, store.LeaseFilter{States: []sandbox.LeaseState{sandbox.LeaseActive}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, l := range active {
		if seen[l.SandboxID] {
			t.Errorf("sandbox %s is in two active leases", l.SandboxID)
		}
		seen[l.SandboxID] = true
		if won[l.SandboxID] != l.ID {
			t.Errorf("stored active lease %s on %s, but the claim answered %q", l.ID, l.SandboxID, won[l.SandboxID])
		}
	}
	if len(active) != members {
		t.Errorf("%d active leases stored, want %d", len(active), members)
	}
}

// testLeaseHolds checks that lease holds count per tenant until they
// expire, that a claim naming a hold drops it in its transaction (and a
// failed claim keeps it), and that DropLeaseHolds takes an instance's holds
// and the expired ones.
func testLeaseHolds(t *testing.T, s store.Store) {
	ctx := t.Context()
	count := func(tenant string, at time.Time) int {
		t.Helper()
		n, err := s.CountLeaseHolds(ctx, tenant, at)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	hold := func(id, tenant, instance string, exp time.Time) {
		t.Helper()
		if err := s.HoldLease(ctx, store.LeaseHold{ID: id, Tenant: tenant, Instance: instance, ExpiresAt: exp}); err != nil {
			t.Fatal(err)
		}
	}
	hold("h1", "a", "i1", base.Add(time.Minute))
	hold("h2", "a", "i2", base.Add(time.Hour))
	hold("h3", "b", "i1", base.Add(time.Hour))
	err := s.HoldLease(ctx, store.LeaseHold{ID: "h1", Tenant: "a", Instance: "i1", ExpiresAt: base.Add(time.Hour)})
	wantClass(t, "duplicate hold", err, errdefs.ErrAlreadyExists)
	err = s.HoldLease(ctx, store.LeaseHold{ID: "h9", Tenant: "a", ExpiresAt: base.Add(time.Hour)})
	wantClass(t, "hold without an instance", err, errdefs.ErrInvalidArgument)
	if n := count("a", base); n != 2 {
		t.Errorf("holds of a: %d, want 2", n)
	}
	if n := count("a", base.Add(time.Minute)); n != 1 {
		t.Errorf("holds of a once h1 expired: %d, want 1", n)
	}

	// A claim that fails keeps its hold; one that stores its lease drops it.
	sb := newSandbox(sandbox.NewID("sbx"), "a", base)
	mustCreateSandbox(t, s, sb)
	_, _, err = s.ClaimSandbox(ctx, store.Claim{Lease: newLease("b", base, time.Minute), SandboxID: sb.ID, Now: base, HoldID: "h3"})
	wantClass(t, "claim of another tenant's sandbox", err, errdefs.ErrNotFound)
	if n := count("b", base); n != 1 {
		t.Errorf("holds of b after a failed claim: %d, want 1", n)
	}
	if _, _, err := s.ClaimSandbox(ctx, store.Claim{Lease: newLease("a", base, time.Minute), SandboxID: sb.ID, Now: base, HoldID: "h2"}); err != nil {
		t.Fatal(err)
	}
	if n := count("a", base); n != 1 {
		t.Errorf("holds of a after the claim naming h2: %d, want 1 (h1)", n)
	}
	if err := s.DropLeaseHold(ctx, "h2"); err != nil {
		t.Errorf("dropping a hold that is gone: %v", err)
	}

	hold("h4", "a", "i2", base.Add(time.Hour))
	n, err := s.DropLeaseHolds(ctx, "", base.Add(time.Minute))
	if err != nil || n != 1 {
		t.Errorf("dropping the expired holds: %d %v, want 1 (h1)", n, err)
	}
	if n, err = s.DropLeaseHolds(ctx, "i1", base); err != nil || n != 1 {
		t.Errorf("dropping the holds of i1: %d %v, want 1 (h3)", n, err)
	}
	if a, b := count("a", base), count("b", base); a != 1 || b != 0 {
		t.Errorf("holds left: a %d, b %d; want 1 (h4), 0", a, b)
	}
}

// testClaimFromAnyInstance checks that a pool claim with no instance takes
// the oldest idle member of any instance (shared pools), and one with an
// instance only that instance's.
func testClaimFromAnyInstance(t *testing.T, s store.Store) {
	ctx := t.Context()
	older := newPoolMember("p", sandbox.RuntimeRunc, "i1", base)
	newer := newPoolMember("p", sandbox.RuntimeRunc, "i2", base.Add(time.Second))
	mustCreateSandbox(t, s, older)
	mustCreateSandbox(t, s, newer)
	_, got, err := s.ClaimSandbox(ctx, poolClaim(newLease("a", base, time.Minute), "p", sandbox.RuntimeRunc, "i2", base))
	if err != nil || got.ID != newer.ID {
		t.Fatalf("claim of i2's member: %v, %v; want %s", got, err, newer.ID)
	}
	_, _, err = s.ClaimSandbox(ctx, poolClaim(newLease("a", base, time.Minute), "p", sandbox.RuntimeRunc, "i2", base))
	wantClass(t, "a second claim of i2's members", err, errdefs.ErrNotFound)
	_, got, err = s.ClaimSandbox(ctx, poolClaim(newLease("a", base, time.Minute), "p", sandbox.RuntimeRunc, "", base))
	if err != nil || got.ID != older.ID || got.Instance != "i1" {
		t.Fatalf("claim of any instance's member: %v, %v; want %s of i1", got, err, older.ID)
	}
}

// testClaimWithAudit checks that a claim's audit record is stored with the
// lease in one transaction: appended, with its Seq set, when the claim
// commits; neither stored nor given a Seq when the claim fails.
func testClaimWithAudit(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateSandbox(t, s, newPoolMember("p", sandbox.RuntimeRunc, "i1", base))
	rec := func(id string) *tenant.AuditRecord {
		return &tenant.AuditRecord{Time: base, Actor: "key_a", Tenant: "a", Action: "POST /v1/leases", Status: 201,
			RequestID: id, Remote: "127.0.0.1:1"}
	}
	c := poolClaim(newLease("a", base, time.Minute), "p", sandbox.RuntimeRunc, "i1", base)
	c.Audit = rec("req_claimed")
	c.Audit.Target = c.Lease.ID
	l, _, err := s.ClaimSandbox(ctx, c)
	if err != nil {
		t.Fatalf("ClaimSandbox: %v", err)
	}
	if c.Audit.Seq <= 0 {
		t.Fatalf("a committed claim's audit record has seq %d", c.Audit.Seq)
	}
	// The pool is empty now: the claim fails, and its record is not kept.
	failed := poolClaim(newLease("a", base, time.Minute), "p", sandbox.RuntimeRunc, "i1", base)
	failed.Audit = rec("req_failed")
	if _, _, err := s.ClaimSandbox(ctx, failed); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("claim of an empty pool: %v, want not found", err)
	}
	if failed.Audit.Seq != 0 {
		t.Fatalf("a failed claim's audit record has seq %d", failed.Audit.Seq)
	}
	got, err := s.ListAudit(ctx, store.AuditFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].RequestID != "req_claimed" || got[0].Seq != c.Audit.Seq || got[0].Target != l.ID || got[0].Status != 201 {
		t.Fatalf("audit records after a stored and a failed claim: %+v", got)
	}
}
