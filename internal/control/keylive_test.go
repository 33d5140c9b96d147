package control_test

import (
	"context"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/tenant"
)

// TestKeyLive: a config key is live for its tenant while configured; a
// stored key until it is revoked or its tenant deleted, at once when that
// happens through this service and within KeyLiveTTL when it happens
// through another instance sharing the store.
func TestKeyLive(t *testing.T) {
	t.Parallel()
	cfgKey := tenant.ConfigKeyID(tenant.HashKey("config-key-0123456789"))
	h := newHarnessWith(t, nil, func(c *control.Config) {
		c.ConfigKeys = map[string]string{cfgKey: "a"}
	})
	ctx := context.Background()
	revoked := func(what string, err error) {
		t.Helper()
		if errdefs.Code(err) != control.CodeTokenRevoked || !errdefs.Is(err, errdefs.ErrUnauthenticated) {
			t.Errorf("%s: %v, want token_revoked (401)", what, err)
		}
	}
	live := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v, want live", what, err)
		}
	}

	live("a configured key", h.Svc.KeyLive(ctx, "a", cfgKey))
	revoked("a configured key for another tenant", h.Svc.KeyLive(ctx, "b", cfgKey))
	revoked("a config key no longer configured", h.Svc.KeyLive(ctx, "a", tenant.ConfigKeyID(tenant.HashKey("gone-key-0123456789"))))
	revoked("no key", h.Svc.KeyLive(ctx, "a", ""))
	revoked("no tenant", h.Svc.KeyLive(ctx, "", "key_x"))
	revoked("a key that never was", h.Svc.KeyLive(ctx, "a", "key_nonesuch"))

	if _, err := h.Svc.CreateTenant(ctx, control.TenantInput{Name: "t"}); err != nil {
		t.Fatal(err)
	}
	k1, _, err := h.Svc.CreateKey(ctx, "t", "one", nil)
	if err != nil {
		t.Fatal(err)
	}
	k2, _, err := h.Svc.CreateKey(ctx, "t", "two", nil)
	if err != nil {
		t.Fatal(err)
	}
	live("a new key", h.Svc.KeyLive(ctx, "t", k1.ID))
	live("a new key, again (remembered)", h.Svc.KeyLive(ctx, "t", k1.ID))
	revoked("a key of another tenant", h.Svc.KeyLive(ctx, "a", k1.ID))

	// Revoked through this service: at once, though remembered live.
	if _, err := h.Svc.RevokeKey(ctx, "t", k1.ID); err != nil {
		t.Fatal(err)
	}
	revoked("a key revoked here", h.Svc.KeyLive(ctx, "t", k1.ID))
	live("the tenant's other key", h.Svc.KeyLive(ctx, "t", k2.ID))

	// Revoked through another instance (straight in the shared store):
	// within KeyLiveTTL.
	if _, err := h.St.RevokeKey(ctx, "t", k2.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	h.Clock.Advance(control.KeyLiveTTL)
	revoked("a key revoked elsewhere, after KeyLiveTTL", h.Svc.KeyLive(ctx, "t", k2.ID))

	// The tenant deleted through this service: at once.
	if _, err := h.Svc.CreateTenant(ctx, control.TenantInput{Name: "u"}); err != nil {
		t.Fatal(err)
	}
	k3, _, err := h.Svc.CreateKey(ctx, "u", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	live("a key of u", h.Svc.KeyLive(ctx, "u", k3.ID))
	if err := h.Svc.DeleteTenant(ctx, "u", 0); err != nil {
		t.Fatal(err)
	}
	revoked("a key of a deleted tenant", h.Svc.KeyLive(ctx, "u", k3.ID))

	// Authenticate names the key's tenant.
	p, err := h.Svc.Authenticate(ctx, tenant.HashKey("config-key-0123456789"), "a")
	if err != nil || p.KeyID != cfgKey || p.KeyTenant != "a" {
		t.Errorf("Authenticate: %+v %v", p, err)
	}
}
