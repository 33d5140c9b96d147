package admission

import "time"

// WaitBuckets are the upper bounds, in seconds, of the wait time histogram.
var WaitBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// TenantStats are one tenant's admission counters since start.
type TenantStats struct {
	Weight   int    // weight of its queue (1 when it never waited)
	Queued   int    // requests waiting now
	Grants   uint64 // requests granted (at once or after waiting)
	Waits    uint64 // requests that had to wait
	Timeouts uint64 // waiting requests whose wait ended without a grant
	Canceled uint64 // waiting requests whose caller went away
	Rejected uint64 // requests refused at once (no wait allowed, or TryAcquire)
}

// Histogram is a cumulative histogram in the Prometheus sense: Counts[i] is
// the number of observations ≤ Bounds[i].
type Histogram struct {
	Bounds []float64
	Counts []uint64
	Count  uint64
	Sum    float64 // seconds
}

// Stats is a snapshot of a Controller.
type Stats struct {
	Capacity Capacity
	InUse    Capacity
	Waiting  int
	Tenants  map[string]TenantStats
	// Wait is the time from queueing to grant of requests that waited.
	Wait Histogram
}

type counters struct {
	tenants  map[string]*TenantStats
	buckets  []uint64 // per bound, not cumulative
	count    uint64
	sum      float64
	avgWait  time.Duration // moving average of recent waits, for retry hints
	anyWaits bool
}

func newCounters() counters {
	return counters{tenants: map[string]*TenantStats{}, buckets: make([]uint64, len(WaitBuckets))}
}

func (s *counters) tenant(name string) *TenantStats {
	t, ok := s.tenants[name]
	if !ok {
		t = &TenantStats{Weight: 1}
		s.tenants[name] = t
	}
	return t
}

// granted counts a grant after waiting waited.
func (s *counters) granted(tenant string, waited time.Duration) {
	s.tenant(tenant).Grants++
	sec := waited.Seconds()
	for i, b := range WaitBuckets {
		if sec <= b {
			s.buckets[i]++
			break
		}
	}
	s.count++
	s.sum += sec
	if !s.anyWaits {
		s.avgWait, s.anyWaits = waited, true
	} else {
		s.avgWait += (waited - s.avgWait) / 8
	}
}

// retryHint is when a refused caller should try again: about as long as
// recent requests waited, between 1 s and 60 s.
func (s *counters) retryHint() time.Duration {
	return min(max(s.avgWait, time.Second), time.Minute)
}

// Stats returns a snapshot of the counters and the capacity in use.
func (c *Controller) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := Stats{
		Capacity: capacityOf(c.total),
		InUse:    capacityOf(c.used),
		Waiting:  c.waiting,
		Tenants:  make(map[string]TenantStats, len(c.stats.tenants)),
		Wait: Histogram{
			Bounds: WaitBuckets,
			Counts: make([]uint64, len(WaitBuckets)),
			Count:  c.stats.count,
			Sum:    c.stats.sum,
		},
	}
	var cum uint64
	for i, n := range c.stats.buckets {
		cum += n
		st.Wait.Counts[i] = cum
	}
	for name, t := range c.stats.tenants {
		one := *t
		if q, ok := c.queues[name]; ok {
			one.Weight = int(q.weight)
			one.Queued = q.fifo.Len()
		}
		st.Tenants[name] = one
	}
	return st
}

func capacityOf(d demand) Capacity {
	return Capacity{CPU: float64(d.milliCPU) / 1000, MemoryMB: d.memoryMB, Sandboxes: int(d.sandboxes)}
}
