package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/controltest"
	"genesis.dev/sandbox/internal/httpapi"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/store/sqlite"
)

// countingStore wraps the harness's store and counts the sandbox count
// queries and listings made on behalf of a scrape (calls whose context
// carries scrapeKey): background loops of the service may list sandboxes at
// any time, a scrape must not.
type countingStore struct {
	store.Store
	lists  atomic.Int64
	counts atomic.Int64
}

// scrapeKey marks the context of a request to /metrics.
type scrapeKey struct{}

func (c *countingStore) ListSandboxes(ctx context.Context, f store.SandboxFilter) ([]*sandbox.Sandbox, error) {
	if ctx.Value(scrapeKey{}) != nil {
		c.lists.Add(1)
	}
	return c.Store.ListSandboxes(ctx, f)
}

func (c *countingStore) CountSandboxesByState(ctx context.Context) (map[sandbox.State]int, error) {
	if ctx.Value(scrapeKey{}) != nil {
		c.counts.Add(1)
	}
	return c.Store.CountSandboxesByState(ctx)
}

// newMetricsAPI is newAPI with one Metrics shared by the control service
// and the HTTP API, as the service wires them, reading sandbox counts from a
// counting wrapper of the store: given to the metrics as their source, or,
// with viaControl, as the control service's store (the metrics then have no
// source of their own and ask the service).
func newMetricsAPI(t *testing.T, viaControl bool) (*api, *countingStore) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "state.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cs := &countingStore{Store: st}
	var m *httpapi.Metrics
	if viaControl {
		m = httpapi.NewMetrics(httpapi.MetricsConfig{}) // asks the service, whose store cs is
	} else {
		m = httpapi.NewMetrics(httpapi.MetricsConfig{Sandboxes: cs})
	}
	h := controltest.NewOpts(t, controltest.Options{Store: st, Metrics: m, Configure: func(c *config.Config) {
		c.WarmPools = false // pools would read the store on every scrape too
	}, Tune: func(c *control.Config) {
		if viaControl {
			c.Store = cs
		}
	}})
	srv, err := httpapi.New(httpapi.Config{PublicURL: testPublicURL, Previews: testPreviews(t), Control: h.Svc, Terminals: h.Terminals, Files: h.Files, Jobs: h.Jobs, Artifacts: h.Artifacts, Ports: h.Ports,
		Keys: map[string]string{keyA: "a", keyB: "b"}, MaxBodyBytes: maxBody, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	handler := srv.Handler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			r = r.WithContext(context.WithValue(r.Context(), scrapeKey{}, true))
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return &api{Harness: h, srv: srv, url: ts.URL, hc: ts.Client()}, cs
}

func TestMetricsHistogramsAndProcess(t *testing.T) {
	t.Parallel()
	a, _ := newMetricsAPI(t, false)
	sb, _ := a.createHTTP(keyA, client.CreateSandboxRequest{})
	resp, body := a.do(req{method: "POST", path: "/v1/sandboxes/" + sb.ID + "/exec", key: keyA, body: `{"command":["echo","hi"]}`})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("exec: %d %s", resp.StatusCode, body)
	}
	resp, body = a.do(req{method: "POST", path: "/v1/sandboxes/" + sb.ID + "/exec", key: keyA, body: `{"command":["echo","streamed"]}`,
		header: map[string]string{"Accept": "text/event-stream"}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "streamed") {
		t.Fatalf("streamed exec: %d %s", resp.StatusCode, body)
	}
	resp, body = a.do(req{method: "POST", path: "/v1/leases", key: keyA, body: `{"profile":"` + controltest.Profile + `","runtime":"runc"}`})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("lease: %d %s", resp.StatusCode, body)
	}
	resp, body = a.do(req{method: "GET", path: "/metrics"})
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("metrics: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	text := string(body)
	for _, want := range []string{
		"# TYPE genesis_http_request_duration_seconds histogram",
		`genesis_http_request_duration_seconds_bucket{route="POST /v1/sandboxes/{id}/exec",status="200",le="+Inf"} 2`,
		"# TYPE genesis_exec_duration_seconds histogram",
		`genesis_exec_duration_seconds_bucket{runtime="runc",le="+Inf"} 1`,
		`genesis_exec_duration_seconds_count{runtime="runc"} 1`,
		`genesis_exec_first_output_seconds_count{runtime="runc"} 1`,
		`genesis_sandbox_create_duration_seconds_count{runtime="runc"} 1`,
		`genesis_lease_wait_seconds_count{runtime="runc"} 1`,
		`genesis_sandboxes{state="ready"} 1`,
		`genesis_admission_wait_seconds_count 0`,
		`genesis_egress_gateway_up 0`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
	for _, prefix := range []string{"\nprocess_cpu_seconds_total ", "\nprocess_resident_memory_bytes ", "\ngo_goroutines "} {
		if !strings.Contains(text, prefix) {
			t.Errorf("metrics lack %q", strings.TrimSpace(prefix))
		}
	}
	// The exec took real time: some bucket below +Inf is short of the count
	// or the sum is positive.
	if strings.Contains(text, `genesis_exec_duration_seconds_sum{runtime="runc"} 0`+"\n") {
		t.Error("exec duration sum is 0")
	}
}

// TestMetricsScrapeCountsSandboxesInOneQuery: with 1,000 records a scrape
// asks the store for the counts once and lists nothing, whether the counts
// come from the metrics' own source or from the control service's store.
func TestMetricsScrapeCountsSandboxesInOneQuery(t *testing.T) {
	t.Parallel()
	for _, viaControl := range []bool{false, true} {
		t.Run(fmt.Sprintf("via_control=%v", viaControl), func(t *testing.T) {
			t.Parallel()
			a, cs := newMetricsAPI(t, viaControl)
			ctx := context.Background()
			now := time.Now().UTC()
			for i := range 1000 {
				st := sandbox.StateDestroyed
				if i%4 == 0 {
					st = sandbox.StateFailed
				}
				sb := &sandbox.Sandbox{ID: fmt.Sprintf("sbx_metrics%04d", i), Tenant: "a", Profile: controltest.Profile,
					Runtime: sandbox.RuntimeRunc, RiskLevel: sandbox.RiskLow, State: st, Image: controltest.Image,
					Resources: sandbox.Resources{CPU: 0.5, MemoryMB: 256, Pids: 64}, CreatedAt: now, UpdatedAt: now}
				if err := cs.Store.CreateSandbox(ctx, sb); err != nil {
					t.Fatal(err)
				}
			}
			for scrape := 1; scrape <= 2; scrape++ {
				cs.lists.Store(0)
				cs.counts.Store(0)
				resp, body := a.do(req{method: "GET", path: "/metrics"})
				lists, counts := cs.lists.Load(), cs.counts.Load()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("metrics: %d", resp.StatusCode)
				}
				text := string(body)
				for _, want := range []string{`genesis_sandboxes{state="destroyed"} 750`, `genesis_sandboxes{state="failed"} 250`} {
					if !strings.Contains(text, want+"\n") {
						t.Errorf("scrape %d: metrics lack %q", scrape, want)
					}
				}
				if counts != 1 || lists != 0 {
					t.Errorf("scrape %d: %d CountSandboxesByState and %d ListSandboxes calls; want one count and no listing", scrape, counts, lists)
				}
			}
		})
	}
}
