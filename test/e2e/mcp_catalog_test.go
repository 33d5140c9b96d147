package e2e

import (
	"strings"
	"testing"
)

type catalogEntry struct {
	Name   string `json:"name"`
	Source string `json:"source"`
	Owner  string `json:"owner"`
}

// TestMCPTenantCatalog: a tenant adds its own catalog entry through the API
// and starts an instance from it by name, placed by the same risk rule
// (registry → medium → runsc) with the entry's tool rules; the entry is the
// tenant's alone, survives a restart, cannot claim the operator's word
// (builtin, verified, env_secrets, an operator entry's name), and deleting
// it leaves a running instance alone.
func TestMCPTenantCatalog(t *testing.T) {
	t.Parallel()
	const otherKey = "other-key-0123456789"
	e := newEnv(t, "tenants: {other: {api_keys: ["+otherKey+"]}}\n")
	e.requireImage(t, "tool-node")
	svc := e.start(t)
	command := []string{"node", "/opt/genesis/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js", "stdio"}
	entry := map[string]any{"name": "my-everything", "source": "registry", "profile": "tool-node", "command": command,
		"tools": map[string]any{"deny": []string{"echo"}}}

	var added catalogEntry
	if code, body := apiJSON(t, svc, "POST", "/v1/mcp/catalog", entry, &added); code != 201 || added.Owner != "tenant" || added.Source != "registry" {
		t.Fatalf("add: %d %s", code, body)
	}
	for _, bad := range []struct {
		change map[string]any
		status int
		code   string
	}{
		{map[string]any{}, 409, "catalog_entry_exists"},
		{map[string]any{"name": "everything"}, 409, "catalog_entry_exists"},
		{map[string]any{"name": "mine-2", "source": "verified"}, 403, "catalog_source_not_allowed"},
		{map[string]any{"name": "mine-2", "source": "builtin"}, 403, "catalog_source_not_allowed"},
		{map[string]any{"name": "mine-2", "permissions": map[string]any{"env_secrets": []string{"X=y"}}}, 403, "env_secrets_catalog_only"},
		{map[string]any{"name": "mine-2", "pins": []map[string]string{{"tool": "echo", "hash": "sha256:00"}}}, 400, ""},
		{map[string]any{"name": "Bad Name"}, 400, ""},
		{map[string]any{"name": "mine-2", "command": []string{}}, 400, ""},
		{map[string]any{"name": "mine-2", "owner": "operator"}, 400, ""},
	} {
		req := map[string]any{}
		for k, v := range entry {
			req[k] = v
		}
		for k, v := range bad.change {
			req[k] = v
		}
		code, body := apiJSON(t, svc, "POST", "/v1/mcp/catalog", req, nil)
		if code != bad.status || !strings.Contains(body, bad.code) {
			t.Errorf("add %v: %d %s, want %d %s", bad.change, code, body, bad.status, bad.code)
		}
	}
	if code, body := apiJSON(t, svc, "DELETE", "/v1/mcp/catalog/everything", nil, nil); code != 403 || !strings.Contains(body, "catalog_entry_operator") {
		t.Errorf("delete an operator entry: %d %s", code, body)
	}
	names := func(key string) map[string]string {
		t.Helper()
		var list struct {
			Items []catalogEntry `json:"items"`
		}
		if code, body := apiJSONAs(t, svc, key, "GET", "/v1/mcp/catalog", nil, &list); code != 200 {
			t.Fatalf("list: %d %s", code, body)
		}
		out := map[string]string{}
		for _, it := range list.Items {
			out[it.Name] = it.Owner
		}
		return out
	}
	if got := names(e.apiKey); got["my-everything"] != "tenant" || got["everything"] != "operator" || len(got) != 2 {
		t.Errorf("the tenant's catalog: %v", got)
	}
	if got := names(otherKey); got["my-everything"] != "" || got["everything"] != "operator" {
		t.Errorf("another tenant's catalog: %v", got)
	}
	if code, body := apiJSONAs(t, svc, otherKey, "POST", "/v1/mcp/servers", map[string]any{"catalog": "my-everything"}, nil); code != 404 || !strings.Contains(body, "catalog_entry_not_found") {
		t.Errorf("another tenant names the entry: %d %s", code, body)
	}
	if code, _ := apiJSONAs(t, svc, otherKey, "DELETE", "/v1/mcp/catalog/my-everything", nil, nil); code != 404 {
		t.Errorf("another tenant deletes the entry: %d", code)
	}

	// It survives a restart of the service.
	svc.stop(t)
	svc = e.start(t)
	if got := names(e.apiKey); got["my-everything"] != "tenant" {
		t.Fatalf("after a restart: %v", got)
	}

	var s mcpServer
	if code, body := apiJSON(t, svc, "POST", "/v1/mcp/servers", map[string]any{"catalog": "my-everything"}, &s); code != 201 {
		t.Fatalf("create from the tenant's entry: %d %s", code, body)
	}
	t.Cleanup(func() { apiJSON(t, svc, "DELETE", "/v1/mcp/servers/"+s.ID, nil, nil) })
	if s.Decision.Source != "registry" || s.Decision.Risk != "medium" || s.Runtime != "runsc" || s.Network != "none" {
		t.Errorf("instance %+v: want registry → medium → runsc, no network", s)
	}
	var tools struct {
		Items []struct {
			Name string `json:"name"`
		} `json:"items"`
	}
	if code, body := apiJSON(t, svc, "GET", "/v1/mcp/servers/"+s.ID+"/tools", nil, &tools); code != 200 || len(tools.Items) == 0 {
		t.Fatalf("tools: %d %s", code, body)
	}
	for _, tl := range tools.Items {
		if tl.Name == "echo" {
			t.Errorf("the entry denies echo, and it is listed")
		}
	}

	if code, body := apiJSON(t, svc, "DELETE", "/v1/mcp/catalog/my-everything", nil, nil); code != 204 {
		t.Fatalf("delete: %d %s", code, body)
	}
	var after mcpServer
	if code, body := apiJSON(t, svc, "GET", "/v1/mcp/servers/"+s.ID, nil, &after); code != 200 || after.State != "ready" {
		t.Errorf("the instance after its entry is gone: %d %s", code, body)
	}
	if code, body := apiJSON(t, svc, "POST", "/v1/mcp/servers", map[string]any{"catalog": "my-everything"}, nil); code != 404 {
		t.Errorf("create from a deleted entry: %d %s", code, body)
	}
}
