package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"genesis.dev/sandbox/internal/browser"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/jobs"
)

type timing struct {
	name string
	d    time.Duration
}

// serverTimed, with Config.ServerTiming, gives r's context the timings
// *T of the layer below (with) and returns the func that writes them, as
// parts names them, before the answer as a Server-Timing header in ms,
// between pre (the root handler to this handler: routing, the key check,
// the body) and handler (the root handler to the header). Without it ctx
// is r's and the func does nothing.
func serverTimed[T any](s *Server, r *http.Request, with func(context.Context, *T) context.Context, parts func(*T) []timing) (context.Context, func(http.Header)) {
	start, ok := r.Context().Value(startKey).(time.Time)
	if !s.serverTiming || !ok {
		return r.Context(), func(http.Header) {}
	}
	pre, t := time.Since(start), new(T)
	return with(r.Context(), t), func(h http.Header) {
		ts := append(append([]timing{{"pre", pre}}, parts(t)...), timing{"handler", time.Since(start)})
		var b strings.Builder
		for i, m := range ts {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s;dur=%.3f", m.name, float64(m.d)/float64(time.Millisecond))
		}
		h.Set("Server-Timing", b.String())
	}
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
