package tenancy

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/tenant"
)

// Authenticate resolves the hash of a presented API key to its principal.
// staticTenant is the tenant of a key given in the config or on the command
// line (matched by the caller in constant time), "" to look the key up in
// the store. Unknown and revoked keys, and keys whose tenant is gone, are
// errdefs.ErrUnauthenticated. Each call reads the store, so revocations by
// any instance sharing it take effect on the next request.
func (s *Service) Authenticate(ctx context.Context, hash [32]byte, staticTenant string) (tenant.Principal, error) {
	unauth := func(why string) (tenant.Principal, error) {
		return tenant.Principal{}, errdefs.WithCode("unauthenticated", errdefs.Mark(errors.New(why), errdefs.ErrUnauthenticated))
	}
	p := tenant.Principal{Tenant: staticTenant, KeyID: tenant.ConfigKeyID(hash)}
	if staticTenant == "" {
		k, err := s.store.KeyByHash(ctx, hash)
		switch {
		case errors.Is(err, errdefs.ErrNotFound):
			return unauth("invalid API key")
		case err != nil:
			return tenant.Principal{}, err
		case !k.Matches(hash):
			return unauth("invalid API key")
		case k.Revoked():
			return unauth("API key " + k.ID + " is revoked")
		}
		p.Tenant, p.KeyID, p.Scopes = k.Tenant, k.ID, k.Scopes
	}
	p.KeyTenant = p.Tenant
	t, err := s.store.GetTenant(ctx, p.Tenant)
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		return unauth("the tenant of this API key no longer exists")
	case err != nil:
		return tenant.Principal{}, err
	}
	p.Admin = t.Admin
	return p, nil
}

// CreateKey makes a new API key of a tenant with scopes (tenant.Scope*).
// The secret is returned once and never stored.
func (s *Service) CreateKey(ctx context.Context, name, description string, scopes []string) (*tenant.Key, string, error) {
	if len(description) > 256 {
		return nil, "", errdefs.Invalid("description is longer than 256 bytes")
	}
	if err := tenant.ValidateScopes(scopes); err != nil {
		return nil, "", errdefs.WithCode("invalid_scope", err)
	}
	if _, err := s.getTenant(ctx, name); err != nil {
		return nil, "", err
	}
	k, secret, err := tenant.NewKey(rand.Reader, name, description, s.now())
	if err != nil {
		return nil, "", err
	}
	k.Scopes = slices.Clone(scopes)
	if err := s.store.CreateKey(ctx, k); err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			return nil, "", tenantNotFound(name)
		}
		return nil, "", err
	}
	return k, secret, nil
}

// ListKeys lists a tenant's keys (never their secrets).
func (s *Service) ListKeys(ctx context.Context, name string) ([]*tenant.Key, error) {
	if _, err := s.getTenant(ctx, name); err != nil {
		return nil, err
	}
	return s.store.ListKeys(ctx, name)
}

// RevokeKey revokes a key of a tenant; revoking a revoked key succeeds. The
// next request with it is refused.
func (s *Service) RevokeKey(ctx context.Context, name, id string) (*tenant.Key, error) {
	if _, err := s.getTenant(ctx, name); err != nil {
		return nil, err
	}
	k, err := s.store.RevokeKey(ctx, name, id, s.now())
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, errdefs.WithCode("key_not_found", fmt.Errorf("key %q of tenant %s: %w", id, name, errdefs.ErrNotFound))
	}
	if err == nil {
		s.keyLive.forget(name, id)
	}
	return k, err
}
