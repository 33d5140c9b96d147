package httpapi_test

import (
	"net/http"
	"testing"

	apipkg "genesis.dev/sandbox/api"
	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/controltest"
)

// TestLeaseRoutes: bad input gets clear problems, pools are listed, and
// only an admin key may drain a pool.
func TestLeaseRoutes(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	for _, tc := range []struct {
		body   string
		status int
		code   string
	}{
		{`{"profile":"nope"}`, http.StatusNotFound, "profile_not_found"},
		{`{"profile":"tool-basic","ttl_seconds":0}`, http.StatusBadRequest, "invalid_ttl"},
		{`{"profile":"tool-basic","ttl_seconds":-3}`, http.StatusBadRequest, "invalid_ttl"},
		{`{"profile":"tool-basic","wait_seconds":-1}`, http.StatusBadRequest, "invalid_argument"},
		{`{"profile":"tool-basic","bogus":1}`, http.StatusBadRequest, "invalid_argument"},
	} {
		resp, body := a.do(req{method: "POST", path: "/v1/leases", key: keyA, body: tc.body})
		if resp.StatusCode != tc.status || problemCode(t, body) != tc.code {
			t.Errorf("POST /v1/leases %s: %d %s, want %d %s", tc.body, resp.StatusCode, body, tc.status, tc.code)
		}
	}
	if resp, body := a.do(req{method: "GET", path: "/v1/leases/lse_0000000000000000", key: keyA}); resp.StatusCode != http.StatusNotFound || problemCode(t, body) != "lease_not_found" {
		t.Errorf("unknown lease: %d %s", resp.StatusCode, body)
	}
	resp, body := a.do(req{method: "GET", path: "/v1/pools", key: keyA})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/pools: %d %s", resp.StatusCode, body)
	}
	decodeJSON[client.PoolList](t, body)
	if resp, body := a.do(req{method: "POST", path: "/v1/pools/tool-basic/drain", key: keyA}); resp.StatusCode != http.StatusForbidden || problemCode(t, body) != "admin_required" {
		t.Errorf("drain with a tenant key: %d %s, want 403 admin_required", resp.StatusCode, body)
	}
	if resp, body := a.do(req{method: "POST", path: "/v1/pools/nope/drain", key: keyAdmin}); resp.StatusCode != http.StatusNotFound || problemCode(t, body) != "pool_not_found" {
		t.Errorf("drain of an unknown pool: %d %s, want 404 pool_not_found", resp.StatusCode, body)
	}
}

// TestLeaseAuditedOnce: a lease's audit record, written in the claim's
// transaction, is there once when the answer is (read-your-writes), with
// the lease as its target; a refused lease still gets its record.
func TestLeaseAuditedOnce(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	resp, body := a.do(req{method: "POST", path: "/v1/leases", key: keyA, body: `{"profile":"` + controltest.Profile + `","runtime":"runc"}`})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("lease: %d %s", resp.StatusCode, body)
	}
	l := decodeJSON[client.Lease](t, body)
	rid := resp.Header.Get(apipkg.HeaderRequestID)
	page := a.auditPage(keyA, "action=POST+/v1/leases&limit=100")
	if len(page.Items) != 1 {
		t.Fatalf("%d audit records of POST /v1/leases, want 1: %+v", len(page.Items), page.Items)
	}
	if r := page.Items[0]; r.Target != l.LeaseID || r.Status != http.StatusCreated || r.RequestID != rid || r.Actor == "" || r.Tenant != "a" {
		t.Errorf("the lease's audit record: %+v, want target %s, status 201, request %s", r, l.LeaseID, rid)
	}
	resp, body = a.do(req{method: "POST", path: "/v1/leases", key: keyA, body: `{"profile":"nope"}`})
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("lease of an unknown profile: %d %s", resp.StatusCode, body)
	}
	page = a.auditPage(keyA, "action=POST+/v1/leases&limit=100")
	if len(page.Items) != 2 || page.Items[1].Status != http.StatusNotFound || page.Items[1].Code != "profile_not_found" {
		t.Errorf("audit records after a refused lease: %+v", page.Items)
	}
}
