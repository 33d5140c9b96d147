package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"genesis.dev/sandbox/internal/metrics"
	"genesis.dev/sandbox/internal/sandbox"
)

// The service's Prometheus instrumentation is package metrics'; these
// names keep the API's configuration as it was.
type (
	// Metrics is metrics.Metrics.
	Metrics = metrics.Metrics
	// MetricsConfig is metrics.Config.
	MetricsConfig = metrics.Config
	// SandboxSource is metrics.SandboxSource.
	SandboxSource = metrics.SandboxSource
)

// NewMetrics is metrics.New.
func NewMetrics(cfg MetricsConfig) *Metrics { return metrics.New(cfg) }

// edgeMetrics is the server's Metrics with what the handlers record
// through it.
type edgeMetrics struct{ *metrics.Metrics }

// observeCreate records a successful create through the API, begun at since.
func (m edgeMetrics) observeCreate(rt sandbox.Runtime, since time.Time) {
	m.ObserveCreate(rt, time.Since(since))
}

// instrument counts and times the requests of one route.
func (m edgeMetrics) instrument(route string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw, ok := w.(*statusWriter)
		if !ok {
			sw = &statusWriter{ResponseWriter: w, status: http.StatusOK}
		}
		next.ServeHTTP(sw, r)
		m.ObserveRequest(route, strconv.Itoa(sw.status), time.Since(start))
	})
}

// serveMetrics answers a scrape. The series name tenants only with tenant
// labels on and for a scrape with an admin key; a scrape that sends a key
// must send a valid admin key.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") == "" {
		s.metrics.Handler(s.ctl, false, s.log).ServeHTTP(w, r)
		return
	}
	s.authenticate(http.HandlerFunc(s.adminOnly(func(w http.ResponseWriter, r *http.Request) {
		s.metrics.Handler(s.ctl, s.metrics.TenantLabels(), s.log).ServeHTTP(w, r)
	}))).ServeHTTP(w, r)
}
