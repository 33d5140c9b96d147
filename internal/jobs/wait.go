package jobs

import (
	"context"
	"time"

	"genesis.dev/sandbox/internal/sandbox"
)

// waitRecheck is how often Wait reads a job's record again although no end
// was announced here: a job another service instance follows, or one the
// previous process left, ends without this process knowing.
const waitRecheck = time.Second

// Wait waits until job id of tenant ("" for any) has a final state and
// returns its final record. It returns at once for a finished job, and
// ctx's error when ctx ends first. A job this process follows or runs
// wakes its waiters as soon as its final state is recorded; callers never
// poll the record themselves.
func (s *Manager) Wait(ctx context.Context, tenant, id string) (*sandbox.Job, error) {
	ch, done := s.waiter(id)
	defer done()
	t := time.NewTicker(waitRecheck)
	defer t.Stop()
	for {
		j, err := s.GetJob(ctx, tenant, id)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
		if j.State.Final() {
			return j, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ch:
			// ended here: the record is final now (one more read returns it)
			ch = nil
		case <-t.C:
		}
	}
}

// waiter registers a wait for job id's end: the channel is closed when
// its final state is recorded (jobEnded). done unregisters it. The wait is
// registered before the caller reads the record, so no end falls between.
func (s *Manager) waiter(id string) (<-chan struct{}, func()) {
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	w := s.waits[id]
	if w == nil {
		w = &jobWait{ch: make(chan struct{})}
		s.waits[id] = w
	}
	w.n++
	return w.ch, func() {
		s.waitMu.Lock()
		defer s.waitMu.Unlock()
		if w.n--; w.n == 0 && s.waits[id] == w {
			delete(s.waits, id)
		}
	}
}

// jobWait is the waiters of one job.
type jobWait struct {
	ch chan struct{}
	n  int // registered waiters
}

// jobEnded wakes the waiters of job id, whose final state is recorded.
func (s *Manager) jobEnded(id string) {
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	if w := s.waits[id]; w != nil {
		close(w.ch)
		delete(s.waits, id)
	}
}
