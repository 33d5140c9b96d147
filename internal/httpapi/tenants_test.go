package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"genesis.dev/sandbox/internal/controltest"

	"genesis.dev/sandbox/client"
)

// problemCode returns the code of a problem answer.
func problemCode(t *testing.T, b []byte) string {
	t.Helper()
	return decodeJSON[client.Problem](t, b).Code
}

func TestAdminRoutesRefuseTenantKeys(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	for _, r := range a.srv.Routes() {
		if !strings.HasPrefix(r.Pattern, "/v1/tenants") {
			continue
		}
		path := strings.NewReplacer("{name}", "a", "{key_id}", "key_x").Replace(r.Pattern)
		resp, body := a.do(req{method: r.Method, path: path, key: keyA, body: `{"name":"zz"}`})
		if resp.StatusCode != http.StatusForbidden || problemCode(t, body) != "admin_required" {
			t.Errorf("%s %s with a tenant key: %d %s, want 403 admin_required", r.Method, path, resp.StatusCode, body)
		}
	}
	if resp, body := a.do(req{method: "GET", path: "/v1/tenants", key: keyAdmin}); resp.StatusCode != http.StatusOK {
		t.Fatalf("admin list: %d %s", resp.StatusCode, body)
	}
}

func TestTenantsAndKeys(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	admin := func(method, path, body string, hdr ...string) (*http.Response, []byte) {
		r := req{method: method, path: path, key: keyAdmin, body: body}
		if len(hdr) == 2 {
			r.header = map[string]string{hdr[0]: hdr[1]}
		}
		return a.do(r)
	}
	resp, body := admin("POST", "/v1/tenants", `{"name":"acme","weight":3,"quotas":{"max_sandboxes":1,"max_cpu":0,"max_memory_mb":0,"max_leases":0}}`)
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Location") != "/v1/tenants/acme" {
		t.Fatalf("create tenant: %d %s", resp.StatusCode, body)
	}
	tn := decodeJSON[client.Tenant](t, body)
	if tn.Source != "api" || tn.Weight != 3 || tn.Quotas.MaxSandboxes != 1 || resp.Header.Get("ETag") != `"1"` {
		t.Fatalf("tenant %+v etag %s", tn, resp.Header.Get("ETag"))
	}
	for _, bad := range []struct{ body, code string }{
		{`{"name":"acme"}`, "tenant_exists"},
		{`{"name":"Bad Name"}`, "invalid_argument"},
		{`{"name":"q","quotas":{"max_sandboxes":-1,"max_cpu":0,"max_memory_mb":0,"max_leases":0}}`, "invalid_argument"},
		{`{"name":"q","bogus":1}`, "invalid_argument"},
	} {
		if resp, body := admin("POST", "/v1/tenants", bad.body); resp.StatusCode/100 != 4 || problemCode(t, body) != bad.code {
			t.Errorf("create %s: %d %s, want code %s", bad.body, resp.StatusCode, body, bad.code)
		}
	}

	resp, body = admin("POST", "/v1/tenants/acme/keys", `{"description":"ci"}`)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create key: %d %s", resp.StatusCode, body)
	}
	k := decodeJSON[client.APIKey](t, body)
	if !regexp.MustCompile(`^gsk_[0-9a-f]{64}$`).MatchString(k.Key) || !strings.HasPrefix(k.Key, k.Prefix) || k.Tenant != "acme" {
		t.Fatalf("key %+v", k)
	}
	resp, body = admin("GET", "/v1/tenants/acme/keys", "")
	if resp.StatusCode != http.StatusOK || strings.Contains(string(body), k.Key) || !strings.Contains(string(body), k.ID) {
		t.Fatalf("key list shows the secret or lacks the key: %s", body)
	}

	// The new key works as tenant acme, whose quota allows one sandbox.
	sb, _ := a.createHTTP(k.Key, client.CreateSandboxRequest{})
	if rec := a.Record(sb.ID); rec.Tenant != "acme" {
		t.Fatalf("sandbox of tenant %q, want acme", rec.Tenant)
	}
	resp, body = a.do(req{method: "POST", path: "/v1/sandboxes", key: k.Key, body: `{"profile":"` + controltest.Profile + `"}`})
	if resp.StatusCode != http.StatusTooManyRequests || problemCode(t, body) != "quota_exceeded" || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("second sandbox over quota: %d %s (Retry-After %q)", resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}
	resp, body = admin("GET", "/v1/tenants/acme", "")
	if u := decodeJSON[client.Tenant](t, body).Usage; resp.StatusCode != http.StatusOK || u == nil || u.Sandboxes != 1 || u.MemoryMB != 256 {
		t.Fatalf("usage: %d %s", resp.StatusCode, body)
	}
	// The list carries every tenant's usage too (the console's tenants view).
	resp, body = admin("GET", "/v1/tenants", "")
	usage := map[string]*client.Usage{}
	for _, tn := range decodeJSON[client.TenantList](t, body).Items {
		usage[tn.Name] = tn.Usage
	}
	if u := usage["acme"]; resp.StatusCode != http.StatusOK || u == nil || u.Sandboxes != 1 || u.MemoryMB != 256 || usage["a"] == nil || usage["a"].Sandboxes != 0 {
		t.Fatalf("usage in the list: %d %s", resp.StatusCode, body)
	}
	// Raising the quota lets the next create through; a stale If-Match is 412.
	if resp, body := admin("PATCH", "/v1/tenants/acme", `{"quotas":{"max_sandboxes":2}}`, "If-Match", `"1"`); resp.StatusCode != http.StatusOK {
		t.Fatalf("patch: %d %s", resp.StatusCode, body)
	}
	if resp, _ := admin("PATCH", "/v1/tenants/acme", `{"weight":1}`, "If-Match", `"1"`); resp.StatusCode != http.StatusPreconditionFailed {
		t.Fatalf("stale patch: %d", resp.StatusCode)
	}
	sb2, _ := a.createHTTP(k.Key, client.CreateSandboxRequest{})

	// Config tenants change only in the config; busy tenants are not deleted.
	if resp, body := admin("PATCH", "/v1/tenants/a", `{"weight":2}`); resp.StatusCode != http.StatusConflict || problemCode(t, body) != "tenant_in_config" {
		t.Fatalf("patch config tenant: %d %s", resp.StatusCode, body)
	}
	if resp, body := admin("DELETE", "/v1/tenants/acme", ""); resp.StatusCode != http.StatusConflict || problemCode(t, body) != "tenant_in_use" {
		t.Fatalf("delete busy tenant: %d %s", resp.StatusCode, body)
	}

	// Revocation takes effect on the next request.
	if resp, body := admin("DELETE", "/v1/tenants/acme/keys/"+k.ID, ""); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", resp.StatusCode, body)
	}
	if resp, body := a.do(req{method: "GET", path: "/v1/sandboxes", key: k.Key}); resp.StatusCode != http.StatusUnauthorized || problemCode(t, body) != "unauthenticated" {
		t.Fatalf("revoked key: %d %s", resp.StatusCode, body)
	}
	if resp, _ := admin("DELETE", "/v1/tenants/acme/keys/"+k.ID, ""); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("second revoke: %d", resp.StatusCode)
	}
	if resp, body := admin("DELETE", "/v1/tenants/a/keys/"+k.ID, ""); resp.StatusCode != http.StatusNotFound || problemCode(t, body) != "key_not_found" {
		t.Fatalf("revoke through another tenant: %d %s", resp.StatusCode, body)
	}

	for _, id := range []string{sb.ID, sb2.ID} {
		if err := a.Svc.DeleteSandbox(t.Context(), "acme", id); err != nil {
			t.Fatal(err)
		}
	}
	if resp, body := admin("DELETE", "/v1/tenants/acme", ""); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete tenant: %d %s", resp.StatusCode, body)
	}
	if resp, body := admin("GET", "/v1/tenants/acme", ""); resp.StatusCode != http.StatusNotFound || problemCode(t, body) != "tenant_not_found" {
		t.Fatalf("deleted tenant: %d %s", resp.StatusCode, body)
	}
}

