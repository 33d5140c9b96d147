package gateway

import (
	"sync"
	"sync/atomic"
	"time"

	"genesis.dev/sandbox/internal/egress"
)

// ring is a bounded in-memory log of events with monotonically increasing
// sequence numbers; the oldest events are dropped when it is full. Numbers
// start above the start time in microseconds, so that they keep increasing
// across gateway restarts and a consumer's cursor stays valid.
type ring struct {
	mu      sync.Mutex
	buf     []egress.Event
	start   int    // index of the oldest event in buf
	n       int    // events held
	base    uint64 // seq before the first event
	lastSeq uint64 // seq of the newest event (base: none yet)
	dropped atomic.Uint64
	now     func() time.Time
}

func newRing(capacity int, now func() time.Time) *ring {
	base := uint64(max(now().UnixMicro(), 0))
	return &ring{buf: make([]egress.Event, capacity), now: now, base: base, lastSeq: base}
}

// add stamps e with the next seq and the time and stores it.
func (r *ring) add(e egress.Event) egress.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastSeq++
	e.Seq = r.lastSeq
	if e.Time.IsZero() {
		e.Time = r.now().UTC()
	}
	if r.n == len(r.buf) {
		r.start = (r.start + 1) % len(r.buf)
		r.n--
		r.dropped.Add(1)
	}
	r.buf[(r.start+r.n)%len(r.buf)] = e
	r.n++
	return e
}

// since returns up to limit events with seq > after.
func (r *ring) since(after uint64, limit int) egress.EventsPage {
	r.mu.Lock()
	defer r.mu.Unlock()
	page := egress.EventsPage{Events: []egress.Event{}, Next: after}
	if after > r.lastSeq { // a cursor this gateway never issued
		page.Next = r.lastSeq
		return page
	}
	if r.n == 0 || after == r.lastSeq {
		return page
	}
	oldest := r.lastSeq - uint64(r.n) + 1
	if after+1 < oldest {
		if after >= r.base {
			page.Lost = oldest - after - 1
		} else if oldest > r.base+1 {
			page.Lost = oldest - r.base - 1
		}
		after = oldest - 1
	}
	for i := int(after + 1 - oldest); i < r.n && len(page.Events) < limit; i++ {
		page.Events = append(page.Events, r.buf[(r.start+i)%len(r.buf)])
	}
	page.Next = page.Events[len(page.Events)-1].Seq
	return page
}

func (r *ring) last() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastSeq
}

// counters are the running totals behind GET /v1/counters.
type counters struct {
	dnsAllowed, dnsDenied, connAllowed, connDenied, bytesUp, bytesDown atomic.Uint64
	connActive                                                         atomic.Int64
}

func (s *Server) record(e egress.Event) {
	switch {
	case e.Proto == egress.ProtoDNS && e.Decision == egress.DecisionAllow:
		s.counters.dnsAllowed.Add(1)
	case e.Proto == egress.ProtoDNS:
		s.counters.dnsDenied.Add(1)
	case e.Decision == egress.DecisionAllow:
		s.counters.connAllowed.Add(1)
	default:
		s.counters.connDenied.Add(1)
	}
	s.counters.bytesUp.Add(uint64(max(e.BytesUp, 0)))
	s.counters.bytesDown.Add(uint64(max(e.BytesDown, 0)))
	s.events.add(e)
}
