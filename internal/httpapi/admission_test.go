package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/controltest"
)

// Host capacity over HTTP: a full host answers 503 capacity_exhausted with
// Retry-After; wait_seconds makes the request wait for a slot instead; the
// queues show in /metrics.
func TestCreateWaitsForCapacityOverHTTP(t *testing.T) {
	t.Parallel()
	a := newAPI(t, func(c *config.Config) { c.Capacity.Sandboxes = 1; c.Metrics.TenantLabels = true })
	first, _ := a.createHTTP(keyA, client.CreateSandboxRequest{})
	body := func(cr client.CreateSandboxRequest) string {
		cr.Profile = controltest.Profile
		b, _ := json.Marshal(cr)
		return string(b)
	}

	resp, b := a.do(req{method: "POST", path: "/v1/sandboxes", key: keyB, body: body(client.CreateSandboxRequest{})})
	checkProblem(t, resp, b, http.StatusServiceUnavailable, "capacity_exhausted")
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("Retry-After %q, want a positive number of seconds", resp.Header.Get("Retry-After"))
	}
	resp, b = a.do(req{method: "POST", path: "/v1/sandboxes", key: keyB, body: body(client.CreateSandboxRequest{WaitSeconds: -1})})
	checkProblem(t, resp, b, http.StatusBadRequest, "invalid_argument")

	type answer struct {
		status int
		body   []byte
	}
	done := make(chan answer, 1)
	go func() {
		resp, b := a.do(req{method: "POST", path: "/v1/sandboxes", key: keyB, body: body(client.CreateSandboxRequest{WaitSeconds: 60})})
		done <- answer{resp.StatusCode, b}
	}()
	metrics := func() string {
		_, b := a.do(req{method: "GET", path: "/metrics", key: keyAdmin})
		return string(b)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(metrics(), `genesis_admission_queue_length{tenant="b"} 1`+"\n") {
		if time.Now().After(deadline) {
			t.Fatalf("the create with wait_seconds never queued; metrics:\n%s", metrics())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if resp, b := a.do(req{method: "DELETE", path: "/v1/sandboxes/" + first.ID, key: keyA}); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %d %s", resp.StatusCode, b)
	}
	if r := <-done; r.status != http.StatusCreated {
		t.Fatalf("waiting create: %d %s, want 201", r.status, r.body)
	}
	m := metrics()
	for _, want := range []string{
		`genesis_capacity{resource="sandboxes"} 1`,
		`genesis_capacity_in_use{resource="sandboxes"} 1`,
		`genesis_admission_queue_length{tenant="b"} 0`,
		`genesis_admission_grants_total{tenant="a"} 1`,
		`genesis_admission_grants_total{tenant="b"} 1`,
		`genesis_admission_waits_total{tenant="b"} 1`,
		`genesis_admission_rejected_total{tenant="b"} 1`,
		`genesis_admission_wait_seconds_count 1`,
		`genesis_admission_wait_seconds_bucket{le="+Inf"} 1`,
	} {
		if !strings.Contains(m, want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// TestMetricsTenantLabels: /metrics needs no key and names no tenant (the
// fair queues' series are summed under tenant="(tenants)"); with
// metrics.tenant_labels a scrape with an admin key gets them by tenant. A
// scrape that sends a key must send an admin's.
func TestMetricsTenantLabels(t *testing.T) {
	t.Parallel()
	for _, labels := range []bool{false, true} {
		t.Run("tenant_labels="+strconv.FormatBool(labels), func(t *testing.T) {
			t.Parallel()
			a := newAPI(t, func(c *config.Config) { c.Metrics.TenantLabels = labels })
			a.createHTTP(keyA, client.CreateSandboxRequest{})
			a.createHTTP(keyB, client.CreateSandboxRequest{})
			summed := func(who string, m string) {
				t.Helper()
				if !strings.Contains(m, `genesis_admission_grants_total{tenant="(tenants)"} 2`+"\n") {
					t.Errorf("%s: no sum over the tenants:\n%s", who, admissionSamples(m))
				}
				for _, name := range []string{`tenant="a"`, `tenant="b"`, `tenant="admin"`} {
					if strings.Contains(m, name) {
						t.Errorf("%s: the metrics name a tenant (%s):\n%s", who, name, admissionSamples(m))
					}
				}
			}
			resp, body := a.do(req{method: "GET", path: "/metrics"})
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("anonymous scrape: %d %s", resp.StatusCode, body)
			}
			summed("anonymous", string(body))
			resp, body = a.do(req{method: "GET", path: "/metrics", key: keyA})
			checkProblem(t, resp, body, http.StatusForbidden, "admin_required")
			resp, body = a.do(req{method: "GET", path: "/metrics", key: "not-a-key-0123456789"})
			checkProblem(t, resp, body, http.StatusUnauthorized, "unauthenticated")
			resp, body = a.do(req{method: "GET", path: "/metrics", key: keyAdmin})
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("admin scrape: %d %s", resp.StatusCode, body)
			}
			m := string(body)
			if !labels {
				summed("admin", m)
				return
			}
			if !strings.Contains(m, `genesis_admission_grants_total{tenant="a"} 1`+"\n") ||
				!strings.Contains(m, `genesis_admission_grants_total{tenant="b"} 1`+"\n") || strings.Contains(m, "(tenants)") {
				t.Errorf("admin scrape with tenant labels:\n%s", admissionSamples(m))
			}
		})
	}
}

// admissionSamples keeps the fair queues' samples of a metrics page.
func admissionSamples(m string) string {
	var out []string
	for _, line := range strings.Split(m, "\n") {
		if strings.HasPrefix(line, "genesis_admission_") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
