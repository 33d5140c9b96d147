package tenancy_test

import (
	"context"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/assemble"
	"genesis.dev/sandbox/internal/controltest"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/tenancy"
	"genesis.dev/sandbox/internal/tenant"
)

// TestKeyLive: a config key is live for its tenant while configured; a
// stored key until it is revoked or its tenant deleted, at once when that
// happens through this service and within KeyLiveTTL when it happens
// through another instance sharing the store.
func TestKeyLive(t *testing.T) {
	t.Parallel()
	cfgKey := tenant.ConfigKeyID(tenant.HashKey("config-key-0123456789"))
	h := controltest.NewOpts(t, controltest.Options{Assemble: func(c *assemble.Config) {
		c.ConfigKeys = map[string]string{cfgKey: "a"}
	}})
	ctx := context.Background()
	revoked := func(what string, err error) {
		t.Helper()
		if errdefs.Code(err) != tenancy.CodeTokenRevoked || !errdefs.Is(err, errdefs.ErrUnauthenticated) {
			t.Errorf("%s: %v, want token_revoked (401)", what, err)
		}
	}
	live := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v, want live", what, err)
		}
	}

	live("a configured key", h.Tenancy.KeyLive(ctx, "a", cfgKey))
	revoked("a configured key for another tenant", h.Tenancy.KeyLive(ctx, "b", cfgKey))
	revoked("a config key no longer configured", h.Tenancy.KeyLive(ctx, "a", tenant.ConfigKeyID(tenant.HashKey("gone-key-0123456789"))))
	revoked("no key", h.Tenancy.KeyLive(ctx, "a", ""))
	revoked("no tenant", h.Tenancy.KeyLive(ctx, "", "key_x"))
	revoked("a key that never was", h.Tenancy.KeyLive(ctx, "a", "key_nonesuch"))

	if _, err := h.Tenancy.CreateTenant(ctx, tenancy.TenantInput{Name: "t"}); err != nil {
		t.Fatal(err)
	}
	k1, _, err := h.Tenancy.CreateKey(ctx, "t", "one", nil)
	if err != nil {
		t.Fatal(err)
	}
	k2, _, err := h.Tenancy.CreateKey(ctx, "t", "two", nil)
	if err != nil {
		t.Fatal(err)
	}
	live("a new key", h.Tenancy.KeyLive(ctx, "t", k1.ID))
	live("a new key, again (remembered)", h.Tenancy.KeyLive(ctx, "t", k1.ID))
	revoked("a key of another tenant", h.Tenancy.KeyLive(ctx, "a", k1.ID))

	// Revoked through this service: at once, though remembered live.
	if _, err := h.Tenancy.RevokeKey(ctx, "t", k1.ID); err != nil {
		t.Fatal(err)
	}
	revoked("a key revoked here", h.Tenancy.KeyLive(ctx, "t", k1.ID))
	live("the tenant's other key", h.Tenancy.KeyLive(ctx, "t", k2.ID))

	// Revoked through another instance (straight in the shared store):
	// within KeyLiveTTL.
	if _, err := h.St.RevokeKey(ctx, "t", k2.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	h.Clock.Advance(tenancy.KeyLiveTTL)
	revoked("a key revoked elsewhere, after KeyLiveTTL", h.Tenancy.KeyLive(ctx, "t", k2.ID))

	// The tenant deleted through this service: at once.
	if _, err := h.Tenancy.CreateTenant(ctx, tenancy.TenantInput{Name: "u"}); err != nil {
		t.Fatal(err)
	}
	k3, _, err := h.Tenancy.CreateKey(ctx, "u", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	live("a key of u", h.Tenancy.KeyLive(ctx, "u", k3.ID))
	if err := h.Tenancy.DeleteTenant(ctx, "u", 0); err != nil {
		t.Fatal(err)
	}
	revoked("a key of a deleted tenant", h.Tenancy.KeyLive(ctx, "u", k3.ID))

	// Authenticate names the key's tenant.
	p, err := h.Tenancy.Authenticate(ctx, tenant.HashKey("config-key-0123456789"), "a")
	if err != nil || p.KeyID != cfgKey || p.KeyTenant != "a" {
		t.Errorf("Authenticate: %+v %v", p, err)
	}
}
