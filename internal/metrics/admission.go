package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"genesis.dev/sandbox/internal/control"
)

// poolTenantLabel is the tenant label of warm pool refills, which belong to
// no tenant (tenant names cannot contain parentheses).
const poolTenantLabel = "(pool)"

// allTenantsLabel is the tenant label of the sum over every tenant, when
// the series do not name tenants.
const allTenantsLabel = "(tenants)"

var (
	capacityDesc      = prometheus.NewDesc("genesis_capacity", "Host capacity for sandboxes by resource.", []string{"resource"}, nil)
	capacityInUseDesc = prometheus.NewDesc("genesis_capacity_in_use", "Host capacity held by sandboxes by resource.", []string{"resource"}, nil)
	admissionWaitDesc = prometheus.NewDesc("genesis_admission_wait_seconds", "Time requests waited in the fair queues before a grant.", nil, nil)

	perTenant = []struct {
		desc  *prometheus.Desc
		kind  prometheus.ValueType
		value func(control.AdmissionTenantStats) uint64
	}{
		{tenantDesc("genesis_admission_queue_length", "Requests waiting for host capacity by tenant."), prometheus.GaugeValue,
			func(t control.AdmissionTenantStats) uint64 { return uint64(t.Queued) }},
		{tenantDesc("genesis_admission_grants_total", "Requests granted host capacity by tenant."), prometheus.CounterValue,
			func(t control.AdmissionTenantStats) uint64 { return t.Grants }},
		{tenantDesc("genesis_admission_waits_total", "Requests that waited for host capacity by tenant."), prometheus.CounterValue,
			func(t control.AdmissionTenantStats) uint64 { return t.Waits }},
		{tenantDesc("genesis_admission_timeouts_total", "Waiting requests that got no capacity within their wait by tenant."), prometheus.CounterValue,
			func(t control.AdmissionTenantStats) uint64 { return t.Timeouts }},
		{tenantDesc("genesis_admission_canceled_total", "Waiting requests whose caller went away by tenant."), prometheus.CounterValue,
			func(t control.AdmissionTenantStats) uint64 { return t.Canceled }},
		{tenantDesc("genesis_admission_rejected_total", "Requests refused at once for lack of capacity (no wait) by tenant."), prometheus.CounterValue,
			func(t control.AdmissionTenantStats) uint64 { return t.Rejected }},
	}
)

func tenantDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, []string{"tenant"}, nil)
}

// collectAdmission sends the host capacity and the fair queues' depths and
// counters: per tenant when byTenant, else summed over the tenants (the
// pool's own apart).
func collectAdmission(ch chan<- prometheus.Metric, st control.AdmissionStats, byTenant bool) {
	for _, c := range []struct {
		desc *prometheus.Desc
		cap  control.AdmissionCapacity
	}{{capacityDesc, st.Capacity}, {capacityInUseDesc, st.InUse}} {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, c.cap.CPU, "cpu")
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(c.cap.MemoryMB), "memory_mb")
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(c.cap.Sandboxes), "sandboxes")
	}
	sums := map[string][]float64{}
	if !byTenant {
		sums[allTenantsLabel] = make([]float64, len(perTenant))
	}
	for name, t := range st.Tenants {
		label := name
		switch {
		case label == "":
			label = poolTenantLabel
		case !byTenant:
			label = allTenantsLabel
		}
		if sums[label] == nil {
			sums[label] = make([]float64, len(perTenant))
		}
		for i, m := range perTenant {
			sums[label][i] += float64(m.value(t))
		}
	}
	for label, vs := range sums {
		for i, m := range perTenant {
			ch <- prometheus.MustNewConstMetric(m.desc, m.kind, vs[i], label)
		}
	}
	h := st.Wait
	buckets := make(map[float64]uint64, len(h.Bounds))
	for i, b := range h.Bounds {
		buckets[b] = h.Counts[i]
	}
	ch <- prometheus.MustNewConstHistogram(admissionWaitDesc, h.Count, h.Sum, buckets)
}

var (
	egressEventsDesc = prometheus.NewDesc("genesis_egress_events_total",
		"Egress DNS lookups and connection attempts recorded, by protocol and decision.", []string{"proto", "decision"}, nil)
	egressBytesDesc = prometheus.NewDesc("genesis_egress_bytes_total", "Bytes moved by allowed egress connections.", []string{"direction"}, nil)
	egressLostDesc  = prometheus.NewDesc("genesis_egress_events_lost_total",
		"Egress events the gateway dropped before the service read them.", nil, nil)
	egressUpDesc = prometheus.NewDesc("genesis_egress_gateway_up", "Whether the egress gateway answers its health check.", nil, nil)
	networksDesc = prometheus.NewDesc("genesis_sandbox_networks", "Networked sandboxes by enforcement status.", []string{"status"}, nil)
)

// collectNetwork sends the egress gateway's decisions and state.
func collectNetwork(ch chan<- prometheus.Metric, m control.NetworkMetrics) {
	for _, c := range m.Events {
		ch <- prometheus.MustNewConstMetric(egressEventsDesc, prometheus.CounterValue, float64(c.Count), c.Proto, c.Decision)
	}
	ch <- prometheus.MustNewConstMetric(egressBytesDesc, prometheus.CounterValue, float64(m.BytesUp), "up")
	ch <- prometheus.MustNewConstMetric(egressBytesDesc, prometheus.CounterValue, float64(m.BytesDown), "down")
	ch <- prometheus.MustNewConstMetric(egressLostDesc, prometheus.CounterValue, float64(m.EventsLost))
	up := 0.0
	if m.GatewayUp {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(egressUpDesc, prometheus.GaugeValue, up)
	ch <- prometheus.MustNewConstMetric(networksDesc, prometheus.GaugeValue, float64(m.SandboxesEnforced), "active")
	ch <- prometheus.MustNewConstMetric(networksDesc, prometheus.GaugeValue, float64(m.SandboxesEnforceOff), "enforcement_down")
}
