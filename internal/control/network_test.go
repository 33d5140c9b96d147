package control_test

import (
	"context"
	"errors"
	"testing"

	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/controltest"
	"genesis.dev/sandbox/internal/egress"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/netctl"
	"genesis.dev/sandbox/internal/sandbox"
)

// Without the genesis-egress binary (the harness installs none) networked
// modes are refused, never opened; bad policies are 400 and nothing is
// made; a none sandbox's network is mode none and cannot become networked.
func TestNetworkWithoutGateway(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	caps := h.Svc.NetworkCapabilities()
	if caps.Gateway != "unavailable" || caps.Modes[egress.ModeAllowlist] || !caps.Modes[egress.ModeNone] || caps.Reason == "" {
		t.Errorf("capabilities = %+v; want only none, gateway unavailable with a reason", caps)
	}
	allow := &egress.Policy{Mode: egress.ModeAllowlist, Allow: []egress.Rule{{Host: "api.example.com"}}}
	_, err := h.Svc.CreateSandbox(ctx, control.CreateSandboxInput{Tenant: "a", Profile: controltest.Profile, Network: allow})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || errdefs.Code(err) != netctl.CodeModeUnavailable {
		t.Errorf("networked create without a gateway: %v (code %q); want 409 %s", err, errdefs.Code(err), netctl.CodeModeUnavailable)
	}
	for _, bad := range []egress.Policy{
		{Mode: "open"},
		{Mode: egress.ModeAllowlist, Allow: []egress.Rule{{CIDR: "0.0.0.0/0"}}},
		{Mode: egress.ModeToolProxy, Tools: []string{"nope"}},
	} {
		_, err := h.Svc.CreateSandbox(ctx, control.CreateSandboxInput{Tenant: "a", Profile: controltest.Profile, Network: &bad})
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("create with policy %+v: %v; want ErrInvalidArgument", bad, err)
		}
	}
	h.AssertNothingCreated()

	sb := h.Create("a", control.CreateSandboxInput{})
	if sb.Network != nil {
		t.Errorf("none sandbox shows network %+v", sb.Network)
	}
	n, err := h.Svc.GetNetwork(ctx, "a", sb.ID)
	if err != nil || n.Policy.Mode != egress.ModeNone || n.Status != sandbox.NetworkNone {
		t.Fatalf("GetNetwork = %+v, %v; want mode none, status none", n, err)
	}
	if _, err := h.Svc.GetNetwork(ctx, "b", sb.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("other tenant GetNetwork: %v; want not found", err)
	}
	if _, err := h.Svc.UpdateNetwork(ctx, "a", sb.ID, 0, *allow); !errors.Is(err, errdefs.ErrConflict) || errdefs.Code(err) != netctl.CodeRequiresRecreate {
		t.Errorf("none → allowlist: %v; want 409 %s", err, netctl.CodeRequiresRecreate)
	}
	if _, err := h.Svc.UpdateNetwork(ctx, "a", sb.ID, 7, egress.Policy{Mode: egress.ModeNone}); !errors.Is(err, errdefs.ErrPreconditionFailed) {
		t.Errorf("stale If-Match: %v; want 412", err)
	}
	if got, err := h.Svc.UpdateNetwork(ctx, "a", sb.ID, 1, egress.Policy{}); err != nil || got.Policy.Mode != egress.ModeNone {
		t.Errorf("none → none: %+v, %v", got, err)
	}
	if _, err := h.Svc.ListNetworkEvents(ctx, "a", sb.ID, -1, 0); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("negative cursor: %v", err)
	}
	if _, err := h.Svc.ListNetworkEvents(ctx, "a", sb.ID, 0, 5000); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("limit 5000: %v", err)
	}
	if page, err := h.Svc.ListNetworkEvents(ctx, "a", sb.ID, 0, 0); err != nil || len(page.Events) != 0 || page.Next != 0 {
		t.Errorf("events of a none sandbox = %+v, %v", page, err)
	}
}
