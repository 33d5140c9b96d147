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
