package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/sandbox"
)

// Latency buckets, in seconds.
var (
	// httpBuckets span a fast GET to a long synchronous exec.
	httpBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	// execBuckets: an exec's floor is a couple of milliseconds under runc.
	execBuckets = []float64{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}
	// createBuckets: a warm claim takes milliseconds, a cold create with
	// a wait for capacity up to minutes.
	createBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}
)

// SandboxSource is where the sandbox counts of /metrics come from (a
// store.Store is one): one count query per scrape, never a listing.
type SandboxSource interface {
	CountSandboxesByState(ctx context.Context) (map[sandbox.State]int, error)
}

// Config configures New.
type Config struct {
	// Sandboxes is read for the sandbox counts at scrape time; nil means the
	// Service's own count (the control service's store).
	Sandboxes SandboxSource
	// TenantLabels names tenants in the per-tenant series (the fair
	// queues') of a scrape with an admin key. Otherwise, and for every
	// scrape without a key, those series are summed over all tenants under
	// the label tenant="(tenants)".
	TenantLabels bool
}

// Metrics is the service's Prometheus instrumentation: request latency by
// route and status, operation latencies by runtime (it is the
// control.Observer of exec and first-output times), the Go and process
// collectors, and gauges read from the service at scrape time. One Metrics
// serves one API server.
type Metrics struct {
	reg          *prometheus.Registry
	sandboxes    SandboxSource
	tenantLabels bool

	requests    *prometheus.CounterVec
	slow        *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	exec        *prometheus.HistogramVec
	firstOutput *prometheus.HistogramVec
	create      *prometheus.HistogramVec
	leaseWait   *prometheus.HistogramVec
	rpcs        *prometheus.CounterVec
	rpcDuration *prometheus.HistogramVec
}

var (
	_ jobs.Observer    = (*Metrics)(nil)
	_ control.Observer = (*Metrics)(nil)
)

