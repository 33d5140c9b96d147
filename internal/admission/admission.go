package admission

import (
	"container/list"
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// Problem codes of the errors Acquire returns.
const (
	// CodeCapacityExhausted: no capacity was free within the wait (503).
	CodeCapacityExhausted = "capacity_exhausted"
	// CodeExceedsCapacity: the request is larger than the whole host (400).
	CodeExceedsCapacity = "exceeds_capacity"
)

// Capacity is what the host offers to sandboxes in total.
type Capacity struct {
	CPU       float64 // CPUs (sum of the sandboxes' CPU limits)
	MemoryMB  int64   // MB (sum of the sandboxes' memory limits)
	Sandboxes int     // live sandboxes
}

// Config configures a Controller.
type Config struct {
	Capacity Capacity
	// Weight returns the weight of a tenant's queue; nil, or a result below
	// 1, means 1. It is asked (without locks held, so it may look the
	// tenant up) whenever a request of the tenant has to wait.
	Weight func(ctx context.Context, tenant string) int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Release gives the capacity of one grant back. Calling it more than once is
// harmless.
type Release func()

// demand is an amount of capacity in whole units: millicores, MB, sandboxes.
type demand struct{ milliCPU, memoryMB, sandboxes int64 }

func demandOf(r sandbox.Resources) demand {
	return demand{milliCPU: int64(math.Ceil(r.CPU * 1000)), memoryMB: r.MemoryMB, sandboxes: 1}
}

func (d demand) plus(o demand) demand {
	return demand{d.milliCPU + o.milliCPU, d.memoryMB + o.memoryMB, d.sandboxes + o.sandboxes}
}

func (d demand) minus(o demand) demand {
	return demand{d.milliCPU - o.milliCPU, d.memoryMB - o.memoryMB, d.sandboxes - o.sandboxes}
}

func (d demand) within(limit demand) bool {
	return d.milliCPU <= limit.milliCPU && d.memoryMB <= limit.memoryMB && d.sandboxes <= limit.sandboxes
}

// costScale is the cost of a request that takes the whole host.
const costScale = 1_000_000

// waiter is one queued request.
type waiter struct {
	tenant  string
	need    demand
	cost    int64
	since   time.Time
	ready   chan struct{} // closed when granted
	granted bool
	elem    *list.Element // in its queue, nil once granted or removed
}

// queue is one tenant's FIFO of waiters and its round-robin credit.
type queue struct {
	tenant  string
	weight  int64
	deficit int64
	visited bool // got its quantum in the current visit
	fifo    list.List
}

// Controller accounts for the host's capacity and admits requests. It is
// safe for concurrent use.
type Controller struct {
	weight  func(context.Context, string) int
	now     func() time.Time
	total   demand
	quantum int64

	mu      sync.Mutex
	used    demand
	queues  map[string]*queue
	ring    []*queue // backlogged tenants in round-robin order
	next    int      // index in ring of the tenant being served
	waiting int
	stats   counters
}

// New validates cfg and returns a Controller with nothing in use.
func New(cfg Config) (*Controller, error) {
	c := cfg.Capacity
	switch {
	case c.CPU <= 0 || math.IsInf(c.CPU, 0) || math.IsNaN(c.CPU):
		return nil, errdefs.Invalid("admission: capacity cpu must be positive, got %v", c.CPU)
	case c.MemoryMB <= 0:
		return nil, errdefs.Invalid("admission: capacity memory_mb must be positive, got %d", c.MemoryMB)
	case c.Sandboxes <= 0:
		return nil, errdefs.Invalid("admission: capacity sandboxes must be positive, got %d", c.Sandboxes)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	total := demand{milliCPU: int64(math.Floor(c.CPU * 1000)), memoryMB: c.MemoryMB, sandboxes: int64(c.Sandboxes)}
	ctl := &Controller{weight: cfg.Weight, now: cfg.Now, total: total, queues: map[string]*queue{}, stats: newCounters()}
	// One round gives a weight-1 tenant the cost of the smallest possible
	// request: one sandbox slot.
	ctl.quantum = ctl.cost(demand{sandboxes: 1})
	return ctl, nil
}

// cost is a request's dominant share of the host, scaled to costScale.
func (c *Controller) cost(d demand) int64 {
	share := func(n, of int64) int64 { return (n*costScale + of - 1) / of }
	return max(share(d.milliCPU, c.total.milliCPU), share(d.memoryMB, c.total.memoryMB), share(d.sandboxes, c.total.sandboxes), 1)
}

// Acquire takes capacity for one sandbox with resources r for tenant. It
// grants at once when the capacity is free and nobody waits; otherwise it
// waits up to wait in the tenant's queue (not at all when wait ≤ 0). When the
// wait ends or ctx is done first, it returns an error of class
// errdefs.ErrUnavailable with code "capacity_exhausted" and a retry hint. A
// request larger than the whole host fails at once with class
// errdefs.ErrInvalidArgument and code "exceeds_capacity".
func (c *Controller) Acquire(ctx context.Context, tenant string, r sandbox.Resources, wait time.Duration) (Release, error) {
	need := demandOf(r)
	if !need.within(c.total) {
		return nil, errdefs.WithCode(CodeExceedsCapacity, fmt.Errorf(
			"a sandbox with %v CPU and %d MB memory does not fit this host's capacity of %v CPU and %d MB: %w",
			r.CPU, r.MemoryMB, float64(c.total.milliCPU)/1000, c.total.memoryMB, errdefs.ErrInvalidArgument))
	}
	weight := 0 // not asked yet
	c.mu.Lock()
	for {
		if c.waiting == 0 && c.used.plus(need).within(c.total) {
			rel := c.grantLocked(need)
			c.stats.tenant(tenant).Grants++
			c.mu.Unlock()
			return rel, nil
		}
		if wait <= 0 || ctx.Err() != nil {
			c.stats.tenant(tenant).Rejected++
			err := c.exhaustedLocked(0)
			c.mu.Unlock()
			return nil, err
		}
		if weight > 0 {
			break
		}
		c.mu.Unlock()
		weight = 1
		if c.weight != nil {
			weight = max(1, c.weight(ctx, tenant))
		}
		c.mu.Lock() // and look again: capacity may have been released meanwhile
	}
	w := c.enqueueLocked(tenant, need, weight)
	c.dispatchLocked()
	c.mu.Unlock()

	timer := time.NewTimer(wait)
	defer timer.Stop()
	var timedOut bool
	select {
	case <-w.ready:
		return c.releaseFunc(w.need), nil
	case <-timer.C:
		timedOut = true
	case <-ctx.Done():
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if w.granted {
		// Granted while the wait ended: keep it when only the timer fired;
		// the caller is gone when ctx is done.
		rel := c.releaseFunc(w.need)
		if timedOut {
			return rel, nil
		}
		c.releaseLocked(w.need)
		return nil, c.exhaustedLocked(c.now().Sub(w.since))
	}
	c.removeLocked(w)
	waited := c.now().Sub(w.since)
	ts := c.stats.tenant(tenant)
	if timedOut {
		ts.Timeouts++
	} else {
		ts.Canceled++
	}
	// The request may have blocked the head of the line.
	c.dispatchLocked()
	return nil, c.exhaustedLocked(waited)
}

// TryAcquire takes capacity only when it is free and no request waits for
// it, so background work (such as refilling a warm pool) never takes
// capacity a waiting tenant could have had.
func (c *Controller) TryAcquire(tenant string, r sandbox.Resources) (Release, bool) {
	need := demandOf(r)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.waiting > 0 || !c.used.plus(need).within(c.total) {
		c.stats.tenant(tenant).Rejected++
		return nil, false
	}
	c.stats.tenant(tenant).Grants++
	return c.grantLocked(need), true
}

// Reserve takes capacity unconditionally, even beyond the total: it accounts
// for sandboxes that already exist, such as those adopted after a restart.
func (c *Controller) Reserve(tenant string, r sandbox.Resources) Release {
	need := demandOf(r)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.grantLocked(need)
}

func (c *Controller) grantLocked(need demand) Release {
	c.used = c.used.plus(need)
	return c.releaseFunc(need)
}

func (c *Controller) releaseFunc(need demand) Release {
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.releaseLocked(need)
		})
	}
}

func (c *Controller) releaseLocked(need demand) {
	c.used = c.used.minus(need)
	c.dispatchLocked()
}

func (c *Controller) enqueueLocked(tenant string, need demand, weight int) *waiter {
	q, ok := c.queues[tenant]
	if !ok {
		q = &queue{tenant: tenant}
		c.queues[tenant] = q
	}
	q.weight = int64(weight) // the latest word on it
	if q.fifo.Len() == 0 {
		// A newly backlogged tenant joins at the end of the current round.
		c.ring = append(c.ring, nil)
		copy(c.ring[c.next+1:], c.ring[c.next:])
		c.ring[c.next] = q
		if len(c.ring) > 1 {
			c.next++
		}
	}
	w := &waiter{tenant: tenant, need: need, cost: c.cost(need), since: c.now(), ready: make(chan struct{})}
	w.elem = q.fifo.PushBack(w)
	c.waiting++
	c.stats.tenant(tenant).Waits++
	return w
}

// removeLocked takes a waiter that gave up out of its queue.
func (c *Controller) removeLocked(w *waiter) {
	q := c.queues[w.tenant]
	q.fifo.Remove(w.elem)
	w.elem = nil
	c.waiting--
	if q.fifo.Len() == 0 {
		c.retireLocked(q)
	}
}

// retireLocked takes a queue that became empty out of the ring; its unspent
// credit is forfeited, as deficit round robin requires.
func (c *Controller) retireLocked(q *queue) {
	q.deficit, q.visited = 0, false
	for i, x := range c.ring {
		if x != q {
			continue
		}
		c.ring = append(c.ring[:i], c.ring[i+1:]...)
		if i < c.next {
			c.next--
		}
		if c.next >= len(c.ring) {
			c.next = 0
		}
		return
	}
}

// dispatchLocked grants waiting requests in deficit round robin order while
// the chosen one fits.
func (c *Controller) dispatchLocked() {
	skipped := 0 // tenants passed over in a row without a grant
	for len(c.ring) > 0 {
		q := c.ring[c.next]
		if !q.visited {
			q.deficit += c.quantum * q.weight
			q.visited = true
		}
		w := q.fifo.Front().Value.(*waiter)
		if w.cost > q.deficit {
			// Not enough credit: the next tenant's turn.
			q.visited = false
			c.next = (c.next + 1) % len(c.ring)
			if skipped++; skipped >= len(c.ring) {
				c.fastForwardLocked()
				skipped = 0
			}
			continue
		}
		if !c.used.plus(w.need).within(c.total) {
			return // the chosen request waits for more capacity; nobody passes it
		}
		skipped = 0
		q.deficit -= w.cost
		q.fifo.Remove(w.elem)
		w.elem = nil
		c.waiting--
		c.used = c.used.plus(w.need)
		w.granted = true
		c.stats.granted(w.tenant, c.now().Sub(w.since))
		close(w.ready)
		if q.fifo.Len() == 0 {
			c.retireLocked(q)
		}
	}
}

// fastForwardLocked adds, after a whole round in which no tenant could pay
// for its first request, the credit of the empty rounds that would follow
// until one can: the same outcome as running them, without the loop.
func (c *Controller) fastForwardLocked() {
	rounds := int64(math.MaxInt64)
	for _, q := range c.ring {
		w := q.fifo.Front().Value.(*waiter)
		per := c.quantum * q.weight
		need := (w.cost - q.deficit + per - 1) / per // rounds until q can pay
		rounds = min(rounds, need)
	}
	// The next visit adds one round itself.
	if rounds--; rounds <= 0 {
		return
	}
	for _, q := range c.ring {
		q.deficit += rounds * c.quantum * q.weight
	}
}

// exhaustedLocked is the error of a request that got no capacity.
func (c *Controller) exhaustedLocked(waited time.Duration) error {
	var why string
	if waited > 0 {
		why = fmt.Sprintf("no capacity became free for this request within %v", waited.Round(time.Millisecond))
	} else {
		why = "no capacity is free for this request now"
	}
	err := fmt.Errorf("%s: host capacity is exhausted (%d of %d sandboxes, %.2f of %.2f CPU, %d of %d MB in use; %d requests waiting): %w",
		why, c.used.sandboxes, c.total.sandboxes, float64(c.used.milliCPU)/1000, float64(c.total.milliCPU)/1000,
		c.used.memoryMB, c.total.memoryMB, c.waiting, errdefs.ErrUnavailable)
	return errdefs.WithRetryAfter(c.stats.retryHint(), errdefs.WithCode(CodeCapacityExhausted, err))
}
