package admission

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

func cpus(n float64) sandbox.Resources { return sandbox.Resources{CPU: n, MemoryMB: 64, Pids: 64} }

func newController(t *testing.T, c Capacity, weights map[string]int) *Controller {
	t.Helper()
	if c.CPU == 0 {
		c.CPU = 1000
	}
	if c.MemoryMB == 0 {
		c.MemoryMB = 1 << 30
	}
	ctl, err := New(Config{Capacity: c, Weight: func(_ context.Context, tenant string) int { return weights[tenant] }})
	if err != nil {
		t.Fatal(err)
	}
	return ctl
}

// flood runs clients per tenant inside a synctest bubble: each client
// acquires, holds for hold (fake time) and releases, again and again, for
// run; it returns the grants per tenant.
func flood(t *testing.T, ctl *Controller, clients map[string]int, res map[string]sandbox.Resources, hold, run time.Duration) map[string]int {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var mu sync.Mutex
	grants := map[string]int{}
	var wg sync.WaitGroup
	for tenant, n := range clients {
		r, ok := res[tenant]
		if !ok {
			r = cpus(1)
		}
		for range n {
			wg.Go(func() {
				for ctx.Err() == nil {
					rel, err := ctl.Acquire(ctx, tenant, r, time.Hour)
					if err != nil {
						if ctx.Err() == nil {
							t.Errorf("%s: acquire: %v", tenant, err)
						}
						return
					}
					mu.Lock()
					grants[tenant]++
					mu.Unlock()
					time.Sleep(hold)
					rel()
				}
			})
		}
	}
	time.Sleep(run)
	cancel()
	wg.Wait()
	return grants
}

func within(t *testing.T, what string, got, want, tolerance float64) {
	t.Helper()
	if d := got/want - 1; d > tolerance || d < -tolerance {
		t.Errorf("%s = %.3f, want %.3f within %.0f%%", what, got, want, tolerance*100)
	} else {
		t.Logf("%s = %.3f (want %.3f)", what, got, want)
	}
}

// A tenant with ten times the demand of another gets the same share when
// both are backlogged.
func TestFairShareUnderTenfoldDemand(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctl := newController(t, Capacity{Sandboxes: 4}, nil)
		g := flood(t, ctl, map[string]int{"a": 40, "b": 4}, nil, time.Second, 300*time.Second)
		t.Logf("grants: a=%d b=%d", g["a"], g["b"])
		within(t, "share a/b", float64(g["a"])/float64(g["b"]), 1, 0.10)
		if total := g["a"] + g["b"]; total < 4*299 {
			t.Errorf("%d grants in 300 s of 4 slots held 1 s each: capacity left idle", total)
		}
		st := ctl.Stats()
		if st.InUse != (Capacity{}) || st.Waiting != 0 {
			t.Errorf("after the run: in use %+v, waiting %d; want nothing", st.InUse, st.Waiting)
		}
	})
}

// Weights 2:1 give grants 2:1.
func TestWeightedShares(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctl := newController(t, Capacity{Sandboxes: 4}, map[string]int{"a": 2, "b": 1})
		g := flood(t, ctl, map[string]int{"a": 20, "b": 20}, nil, time.Second, 300*time.Second)
		t.Logf("grants: a=%d b=%d", g["a"], g["b"])
		within(t, "share a/b", float64(g["a"])/float64(g["b"]), 2, 0.10)
		if w := ctl.Stats().Tenants["a"].Weight; w != 2 {
			t.Errorf("stats weight of a = %d, want 2", w)
		}
	})
}

// Requests for the whole host among a flood of small ones are served within
// a bounded wait, and the large tenant's cost share matches the small one's.
func TestLargeRequestIsNotStarved(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctl := newController(t, Capacity{CPU: 4, Sandboxes: 100}, nil)
		var mu sync.Mutex
		var longest time.Duration
		ctx, cancel := context.WithCancel(t.Context())
		var large sync.WaitGroup
		var largeGrants int
		for range 2 { // two outstanding: the tenant stays backlogged
			large.Go(func() {
				for ctx.Err() == nil {
					start := time.Now()
					rel, err := ctl.Acquire(ctx, "large", cpus(4), time.Hour)
					if err != nil {
						return
					}
					mu.Lock()
					longest = max(longest, time.Since(start))
					largeGrants++
					mu.Unlock()
					time.Sleep(time.Second)
					rel()
				}
			})
		}
		small := flood(t, ctl, map[string]int{"small": 30}, nil, time.Second, 300*time.Second)["small"]
		cancel()
		large.Wait()
		t.Logf("grants: large (4 CPU) = %d, small (1 CPU) = %d; longest wait of large: %v", largeGrants, small, longest)
		if largeGrants == 0 {
			t.Fatal("the large requests were never served")
		}
		within(t, "small/large grants (cost share 1:1)", float64(small)/float64(largeGrants), 4, 0.10)
		if longest > 5*time.Second {
			t.Errorf("a large request waited up to %v, want a bounded wait of a few holds", longest)
		}
	})
}