// TestQuotaConcurrentCreates sends many creates at once for a tenant whose
// quota allows two sandboxes (and 1 CPU): exactly two succeed, the rest are
// 429 quota_exceeded with Retry-After, and two records exist.
func TestQuotaConcurrentCreates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		quotas string
	}{
		{"max_sandboxes", `{"max_sandboxes":2,"max_cpu":0,"max_memory_mb":0,"max_leases":0}`},
		{"max_cpu", `{"max_sandboxes":0,"max_cpu":1,"max_memory_mb":0,"max_leases":0}`},         // 0.5 CPU each
		{"max_memory_mb", `{"max_sandboxes":0,"max_cpu":0,"max_memory_mb":600,"max_leases":0}`}, // 256 MB each
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := newAPI(t, nil)
			resp, body := a.do(req{method: "POST", path: "/v1/tenants", key: keyAdmin, body: `{"name":"q","quotas":` + tc.quotas + `}`})
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("create tenant: %d %s", resp.StatusCode, body)
			}
			resp, body = a.do(req{method: "POST", path: "/v1/tenants/q/keys", key: keyAdmin})
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("create key: %d %s", resp.StatusCode, body)
			}
			key := decodeJSON[client.APIKey](t, body).Key
			const n = 8
			statuses := make([]int, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					resp, body := a.do(req{method: "POST", path: "/v1/sandboxes", key: key, body: `{"profile":"` + controltest.Profile + `"}`})
					statuses[i] = resp.StatusCode
					if resp.StatusCode == http.StatusTooManyRequests {
						if problemCode(t, body) != "quota_exceeded" || resp.Header.Get("Retry-After") == "" {
							t.Errorf("429 without quota_exceeded or Retry-After: %s", body)
						}
					} else if resp.StatusCode != http.StatusCreated {
						t.Errorf("create: %d %s", resp.StatusCode, body)
					}
				})
			}
			wg.Wait()
			created := 0
			for _, st := range statuses {
				if st == http.StatusCreated {
					created++
				}
			}
			live := 0
			for _, r := range a.Records() {
				if r.Tenant == "q" {
					live++
				}
			}
			if created != 2 || live != 2 {
				t.Fatalf("%d creates succeeded and %d records exist, want 2 and 2 (statuses %v)", created, live, statuses)
			}
		})
	}
}

