// Package metrics is the service's Prometheus instrumentation: request
// latency by route and status, operation latencies by runtime (it is the
// control and jobs Observer of exec, first-output and lease-wait times),
// the Go and process collectors, and the gauges and counters read from
// the service at scrape time (admission, sandboxes by state, warm pools,
// egress), with per-tenant series summed unless a scrape may name tenants.
// The HTTP edge serves its Handler at /metrics and feeds ObserveRequest.
//
// It imports control and jobs (the figures it reads and the observer
// contracts it meets), sandbox and the Prometheus client; never an edge,
// the SDK, the store or a driver (internal/layering states the rule).
package metrics