// Grants alternate between backlogged tenants of equal weight, in FIFO order
// within each tenant.
func TestRoundRobinOrder(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctl := newController(t, Capacity{Sandboxes: 1}, nil)
		hold, err := ctl.Acquire(t.Context(), "x", cpus(1), 0)
		if err != nil {
			t.Fatal(err)
		}
		order := make(chan string, 6)
		var wg sync.WaitGroup
		for i := range 3 {
			for _, tenant := range []string{"a", "b"} {
				wg.Go(func() {
					rel, err := ctl.Acquire(t.Context(), tenant, cpus(1), time.Hour)
					if err != nil {
						t.Error(err)
						return
					}
					order <- fmt.Sprintf("%s%d", tenant, i)
					rel()
				})
				synctest.Wait() // queue in a fixed order
			}
		}
		hold()
		wg.Wait()
		close(order)
		var got []string
		for o := range order {
			got = append(got, o)
		}
		want := []string{"a0", "b0", "a1", "b1", "a2", "b2"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("grant order %v, want %v", got, want)
		}
	})
}

// Many goroutines with real scheduling: every acquire is granted, nothing
// stays in use or queued (no lost wakeups, no leaked capacity).
func TestNoLostWakeups(t *testing.T) {
	t.Parallel()
	ctl := newController(t, Capacity{CPU: 3, Sandboxes: 3}, map[string]int{"t1": 3})
	const goroutines, each = 40, 50
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			tenant := fmt.Sprintf("t%d", g%5)
			for range each {
				r := cpus(float64(1 + rng.IntN(2)))
				rel, err := ctl.Acquire(context.Background(), tenant, r, time.Minute)
				if err != nil {
					t.Errorf("%s: %v", tenant, err)
					return
				}
				time.Sleep(time.Duration(rng.IntN(50)) * time.Microsecond) // hold it a little
				if rng.IntN(4) == 0 {
					rel() // a second release must be harmless
				}
				rel()
			}
		})
	}
	wg.Wait()
	st := ctl.Stats()
	var grants uint64
	for _, ts := range st.Tenants {
		grants += ts.Grants
	}
	if grants != goroutines*each || st.InUse != (Capacity{}) || st.Waiting != 0 {
		t.Errorf("grants %d (want %d), in use %+v, waiting %d", grants, goroutines*each, st.InUse, st.Waiting)
	}
	if st.Wait.Count == 0 || st.Wait.Counts[len(st.Wait.Counts)-1] != st.Wait.Count {
		t.Errorf("wait histogram %+v: want observations, the last bucket holding all", st.Wait)
	}
}

// A waiter that gives up leaves the queue; the capacity goes to the next.
func TestCanceledWaiterFreesItsTurn(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctl := newController(t, Capacity{Sandboxes: 1}, nil)
		hold, _ := ctl.Acquire(t.Context(), "h", cpus(1), 0)
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, err := ctl.Acquire(ctx, "a", cpus(1), time.Hour)
			errc <- err
		}()
		granted := make(chan Release, 1)
		synctest.Wait()
		go func() {
			rel, err := ctl.Acquire(t.Context(), "b", cpus(1), time.Hour)
			if err != nil {
				t.Error(err)
			}
			granted <- rel
		}()
		synctest.Wait()
		cancel()
		err := <-errc
		if !errors.Is(err, errdefs.ErrUnavailable) || errdefs.Code(err) != CodeCapacityExhausted {
			t.Fatalf("canceled waiter: %v (code %s), want capacity_exhausted", err, errdefs.Code(err))
		}
		if st := ctl.Stats(); st.Waiting != 1 || st.Tenants["a"].Canceled != 1 || st.Tenants["a"].Queued != 0 {
			t.Fatalf("after cancel: %+v", st)
		}
		hold()
		synctest.Wait()
		select {
		case rel := <-granted:
			rel()
		default:
			t.Fatal("the slot did not go to the remaining waiter")
		}
		if st := ctl.Stats(); st.InUse != (Capacity{}) {
			t.Errorf("in use %+v after every release", st.InUse)
		}
	})
}

