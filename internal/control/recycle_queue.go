package control

import (
	"context"
	"sync/atomic"
	"time"

	"genesis.dev/sandbox/internal/sandbox"
)

// recycleWorkers bounds the recycles that run at once: a reset is a few
// agent calls and store writes, a destroy a few Docker calls; a burst of
// releases queues rather than starting them all together.
const recycleWorkers = 4

// recycleQueue is the state of the recycles that run after a release has
// answered (queueRecycle).
type recycleQueue struct {
	sem       chan struct{}
	pending   atomic.Int64 // queued or running
	reset     atomic.Int64 // returned to their pool
	destroyed atomic.Int64 // destroyed (by the profile's choice, or a failed reset)
	failed    atomic.Int64 // whose destroy failed too (the reconciler finishes it)
	nanos     atomic.Int64 // time spent recycling, in all
}

// RecycleStats are the counts of the recycles run after release answers.
type RecycleStats struct {
	// Pending counts the sandboxes of released leases waiting for or in
	// their recycle.
	Pending int64
	// Reset, Destroyed and Failed count finished recycles by outcome: the
	// sandbox returned to its pool, destroyed, or its destroy failed (the
	// record stays draining and the reconciler destroys it).
	Reset, Destroyed, Failed int64
	// Seconds is the time spent in finished recycles, in all.
	Seconds float64
}

// RecycleStats returns the recycle queue's counts (genesis_recycle_*).
func (s *Service) RecycleStats() RecycleStats {
	q := &s.recycles
	return RecycleStats{Pending: q.pending.Load(), Reset: q.reset.Load(), Destroyed: q.destroyed.Load(),
		Failed: q.failed.Load(), Seconds: time.Duration(q.nanos.Load()).Seconds()}
}

// queueRecycle hands the sandbox of a lease that endLeaseDraining ended (sb
// as it was before) to a recycle worker and returns at once. The worker
// runs without the caller's context: the caller has its answer already.
// The sandbox's record is draining from the lease's end until the worker
// returns it to its pool or destroys it, so no claim can take it on the
// way; if this process dies first, the next start-up destroys it
// (finishUnfinished), so it is recycled or destroyed exactly once. The
// recycle's error comes on the returned channel (buffered: nobody need
// read it).
func (s *Service) queueRecycle(l *sandbox.Lease, sb *sandbox.Sandbox) <-chan error {
	q := &s.recycles
	q.pending.Add(1)
	done := make(chan error, 1)
	pl := s.mayReturn(l, sb)
	if pl != nil {
		pl.resetting.Add(1)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer q.pending.Add(-1)
		if pl != nil {
			defer pl.recycleEnded()
		}
		q.sem <- struct{}{}
		defer func() { <-q.sem }()
		start := time.Now() // wall time for the metric, not the service clock
		reset, err := s.recycle(context.Background(), l, sb)
		q.nanos.Add(int64(time.Since(start)))
		switch {
		case err != nil:
			q.failed.Add(1)
			s.log.Warn("recycling the sandbox of a released lease", "lease", l.ID, "sandbox", l.SandboxID, "err", err)
		case reset:
			q.reset.Add(1)
		default:
			q.destroyed.Add(1)
		}
		done <- err
	}()
	return done
}

// WaitRecycles waits until no recycle of a released lease's sandbox is
// queued or running (Drain waits for them; tests that look at a released
// sandbox's end wait for it).
func (s *Service) WaitRecycles(ctx context.Context) error {
	for s.recycles.pending.Load() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// mayReturn is the pool the recycle of lease l's sandbox sb may return it
// to, or nil when it will surely be destroyed (a first look at what
// resetRefusal decides in full).
func (s *Service) mayReturn(l *sandbox.Lease, sb *sandbox.Sandbox) *pool {
	if sb == nil || !l.Warm || sb.Reserved != "" {
		return nil
	}
	pl := s.pool(sb.Profile, sb.Runtime, sb.Pool)
	if pl == nil || pl.key.snapshot != "" {
		return nil
	}
	if p, err := s.profile(sb.Profile); err != nil || !p.Lease.Resets() {
		return nil
	}
	return pl
}

// recycleEnded wakes the claims waiting for a recycle of pl to end.
func (pl *pool) recycleEnded() {
	pl.resetting.Add(-1)
	pl.retMu.Lock()
	defer pl.retMu.Unlock()
	if pl.retCh != nil {
		close(pl.retCh)
		pl.retCh = nil
	}
}

// recycleWait returns a channel closed when the next recycle of pl that
// may return a sandbox ends. Taken before a claim looks, it cannot miss
// one that ends in between.
func (pl *pool) recycleWait() <-chan struct{} {
	pl.retMu.Lock()
	defer pl.retMu.Unlock()
	if pl.retCh == nil {
		pl.retCh = make(chan struct{})
	}
	return pl.retCh
}

// returnWaitMax bounds how long a lease that finds its pool empty waits
// for a released sandbox being reset instead of creating one cold: a
// reset takes milliseconds (a member's first under runsc up to about a
// second), a cold create a few hundred.
const returnWaitMax = time.Second
