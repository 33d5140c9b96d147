package metrics

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/sandbox"
)

// fakeService answers a scrape with two tenants' queues, a pool's
// refills, one pool and a running sandbox.
type fakeService struct{ counts int }

func (f *fakeService) AdmissionStats() control.AdmissionStats {
	return control.AdmissionStats{
		Capacity: control.AdmissionCapacity{CPU: 2, MemoryMB: 1024, Sandboxes: 8},
		Tenants: map[string]control.AdmissionTenantStats{
			"a": {Queued: 1, Grants: 3}, "b": {Queued: 2, Grants: 4}, "": {Grants: 5},
		},
	}
}

func (f *fakeService) CountSandboxesByState(ctx context.Context) (map[sandbox.State]int, error) {
	f.counts++
	return map[sandbox.State]int{sandbox.StateReady: 1}, nil
}

func (f *fakeService) Pools(ctx context.Context) ([]control.PoolView, error) {
	return []control.PoolView{{Name: "warm", MinIdle: 2, Hits: 7}}, nil
}

func (f *fakeService) RecycleStats() control.RecycleStats {
	return control.RecycleStats{Pending: 2, Reset: 5, Destroyed: 1, Seconds: 0.25}
}

func (f *fakeService) NetworkMetrics(ctx context.Context) control.NetworkMetrics {
	return control.NetworkMetrics{GatewayUp: true}
}

func scrape(t *testing.T, m *Metrics, svc Service, byTenant bool) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler(svc, byTenant, slog.New(slog.DiscardHandler)).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

// TestScrape checks the scrape-time series: tenants summed unless named,
// the pool's refills apart, one count query, and the observers' series.
func TestScrape(t *testing.T) {
	t.Parallel()
	m := New(Config{TenantLabels: true})
	m.ObserveRequest("GET /v1/x", "200", 0)
	m.ObserveRPC("genesis.sandbox.v1.ExecService", "Exec", "ok", 3*time.Millisecond)
	m.ObserveRPC("genesis.sandbox.v1.ExecService", "Exec", "ok", 4*time.Millisecond)
	m.ObserveRPC("genesis.sandbox.v1.ExecService", "Exec", "not_found", time.Millisecond)
	svc := &fakeService{}
	for _, want := range []string{
		`genesis_admission_grants_total{tenant="(tenants)"} 7`,
		`genesis_admission_grants_total{tenant="(pool)"} 5`,
		`genesis_admission_queue_length{tenant="(tenants)"} 3`,
		`genesis_capacity{resource="cpu"} 2`,
		`genesis_sandboxes{state="ready"} 1`,
		`genesis_pool_hits_total{pool="warm"} 7`,
		`genesis_recycle_pending 2`,
		`genesis_recycles_total{outcome="reset"} 5`,
		`genesis_recycles_total{outcome="destroyed"} 1`,
		`genesis_recycle_seconds_total 0.25`,
		`genesis_egress_gateway_up 1`,
		`genesis_http_requests_total{route="GET /v1/x",status="200"} 1`,
		`genesis_grpc_requests_total{code="ok",method="Exec",service="genesis.sandbox.v1.ExecService"} 2`,
		`genesis_grpc_requests_total{code="not_found",method="Exec",service="genesis.sandbox.v1.ExecService"} 1`,
		`genesis_grpc_request_duration_seconds_count{code="ok",method="Exec",service="genesis.sandbox.v1.ExecService"} 2`,
		`genesis_grpc_request_duration_seconds_bucket{code="ok",method="Exec",service="genesis.sandbox.v1.ExecService",le="0.0025"} 0`,
		`genesis_grpc_request_duration_seconds_bucket{code="ok",method="Exec",service="genesis.sandbox.v1.ExecService",le="0.005"} 2`,
	} {
		if out := scrape(t, m, svc, false); !strings.Contains(out, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	out := scrape(t, m, svc, true)
	if !strings.Contains(out, `genesis_admission_grants_total{tenant="a"} 3`) || strings.Contains(out, `tenant="(tenants)"`) {
		t.Errorf("a scrape by tenant names tenants, and only them:\n%s", out)
	}
	if svc.counts != 18 {
		t.Errorf("%d count queries for 18 scrapes, want one each", svc.counts)
	}
}