// auditPage reads one page of GET /v1/audit with key.
func (a *api) auditPage(key, query string) client.AuditPage {
	a.T.Helper()
	resp, body := a.do(req{method: "GET", path: "/v1/audit?" + query, key: key})
	if resp.StatusCode != http.StatusOK {
		a.T.Fatalf("audit %s: %d %s", query, resp.StatusCode, body)
	}
	return decodeJSON[client.AuditPage](a.T, body)
}

// TestAuditEveryMutatingRoute calls every served POST, PUT, PATCH and
// DELETE route (with ids that do not exist, so nothing changes) and checks
// that each call adds exactly one record naming the route, the caller, the
// target and the result; then that an unauthenticated call is recorded too.
func TestAuditEveryMutatingRoute(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	cursor := a.auditPage(keyAdmin, "").NextCursor
	n := 0
	for _, r := range a.srv.Routes() {
		if r.Method == "GET" || r.Unaudited {
			continue
		}
		key := keyA
		if strings.HasPrefix(r.Pattern, "/v1/tenants") {
			key = keyAdmin
		}
		path := strings.NewReplacer("{id}", "sbx_nothere0000000000", "{name}", "nobody", "{key_id}", "key_nothere").Replace(r.Pattern)
		rid := fmt.Sprintf("audit-%d", n)
		resp, body := a.do(req{method: r.Method, path: path + "?path=x", key: key, body: `{}`, header: map[string]string{"X-Request-ID": rid}})
		n++
		page := a.auditPage(keyAdmin, "cursor="+cursor)
		if len(page.Items) != 1 {
			t.Errorf("%s %s: %d audit records, want 1: %+v", r.Method, r.Pattern, len(page.Items), page.Items)
			cursor = page.NextCursor
			continue
		}
		cursor = page.NextCursor
		rec := page.Items[0]
		wantTenant := "a"
		if key == keyAdmin {
			wantTenant = "admin"
		}
		var p client.Problem
		_ = json.Unmarshal(body, &p)
		if rec.Action != r.Method+" "+r.Pattern || rec.Tenant != wantTenant || !strings.HasPrefix(rec.Actor, "cfgkey_") ||
			rec.Status != resp.StatusCode || rec.Code != p.Code || rec.RequestID != rid || rec.Remote == "" ||
			(strings.Contains(r.Pattern, "{") && rec.Target == "") {
			t.Errorf("%s %s (answer %d %s): record %+v", r.Method, r.Pattern, resp.StatusCode, p.Code, rec)
		}
	}
	if n < 10 {
		t.Fatalf("only %d mutating routes", n)
	}
	resp, _ := a.do(req{method: "DELETE", path: "/v1/sandboxes/sbx_x", key: "wrong-key-0123456789"})
	page := a.auditPage(keyAdmin, "cursor="+cursor)
	if resp.StatusCode != http.StatusUnauthorized || len(page.Items) != 1 || page.Items[0].Actor != "anonymous" ||
		page.Items[0].Tenant != "" || page.Items[0].Status != 401 || page.Items[0].Code != "unauthenticated" || page.Items[0].Target != "sbx_x" {
		t.Fatalf("unauthenticated call: %d, records %+v", resp.StatusCode, page.Items)
	}
	// Tenant b sees none of tenant a's records and cannot ask for them.
	if p := a.auditPage(keyB, ""); len(p.Items) != 0 {
		t.Errorf("tenant b sees %d records", len(p.Items))
	}
	if resp, body := a.do(req{method: "GET", path: "/v1/audit?tenant=a", key: keyB}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("tenant b asking for a's records: %d %s", resp.StatusCode, body)
	}
	if p := a.auditPage(keyA, "limit=1000"); len(p.Items) == 0 || p.Items[0].Tenant != "a" {
		t.Errorf("tenant a sees %+v", p.Items)
	}
}

