package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// TestRenewSandbox: renew moves the expiry to the TTL from now, bad TTLs
// are 400 invalid_ttl and change nothing, another tenant's renew is the
// missing id's 404.
func TestRenewSandbox(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	sb, _ := a.createHTTP(keyA, client.CreateSandboxRequest{})
	before := *sb.ExpiresAt
	start := time.Now()
	resp, body := a.do(req{method: "POST", path: "/v1/sandboxes/" + sb.ID + "/renew", key: keyA, body: `{"ttl_seconds":7200}`})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("renew: %d %s", resp.StatusCode, body)
	}
	got := decodeJSON[client.Sandbox](t, body)
	if got.ExpiresAt == nil || got.ExpiresAt.Before(start.Add(7199*time.Second)) || got.ExpiresAt.After(time.Now().Add(7201*time.Second)) || got.ExpiresAt.Equal(before) {
		t.Fatalf("expiry after renew: %v (before %v)", got.ExpiresAt, before)
	}
	for _, b := range []string{`{"ttl_seconds":-1}`, `{"ttl_seconds":99999999}`} {
		resp, body := a.do(req{method: "POST", path: "/v1/sandboxes/" + sb.ID + "/renew", key: keyA, body: b})
		if resp.StatusCode != http.StatusBadRequest || problemCode(t, body) != "invalid_ttl" {
			t.Errorf("renew %s: %d %s, want 400 invalid_ttl", b, resp.StatusCode, body)
		}
	}
	if resp, body := a.do(req{method: "POST", path: "/v1/sandboxes/" + sb.ID + "/renew", key: keyA, body: `{"bogus":1}`}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("renew with an unknown field: %d %s", resp.StatusCode, body)
	}
	resp, body = a.do(req{method: "GET", path: "/v1/sandboxes/" + sb.ID, key: keyA})
	if now := decodeJSON[client.Sandbox](t, body); resp.StatusCode != 200 || !now.ExpiresAt.Equal(*got.ExpiresAt) {
		t.Errorf("a refused renew changed the expiry: %v, want %v", now.ExpiresAt, got.ExpiresAt)
	}
	other, _ := a.do(req{method: "POST", path: "/v1/sandboxes/" + sb.ID + "/renew", key: keyB, body: `{}`})
	missing, _ := a.do(req{method: "POST", path: "/v1/sandboxes/sbx_00000000000000000000/renew", key: keyB, body: `{}`})
	if other.StatusCode != http.StatusNotFound || missing.StatusCode != http.StatusNotFound {
		t.Errorf("another tenant's renew: %d, a missing id's: %d; want 404 both", other.StatusCode, missing.StatusCode)
	}
}

// TestListSandboxesAcrossTenants: a tenant's key lists its own sandboxes
// only and is refused another tenant's (403 admin_required); an admin key
// lists one tenant's or, with tenant=*, every tenant's, each with its
// tenant.
func TestListSandboxesAcrossTenants(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	sa, _ := a.createHTTP(keyA, client.CreateSandboxRequest{})
	sbB, _ := a.createHTTP(keyB, client.CreateSandboxRequest{})
	list := func(key, q string) (int, client.SandboxList, string) {
		resp, body := a.do(req{method: "GET", path: "/v1/sandboxes" + q, key: key})
		var l client.SandboxList
		if resp.StatusCode == 200 {
			l = decodeJSON[client.SandboxList](t, body)
		}
		return resp.StatusCode, l, string(body)
	}
	ids := func(l client.SandboxList) string {
		var out []string
		for _, s := range l.Items {
			out = append(out, s.Tenant+"/"+s.ID)
		}
		return strings.Join(out, ",")
	}
	if code, l, _ := list(keyA, ""); code != 200 || ids(l) != "a/"+sa.ID {
		t.Errorf("tenant a's own list: %d %s", code, ids(l))
	}
	if code, _, body := list(keyA, "?tenant=b"); code != http.StatusForbidden || !strings.Contains(body, "admin_required") {
		t.Errorf("tenant a listing b: %d %s", code, body)
	}
	if code, l, _ := list(keyAdmin, "?tenant=b"); code != 200 || ids(l) != "b/"+sbB.ID {
		t.Errorf("admin listing b: %d %s", code, ids(l))
	}
	code, l, _ := list(keyAdmin, "?tenant=*")
	if got := ids(l); code != 200 || !strings.Contains(got, "a/"+sa.ID) || !strings.Contains(got, "b/"+sbB.ID) {
		t.Errorf("admin listing every tenant: %d %s", code, got)
	}
}

