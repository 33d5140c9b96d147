package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/tenancy"
	"genesis.dev/sandbox/internal/tenant"
)

// Tenants checks keys and tenants (tenancy.Service).
type Tenants interface {
	Authenticate(ctx context.Context, hash [32]byte, staticTenant string) (tenant.Principal, error)
	GetTenant(ctx context.Context, name string) (*tenancy.TenantView, error)
}

// Config configures an Authenticator.
type Config struct {
	Tenants Tenants
	// Keys maps API keys given in the config or on the command line to
	// their tenants; ApproverKeys likewise, with the scope approve.
	Keys, ApproverKeys map[string]string
	Logger             *slog.Logger
}

// staticKey is a key of the config: only its SHA-256 is kept.
type staticKey struct {
	hash   [32]byte
	tenant string
	scopes []string
}

// Authenticator answers who holds an API key.
type Authenticator struct {
	tenants Tenants
	keys    []staticKey
	log     *slog.Logger
}

// New returns an Authenticator for cfg.
func New(cfg Config) (*Authenticator, error) {
	if cfg.Tenants == nil {
		return nil, errdefs.Invalid("auth: no tenants")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	a := &Authenticator{tenants: cfg.Tenants, log: cfg.Logger}
	for k, t := range cfg.Keys {
		a.keys = append(a.keys, staticKey{hash: sha256.Sum256([]byte(k)), tenant: t})
	}
	for k, t := range cfg.ApproverKeys {
		a.keys = append(a.keys, staticKey{hash: sha256.Sum256([]byte(k)), tenant: t, scopes: []string{tenant.ScopeApprove}})
	}
	return a, nil
}

// Key answers whose key is key.
func (a *Authenticator) Key(ctx context.Context, key string) (tenant.Principal, error) {
	return a.Resolve(ctx, sha256.Sum256([]byte(key)))
}

// Resolve answers whose key has the SHA-256 sum: keys from the config are
// compared in constant time (every one of them, whatever matches); any
// other key is looked up by its sum in the store on every call, so a
// revocation takes effect on the next one.
func (a *Authenticator) Resolve(ctx context.Context, sum [32]byte) (tenant.Principal, error) {
	static, scopes := "", []string(nil)
	for _, k := range a.keys {
		if subtle.ConstantTimeCompare(sum[:], k.hash[:]) == 1 {
			static, scopes = k.tenant, k.scopes
		}
	}
	p, err := a.tenants.Authenticate(ctx, sum, static)
	if err == nil && static != "" {
		p.Scopes = scopes
	}
	return p, err
}

// ActAs is p acting for tenant as (header: api.HeaderActAs): every call
// then sees that tenant's resources, as its own key would, while the
// audit records p's key as the actor. Only an admin key may, and the
// tenant must exist; as empty or p's own is p.
func (a *Authenticator) ActAs(ctx context.Context, p tenant.Principal, as string) (tenant.Principal, error) {
	if as == "" || as == p.Tenant {
		return p, nil
	}
	if !p.Admin {
		return tenant.Principal{}, errdefs.WithCode("admin_required", fmt.Errorf("only an admin key may act for another tenant (%s): %w", api.HeaderActAs, errdefs.ErrPermissionDenied))
	}
	if _, err := a.tenants.GetTenant(ctx, as); err != nil {
		return tenant.Principal{}, err
	}
	p.Tenant = as
	return p, nil
}

// Reissued checks the issuer of something taken earlier (a terminal
// ticket) again as it is used: the key with SHA-256 sum still valid (and
// its tenant still there); for one an admin took acting for another
// tenant, the key still an admin's and that tenant still there. The
// answer acts for tenant.
func (a *Authenticator) Reissued(ctx context.Context, sum [32]byte, forTenant, what string) (tenant.Principal, error) {
	p, err := a.Resolve(ctx, sum)
	if err != nil || forTenant == p.Tenant {
		return p, err
	}
	if !p.Admin {
		return tenant.Principal{}, errdefs.WithCode("admin_required", fmt.Errorf(
			"the %s was issued to an admin key acting for tenant %s, and the key is no longer an admin's: %w", what, forTenant, errdefs.ErrPermissionDenied))
	}
	if _, err := a.tenants.GetTenant(ctx, forTenant); err != nil {
		return tenant.Principal{}, err
	}
	a.log.Info(what+" used by an admin acting for a tenant", "key", p.KeyID, "key_tenant", p.Tenant, "tenant", forTenant)
	p.Tenant = forTenant
	return p, nil
}