// New builds the metrics and their registry.
func New(cfg Config) *Metrics {
	byRuntime := func(name, help string, buckets []float64) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, []string{"runtime"})
	}
	m := &Metrics{
		reg:          prometheus.NewRegistry(),
		sandboxes:    cfg.Sandboxes,
		tenantLabels: cfg.TenantLabels,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "genesis_http_requests_total", Help: "HTTP requests by route and status.",
		}, []string{"route", "status"}),
		slow: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "genesis_http_slow_requests_total", Help: "HTTP requests logged as slow (slow_request_threshold beyond the wait their caller asked for) by route.",
		}, []string{"route"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "genesis_http_request_duration_seconds", Help: "Time spent serving requests by route and status.", Buckets: httpBuckets,
		}, []string{"route", "status"}),
		exec: byRuntime("genesis_exec_duration_seconds",
			"Time of synchronous execs, from the request to the agent to the result, by runtime.", execBuckets),
		firstOutput: byRuntime("genesis_exec_first_output_seconds",
			"Time from starting a background or streamed job to its first output, by runtime.", execBuckets),
		create: byRuntime("genesis_sandbox_create_duration_seconds",
			"Time of successful sandbox creates through the API (waits for capacity included), by runtime.", createBuckets),
		rpcs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "genesis_grpc_requests_total", Help: "Calls of the gRPC edge (gRPC, gRPC-Web and Connect) by service, method and gRPC code.",
		}, []string{"service", "method", "code"}),
		rpcDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "genesis_grpc_request_duration_seconds", Help: "Time spent serving calls of the gRPC edge (a stream: until it ends) by service, method and gRPC code.",
			Buckets: httpBuckets,
		}, []string{"service", "method", "code"}),
		leaseWait: byRuntime("genesis_lease_wait_seconds",
			"Time from a lease request to its grant (a warm claim or a cold create), by runtime.", createBuckets),
	}
	m.reg.MustRegister(m.requests, m.slow, m.duration, m.exec, m.firstOutput, m.create, m.leaseWait, m.rpcs, m.rpcDuration,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// ObserveExec records the time of a synchronous exec (control.Observer).
func (m *Metrics) ObserveExec(rt sandbox.Runtime, d time.Duration) {
	m.exec.WithLabelValues(string(rt)).Observe(d.Seconds())
}

// ObserveFirstOutput records a job's time to first output (control.Observer).
func (m *Metrics) ObserveFirstOutput(rt sandbox.Runtime, d time.Duration) {
	m.firstOutput.WithLabelValues(string(rt)).Observe(d.Seconds())
}

// ObserveCreate records a successful create through the API, of d.
func (m *Metrics) ObserveCreate(rt sandbox.Runtime, d time.Duration) {
	m.create.WithLabelValues(string(rt)).Observe(d.Seconds())
}

// ObserveLeaseWait records the time until a lease was granted
// (control.Observer).
func (m *Metrics) ObserveLeaseWait(rt sandbox.Runtime, d time.Duration) {
	m.leaseWait.WithLabelValues(string(rt)).Observe(d.Seconds())
}

// ObserveRequest records one served request of route with status, of d.
func (m *Metrics) ObserveRequest(route, status string, d time.Duration) {
	m.requests.WithLabelValues(route, status).Inc()
	m.duration.WithLabelValues(route, status).Observe(d.Seconds())
}

// ObserveSlowRequest counts one request of route logged as slow.
func (m *Metrics) ObserveSlowRequest(route string) { m.slow.WithLabelValues(route).Inc() }

// ObserveRPC records one call of the gRPC edge: the service's full name,
// the method, its gRPC code ("ok" for success, else the lower-case name:
// "not_found") and how long it took.
func (m *Metrics) ObserveRPC(service, method, code string, d time.Duration) {
	m.rpcs.WithLabelValues(service, method, code).Inc()
	m.rpcDuration.WithLabelValues(service, method, code).Observe(d.Seconds())
}

// TenantLabels reports whether a scrape with an admin key names tenants.
func (m *Metrics) TenantLabels() bool { return m.tenantLabels }

// Service is what a scrape reads of the service (control.Service).
type Service interface {
	AdmissionStats() control.AdmissionStats
	CountSandboxesByState(ctx context.Context) (map[sandbox.State]int, error)
	Pools(ctx context.Context) ([]control.PoolView, error)
	NetworkMetrics(ctx context.Context) control.NetworkMetrics
	RecycleStats() control.RecycleStats
}

// Handler answers one scrape: the registered metrics, and the gauges and
// counters read from svc for this scrape (with the request's context),
// naming tenants when byTenant. Errors of the exposition go to log.
func (m *Metrics) Handler(svc Service, byTenant bool, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scrape := prometheus.NewRegistry()
		scrape.MustRegister(&serviceCollector{m: m, svc: svc, log: log, ctx: r.Context(), byTenant: byTenant})
		promhttp.HandlerFor(prometheus.Gatherers{m.reg, scrape}, promhttp.HandlerOpts{
			ErrorLog:      slogErrorLog{log},
			ErrorHandling: promhttp.ContinueOnError,
		}).ServeHTTP(w, r)
	})
}

// slogErrorLog sends the exposition's errors to the service log.
type slogErrorLog struct{ log *slog.Logger }

func (l slogErrorLog) Println(v ...any) { l.log.Warn("metrics", "err", v) }

// serviceCollector reads the service's state for one scrape.
type serviceCollector struct {
	m        *Metrics
	svc      Service
	log      *slog.Logger
	ctx      context.Context
	byTenant bool
}

// Describe sends nothing: the collector is unchecked (its series depend on
// the tenants, pools and states present).
func (c *serviceCollector) Describe(chan<- *prometheus.Desc) {}

// Collect sends the scrape-time metrics.
func (c *serviceCollector) Collect(ch chan<- prometheus.Metric) {
	collectAdmission(ch, c.svc.AdmissionStats(), c.byTenant)
	c.collectSandboxes(ch)
	c.collectPools(ch)
	collectRecycles(ch, c.svc.RecycleStats())
	collectNetwork(ch, c.svc.NetworkMetrics(c.ctx))
}

var sandboxesDesc = prometheus.NewDesc("genesis_sandboxes", "Sandboxes known to the store by state.", []string{"state"}, nil)

// collectSandboxes counts sandboxes by state with one store query.
func (c *serviceCollector) collectSandboxes(ch chan<- prometheus.Metric) {
	byState, err := c.countSandboxes()
	if err != nil {
		c.log.Warn("metrics: counting sandboxes", "err", err)
		return
	}
	for _, st := range sandbox.AllStates {
		ch <- prometheus.MustNewConstMetric(sandboxesDesc, prometheus.GaugeValue, float64(byState[st]), string(st))
	}
}

