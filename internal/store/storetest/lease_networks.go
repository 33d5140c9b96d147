package storetest

import (
	"errors"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/egress"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// testClaimHandsOverNetwork checks that a claimed pool member's network
// record becomes the claiming tenant's, in the same transaction.
func testClaimHandsOverNetwork(t *testing.T, s store.Store) {
	ctx := t.Context()
	sb := newPoolMember("p", sandbox.RuntimeRunc, "i1", base)
	mustCreateSandbox(t, s, sb)
	pol := egress.Policy{Mode: egress.ModeAllowlist, Allow: []egress.Rule{{Host: "api.example.com", Ports: []int{443}}}}
	if err := s.CreateSandboxNetwork(ctx, &sandbox.Network{SandboxID: sb.ID, Policy: pol, Status: sandbox.NetworkActive, UpdatedAt: base}); err != nil {
		t.Fatalf("CreateSandboxNetwork: %v", err)
	}
	if _, _, err := s.ClaimSandbox(ctx, poolClaim(newLease("a", base, time.Minute), "p", sandbox.RuntimeRunc, "i1", base)); err != nil {
		t.Fatalf("ClaimSandbox: %v", err)
	}
	n, err := s.GetSandboxNetwork(ctx, "a", sb.ID)
	if err != nil || n.Tenant != "a" || n.Policy.Mode != egress.ModeAllowlist || n.Status != sandbox.NetworkActive {
		t.Fatalf("network of the claimed member read by its tenant: %+v, %v; want tenant a, the member's policy", n, err)
	}
	if _, err := s.GetSandboxNetwork(ctx, "b", sb.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another tenant reads the claimed member's network: %v", err)
	}
	if _, err := s.UpdateSandboxNetwork(ctx, sb.ID, 0, base, func(x *sandbox.Network) error { return nil }); err != nil {
		t.Fatalf("UpdateSandboxNetwork: %v", err)
	}
	if n, err := s.GetSandboxNetwork(ctx, "a", sb.ID); err != nil || n.Tenant != "a" {
		t.Errorf("network after an update: %+v, %v; want tenant a", n, err)
	}
}
