package store

import (
	"context"
	"fmt"
	"maps"
	"time"

	"genesis.dev/sandbox/internal/errdefs"

	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/tenant"
)

// LeaseStore is the lease part of the persistence contract.
//
// The store is the hard guarantee that a sandbox is never in two active
// leases: a claim is one transaction that moves the sandbox out of its
// claimable state conditionally and inserts the lease, and a unique
// constraint allows one active lease per sandbox.
type LeaseStore interface {
	// ClaimSandbox takes one sandbox for c.Lease in one transaction:
	//   - with c.SandboxID set, that sandbox, which must be of c.Lease.Tenant
	//     and in state ready (a cold create handed to its lease);
	//   - otherwise the oldest idle pool member (tenant "") of c.Profile,
	//     c.Runtime and c.Instance (any instance if c.Instance is ""),
	//     which then becomes c.Lease.Tenant's.
	// The sandbox becomes leased with c.RiskLevel (if set), c.Env and
	// c.Metadata merged over its own, ExpiresAt = c.Lease.ExpiresAt and
	// the reservation c.Lease.Reserved (a sandbox reserved to anything
	// else is errdefs.ErrConflict); the
	// lease is inserted with its SandboxID filled in. No sandbox to take is
	// errdefs.ErrNotFound (the caller cold-creates); a sandbox already in an
	// active lease is errdefs.ErrConflict.
	ClaimSandbox(ctx context.Context, c Claim) (*sandbox.Lease, *sandbox.Sandbox, error)
	// GetLease returns one lease; tenant "" matches any tenant, another
	// tenant's lease is not found.
	GetLease(ctx context.Context, tenant, id string) (*sandbox.Lease, error)
	// ListLeases returns the leases matching f, oldest first.
	ListLeases(ctx context.Context, f LeaseFilter) ([]*sandbox.Lease, error)
	// UpdateLease applies fn to the current lease and stores it, bumping
	// ResourceVersion. fn must not change ID, Tenant or SandboxID (such
	// changes are ignored). An error from fn aborts the update.
	UpdateLease(ctx context.Context, id string, fn func(*sandbox.Lease) error) (*sandbox.Lease, error)

	// HoldLease counts one lease of h.Tenant as held, in every service
	// instance sharing the store, until the claim naming it (Claim.HoldID)
	// stores the lease, DropLeaseHold drops it, or h.ExpiresAt passes. A
	// cold lease holds one while its sandbox is made. A duplicate ID is
	// errdefs.ErrAlreadyExists.
	HoldLease(ctx context.Context, h LeaseHold) error
	// DropLeaseHold drops one hold; one that is gone is not an error.
	DropLeaseHold(ctx context.Context, id string) error
	// CountLeaseHolds counts the holds of tenant not expired at now.
	CountLeaseHolds(ctx context.Context, tenant string, now time.Time) (int, error)
	// DropLeaseHolds drops every hold of instance (what a process of that
	// instance left when it ended), unless instance is "", and every hold
	// expired at now.
	DropLeaseHolds(ctx context.Context, instance string, now time.Time) (int, error)
}

// LeaseHold is a lease being made, counted against its tenant's
// max_leases before the lease is stored.
type LeaseHold struct {
	ID        string
	Tenant    string
	Instance  string
	ExpiresAt time.Time
}

// Claim is one ClaimSandbox request.
type Claim struct {
	Lease     *sandbox.Lease
	SandboxID string
	Profile   string
	Runtime   sandbox.Runtime
	// Pool is the snapshot a pool claim's pool is fed from ("": the
	// profile's plain pool); it takes only members made for that pool.
	Pool      string
	Instance  string
	RiskLevel sandbox.RiskLevel
	Env       map[string]string
	Metadata  map[string]string
	Now       time.Time
	// HoldID, if set, is the hold (HoldLease) the stored lease replaces:
	// the claim drops it in its transaction, so the lease is never counted
	// twice nor not at all.
	HoldID string
	// Audit, if set, is the audit record of the request that makes the
	// claim, appended in the claim's transaction (as AppendAudit would,
	// one write transaction fewer before the answer); its Seq is set only
	// once the claim has committed.
	Audit *tenant.AuditRecord
}

