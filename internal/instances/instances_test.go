package instances

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// fakeStore is a store shared by instances in memory: named locks (held by
// the fakeLock that took them), sandboxes' owners, lease holds.
type fakeStore struct {
	mu        sync.Mutex
	oneProc   bool
	held      map[string]*fakeLock
	sandboxes map[string]*sandbox.Sandbox
	holds     map[string]int // per instance
}

type fakeLock struct {
	s    *fakeStore
	name string
	lost chan struct{}
	once sync.Once
}

func (l *fakeLock) Lost() <-chan struct{} { return l.lost }

func (l *fakeLock) Release() {
	l.once.Do(func() {
		l.s.mu.Lock()
		defer l.s.mu.Unlock()
		if l.s.held[l.name] == l {
			delete(l.s.held, l.name)
		}
	})
}

// lose breaks the lock as a broken connection does: it is free again.
func (l *fakeLock) lose() {
	l.s.mu.Lock()
	delete(l.s.held, l.name)
	l.s.mu.Unlock()
	close(l.lost)
}

func (s *fakeStore) TryLock(_ context.Context, name string) (store.Lock, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.oneProc {
		return nil, false, errdefs.ErrNotImplemented
	}
	if s.held[name] != nil {
		return nil, false, nil
	}
	l := &fakeLock{s: s, name: name, lost: make(chan struct{})}
	s.held[name] = l
	return l, true, nil
}

func (s *fakeStore) Lock(context.Context, string) (store.Lock, error) {
	return nil, errdefs.ErrNotImplemented
}

func (s *fakeStore) lock(name string) *fakeLock {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[name]
}

func (s *fakeStore) AdoptSandboxes(_ context.Context, from, to string, _ time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, sb := range s.sandboxes {
		if sb.Instance == from && sb.State != sandbox.StateDestroyed {
			sb.Instance = to
			n++
		}
	}
	return n, nil
}