// TestAuditPaging pages through the log in small pages while calls keep
// being recorded: every record is seen exactly once, in seq order.
func TestAuditPaging(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	const calls = 40
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range calls {
			a.do(req{method: "DELETE", path: "/v1/sandboxes/sbx_" + strconv.Itoa(i), key: keyA})
		}
	})
	seen := map[int64]bool{}
	var last int64
	cursor := ""
	read := func() int {
		p := a.auditPage(keyA, "limit=3&cursor="+cursor)
		for _, r := range p.Items {
			if seen[r.Seq] || r.Seq <= last {
				t.Fatalf("record %d seen twice or out of order (after %d)", r.Seq, last)
			}
			seen[r.Seq], last = true, r.Seq
		}
		cursor = p.NextCursor
		return len(p.Items)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
			read()
		}
	}
	for read() > 0 {
	}
	if len(seen) != calls {
		t.Fatalf("paged through %d records, want %d", len(seen), calls)
	}
	// Newest first: pages go back from the latest record, each cursor to
	// older ones, and cover the same records.
	var back []int64
	for cursor := ""; ; {
		p := a.auditPage(keyA, "order=newest&limit=7&cursor="+cursor)
		for _, r := range p.Items {
			if n := len(back); n > 0 && r.Seq >= back[n-1] {
				t.Fatalf("newest first: record %d after %d", r.Seq, back[n-1])
			}
			back = append(back, r.Seq)
		}
		if !p.HasMore {
			break
		}
		cursor = p.NextCursor
	}
	if len(back) != calls || back[0] != last {
		t.Errorf("newest first: %d records starting at %v, want %d starting at %d", len(back), back[:min(1, len(back))], calls, last)
	}
	for _, q := range []string{"cursor=abc", "limit=0", "limit=1001", "since=yesterday", "result=x!", "order=random"} {
		if resp, body := a.do(req{method: "GET", path: "/v1/audit?" + q, key: keyA}); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("audit ?%s: %d %s, want 400", q, resp.StatusCode, body)
		}
	}
	if p := a.auditPage(keyA, "result=404&action=DELETE&limit=1000"); len(p.Items) != calls {
		t.Errorf("filter result=404 action=DELETE: %d records, want %d", len(p.Items), calls)
	}
	if p := a.auditPage(keyA, "target=sbx_7"); len(p.Items) != 1 || p.Items[0].Target != "sbx_7" {
		t.Errorf("filter target: %+v", p.Items)
	}
}