// LeaseFilter selects leases. Zero fields match everything.
type LeaseFilter struct {
	Tenant    string
	SandboxID string
	States    []sandbox.LeaseState
	// ExpiresBefore, if set, keeps leases expiring before it.
	ExpiresBefore time.Time
	Limit         int
}

// ApplyClaim checks that sb (a copy of the stored record) may be taken by c
// and changes it into its leased form. Implementations call it inside their
// claim transaction, so every store applies a claim the same way.
func ApplyClaim(sb *sandbox.Sandbox, c Claim) error {
	if c.SandboxID != "" {
		if sb.Tenant != c.Lease.Tenant {
			return fmt.Errorf("sandbox %s: %w", sb.ID, errdefs.ErrNotFound)
		}
		if sb.State != sandbox.StateReady {
			return errdefs.WithCode("invalid_state", fmt.Errorf("sandbox %s is %s; only a ready sandbox can be leased: %w",
				sb.ID, sb.State, errdefs.ErrConflict))
		}
	} else if sb.Tenant != "" || sb.State != sandbox.StateIdle {
		return fmt.Errorf("sandbox %s is no longer an idle pool member: %w", sb.ID, errdefs.ErrConflict)
	}
	if sb.Reserved != "" && sb.Reserved != c.Lease.Reserved {
		return fmt.Errorf("sandbox %s is reserved to %s: %w", sb.ID, sb.Reserved, errdefs.ErrConflict)
	}
	sb.Reserved = c.Lease.Reserved
	sb.Tenant = c.Lease.Tenant
	sb.State = sandbox.StateLeased
	if c.RiskLevel != "" {
		sb.RiskLevel = c.RiskLevel
	}
	sb.Env = mergeMaps(sb.Env, c.Env)
	sb.Metadata = mergeMaps(sb.Metadata, c.Metadata)
	exp := c.Lease.ExpiresAt.UTC()
	sb.ExpiresAt = &exp
	sb.ResourceVersion++
	sb.UpdatedAt = c.Now.UTC()
	if len(sb.Env) == 0 {
		sb.Env = nil
	}
	if len(sb.Metadata) == 0 {
		sb.Metadata = nil
	}
	return nil
}

// CheckClaim validates a claim request before any store work.
func CheckClaim(c Claim) error {
	switch {
	case c.Lease == nil || c.Lease.ID == "" || c.Lease.Tenant == "":
		return errdefs.Invalid("claim sandbox: lease id and tenant are required")
	case c.SandboxID == "" && (c.Profile == "" || c.Runtime == ""):
		return errdefs.Invalid("claim sandbox: a sandbox id or a pool (profile, runtime) is required")
	case c.Lease.State != sandbox.LeaseActive:
		return errdefs.Invalid("claim sandbox: a new lease must be active, not %q", c.Lease.State)
	}
	return nil
}

// NormalizeLease puts l in the form a read returns: times in UTC, an empty
// map as nil.
func NormalizeLease(l *sandbox.Lease) {
	l.CreatedAt, l.RenewedAt, l.ExpiresAt = l.CreatedAt.UTC(), l.RenewedAt.UTC(), l.ExpiresAt.UTC()
	if l.EndedAt != nil {
		t := l.EndedAt.UTC()
		l.EndedAt = &t
	}
	if len(l.Metadata) == 0 {
		l.Metadata = nil
	}
}

// CloneLease returns a deep copy of l.
func CloneLease(l *sandbox.Lease) *sandbox.Lease {
	c := *l
	c.Metadata = maps.Clone(l.Metadata)
	if l.EndedAt != nil {
		t := *l.EndedAt
		c.EndedAt = &t
	}
	return &c
}

func mergeMaps(base, over map[string]string) map[string]string {
	if len(over) == 0 {
		return base
	}
	out := maps.Clone(base)
	if out == nil {
		out = make(map[string]string, len(over))
	}
	maps.Copy(out, over)
	return out
}
