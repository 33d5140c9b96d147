package httpapi

import (
	"context"
	"net/http"
	"time"

	"genesis.dev/sandbox/internal/browser"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/slowlog"
)

type timing struct {
	name string
	d    time.Duration
}

// serverTimed, with Config.ServerTiming or the slow request log on, gives
// r's context the timings *T of the layer below (with) and r's
// slowlog.Request its hops: pre (the root handler to this handler:
// routing, the key check, the body), then the parts of *T. With
// Config.ServerTiming the func it returns writes them before the answer
// as a Server-Timing header, with handler (the root handler to the
// header). Otherwise ctx is r's and the func does nothing.
func serverTimed[T any](s *Server, r *http.Request, with func(context.Context, *T) context.Context, parts func(*T) []timing) (context.Context, func(http.Header)) {
	q := slowlog.Of(r.Context())
	if q == nil || !s.serverTiming && !s.slow.On() {
		return r.Context(), func(http.Header) {}
	}
	pre, t := time.Since(q.Start()), new(T)
	q.SetHops(func(yield func(string, time.Duration) bool) {
		for _, h := range append([]timing{{"pre", pre}}, parts(t)...) {
			if !yield(h.name, h.d) {
				return
			}
		}
	})
	if !s.serverTiming {
		return with(r.Context(), t), func(http.Header) {}
	}
	return with(r.Context(), t), func(h http.Header) { h.Set("Server-Timing", q.ServerTiming(time.Now())) }
}

// execTimings is serverTimed for a synchronous exec: attach, record,
// agent and finish (jobs.ExecTimings), and the parts of record and
// finish: rec-job, rec-trace, rec-log, fin-job, fin-trace and fin-log.
func (s *Server) execTimings(r *http.Request) (context.Context, func(http.Header)) {
	return serverTimed(s, r, jobs.WithExecTimings, func(t *jobs.ExecTimings) []timing {
		return []timing{{"attach", t.Attach}, {"record", t.Record}, {"agent", t.Agent}, {"finish", t.Finish},
			{"rec-job", t.RecordJob}, {"rec-trace", t.RecordTrace}, {"rec-log", t.RecordLog},
			{"fin-job", t.FinishJob}, {"fin-trace", t.FinishTrace}, {"fin-log", t.FinishLog}}
	})
}

// leaseTimings is serverTimed for POST /v1/leases: check, policy and
// claim (control.LeaseTimings).
func (s *Server) leaseTimings(r *http.Request) (context.Context, func(http.Header)) {
	return serverTimed(s, r, control.WithLeaseTimings, func(t *control.LeaseTimings) []timing {
		return []timing{{"check", t.Check}, {"policy", t.Policy}, {"claim", t.Claim}}
	})
}

// browserTimings is serverTimed for POST …/browser/actions: attach,
// trace, actions (of which find and input) and info
// (browser.ActionTimings).
func (s *Server) browserTimings(r *http.Request) (context.Context, func(http.Header)) {
	return serverTimed(s, r, browser.WithActionTimings, func(t *browser.ActionTimings) []timing {
		return []timing{{"attach", t.Attach}, {"trace", t.Trace}, {"actions", t.Actions}, {"find", t.Find}, {"input", t.Input}, {"info", t.Info}}
	})
}
