package control

import (
	"context"

	"genesis.dev/sandbox/internal/instances"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// replicas is the instance's part in sharing a store (internal/instances:
// its instance lock, the leader, the adoption of gone instances).
type replicas struct {
	*instances.Instance
	locker  store.Locker
	adopter store.Adopter
}

// startReplicas takes this instance's lock and starts the leader's loop.
// Another live process with the same instance id is refused.
func (s *Service) startReplicas(ctx, loopCtx context.Context) error {
	l, ok := s.store.(store.Locker)
	a, ok2 := s.store.(store.Adopter)
	if !ok || !ok2 {
		return nil
	}
	in, err := instances.Start(ctx, instances.Config{ID: s.instance, Locker: l, Adopter: a, Records: s.store,
		LiveStates: liveStates, Logger: s.log, Now: s.now, Lost: func() { s.draining.Store(true) },
		Finish: func(ctx context.Context, sb *sandbox.Sandbox) { s.finishUnfinished(ctx, sb, true, s.now()) }})
	if in == nil || err != nil {
		return err
	}
	s.reps = &replicas{Instance: in, locker: l, adopter: a}
	s.wg.Go(func() { in.Run(loopCtx) })
	return nil
}

// Leader says whether this instance leads the instances sharing its store
// (always true with a store of one process).
func (s *Service) Leader() bool { return s.reps == nil || s.reps.Leader() }

// ownsInstance says whether containers labelled with instance inst are
// this instance's to judge: its own, or those of an instance it adopted.
func (s *Service) ownsInstance(inst string) bool {
	return inst == s.instance || s.reps != nil && s.reps.Owns(inst)
}