func (s *fakeStore) LiveInstances(context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, sb := range s.sandboxes {
		if sb.State != sandbox.StateDestroyed && sb.State != sandbox.StateFailed && !slices.Contains(out, sb.Instance) {
			out = append(out, sb.Instance)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (s *fakeStore) TakeSandbox(context.Context, string, string, string, time.Time) error {
	return errdefs.ErrNotImplemented
}

func (s *fakeStore) GetSandbox(_ context.Context, _, id string) (*sandbox.Sandbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, ok := s.sandboxes[id]
	if !ok {
		return nil, errdefs.ErrNotFound
	}
	c := *sb
	return &c, nil
}

func (s *fakeStore) ListSandboxes(_ context.Context, f store.SandboxFilter) ([]*sandbox.Sandbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*sandbox.Sandbox
	for _, sb := range s.sandboxes {
		if sb.Instance == f.Instance && slices.Contains(f.States, sb.State) {
			c := *sb
			out = append(out, &c)
		}
	}
	return out, nil
}

func (s *fakeStore) DropLeaseHolds(_ context.Context, inst string, _ time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.holds[inst]
	delete(s.holds, inst)
	return n, nil
}

func newFakeStore() *fakeStore {
	return &fakeStore{held: map[string]*fakeLock{}, sandboxes: map[string]*sandbox.Sandbox{
		"sbx_a1":   {ID: "sbx_a1", Instance: "a", State: sandbox.StateReady},
		"sbx_gone": {ID: "sbx_gone", Instance: "gone", State: sandbox.StateStarting},
		"sbx_old":  {ID: "sbx_old", Instance: "gone", State: sandbox.StateDestroyed},
		"sbx_b1":   {ID: "sbx_b1", Instance: "b", State: sandbox.StateLeased},
	}, holds: map[string]int{"gone": 2, "b": 1}}
}

// config is an instance id's Config over st; finished records the ids
// passed to Finish, lost counts calls of Lost.
func config(st *fakeStore, id string, finished *[]string, lost *int) Config {
	var mu sync.Mutex
	return Config{ID: id, Locker: st, Adopter: st, Records: st,
		LiveStates: []sandbox.State{sandbox.StateStarting, sandbox.StateReady, sandbox.StateLeased},
		Finish: func(_ context.Context, sb *sandbox.Sandbox) {
			mu.Lock()
			defer mu.Unlock()
			*finished = append(*finished, sb.ID+"@"+sb.Instance)
		},
		Lost: func() { mu.Lock(); *lost++; mu.Unlock() },
		Now:  func() time.Time { return time.Unix(0, 0) }}
}

func TestStart(t *testing.T) {
	t.Parallel()
	st := newFakeStore()
	var finished []string
	var lost int
	a, err := Start(t.Context(), config(st, "a", &finished, &lost))
	if err != nil || a == nil {
		t.Fatalf("Start(a) = %v, %v; want an instance", a, err)
	}
	if _, err := Start(t.Context(), config(st, "a", &finished, &lost)); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("a second Start(a) on one store = %v; want ErrFailedPrecondition", err)
	}
	one := newFakeStore()
	one.oneProc = true
	if in, err := Start(t.Context(), config(one, "a", &finished, &lost)); in != nil || err != nil {
		t.Fatalf("Start on a store of one process = %v, %v; want nil, nil", in, err)
	}
	bad := config(st, "c", &finished, &lost)
	bad.Finish = nil
	if _, err := Start(t.Context(), bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("Start without Finish = %v; want ErrInvalidArgument", err)
	}
}

// TestLeadAdoptsGone: one of two live instances leads; the leader adopts
// the live sandboxes of an instance whose lock is free (not the destroyed
// one), drops its lease holds, finishes each adopted sandbox and owns its
// containers from then on; an instance that lives keeps its own.
func TestLeadAdoptsGone(t *testing.T) {
	t.Parallel()
	st := newFakeStore()
	var finishedA, finishedB []string
	var lost int
	a, err := Start(t.Context(), config(st, "a", &finishedA, &lost))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Start(t.Context(), config(st, "b", &finishedB, &lost))
	if err != nil {
		t.Fatal(err)
	}
	if a.Leader() || b.Leader() {
		t.Fatal("a leader before any campaign")
	}
	a.lead(t.Context())
	b.lead(t.Context())
	if !a.Leader() || b.Leader() {
		t.Fatalf("Leader() = %v, %v; want a alone", a.Leader(), b.Leader())
	}
	if sb, _ := st.GetSandbox(t.Context(), "", "sbx_gone"); sb.Instance != "a" {
		t.Errorf("gone's live sandbox is %s's; want a's", sb.Instance)
	}
	if sb, _ := st.GetSandbox(t.Context(), "", "sbx_b1"); sb.Instance != "b" {
		t.Errorf("b's sandbox is %s's; want b's (b lives)", sb.Instance)
	}
	if st.holds["gone"] != 0 || st.holds["b"] != 1 {
		t.Errorf("lease holds = %v; want gone's dropped, b's kept", st.holds)
	}
	if want := []string{"sbx_gone@a"}; !slices.Equal(finishedA, want) || len(finishedB) != 0 {
		t.Errorf("finished by a %v, by b %v; want %v by a", finishedA, finishedB, want)
	}
	for inst, want := range map[string]bool{"a": true, "gone": true, "b": false, "other": false} {
		if got := a.Owns(inst); got != want {
			t.Errorf("a.Owns(%q) = %v; want %v", inst, got, want)
		}
	}
	if st.lock(instanceLock("gone")) != nil {
		t.Error("the gone instance's lock is still held after its adoption")
	}

	// The leader lock lost, a leads no more and b takes over.
	st.lock("leader").lose()
	a.lead(t.Context())
	b.lead(t.Context())
	if a.Leader() || !b.Leader() {
		t.Fatalf("after a lost the leader lock Leader() = %v, %v; want b alone", a.Leader(), b.Leader())
	}
}

// TestRun: Run campaigns every AdoptEvery, calls Lost when the instance's
// own lock breaks, and releases the leader lock when its context ends.
func TestRun(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newFakeStore()
		var finished []string
		var lost int
		in, err := Start(t.Context(), config(st, "a", &finished, &lost))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); in.Run(ctx) }()
		synctest.Wait()
		if in.Leader() {
			t.Fatal("leader before the first AdoptEvery")
		}
		time.Sleep(AdoptEvery)
		synctest.Wait()
		// b holds no lock here: it is gone too.
		if !in.Leader() || len(finished) != 2 {
			t.Fatalf("after AdoptEvery: Leader() = %v, finished %v; want the leader, the sandboxes of b and gone finished", in.Leader(), finished)
		}
		st.lock(instanceLock("a")).lose()
		synctest.Wait()
		if lost != 1 {
			t.Fatalf("Lost called %d times after the instance's lock broke; want 1", lost)
		}
		cancel()
		<-done
		if st.lock("leader") != nil {
			t.Error("the leader lock is held after Run returned")
		}
	})
}
