package control_test

import (
	"context"
	"testing"

	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/sandbox"
)

// TestLeaseTenantMinRisk: the min_risk_level of a tenant made through the
// API holds for leases: its lease skips the runc pool and gets a runsc
// sandbox at that risk level.
func TestLeaseTenantMinRisk(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withPool(1, 2))
	ctx := context.Background()
	if _, err := h.svc.CreateTenant(ctx, control.TenantInput{Name: "strict", MinRiskLevel: "high"}); err != nil {
		t.Fatal(err)
	}
	h.waitIdle(1)
	out, err := h.svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "strict", Profile: testProfile})
	if err != nil {
		t.Fatal(err)
	}
	if out.Lease.Warm || out.Sandbox.Runtime != sandbox.RuntimeRunsc || out.Sandbox.RiskLevel != sandbox.RiskHigh ||
		out.Lease.Runtime != sandbox.RuntimeRunsc {
		t.Errorf("lease of a min-risk-high tenant: warm %v, lease runtime %s, sandbox %s at %s; want a cold runsc sandbox at high",
			out.Lease.Warm, out.Lease.Runtime, out.Sandbox.Runtime, out.Sandbox.RiskLevel)
	}
	_, err = h.svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "strict", Profile: testProfile, Runtime: "runc"})
	wantProblem(t, "runc for a min-risk-high tenant", err, 400, "runtime_not_allowed")
}
