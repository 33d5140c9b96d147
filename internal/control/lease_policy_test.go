package control_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/controltest"
	"genesis.dev/sandbox/internal/egress"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/interactive"
	"genesis.dev/sandbox/internal/netctl"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/tenancy"
	"genesis.dev/sandbox/internal/tenant"
)

// TestLeaseTenantMinRisk: the min_risk_level of a tenant made through the
// API holds for leases: its lease skips the runc pool and gets a runsc
// sandbox at that risk level.
func TestLeaseTenantMinRisk(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withPool(1, 2))
	ctx := context.Background()
	if _, err := h.Tenancy.CreateTenant(ctx, tenancy.TenantInput{Name: "strict", MinRiskLevel: "high"}); err != nil {
		t.Fatal(err)
	}
	h.waitIdle(1)
	out, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "strict", Profile: controltest.Profile})
	if err != nil {
		t.Fatal(err)
	}
	if out.Lease.Warm || out.Sandbox.Runtime != sandbox.RuntimeRunsc || out.Sandbox.RiskLevel != sandbox.RiskHigh ||
		out.Lease.Runtime != sandbox.RuntimeRunsc {
		t.Errorf("lease of a min-risk-high tenant: warm %v, lease runtime %s, sandbox %s at %s; want a cold runsc sandbox at high",
			out.Lease.Warm, out.Lease.Runtime, out.Sandbox.Runtime, out.Sandbox.RiskLevel)
	}
	_, err = h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "strict", Profile: controltest.Profile, Runtime: "runc"})
	wantProblem(t, "runc for a min-risk-high tenant", err, 400, "runtime_not_allowed")
}

// TestLeaseNetworkPolicy: a lease asking for another network policy than
// the pool members run — in its request or through its tenant's default —
// is never served a warm member; without a gateway it is refused (409), the
// member stays idle.
func TestLeaseNetworkPolicy(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *config.Config) {
		withPool(1, 2)(c)
		c.Tenants["netted"] = config.Tenant{Network: &config.NetworkPolicy{Policy: egress.Policy{
			Mode: egress.ModeAllowlist, Allow: []egress.Rule{{Host: "api.example.com"}}}}}
	})
	ctx := context.Background()
	h.waitIdle(1)
	allow := &egress.Policy{Mode: egress.ModeAllowlist, Allow: []egress.Rule{{Host: "api.example.com"}}}
	_, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "a", Profile: controltest.Profile, Network: allow})
	wantProblem(t, "lease asking for allowlist", err, 409, netctl.CodeModeUnavailable)
	_, err = h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "netted", Profile: controltest.Profile})
	wantProblem(t, "lease of a tenant with an allowlist default", err, 409, netctl.CodeModeUnavailable)
	if v := h.waitIdle(1); v.Hits != 0 {
		t.Errorf("pool handed out members to leases of another network policy: %+v", v)
	}
	// The members' own policy (none) is served warm.
	out, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "a", Profile: controltest.Profile, Network: &egress.Policy{Mode: egress.ModeNone}})
	if err != nil || !out.Lease.Warm {
		t.Fatalf("lease asking for mode none: %+v, %v; want a warm member", out, err)
	}
}

