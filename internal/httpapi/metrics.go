package httpapi

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/sandbox"
)

// metrics is a small Prometheus text-format exporter for request counts and
// latencies; sandbox counts are read from the store at scrape time.
type metrics struct {
	mu       sync.Mutex
	requests map[[2]string]uint64 // route, status → count
	seconds  map[string]float64   // route → total seconds
	counts   map[string]uint64    // route → count
}

func newMetrics() *metrics {
	return &metrics{requests: map[[2]string]uint64{}, seconds: map[string]float64{}, counts: map[string]uint64{}}
}

func (m *metrics) instrument(route string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw, ok := w.(*statusWriter)
		if !ok {
			sw = &statusWriter{ResponseWriter: w, status: http.StatusOK}
		}
		next.ServeHTTP(sw, r)
		d := time.Since(start).Seconds()
		m.mu.Lock()
		m.requests[[2]string{route, strconv.Itoa(sw.status)}]++
		m.seconds[route] += d
		m.counts[route]++
		m.mu.Unlock()
	})
}

func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	m := s.metrics
	m.mu.Lock()
	keys := make([][2]string, 0, len(m.requests))
	for k := range m.requests {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]string) int {
		if a[0] != b[0] {
			return compare(a[0], b[0])
		}
		return compare(a[1], b[1])
	})
	fmt.Fprintln(w, "# HELP genesis_http_requests_total HTTP requests by route and status.")
	fmt.Fprintln(w, "# TYPE genesis_http_requests_total counter")
	for _, k := range keys {
		fmt.Fprintf(w, "genesis_http_requests_total{route=%q,status=%q} %d\n", k[0], k[1], m.requests[k])
	}
	routes := make([]string, 0, len(m.counts))
	for k := range m.counts {
		routes = append(routes, k)
	}
	slices.Sort(routes)
	fmt.Fprintln(w, "# HELP genesis_http_request_duration_seconds Time spent serving requests by route.")
	fmt.Fprintln(w, "# TYPE genesis_http_request_duration_seconds summary")
	for _, k := range routes {
		fmt.Fprintf(w, "genesis_http_request_duration_seconds_sum{route=%q} %g\n", k, m.seconds[k])
		fmt.Fprintf(w, "genesis_http_request_duration_seconds_count{route=%q} %d\n", k, m.counts[k])
	}
	m.mu.Unlock()
	writeAdmissionMetrics(w, s.ctl.AdmissionStats())
	list, err := s.ctl.ListSandboxes(r.Context(), control.SandboxFilter{})
	if err != nil {
		return
	}
	byState := map[sandbox.State]int{}
	for _, sb := range list {
		byState[sb.State]++
	}
	fmt.Fprintln(w, "# HELP genesis_sandboxes Sandboxes known to the store by state.")
	fmt.Fprintln(w, "# TYPE genesis_sandboxes gauge")
	for _, st := range sandbox.AllStates {
		fmt.Fprintf(w, "genesis_sandboxes{state=%q} %d\n", st, byState[st])
	}
	s.writeNetworkMetrics(w, r)
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
