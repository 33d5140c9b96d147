package httpapi

import (
	"fmt"
	"io"
	"slices"
	"strconv"

	"genesis.dev/sandbox/internal/control"
)

// poolTenantLabel is the tenant label of warm pool refills, which belong to
// no tenant (tenant names cannot contain parentheses).
const poolTenantLabel = "(pool)"

// writeAdmissionMetrics writes the host capacity and the fair queues'
// counters in the Prometheus text format.
func writeAdmissionMetrics(w io.Writer, st control.AdmissionStats) {
	fmt.Fprintln(w, "# HELP genesis_capacity Host capacity for sandboxes by resource.")
	fmt.Fprintln(w, "# TYPE genesis_capacity gauge")
	fmt.Fprintf(w, "genesis_capacity{resource=\"cpu\"} %g\n", st.Capacity.CPU)
	fmt.Fprintf(w, "genesis_capacity{resource=\"memory_mb\"} %d\n", st.Capacity.MemoryMB)
	fmt.Fprintf(w, "genesis_capacity{resource=\"sandboxes\"} %d\n", st.Capacity.Sandboxes)
	fmt.Fprintln(w, "# HELP genesis_capacity_in_use Host capacity held by sandboxes by resource.")
	fmt.Fprintln(w, "# TYPE genesis_capacity_in_use gauge")
	fmt.Fprintf(w, "genesis_capacity_in_use{resource=\"cpu\"} %g\n", st.InUse.CPU)
	fmt.Fprintf(w, "genesis_capacity_in_use{resource=\"memory_mb\"} %d\n", st.InUse.MemoryMB)
	fmt.Fprintf(w, "genesis_capacity_in_use{resource=\"sandboxes\"} %d\n", st.InUse.Sandboxes)

	tenants := slices.Sorted(func(yield func(string) bool) {
		for name := range st.Tenants {
			if !yield(name) {
				return
			}
		}
	})
	perTenant := []struct {
		name, help, kind string
		value            func(control.AdmissionTenantStats) uint64
	}{
		{"genesis_admission_queue_length", "Requests waiting for host capacity by tenant.", "gauge",
			func(t control.AdmissionTenantStats) uint64 { return uint64(t.Queued) }},
		{"genesis_admission_grants_total", "Requests granted host capacity by tenant.", "counter",
			func(t control.AdmissionTenantStats) uint64 { return t.Grants }},
		{"genesis_admission_waits_total", "Requests that waited for host capacity by tenant.", "counter",
			func(t control.AdmissionTenantStats) uint64 { return t.Waits }},
		{"genesis_admission_timeouts_total", "Waiting requests that got no capacity within their wait by tenant.", "counter",
			func(t control.AdmissionTenantStats) uint64 { return t.Timeouts }},
		{"genesis_admission_canceled_total", "Waiting requests whose caller went away by tenant.", "counter",
			func(t control.AdmissionTenantStats) uint64 { return t.Canceled }},
		{"genesis_admission_rejected_total", "Requests refused at once for lack of capacity (no wait) by tenant.", "counter",
			func(t control.AdmissionTenantStats) uint64 { return t.Rejected }},
	}
	for _, m := range perTenant {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", m.name, m.help, m.name, m.kind)
		for _, name := range tenants {
			label := name
			if label == "" {
				label = poolTenantLabel
			}
			fmt.Fprintf(w, "%s{tenant=%q} %d\n", m.name, label, m.value(st.Tenants[name]))
		}
	}

	h := st.Wait
	fmt.Fprintln(w, "# HELP genesis_admission_wait_seconds Time requests waited in the fair queues before a grant.")
	fmt.Fprintln(w, "# TYPE genesis_admission_wait_seconds histogram")
	for i, b := range h.Bounds {
		fmt.Fprintf(w, "genesis_admission_wait_seconds_bucket{le=%q} %d\n", strconv.FormatFloat(b, 'g', -1, 64), h.Counts[i])
	}
	fmt.Fprintf(w, "genesis_admission_wait_seconds_bucket{le=\"+Inf\"} %d\n", h.Count)
	fmt.Fprintf(w, "genesis_admission_wait_seconds_sum %g\n", h.Sum)
	fmt.Fprintf(w, "genesis_admission_wait_seconds_count %d\n", h.Count)
}
