package store

import (
	"context"
	"time"

	"genesis.dev/sandbox/internal/tenant"
)

// Tenants stores tenants and their API keys. Keys are stored only as their
// hash. Not-found lookups return errdefs.ErrNotFound.
type Tenants interface {
	// PutTenant inserts t or, if a tenant of that name exists, replaces all
	// its fields but CreatedAt (bumping ResourceVersion). It is how config
	// tenants are written at start.
	PutTenant(ctx context.Context, t *tenant.Tenant) (*tenant.Tenant, error)
	// CreateTenant inserts a new tenant (ResourceVersion 1); a taken name
	// returns errdefs.ErrAlreadyExists.
	CreateTenant(ctx context.Context, t *tenant.Tenant) error
	// GetTenant returns one tenant.
	GetTenant(ctx context.Context, name string) (*tenant.Tenant, error)
	// ListTenants returns every tenant in name order.
	ListTenants(ctx context.Context) ([]*tenant.Tenant, error)
	// UpdateTenant applies fn to the current record and stores it, bumping
	// ResourceVersion and setting UpdatedAt to now. A non-zero ifVersion
	// that differs from the stored one returns errdefs.ErrPreconditionFailed
	// without calling fn. Name, Source and CreatedAt cannot change.
	UpdateTenant(ctx context.Context, name string, ifVersion int64, now time.Time, fn func(*tenant.Tenant) error) (*tenant.Tenant, error)
	// DeleteTenant removes a tenant and its keys in one step. A non-zero
	// ifVersion is checked as by UpdateTenant.
	DeleteTenant(ctx context.Context, name string, ifVersion int64) error

	// CreateKey inserts a key of an existing tenant (errdefs.ErrNotFound if
	// the tenant does not exist).
	CreateKey(ctx context.Context, k *tenant.Key) error
	// KeyByHash returns the key with this hash, revoked or not.
	KeyByHash(ctx context.Context, hash [32]byte) (*tenant.Key, error)
	// ListKeys returns a tenant's keys, oldest first.
	ListKeys(ctx context.Context, tenant string) ([]*tenant.Key, error)
	// RevokeKey sets RevokedAt of a key of tenant to now, unless it is
	// revoked already (then the first revocation time stays). A key of
	// another tenant is not found.
	RevokeKey(ctx context.Context, tenant, id string, now time.Time) (*tenant.Key, error)
}