// countSandboxes returns the number of sandboxes in each state, with one
// count query.
func (c *serviceCollector) countSandboxes() (map[sandbox.State]int, error) {
	if src := c.m.sandboxes; src != nil {
		return src.CountSandboxesByState(c.ctx)
	}
	return c.svc.CountSandboxesByState(c.ctx)
}

var (
	poolMembersDesc = prometheus.NewDesc("genesis_pool_members",
		"Live sandboxes of a warm pool by state (idle ones are its warm members).", []string{"pool", "state"}, nil)
	poolStartingDesc = prometheus.NewDesc("genesis_pool_starting", "Pool members being created now.", []string{"pool"}, nil)
	poolMinIdleDesc  = prometheus.NewDesc("genesis_pool_min_idle", "Warm members a pool keeps ready.", []string{"pool"}, nil)
	poolMaxTotalDesc = prometheus.NewDesc("genesis_pool_max_total", "Most members a pool holds, leased ones included.", []string{"pool"}, nil)
	poolHitsDesc     = prometheus.NewDesc("genesis_pool_hits_total", "Leases served by a warm member.", []string{"pool"}, nil)
	poolMissesDesc   = prometheus.NewDesc("genesis_pool_misses_total", "Leases that found no warm member.", []string{"pool"}, nil)
)

var (
	recyclePendingDesc = prometheus.NewDesc("genesis_recycle_pending",
		"Sandboxes of released leases waiting for or in their recycle (reset or destroy), which runs after the release answers.", nil, nil)
	recyclesDesc = prometheus.NewDesc("genesis_recycles_total",
		"Finished recycles of released leases' sandboxes by outcome (reset: back in its pool; destroyed; failed: its destroy failed and the reconciler finishes it).",
		[]string{"outcome"}, nil)
	recycleSecondsDesc = prometheus.NewDesc("genesis_recycle_seconds_total", "Time spent in finished recycles of released leases' sandboxes.", nil, nil)
)

// collectRecycles sends the recycle queue's gauge and counters.
func collectRecycles(ch chan<- prometheus.Metric, st control.RecycleStats) {
	ch <- prometheus.MustNewConstMetric(recyclePendingDesc, prometheus.GaugeValue, float64(st.Pending))
	ch <- prometheus.MustNewConstMetric(recyclesDesc, prometheus.CounterValue, float64(st.Reset), "reset")
	ch <- prometheus.MustNewConstMetric(recyclesDesc, prometheus.CounterValue, float64(st.Destroyed), "destroyed")
	ch <- prometheus.MustNewConstMetric(recyclesDesc, prometheus.CounterValue, float64(st.Failed), "failed")
	ch <- prometheus.MustNewConstMetric(recycleSecondsDesc, prometheus.CounterValue, st.Seconds)
}

// collectPools sends the warm pools' sizes and counters.
func (c *serviceCollector) collectPools(ch chan<- prometheus.Metric) {
	pools, err := c.svc.Pools(c.ctx)
	if err != nil {
		c.log.Warn("metrics: reading pools", "err", err)
		return
	}
	for _, p := range pools {
		for _, st := range sandbox.AllStates {
			if n, ok := p.Counts[st]; ok || st == sandbox.StateIdle {
				ch <- prometheus.MustNewConstMetric(poolMembersDesc, prometheus.GaugeValue, float64(n), p.Name, string(st))
			}
		}
		ch <- prometheus.MustNewConstMetric(poolStartingDesc, prometheus.GaugeValue, float64(p.Starting), p.Name)
		ch <- prometheus.MustNewConstMetric(poolMinIdleDesc, prometheus.GaugeValue, float64(p.MinIdle), p.Name)
		ch <- prometheus.MustNewConstMetric(poolMaxTotalDesc, prometheus.GaugeValue, float64(p.MaxTotal), p.Name)
		ch <- prometheus.MustNewConstMetric(poolHitsDesc, prometheus.CounterValue, float64(p.Hits), p.Name)
		ch <- prometheus.MustNewConstMetric(poolMissesDesc, prometheus.CounterValue, float64(p.Misses), p.Name)
	}
}
