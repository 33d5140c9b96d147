package main

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

const tenantJSON = `{"name":"acme","weight":1,"admin":false,"quotas":{"max_sandboxes":2,"max_cpu":0,"max_memory_mb":0,"max_leases":0,"max_volumes":0,"max_volume_mb":2048},
"source":"api","usage":{"sandboxes":1,"cpu":0.5,"memory_mb":256,"leases":0,"volumes":2,"volume_mb":1536},"resource_version":"3","created_at":"2026-03-01T11:00:00Z","updated_at":"2026-03-01T11:00:00Z"}`

func TestTenantCommands(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, b []byte) {
		switch r.Method + " " + r.URL.Path {
		case "POST /v1/tenants":
			reply(201, tenantJSON)(w, r, b)
		case "GET /v1/tenants":
			reply(200, `{"items":[`+tenantJSON+`]}`)(w, r, b)
		case "GET /v1/tenants/acme", "PATCH /v1/tenants/acme":
			reply(200, tenantJSON)(w, r, b)
		case "POST /v1/tenants/acme/keys":
			reply(201, `{"id":"key_1","tenant":"acme","prefix":"gsk_01234567","created_at":"2026-03-01T11:00:00Z","key":"gsk_secret"}`)(w, r, b)
		case "DELETE /v1/tenants/acme/keys/key_1", "DELETE /v1/tenants/acme":
			w.WriteHeader(http.StatusNoContent)
		default:
			problem(404, "not_found", "no "+r.URL.Path)(w, r, b)
		}
	})
	r := cli(t, api.URL, "", nil, "tenant", "create", "acme", "--max-sandboxes", "2", "--weight", "3", "--max-volume-mb", "2048")
	if r.code != 0 || r.stdout != "acme\n" {
		t.Fatalf("create: %d %q %q", r.code, r.stdout, r.stderr)
	}
	jsonEqual(t, api.requests()[0].Body, `{"name":"acme","weight":3,"quotas":{"max_sandboxes":2,"max_cpu":0,"max_memory_mb":0,"max_leases":0,"max_volumes":0,"max_volume_mb":2048}}`)

	// The list shows usage against each quota.
	r = cli(t, api.URL, "", nil, "tenant", "ls")
	if f := strings.Fields(strings.Split(r.stdout, "\n")[1]); r.code != 0 || len(f) != 10 || f[4] != "1/2" || f[5] != "0.5/-" || f[6] != "256/-" || f[7] != "0/-" ||
		f[8] != "2/-" || f[9] != "1536/2048" {
		t.Errorf("ls: %d %q %q", r.code, r.stdout, r.stderr)
	}

	r = cli(t, api.URL, "", nil, "tenant", "quota", "acme", "--max-cpu", "4")
	reqs := api.requests()
	jsonEqual(t, reqs[len(reqs)-2].Body, `{"quotas":{"max_cpu":4}}`)
	for _, want := range []string{"Sandboxes:", "1 of 2", "CPU:", "0.5 of unlimited", "Volumes:", "2 of the service's limit", "Volume MB:", "1536 of 2048"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("quota output lacks %q:\n%s", want, r.stdout)
		}
	}
	r = cli(t, api.URL, "", nil, "tenant", "quota", "acme", "--max-volumes", "5", "--max-volume-mb", "0")
	reqs = api.requests()
	jsonEqual(t, reqs[len(reqs)-2].Body, `{"quotas":{"max_volumes":5,"max_volume_mb":0}}`)
	if r := cli(t, api.URL, "", nil, "tenant", "quota", "acme", "--max-leases", "-1"); r.code != 2 {
		t.Errorf("negative quota: exit %d, want usage error 2", r.code)
	}

	r = cli(t, api.URL, "", nil, "tenant", "key", "create", "acme")
	if r.code != 0 || r.stdout != "gsk_secret\n" || !strings.Contains(r.stderr, "not shown again") {
		t.Errorf("key create: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = cli(t, api.URL, "", nil, "tenant", "key", "create", "acme", "--scope", "approve", "--description", "reviewer")
	reqs = api.requests()
	if r.code != 0 {
		t.Errorf("key create --scope: %d %q", r.code, r.stderr)
	}
	jsonEqual(t, reqs[len(reqs)-1].Body, `{"description":"reviewer","scopes":["approve"]}`)
	if r := cli(t, api.URL, "", nil, "tenant", "key", "revoke", "acme", "key_1"); r.code != 0 {
		t.Errorf("revoke: %d %q", r.code, r.stderr)
	}
	if r := cli(t, api.URL, "", nil, "tenant", "rm", "nobody"); r.code != 1 || !strings.Contains(r.stderr, "not_found") {
		t.Errorf("rm unknown: %d %q", r.code, r.stderr)
	}
}

func TestAuditCommand(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, b []byte) {
		switch r.URL.Query().Get("cursor") {
		case "":
			reply(200, `{"items":[{"seq":1,"time":"2026-03-01T11:00:00Z","actor":"key_1","tenant":"a","action":"POST /v1/sandboxes","target":"sbx_1","status":201}],"next_cursor":"1","has_more":true}`)(w, r, b)
		default:
			reply(200, `{"items":[],"next_cursor":"1","has_more":false}`)(w, r, b)
		}
	})
	r := cli(t, api.URL, "", nil, "audit", "--action", "POST /v1/sandboxes", "--result", "4xx", "--limit", "1")
	if r.code != 0 || !strings.Contains(r.stdout, "POST /v1/sandboxes") || !strings.Contains(r.stdout, "sbx_1") || !strings.Contains(r.stderr, "older records: --cursor 1") {
		t.Fatalf("audit: %d %q %q", r.code, r.stdout, r.stderr)
	}
	q := api.requests()[0].Query
	if q["action"][0] != "POST /v1/sandboxes" || q["result"][0] != "4xx" || q["limit"][0] != "1" || url.Values(q).Get("order") != "newest" {
		t.Errorf("query %v; want the filters and order=newest", q)
	}
	// --oldest pages from the oldest record, as the API does by default.
	r = cli(t, api.URL, "", nil, "audit", "--oldest", "--limit", "1")
	if q := api.requests()[1].Query; r.code != 0 || url.Values(q).Get("order") != "" || !strings.Contains(r.stderr, "more records: --oldest --cursor 1") {
		t.Errorf("--oldest: query %v, stderr %q", q, r.stderr)
	}
	if r := cli(t, api.URL, "", nil, "audit", "--since", "yesterday"); r.code != 2 {
		t.Errorf("bad --since: exit %d", r.code)
	}
}