// TestAdminActsForTenant: an admin key with X-Genesis-Tenant sees and
// operates a tenant's sandbox as the tenant's key would (get, renew,
// delete), the audit names the admin's key; a tenant's key sending the
// header is refused (403 admin_required) and an unknown tenant is 404.
func TestAdminActsForTenant(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	sb, _ := a.createHTTP(keyB, client.CreateSandboxRequest{})
	as := func(tenant string) map[string]string { return map[string]string{"X-Genesis-Tenant": tenant} }
	if resp, _ := a.do(req{method: "GET", path: "/v1/sandboxes/" + sb.ID, key: keyAdmin}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("admin without the header: %d, want 404 (its own tenant has no such sandbox)", resp.StatusCode)
	}
	if resp, body := a.do(req{method: "GET", path: "/v1/sandboxes/" + sb.ID, key: keyAdmin, header: as("b")}); resp.StatusCode != 200 || !strings.Contains(string(body), sb.ID) {
		t.Errorf("admin acting for b: %d %s", resp.StatusCode, body)
	}
	if resp, body := a.do(req{method: "GET", path: "/v1/whoami", key: keyAdmin, header: as("b")}); resp.StatusCode != 200 || !strings.Contains(string(body), `"tenant":"b"`) {
		t.Errorf("whoami acting for b: %d %s", resp.StatusCode, body)
	}
	if resp, body := a.do(req{method: "GET", path: "/v1/sandboxes/" + sb.ID, key: keyA, header: as("b")}); resp.StatusCode != http.StatusForbidden || problemCode(t, body) != "admin_required" {
		t.Errorf("tenant a acting for b: %d %s, want 403 admin_required", resp.StatusCode, body)
	}
	if resp, _ := a.do(req{method: "GET", path: "/v1/sandboxes/" + sb.ID, key: keyAdmin, header: as("nobody")}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("admin acting for an unknown tenant: %d, want 404", resp.StatusCode)
	}
	if resp, body := a.do(req{method: "DELETE", path: "/v1/sandboxes/" + sb.ID, key: keyAdmin, header: as("b")}); resp.StatusCode/100 != 2 {
		t.Errorf("admin deleting b's sandbox: %d %s", resp.StatusCode, body)
	}
	resp, body := a.do(req{method: "GET", path: "/v1/audit?tenant=b", key: keyAdmin})
	if resp.StatusCode != 200 || !strings.Contains(string(body), "DELETE /v1/sandboxes/{id}") {
		t.Fatalf("audit of b: %d %s", resp.StatusCode, body)
	}
	// The delete's actor is the admin's key, not b's.
	recs := decodeJSON[client.AuditPage](t, body)
	actors := map[string]string{}
	for _, r := range recs.Items {
		actors[r.Action] = r.Actor
	}
	if d, c := actors["DELETE /v1/sandboxes/{id}"], actors["POST /v1/sandboxes"]; d == "" || d == c {
		t.Errorf("the delete's actor %q, the create's (b's key) %q: want the admin's key", d, c)
	}
}

// TestListSandboxJobs: a sandbox's jobs newest first, filtered by state and
// cut by limit; bad filters are 400 and another tenant's sandbox 404.
func TestListSandboxJobs(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	sb, _ := a.createHTTP(keyA, client.CreateSandboxRequest{})
	p := "/v1/sandboxes/" + sb.ID
	var ids []string
	for _, cmd := range []string{`["true"]`, `["false"]`} {
		resp, body := a.do(req{method: "POST", path: p + "/exec", key: keyA, body: `{"command":` + cmd + `}`})
		if resp.StatusCode != 200 {
			t.Fatalf("exec: %d %s", resp.StatusCode, body)
		}
		ids = append(ids, decodeJSON[client.ExecResult](t, body).JobID)
	}
	list := func(key, q string) (int, []string, string) {
		resp, body := a.do(req{method: "GET", path: p + "/jobs" + q, key: key})
		var out []string
		if resp.StatusCode == 200 {
			for _, j := range decodeJSON[client.JobList](t, body).Items {
				out = append(out, j.ID)
			}
		}
		return resp.StatusCode, out, string(body)
	}
	if code, got, body := list(keyA, ""); code != 200 || len(got) != 2 || got[0] != ids[1] || got[1] != ids[0] {
		t.Errorf("jobs: %d %v (%s), want newest first %v", code, got, body, []string{ids[1], ids[0]})
	}
	if code, got, _ := list(keyA, "?limit=1"); code != 200 || len(got) != 1 || got[0] != ids[1] {
		t.Errorf("limit 1: %d %v", code, got)
	}
	if code, got, _ := list(keyA, "?state=succeeded"); code != 200 || len(got) != 1 || got[0] != ids[0] {
		t.Errorf("succeeded: %d %v", code, got)
	}
	for _, q := range []string{"?limit=0x", "?limit=501", "?state=happy"} {
		if code, _, body := list(keyA, q); code != 400 {
			t.Errorf("%s: %d %s, want 400", q, code, body)
		}
	}
	if code, _, _ := list(keyB, ""); code != 404 {
		t.Errorf("another tenant: %d, want 404", code)
	}
}