// TestKeyScopes: a key made with the scope approve carries it (in the key
// list, in whoami, after a restart of nothing: it is stored), as does a
// config approver key; a plain key has none; unknown or repeated scopes
// are 400 invalid_scope. The MCP approval routes answer another tenant's
// or a missing instance 404 before they look at scopes.
func TestKeyScopes(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	whoami := func(key string) client.Whoami {
		t.Helper()
		resp, body := a.do(req{method: "GET", path: "/v1/whoami", key: key})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("whoami: %d %s", resp.StatusCode, body)
		}
		return decodeJSON[client.Whoami](t, body)
	}
	resp, body := a.do(req{method: "POST", path: "/v1/tenants/a/keys", key: keyAdmin, body: `{"description":"on call","scopes":["approve"]}`})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create an approver key: %d %s", resp.StatusCode, body)
	}
	k := decodeJSON[client.APIKey](t, body)
	if strings.Join(k.Scopes, ",") != "approve" {
		t.Errorf("created key %+v, want scopes [approve]", k)
	}
	if w := whoami(k.Key); w.Tenant != "a" || strings.Join(w.Scopes, ",") != "approve" {
		t.Errorf("whoami of the approver key: %+v", w)
	}
	if w := whoami(keyApproverA); w.Tenant != "a" || strings.Join(w.Scopes, ",") != "approve" {
		t.Errorf("whoami of the config approver key: %+v", w)
	}
	resp, body = a.do(req{method: "POST", path: "/v1/tenants/a/keys", key: keyAdmin, body: `{"description":"agent"}`})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("a plain key: %d %s", resp.StatusCode, body)
	}
	plain := decodeJSON[client.APIKey](t, body)
	if w := whoami(plain.Key); len(plain.Scopes) != 0 || len(w.Scopes) != 0 || len(whoami(keyA).Scopes) != 0 {
		t.Errorf("a plain key has scopes: %+v %+v", plain, w)
	}
	resp, body = a.do(req{method: "GET", path: "/v1/tenants/a/keys", key: keyAdmin})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("listing keys: %d %s", resp.StatusCode, body)
	}
	list := decodeJSON[client.APIKeyList](t, body)
	for _, it := range list.Items {
		if want := map[string]string{k.ID: "approve", plain.ID: ""}[it.ID]; strings.Join(it.Scopes, ",") != want {
			t.Errorf("listed key %s has scopes %v, want %q", it.ID, it.Scopes, want)
		}
	}
	for _, bad := range []string{`{"scopes":["root"]}`, `{"scopes":["approve","approve"]}`} {
		resp, body := a.do(req{method: "POST", path: "/v1/tenants/a/keys", key: keyAdmin, body: bad})
		checkProblem(t, resp, body, http.StatusBadRequest, "invalid_scope")
	}
	for p, b := range map[string]string{
		"/v1/mcp/servers/mcp_00000000000000000000/approvals/apr_0":   `{"decision":"approve","args_digest":"sha256:00"}`,
		"/v1/mcp/servers/mcp_00000000000000000000/pins/echo/approve": `{"hash":"sha256:00"}`,
	} {
		for _, key := range []string{keyA, keyApproverA} {
			resp, body := a.do(req{method: "POST", path: p, key: key, body: b})
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("%s with %s: %d %s, want 404", p, key, resp.StatusCode, body)
			}
		}
	}
}