// A large request chosen by the round robin is not passed by a small one;
// when it gives up, the small one gets the free capacity without waiting
// for another release.
func TestBlockedHeadGivesUp(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctl := newController(t, Capacity{CPU: 4, Sandboxes: 4}, nil)
		for range 2 {
			if _, err := ctl.Acquire(t.Context(), "h", cpus(1), 0); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(t.Context())
		largeErr := make(chan error, 1)
		go func() {
			_, err := ctl.Acquire(ctx, "large", cpus(4), time.Hour)
			largeErr <- err
		}()
		synctest.Wait()
		small := make(chan error, 1)
		go func() {
			_, err := ctl.Acquire(t.Context(), "small", cpus(1), time.Hour)
			small <- err
		}()
		synctest.Wait()
		select {
		case err := <-small:
			t.Fatalf("the small request passed the large one chosen before it (err %v)", err)
		default:
		}
		if ok := func() bool { _, ok := ctl.TryAcquire("pool", cpus(1)); return ok }(); ok {
			t.Fatal("TryAcquire took free capacity while requests wait")
		}
		cancel()
		if err := <-largeErr; errdefs.Code(err) != CodeCapacityExhausted {
			t.Fatalf("large: %v", err)
		}
		synctest.Wait()
		select {
		case err := <-small:
			if err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatal("the small request was not granted once the large one left")
		}
		if st := ctl.Stats(); st.InUse.Sandboxes != 3 || st.Waiting != 0 {
			t.Errorf("in use %+v waiting %d, want 3 sandboxes and nobody", st.InUse, st.Waiting)
		}
		if _, ok := ctl.TryAcquire("pool", cpus(1)); !ok {
			t.Error("TryAcquire refused free capacity with nobody waiting")
		}
	})
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctl := newController(t, Capacity{CPU: 2, Sandboxes: 1}, nil)
		if _, err := ctl.Acquire(t.Context(), "a", cpus(3), time.Hour); !errors.Is(err, errdefs.ErrInvalidArgument) ||
			errdefs.Code(err) != CodeExceedsCapacity {
			t.Errorf("request above the host: %v (code %s), want exceeds_capacity", err, errdefs.Code(err))
		}
		hold, _ := ctl.Acquire(t.Context(), "a", cpus(1), 0)
		start := time.Now()
		_, err := ctl.Acquire(t.Context(), "b", cpus(1), 0)
		if errdefs.Code(err) != CodeCapacityExhausted || time.Since(start) != 0 {
			t.Errorf("no wait allowed: %v after %v, want capacity_exhausted at once", err, time.Since(start))
		}
		_, err = ctl.Acquire(t.Context(), "b", cpus(1), 3*time.Second)
		after, ok := errdefs.RetryAfter(err)
		if errdefs.HTTPStatus(err) != http.StatusServiceUnavailable || errdefs.Code(err) != CodeCapacityExhausted ||
			!ok || after < time.Second || time.Since(start) != 3*time.Second {
			t.Errorf("timed out wait: %v (status %d, retry %v %v) after %v; want 503 capacity_exhausted with Retry-After after 3s",
				err, errdefs.HTTPStatus(err), after, ok, time.Since(start))
		}
		st := ctl.Stats().Tenants["b"]
		if st.Rejected != 1 || st.Timeouts != 1 || st.Waits != 1 || st.Grants != 0 {
			t.Errorf("stats of b: %+v", st)
		}
		hold()
		hold() // idempotent
		if in := ctl.Stats().InUse; in != (Capacity{}) {
			t.Errorf("in use %+v after a double release", in)
		}
	})
}

// Reserve accounts for existing sandboxes beyond the capacity; new requests
// wait until usage is below it again.
func TestReserveBeyondCapacity(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctl := newController(t, Capacity{Sandboxes: 1}, nil)
		r1, r2 := ctl.Reserve("a", cpus(1)), ctl.Reserve("a", cpus(1))
		got := make(chan error, 1)
		go func() {
			_, err := ctl.Acquire(t.Context(), "b", cpus(1), time.Hour)
			got <- err
		}()
		synctest.Wait()
		r1()
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("granted while usage was still at capacity")
		default:
		}
		r2()
		if err := <-got; err != nil {
			t.Fatal(err)
		}
	})
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	for _, c := range []Capacity{{CPU: 0, MemoryMB: 1, Sandboxes: 1}, {CPU: 1, MemoryMB: 0, Sandboxes: 1}, {CPU: 1, MemoryMB: 1, Sandboxes: -1}} {
		if _, err := New(Config{Capacity: c}); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("New(%+v) = %v, want invalid argument", c, err)
		}
	}
}
