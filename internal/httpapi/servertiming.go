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

// execTimings, with Config.ServerTiming, asks the jobs manager where a
// synchronous exec's time goes and returns the func that writes it, before
// the answer, as a Server-Timing header (durations in ms): pre (the root
// handler to the exec handler: routing, the key check, the body), attach,
// record, agent and finish (jobs.ExecTimings), handler (the root handler
// to the header), then the parts of record and finish: rec-job, rec-trace,
// rec-log, fin-job, fin-trace and fin-log. Without it ctx is r's and the func does nothing.
func (s *Server) execTimings(r *http.Request) (context.Context, func(http.ResponseWriter)) {
	start, ok := r.Context().Value(startKey).(time.Time)
	if !s.serverTiming || !ok {
		return r.Context(), func(http.ResponseWriter) {}
	}
	pre := time.Since(start)
	t := &jobs.ExecTimings{}
	return jobs.WithExecTimings(r.Context(), t), func(w http.ResponseWriter) {
		var b strings.Builder
		for i, m := range []struct {
			name string
			d    time.Duration
		}{{"pre", pre}, {"attach", t.Attach}, {"record", t.Record}, {"agent", t.Agent}, {"finish", t.Finish}, {"handler", time.Since(start)},
			{"rec-job", t.RecordJob}, {"rec-trace", t.RecordTrace}, {"rec-log", t.RecordLog},
			{"fin-job", t.FinishJob}, {"fin-trace", t.FinishTrace}, {"fin-log", t.FinishLog}} {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s;dur=%.3f", m.name, float64(m.d)/float64(time.Millisecond))
		}
		w.Header().Set("Server-Timing", b.String())
	}
}

// leaseTimings is execTimings for POST /v1/leases: pre, check, policy and
// claim (control.LeaseTimings), and handler.
func (s *Server) leaseTimings(r *http.Request) (context.Context, func(http.ResponseWriter)) {
	start, ok := r.Context().Value(startKey).(time.Time)
	if !s.serverTiming || !ok {
		return r.Context(), func(http.ResponseWriter) {}
	}
	pre := time.Since(start)
	t := &control.LeaseTimings{}
	return control.WithLeaseTimings(r.Context(), t), func(w http.ResponseWriter) {
		w.Header().Set("Server-Timing", serverTiming([]timing{
			{"pre", pre}, {"check", t.Check}, {"policy", t.Policy}, {"claim", t.Claim}, {"handler", time.Since(start)}}))
	}
}

// browserTimings is execTimings for POST …/browser/actions: pre, attach,
// trace, actions (of which find and input), info (browser.ActionTimings)
// and handler.
func (s *Server) browserTimings(r *http.Request) (context.Context, func(http.Header)) {
	start, ok := r.Context().Value(startKey).(time.Time)
	if !s.serverTiming || !ok {
		return r.Context(), func(http.Header) {}
	}
	pre := time.Since(start)
	t := &browser.ActionTimings{}
	return browser.WithActionTimings(r.Context(), t), func(h http.Header) {
		h.Set("Server-Timing", serverTiming([]timing{
			{"pre", pre}, {"attach", t.Attach}, {"trace", t.Trace}, {"actions", t.Actions}, {"find", t.Find}, {"input", t.Input},
			{"info", t.Info}, {"handler", time.Since(start)}}))
	}
}

type timing struct {
	name string
	d    time.Duration
}

// serverTiming is a Server-Timing header's value of ts, in ms.
func serverTiming(ts []timing) string {
	var b strings.Builder
	for i, m := range ts {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s;dur=%.3f", m.name, float64(m.d)/float64(time.Millisecond))
	}
	return b.String()
}