// TestLeaseEndsWithSandbox: the lease of a deleted or failed sandbox ends
// with it, and a drain does not wait for a lease whose sandbox no longer
// runs.
func TestLeaseEndsWithSandbox(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	acquire := func() *control.LeaseOutput {
		t.Helper()
		out, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "a", Profile: controltest.Profile, TTLSeconds: ttl(600)})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	wantEnded := func(what string, out *control.LeaseOutput, reason string) {
		t.Helper()
		l, err := h.Svc.GetLease(ctx, "a", out.Lease.ID)
		if err != nil || l.State != sandbox.LeaseReleased || !strings.Contains(l.EndReason, reason) || l.EndedAt == nil {
			t.Errorf("lease of a %s sandbox: %+v, %v; want released with a reason saying %q", what, l, err, reason)
		}
	}
	deleted := acquire()
	if err := h.Svc.DeleteSandbox(ctx, "a", deleted.Sandbox.ID); err != nil {
		t.Fatal(err)
	}
	wantEnded("deleted", deleted, "destroyed")

	failed := acquire()
	if err := h.Drv.Exit(h.Record(failed.Sandbox.ID).ContainerID, 137, true); err != nil {
		t.Fatal(err)
	}
	if err := h.Svc.Reconcile(ctx, false); err != nil {
		t.Fatal(err)
	}
	if st := h.Record(failed.Sandbox.ID).State; st != sandbox.StateFailed {
		t.Fatalf("sandbox with an exited container is %s, want failed", st)
	}
	wantEnded("failed", failed, "failed")

	// A lease left active on a sandbox that failed (as an older version
	// left them) does not hold up a drain until its timeout.
	stale := acquire()
	if _, err := h.St.UpdateSandbox(ctx, stale.Sandbox.ID, 0, time.Now(), func(x *sandbox.Sandbox) error {
		x.State = sandbox.StateFailed
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := h.Svc.Drain(dctx, 10*time.Minute); err != nil {
		t.Errorf("drain with only a failed sandbox's lease left: %v; want done at once", err)
	}
}

// TestColdLeasesKeepMaxLeases: concurrent cold leases of a tenant never
// pass its max_leases; the rest are refused with 429 quota_exceeded.
func TestColdLeasesKeepMaxLeases(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	if _, err := h.Tenancy.CreateTenant(ctx, tenancy.TenantInput{Name: "capped", Quotas: tenant.Quotas{MaxLeases: 2}}); err != nil {
		t.Fatal(err)
	}
	const n = 6
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "capped", Profile: controltest.Profile})
			errs <- err
		}()
	}
	ok := 0
	for range n {
		err := <-errs
		switch {
		case err == nil:
			ok++
		case errdefs.Code(err) != "quota_exceeded":
			t.Errorf("lease refused with %v; want quota_exceeded", err)
		}
	}
	if ok != 2 {
		t.Errorf("%d of %d concurrent cold leases granted with max_leases 2", ok, n)
	}
	if list, err := h.Svc.ListLeases(ctx, store.LeaseFilter{Tenant: "capped", States: []sandbox.LeaseState{sandbox.LeaseActive}}); err != nil || len(list) != 2 {
		t.Errorf("active leases: %d, %v; want 2", len(list), err)
	}
}

// TestWarmLeaseTerminalEnv: a terminal of a warm-leased sandbox has the
// env the lease gave, as its jobs do.
func TestWarmLeaseTerminalEnv(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withPool(1, 2))
	ctx := context.Background()
	h.waitIdle(1)
	out, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "a", Profile: controltest.Profile,
		Env: map[string]string{"LEASE_VAR": "from-claim"}})
	if err != nil || !out.Lease.Warm {
		t.Fatalf("warm lease: %+v, %v", out, err)
	}
	conn, err := h.Terminals.Open(ctx, interactive.TerminalOptions{Tenant: "a", SandboxID: out.Sandbox.ID})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if ok, err := conn.Input([]byte("echo \"<${LEASE_VAR}>\"; exit\n")); !ok || err != nil {
		t.Fatalf("terminal input: %v %v", ok, err)
	}
	got := make(chan string, 1)
	go func() {
		var buf strings.Builder
		for {
			ev, err := conn.Next()
			if err != nil || ev.Exit != nil {
				got <- buf.String()
				return
			}
			buf.Write(ev.Output)
		}
	}()
	select {
	case s := <-got:
		if !strings.Contains(s, "<from-claim>") {
			t.Errorf("terminal output %q; want the lease's LEASE_VAR", s)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the terminal did not exit")
	}
}

// TestLeaseSystemEndsAudited: the reaper's end of an expired lease and a
// drain's destroy of a tenant's sandbox leave system audit records.
func TestLeaseSystemEndsAudited(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	expired, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "a", Profile: controltest.Profile, TTLSeconds: ttl(5)})
	if err != nil {
		t.Fatal(err)
	}
	h.Clock.Advance(6 * time.Second)
	if err := h.Svc.Reconcile(ctx, false); err != nil {
		t.Fatal(err)
	}
	kept := h.Create("b", control.CreateSandboxInput{})
	if err := h.Svc.Drain(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct{ tenant, action, target string }{
		{"a", "system lease_expired", expired.Lease.ID},
		{"b", "system service_drained", kept.ID},
	} {
		recs, err := h.Tenancy.ListAudit(ctx, tenant.Principal{Admin: true}, store.AuditFilter{Tenant: want.tenant, Action: want.action, Target: want.target})
		if err != nil || len(recs) != 1 || recs[0].Actor != "system" || recs[0].Status != 200 {
			t.Errorf("audit of %s on %s: %+v, %v; want one system record", want.action, want.target, recs, err)
		}
	}
}
