package control

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/tenant"
)

// Bounds of the Retry-After hint of a quota refusal.
const (
	quotaRetryMin     = time.Second
	quotaRetryMax     = time.Minute
	quotaRetryDefault = 10 * time.Second
)

// coldLeaseHoldFor is how long, beyond its wait for capacity, a cold
// lease's hold counts when its maker never drops it (the process died).
const coldLeaseHoldFor = 10 * time.Minute

// LockTenant takes the tenant's quota lock, which every create and claim
// for the tenant takes (in every instance sharing the store when the
// tenant has quotas; otherwise in this instance), and returns its unlock
// (internal/tenancy deletes a tenant under it).
func (s *Service) LockTenant(ctx context.Context, name string) (unlock func(), err error) {
	return s.lockTenant(ctx, name, true)
}

// LiveSandboxes lists the live sandboxes of tenant name, or of every
// tenant when name is "": what tenants hold now (internal/tenancy's
// views of tenants). A draining sandbox is on its way out of the tenant's
// hands (a destroy, or the recycle of a released lease that runs after
// the release answered) and is not listed: it holds no quota, and a
// tenant whose leases are all released can be deleted at once. The host
// capacity it holds stays held until it is gone (admission).
func (s *Service) LiveSandboxes(ctx context.Context, name string) ([]*sandbox.Sandbox, error) {
	live, err := s.store.ListSandboxes(ctx, store.SandboxFilter{Tenant: name, States: liveStates})
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(live, func(sb *sandbox.Sandbox) bool { return sb.State == sandbox.StateDraining }), nil
}

// tenantRecord returns the stored tenant, or a zero tenant (no quotas, no
// policy) for a name without a record.
func (s *Service) tenantRecord(ctx context.Context, name string) (*tenant.Tenant, error) {
	t, err := s.store.GetTenant(ctx, name)
	if errors.Is(err, errdefs.ErrNotFound) {
		return &tenant.Tenant{Name: name}, nil
	}
	return t, err
}

// usage sums what a tenant's live sandboxes hold (LiveSandboxes: not the
// draining ones, so a lease released and taken again at once fits as it
// did before the release), and returns the one that expires first (zero
// if none).
func (s *Service) usage(ctx context.Context, name string) (tenant.Usage, sandbox.Sandbox, error) {
	live, err := s.LiveSandboxes(ctx, name)
	if err != nil {
		return tenant.Usage{}, sandbox.Sandbox{}, err
	}
	u, first := tenant.UsageOf(live)
	return u, first, nil
}

// lockTenant takes the tenant's quota lock and returns its unlock: within
// this process a mutex and, if shared and instances share the store
// (PostgreSQL), the store lock "quota:<tenant>" besides, so that no two
// instances check a tenant's usage and store what it changes at once.
func (s *Service) lockTenant(ctx context.Context, name string, shared bool) (unlock func(), err error) {
	v, _ := s.quotaLocks.LoadOrStore(name, &sync.Mutex{})
	mu := v.(*sync.Mutex)
	mu.Lock()
	if s.reps == nil || !shared {
		return mu.Unlock, nil
	}
	l, err := s.reps.locker.Lock(ctx, "quota:"+name)
	if err != nil {
		mu.Unlock()
		return nil, fmt.Errorf("tenant %s: quota lock: %w", name, err)
	}
	return func() { l.Release(); mu.Unlock() }, nil
}

// reserveQuota checks the tenant's quotas for one more sandbox using add
// (and one more lease if lease) and, when it fits, returns with the
// tenant's quota lock held: the caller stores the record that makes the
// new usage visible (the sandbox row, the claimed sandbox's tenant and
// state, or a lease hold) and then calls release. Usage is what the store
// holds — every instance's sandboxes, leases and lease holds — and the
// lock is shared by the instances sharing the store, so concurrent creates
// of one tenant, here or in another instance, cannot overshoot a quota.
//
// A refusal is class errdefs.ErrResourceExhausted with code
// "quota_exceeded" and a retry hint: the time until the tenant's first
// sandbox expires, within [1 s, 1 min].
func (s *Service) reserveQuota(ctx context.Context, tenantName string, add sandbox.Resources, lease bool) (release func(), err error) {
	release, _, err = s.reserve(ctx, tenantName, add, lease)
	return release, err
}

// reserve is reserveQuota that also returns the tenant's quotas.
func (s *Service) reserve(ctx context.Context, tenantName string, add sandbox.Resources, lease bool) (release func(), q tenant.Quotas, err error) {
	t, err := s.tenantRecord(ctx, tenantName)
	if err != nil {
		return nil, q, err
	}
	return s.reserveOf(ctx, t, add, lease)
}

