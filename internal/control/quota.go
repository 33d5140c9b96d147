package control

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/tenant"
)

// Bounds of the Retry-After hint of a quota refusal.
const (
	quotaRetryMin     = time.Second
	quotaRetryMax     = time.Minute
	quotaRetryDefault = 10 * time.Second
)

// lockTenant takes the tenant's quota lock and returns its unlock.
func (s *Service) lockTenant(name string) (unlock func()) {
	v, _ := s.quotaLocks.LoadOrStore(name, &sync.Mutex{})
	mu := v.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// reserveQuota checks the tenant's quotas for one more sandbox using add
// (and one more lease if lease) and, when it fits, returns with the
// tenant's quota lock held: the caller stores the record that makes the
// new usage visible (the sandbox row, or the claimed sandbox's tenant and
// state) and then calls release. Concurrent creates of one tenant are so
// serialized between check and insert and cannot overshoot a quota within
// one service process. Several processes sharing one PostgreSQL each hold
// their own locks: there, concurrent requests can overshoot by at most one
// sandbox per other process.
//
// A refusal is class errdefs.ErrResourceExhausted with code
// "quota_exceeded" and a retry hint: the time until the tenant's first
// sandbox expires, within [1 s, 1 min].
func (s *Service) reserveQuota(ctx context.Context, tenantName string, add sandbox.Resources, lease bool) (release func(), err error) {
	unlock := sync.OnceFunc(s.lockTenant(tenantName)) // release may be called more than once
	defer func() {
		if err != nil {
			unlock()
		}
	}()
	t, err := s.tenantRecord(ctx, tenantName)
	if err != nil {
		return nil, err
	}
	if t.Quotas == (tenant.Quotas{}) {
		return unlock, nil
	}
	u, first, err := s.usage(ctx, tenantName)
	if err != nil {
		return nil, err
	}
	// Cold leases being made hold a lease before their claim is stored.
	u.Leases += int(s.coldLeaseCount(tenantName).Load())
	over := t.Quotas.Exceeded(u.Add(add, lease))
	if over == "" {
		return unlock, nil
	}
	retry := quotaRetryDefault
	if first.ExpiresAt != nil {
		retry = min(max(first.ExpiresAt.Sub(s.now()), quotaRetryMin), quotaRetryMax)
	}
	return nil, errdefs.WithRetryAfter(retry, errdefs.WithCode("quota_exceeded", fmt.Errorf(
		"tenant %s would exceed its quota %s (holds %d sandboxes, %g CPUs, %d MB, %d leases): %w",
		tenantName, over, u.Sandboxes, u.CPU, u.MemoryMB, u.Leases, errdefs.ErrResourceExhausted)))
}

func (s *Service) coldLeaseCount(tenantName string) *atomic.Int64 {
	v, _ := s.coldLeases.LoadOrStore(tenantName, new(atomic.Int64))
	return v.(*atomic.Int64)
}

// reserveColdLease checks the tenant's quotas for one more lease of a
// sandbox using add and counts the lease as held until done is called
// (after its claim is stored), so that concurrent cold leases of one tenant
// cannot pass max_leases while their sandboxes are being made.
func (s *Service) reserveColdLease(ctx context.Context, tenantName string, add sandbox.Resources) (done func(), err error) {
	release, err := s.reserveQuota(ctx, tenantName, add, true)
	if err != nil {
		return nil, err
	}
	n := s.coldLeaseCount(tenantName)
	n.Add(1) // under the tenant's quota lock
	release()
	return sync.OnceFunc(func() { n.Add(-1) }), nil
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
