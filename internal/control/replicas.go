package control

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/store"
)

// Several service instances may share one store (PostgreSQL). Each owns
// the sandboxes it made (their records name it) and holds the store lock
// "instance:<id>" for as long as it lives. One of them, the holder of the
// lock "leader", looks for instances whose lock is free — the process is
// gone — and adopts their sandboxes: their records name the leader from
// then on, so its reconciler, lease reaping, TTLs and pool keep them, and
// its driver reaches their agents (a Kubernetes Pod's address and token
// do not depend on which instance made it). With a store that one process
// uses (SQLite) there is nobody to adopt from.

// adoptEvery is how often the leader looks for instances that are gone.
const adoptEvery = 2 * time.Second

// replicas is the instance's part in sharing a store.
type replicas struct {
	locker  store.Locker
	adopter store.Adopter
	self    store.Lock // "instance:<id>"

	mu      sync.Mutex
	leader  store.Lock      // held while this instance leads
	adopted map[string]bool // instances whose sandboxes this one adopted
}

func instanceLock(id string) string { return "instance:" + id }

// startReplicas takes this instance's lock and starts the leader's loop.
// Another live process with the same instance id is refused.
func (s *Service) startReplicas(ctx, loopCtx context.Context) error {
	l, ok := s.store.(store.Locker)
	a, ok2 := s.store.(store.Adopter)
	if !ok || !ok2 {
		return nil
	}
	self, held, err := l.TryLock(ctx, instanceLock(s.instance))
	if errors.Is(err, errdefs.ErrNotImplemented) {
		return nil // a store of one process
	}
	if err != nil {
		return err
	}
	if !held {
		return fmt.Errorf("control: another process runs as instance %s on this store (its data dir's instance-id): %w", s.instance, errdefs.ErrFailedPrecondition)
	}
	s.reps = &replicas{locker: l, adopter: a, adopted: map[string]bool{}, self: self}
	s.loop(loopCtx, adoptEvery, s.lead)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		select {
		case <-loopCtx.Done():
			self.Release()
		case <-self.Lost():
			// Another instance may adopt this one's sandboxes now: stop
			// taking work, so that two never act on one sandbox.
			s.log.Error("lost this instance's store lock (the database connection broke); draining: restart the service")
			s.draining.Store(true)
		}
	}()
	return nil
}

// Leader says whether this instance leads the instances sharing its store
// (always true with a store of one process).
func (s *Service) Leader() bool {
	if s.reps == nil {
		return true
	}
	s.reps.mu.Lock()
	defer s.reps.mu.Unlock()
	return s.reps.leader != nil
}

// lead campaigns for leadership and, as leader, adopts the sandboxes of
// instances that are gone.
func (s *Service) lead(ctx context.Context) {
	r := s.reps
	r.mu.Lock()
	leader := r.leader
	r.mu.Unlock()
	if leader != nil {
		select {
		case <-leader.Lost():
			s.log.Warn("lost the leader lock")
			r.mu.Lock()
			r.leader = nil
			r.mu.Unlock()
			return
		default:
		}
	} else {
		l, ok, err := r.locker.TryLock(ctx, "leader")
		if err != nil || !ok {
			return
		}
		s.log.Info("this instance leads the instances sharing the store")
		r.mu.Lock()
		r.leader = l
		r.mu.Unlock()
		s.wg.Add(1)
		go func() { defer s.wg.Done(); <-ctx.Done(); l.Release() }()
	}
	if err := s.adoptGone(ctx); err != nil && !errors.Is(err, context.Canceled) {
		s.log.Warn("adopting the sandboxes of gone instances", "err", err)
	}
}

// adoptGone adopts the sandboxes of every instance named by a live record
// whose lock is free.
func (s *Service) adoptGone(ctx context.Context) error {
	owners, err := s.reps.adopter.LiveInstances(ctx)
	if err != nil {
		return err
	}
	for _, inst := range owners {
		if inst == s.instance {
			continue
		}
		l, free, err := s.reps.locker.TryLock(ctx, instanceLock(inst))
		if err != nil {
			return err
		}
		if !free {
			continue // alive
		}
		theirs, err := s.store.ListSandboxes(ctx, store.SandboxFilter{Instance: inst, States: liveStates})
		if err != nil {
			l.Release()
			return err
		}
		n, err := s.reps.adopter.AdoptSandboxes(ctx, inst, s.instance, s.now())
		if err == nil {
			// Its cold leases being made died with it.
			_, err = s.store.DropLeaseHolds(ctx, inst, s.now())
		}
		l.Release()
		if err != nil {
			return err
		}
		s.reps.mu.Lock()
		s.reps.adopted[inst] = true
		s.reps.mu.Unlock()
		s.log.Warn("adopted the sandboxes of an instance that is gone", "instance", inst, "sandboxes", n)
		// What the gone process left half done ends now, as at a start-up.
		for _, r := range theirs {
			cur, err := s.store.GetSandbox(ctx, "", r.ID)
			if err == nil && cur.Instance == s.instance {
				s.finishUnfinished(ctx, cur, true, s.now())
			}
		}
	}
	return nil
}

// ownsInstance says whether containers labelled with instance inst are
// this instance's to judge: its own, or those of an instance it adopted.
func (s *Service) ownsInstance(inst string) bool {
	if inst == s.instance {
		return true
	}
	if s.reps == nil {
		return false
	}
	s.reps.mu.Lock()
	defer s.reps.mu.Unlock()
	return s.reps.adopted[inst]
}