// reserveOf is reserve with the tenant's record read already (a warm
// claim read it to select the runtime: one store read fewer).
func (s *Service) reserveOf(ctx context.Context, t *tenant.Tenant, add sandbox.Resources, lease bool) (release func(), q tenant.Quotas, err error) {
	tenantName := t.Name
	// A tenant without quotas needs no lock between instances: the store
	// lock costs a round trip on every create and claim.
	lock, err := s.lockTenant(ctx, tenantName, t.Quotas != (tenant.Quotas{}))
	if err != nil {
		return nil, q, err
	}
	unlock := sync.OnceFunc(lock) // release may be called more than once
	defer func() {
		if err != nil {
			unlock()
		}
	}()
	if t.Quotas == (tenant.Quotas{}) {
		return unlock, t.Quotas, nil
	}
	// Read again under the lock: the quotas may have changed meanwhile.
	if t, err = s.tenantRecord(ctx, tenantName); err != nil {
		return nil, q, err
	}
	u, first, err := s.usage(ctx, tenantName)
	if err != nil {
		return nil, q, err
	}
	if t.Quotas.MaxLeases > 0 {
		// Cold leases being made hold a lease before their claim is stored.
		held, err := s.store.CountLeaseHolds(ctx, tenantName, s.now())
		if err != nil {
			return nil, q, err
		}
		u.Leases += held
	}
	over := t.Quotas.Exceeded(u.Add(add, lease))
	if over == "" {
		return unlock, t.Quotas, nil
	}
	retry := quotaRetryDefault
	if first.ExpiresAt != nil {
		retry = min(max(first.ExpiresAt.Sub(s.now()), quotaRetryMin), quotaRetryMax)
	}
	return nil, q, errdefs.WithRetryAfter(retry, errdefs.WithCode("quota_exceeded", fmt.Errorf(
		"tenant %s would exceed its quota %s (holds %d sandboxes, %g CPUs, %d MB, %d leases): %w",
		tenantName, over, u.Sandboxes, u.CPU, u.MemoryMB, u.Leases, errdefs.ErrResourceExhausted)))
}

// coldHold is a cold lease's hold on its tenant's max_leases.
type coldHold struct {
	id   string // "" when the tenant has no lease quota
	drop func()
}

// reserveColdLease checks the tenant's quotas for one more lease of a
// sandbox using add and, when the tenant has a lease quota, stores a lease
// hold that every instance counts until the claim naming it (Claim.HoldID)
// stores the lease, or drop is called, or it expires (wait plus
// coldLeaseHoldFor). So concurrent cold leases of one tenant cannot pass
// max_leases while their sandboxes are being made.
func (s *Service) reserveColdLease(ctx context.Context, tenantName string, add sandbox.Resources, wait time.Duration) (coldHold, error) {
	release, q, err := s.reserve(ctx, tenantName, add, true)
	if err != nil {
		return coldHold{}, err
	}
	defer release()
	if q.MaxLeases == 0 {
		return coldHold{drop: func() {}}, nil
	}
	h := store.LeaseHold{ID: sandbox.NewID("hold"), Tenant: tenantName, Instance: s.instance,
		ExpiresAt: s.now().Add(wait + coldLeaseHoldFor)}
	if err := s.store.HoldLease(ctx, h); err != nil {
		return coldHold{}, err
	}
	return coldHold{id: h.ID, drop: sync.OnceFunc(func() {
		cctx, cancel := cleanupCtx(ctx, 10*time.Second)
		defer cancel()
		if err := s.store.DropLeaseHold(cctx, h.ID); err != nil {
			s.log.Warn("dropping a lease hold (it expires by itself)", "hold", h.ID, "tenant", tenantName, "err", err)
		}
	})}, nil
}

// checkQuota is called before a sandbox is created for tenant or handed to it
// by a lease (add is what the new sandbox would use; lease says whether a new
// lease is being taken too). It returns an error of class
// errdefs.ErrResourceExhausted with code "quota_exceeded" and a retry hint
// (errdefs.WithRetryAfter) when the tenant's quotas would be exceeded.
//
// checkQuota releases the tenant's quota lock before it returns; callers
// that must not overshoot under concurrency use reserveQuota and release
// after storing the record.
func (s *Service) checkQuota(ctx context.Context, tenantName string, add sandbox.Resources, lease bool) error {
	release, err := s.reserveQuota(ctx, tenantName, add, lease)
	if err != nil {
		return err
	}
	release()
	return nil
}
