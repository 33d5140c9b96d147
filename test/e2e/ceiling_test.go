package e2e

import (
	"strings"
	"testing"
)

// TestToolRiskCeiling: a tenant's max_tool_risk_level, from the config or
// set through the admin API, refuses MCP servers and skill runs above it
// (403 risk_above_ceiling, naming the tenant's ceiling) before anything
// starts, and never relabels them; a tenant ceiling above the operator's
// does not raise it, and removing it lets the same request through.
func TestToolRiskCeiling(t *testing.T) {
	t.Parallel()
	const cappedKey = "capped-key-0123456789"
	const adminKey = "admin-key-0123456789"
	e := newEnv(t, "admin_api_key: "+adminKey+"\nmcp: {max_risk_level: medium}\n"+
		"tenants: {capped: {max_tool_risk_level: trusted, api_keys: ["+cappedKey+"]}}\n")
	e.requireImage(t, "tool-node")
	svc := e.start(t)

	refused := func(t *testing.T, key string) {
		t.Helper()
		code, body := apiJSONAs(t, svc, key, "POST", "/v1/mcp/servers", map[string]any{"catalog": "everything"}, nil)
		if code != 403 || !strings.Contains(body, "risk_above_ceiling") || !strings.Contains(body, "max_tool_risk_level") {
			t.Errorf("everything (risk low) under a tenant ceiling trusted: %d %s", code, body)
		}
		var list struct {
			Items []mcpServer `json:"items"`
		}
		if code, body := apiJSONAs(t, svc, key, "GET", "/v1/mcp/servers", nil, &list); code != 200 || len(list.Items) != 0 {
			t.Errorf("a refused create left instances: %d %s", code, body)
		}
	}
	refused(t, cappedKey)
	if code, body := pushSkillAs(t, svc, cappedKey, skillArchive(t, reportSkill), "application/gzip", nil); code != 201 {
		t.Fatalf("push: %d %s", code, body)
	}
	code, body := apiJSONAs(t, svc, cappedKey, "POST", "/v1/skills/csv-report/runs", map[string]any{"script": "scripts/report.py"}, nil)
	if code != 403 || !strings.Contains(body, "risk_above_ceiling") || !strings.Contains(body, "tenant capped's max_tool_risk_level") {
		t.Errorf("a skill run (risk medium) under a tenant ceiling trusted: %d %s", code, body)
	}

	// Through the admin API: a ceiling above the operator's (medium) is
	// accepted but does not raise it; one below refuses, and "" removes it.
	var tn struct {
		MaxToolRiskLevel string `json:"max_tool_risk_level"`
	}
	if code, body := apiJSONAs(t, svc, adminKey, "POST", "/v1/tenants", map[string]any{"name": "api-capped", "max_tool_risk_level": "trusted"}, &tn); code != 201 || tn.MaxToolRiskLevel != "trusted" {
		t.Fatalf("create tenant: %d %s", code, body)
	}
	if code, body := apiJSONAs(t, svc, adminKey, "POST", "/v1/tenants", map[string]any{"name": "bad", "max_tool_risk_level": "meh"}, nil); code != 400 {
		t.Errorf("an unknown level: %d %s", code, body)
	}
	var key struct {
		Key string `json:"key"`
	}
	if code, body := apiJSONAs(t, svc, adminKey, "POST", "/v1/tenants/api-capped/keys", map[string]any{}, &key); code != 201 || key.Key == "" {
		t.Fatalf("create key: %d %s", code, body)
	}
	refused(t, key.Key)
	patch := func(level string) {
		t.Helper()
		var got struct {
			MaxToolRiskLevel string `json:"max_tool_risk_level"`
		}
		if code, body := apiJSONAs(t, svc, adminKey, "PATCH", "/v1/tenants/api-capped", map[string]any{"max_tool_risk_level": level}, &got); code != 200 || got.MaxToolRiskLevel != level {
			t.Fatalf("patch %q: %d %s", level, code, body)
		}
	}
	patch("")
	var s mcpServer
	if code, body := apiJSONAs(t, svc, key.Key, "POST", "/v1/mcp/servers", map[string]any{"catalog": "everything", "runtime": "runsc"}, &s); code != 201 {
		t.Fatalf("without a tenant ceiling: %d %s", code, body)
	}
	apiJSONAs(t, svc, key.Key, "DELETE", "/v1/mcp/servers/"+s.ID, nil, nil)
	if s.Decision.Ceiling != "medium" || s.Decision.CeilingFrom != "operator" {
		t.Errorf("decision %+v: want the operator's ceiling medium", s.Decision)
	}
	// An ad-hoc spec is risk high: above the operator's medium whatever the
	// tenant's own ceiling says.
	patch("untrusted")
	code, body = apiJSONAs(t, svc, key.Key, "POST", "/v1/mcp/servers", map[string]any{"spec": map[string]any{"command": []string{"true"}}}, nil)
	if code != 403 || !strings.Contains(body, "above the ceiling medium") || strings.Contains(body, "max_tool_risk_level") {
		t.Errorf("a tenant ceiling untrusted and an ad-hoc spec (high) under the operator's medium: %d %s", code, body)
	}
}
