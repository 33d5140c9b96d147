// Package busy keeps, in memory, the jobs that run on each leased sandbox
// and brings the sandbox's record in line: busy while jobs have been
// running on it for a while (After), leased again once none runs. The
// busy state is what a sandbox shows (GET, lists), not something recovery
// needs: after a crash its jobs are recovered from their own records, and
// a leased and a busy sandbox count alike against quotas. A short exec,
// the common case, thus ends before any write: the store is not asked to
// flip the record twice for each command, which would compete with the
// job's own writes. Control owns a Tracker and does the writes (Config.Write).
package busy

import (
	"context"
	"sync"
	"time"
)

// After is how long jobs must have been running on a leased sandbox
// before its record moves to busy (Config.After's default).
const After = 250 * time.Millisecond

// Config is what a Tracker writes with.
type Config struct {
	// Write moves sandbox id's record to busy (true) or back to leased
	// (false) when it is in the other state; a release or a failure in
	// between wins. It runs on a goroutine of the Tracker's, one per
	// sandbox at a time, with a context that is not cancelled with the
	// job's.
	Write func(ctx context.Context, id string, busy bool)
	// After: 0 is After.
	After time.Duration
}

// Tracker is the busy accounting of the leased sandboxes of one service.
type Tracker struct {
	cfg   Config
	mu    sync.Mutex
	holds map[string]*hold // sandbox id → its jobs and busy record
	wg    sync.WaitGroup
}

// hold is the accounting of one leased sandbox.
type hold struct {
	jobs int // jobs running on it
	// recorded: its record may say busy, so the last job's end moves it
	// back to leased.
	recorded bool
	syncing  bool // a goroutine brings the record in line (syncLocked)
	pending  bool // a check after cfg.After is due
}

// New returns a Tracker that writes with cfg.
func New(cfg Config) *Tracker {
	if cfg.After == 0 {
		cfg.After = After
	}
	return &Tracker{cfg: cfg, holds: map[string]*hold{}}
}

// Jobs is the number of jobs running on leased sandbox id.
func (t *Tracker) Jobs(id string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h := t.holds[id]; h != nil {
		return h.jobs
	}
	return 0
}

// Running counts a job that starts on leased sandbox id, whose record is
// busy already when recordedBusy (left so by a job that ran before): once
// jobs have been running on it for After its record moves leased → busy,
// and the returned func, called when the job ends (once is enough; more
// do nothing), moves it back once no job runs. The record follows in the
// background, so that no job waits for the write.
func (t *Tracker) Running(ctx context.Context, id string, recordedBusy bool) (done func()) {
	bctx := context.WithoutCancel(ctx)
	t.mu.Lock()
	h := t.holds[id]
	if h == nil {
		h = &hold{}
		t.holds[id] = h
	}
	h.jobs++
	if recordedBusy {
		h.recorded = true
	}
	if !h.recorded && !h.pending && !h.syncing {
		h.pending = true
		time.AfterFunc(t.cfg.After, func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			h := t.holds[id]
			if h == nil {
				return
			}
			h.pending = false
			if h.jobs > 0 {
				t.syncLocked(bctx, id)
			}
			t.dropLocked(id)
		})
	}
	t.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			h := t.holds[id]
			if h == nil {
				return
			}
			if h.jobs--; h.jobs <= 0 {
				h.jobs = 0
				if h.recorded {
					t.syncLocked(bctx, id)
				}
			}
			t.dropLocked(id)
		})
	}
}

// NoteRecorded notes that the record of id was written busy outside the
// accounting (a suspension's end), so that the last job's end moves it
// back.
func (t *Tracker) NoteRecorded(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h := t.holds[id]; h != nil {
		h.recorded = true
	}
}

// Wait waits for the writes under way.
func (t *Tracker) Wait() { t.wg.Wait() }

// dropLocked forgets the accounting of id once nothing about it is left
// to do. Called with mu held.
func (t *Tracker) dropLocked(id string) {
	if h := t.holds[id]; h != nil && h.jobs == 0 && !h.recorded && !h.syncing && !h.pending {
		delete(t.holds, id)
	}
}

// syncLocked makes sure that a goroutine moves the sandbox's record to
// busy while jobs run on it and back to leased when none does. One runs
// per sandbox at a time, and it re-reads the count after each write, so
// the record ends in line with the last change. Called with mu held and
// holds[id] set.
func (t *Tracker) syncLocked(ctx context.Context, id string) {
	h := t.holds[id]
	if h.syncing {
		return
	}
	h.syncing = true
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		written := -1 // 1: busy, 0: leased
		for {
			t.mu.Lock()
			want := 0
			if h.jobs > 0 {
				want = 1
			}
			if want == written {
				h.syncing = false
				t.dropLocked(id)
				t.mu.Unlock()
				return
			}
			if want == 1 {
				h.recorded = true // before the write: a job's end must undo it
			}
			t.mu.Unlock()
			t.cfg.Write(ctx, id, want == 1)
			if want == 0 {
				t.mu.Lock()
				h.recorded = h.jobs > 0 && h.recorded
				t.mu.Unlock()
			}
			written = want
		}
	}()
}
