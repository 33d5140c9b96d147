package main

import (
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"genesis.dev/sandbox/client"
)

// The OpenAPI document is the contract this CLI and the client package
// speak; these tests keep it in step with the routes and the wire types.

func loadOpenAPI(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile("../../api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("api/openapi.yaml: %v", err)
	}
	return doc
}

// dig walks nested maps by keys; nil when a key is missing.
func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// resolve follows a local $ref, if v is one.
func resolve(doc map[string]any, v any) any {
	ref, ok := dig(v, "$ref").(string)
	if !ok {
		return v
	}
	parts := strings.Split(strings.TrimPrefix(ref, "#/"), "/")
	return dig(doc, parts...)
}

type apiRoute struct {
	method, path string
	statuses     []string
}

// apiRoutes is every route of the HTTP API v1 with the statuses the
// contract must list.
func apiRoutes() []apiRoute {
	return []apiRoute{
		{"get", "/healthz", []string{"200"}},
		{"get", "/readyz", []string{"200", "503"}},
		{"get", "/metrics", []string{"200"}},
		{"get", "/v1/capabilities", []string{"200", "401"}},
		{"get", "/v1/whoami", []string{"200", "401"}},
		{"get", "/v1/profiles", []string{"200", "401"}},
		{"get", "/v1/images", []string{"200", "401"}},
		{"post", "/v1/sandboxes", []string{"201", "400", "401", "404", "409", "413", "503"}},
		{"get", "/v1/sandboxes", []string{"200", "400", "401"}},
		{"get", "/v1/sandboxes/{id}", []string{"200", "401", "404"}},
		{"patch", "/v1/sandboxes/{id}", []string{"200", "400", "401", "404", "412"}},
		{"delete", "/v1/sandboxes/{id}", []string{"204", "401", "404"}},
		{"post", "/v1/sandboxes/{id}/renew", []string{"200", "400", "401", "404", "409"}},
		{"post", "/v1/sandboxes/{id}/exec", []string{"200", "202", "400", "401", "404", "409"}},
		{"get", "/v1/jobs/{id}", []string{"200", "401", "404"}},
		{"get", "/v1/sandboxes/{id}/jobs", []string{"200", "400", "401", "404"}},
		{"get", "/v1/jobs/{id}/logs", []string{"200", "400", "401", "404"}},
		{"post", "/v1/jobs/{id}/cancel", []string{"202", "401", "404", "409"}},
		{"post", "/v1/sandboxes/{id}/sessions", []string{"201", "401", "404", "409"}},
		{"get", "/v1/sessions/{id}", []string{"200", "401", "404"}},
		{"delete", "/v1/sessions/{id}", []string{"204", "401", "404"}},
		{"post", "/v1/sessions/{id}/exec", []string{"200", "400", "401", "404", "409"}},
		{"post", "/v1/sandboxes/{id}/contexts", []string{"201", "400", "401", "404", "409"}},
		{"get", "/v1/contexts/{id}", []string{"200", "401", "404"}},
		{"delete", "/v1/contexts/{id}", []string{"204", "401", "404"}},
		{"post", "/v1/contexts/{id}/run", []string{"200", "400", "401", "404", "409"}},
		{"put", "/v1/sandboxes/{id}/files", []string{"201", "400", "401", "404", "409", "413"}},
		{"post", "/v1/sandboxes/{id}/files", []string{"201", "400", "401", "404", "409", "413"}},
		{"get", "/v1/sandboxes/{id}/files", []string{"200", "206", "304", "400", "401", "404", "416"}},
		{"get", "/v1/sandboxes/{id}/files/stat", []string{"200", "400", "401", "404"}},
		{"get", "/v1/sandboxes/{id}/files/list", []string{"200", "400", "401", "404"}},
		{"post", "/v1/sandboxes/{id}/files/mkdir", []string{"200", "400", "401", "404"}},
		{"post", "/v1/sandboxes/{id}/files/move", []string{"200", "400", "401", "404"}},
		{"post", "/v1/sandboxes/{id}/files/delete", []string{"204", "400", "401", "404"}},
		{"post", "/v1/sandboxes/{id}/files/chmod", []string{"200", "400", "401", "404"}},
		{"post", "/v1/sandboxes/{id}/files/extract", []string{"200", "400", "401", "404", "409", "413"}},
		{"get", "/v1/sandboxes/{id}/files/archive", []string{"200", "400", "401", "404", "409"}},
		{"post", "/v1/sandboxes/{id}/files/search", []string{"200", "400", "401", "404"}},
		{"post", "/v1/sandboxes/{id}/files/replace", []string{"200", "400", "401", "404"}},
		{"get", "/v1/sandboxes/{id}/terminal", []string{"101", "400", "401", "404", "409"}},
		{"post", "/v1/sandboxes/{id}/terminal/tickets", []string{"201", "401", "404"}},
		{"post", "/v1/tenants", []string{"201", "400", "401", "403", "409"}},
		{"get", "/v1/tenants", []string{"200", "401", "403"}},
		{"get", "/v1/tenants/{name}", []string{"200", "401", "403", "404"}},
		{"patch", "/v1/tenants/{name}", []string{"200", "400", "401", "403", "404", "409", "412"}},
		{"delete", "/v1/tenants/{name}", []string{"204", "401", "403", "404", "409", "412"}},
		{"post", "/v1/tenants/{name}/keys", []string{"201", "400", "401", "403", "404"}},
		{"get", "/v1/tenants/{name}/keys", []string{"200", "401", "403", "404"}},
		{"delete", "/v1/tenants/{name}/keys/{key_id}", []string{"204", "401", "403", "404"}},
		{"get", "/v1/audit", []string{"200", "400", "401", "403"}},
		{"get", "/v1/jobs/{id}/artifacts", []string{"200", "401", "404"}},
		{"get", "/v1/artifacts/{id}", []string{"200", "206", "304", "401", "404", "416"}},
		{"get", "/v1/artifacts/{id}/meta", []string{"200", "401", "404"}},
		{"post", "/v1/sandboxes/{id}/pause", []string{"200", "401", "404", "409", "501"}},
		{"post", "/v1/sandboxes/{id}/resume", []string{"200", "401", "404", "409"}},
		{"post", "/v1/sandboxes/{id}/hibernate", []string{"200", "401", "404", "409", "501"}},
		{"post", "/v1/sandboxes/{id}/snapshots", []string{"201", "400", "401", "403", "404", "409", "429", "501"}},
		{"get", "/v1/sandboxes/{id}/snapshots", []string{"200", "401", "404"}},
		{"post", "/v1/sandboxes/{id}/fork", []string{"201", "400", "401", "404", "409", "501"}},
		{"post", "/v1/sandboxes/{id}/rollback", []string{"200", "400", "401", "404", "409"}},
		{"get", "/v1/sandboxes/{id}/diff", []string{"200", "400", "401", "404", "409", "413"}},
		{"post", "/v1/sandboxes/{id}/patch", []string{"200", "400", "401", "404", "409", "413"}},
		{"get", "/v1/snapshots", []string{"200", "401"}},
		{"get", "/v1/snapshots/{id}", []string{"200", "401", "404"}},
		{"delete", "/v1/snapshots/{id}", []string{"204", "401", "404", "409"}},
		{"post", "/v1/volumes", []string{"201", "400", "401", "409", "429", "501"}},
		{"get", "/v1/volumes", []string{"200", "401", "501"}},
		{"get", "/v1/volumes/{name}", []string{"200", "401", "404", "501"}},
		{"delete", "/v1/volumes/{name}", []string{"204", "401", "409", "501"}},
		{"put", "/v1/volumes/{name}/files", []string{"201", "400", "401", "404", "409", "413", "501"}},
		{"get", "/v1/volumes/{name}/files", []string{"200", "206", "400", "401", "404", "416", "501"}},
		{"get", "/v1/volumes/{name}/files/stat", []string{"200", "400", "401", "404", "501"}},
		{"get", "/v1/volumes/{name}/files/list", []string{"200", "400", "401", "404", "501"}},
		{"post", "/v1/volumes/{name}/files/delete", []string{"204", "400", "401", "404", "409", "501"}},
		{"get", "/v1/sandboxes/{id}/network", []string{"200", "401", "404"}},
		{"put", "/v1/sandboxes/{id}/network", []string{"200", "400", "401", "404", "409", "412", "503"}},
		{"get", "/v1/sandboxes/{id}/network/events", []string{"200", "400", "401", "404"}},
		{"post", "/v1/leases", []string{"201", "400", "401", "404", "409", "413", "429", "503"}},
		{"get", "/v1/leases", []string{"200", "400", "401"}},
		{"get", "/v1/leases/{id}", []string{"200", "401", "404"}},
		{"post", "/v1/leases/{id}/renew", []string{"200", "400", "401", "404", "409"}},
		{"delete", "/v1/leases/{id}", []string{"204", "401", "404", "409"}},
		{"get", "/v1/pools", []string{"200", "401"}},
		{"post", "/v1/pools/{name}/drain", []string{"200", "401", "403", "404"}},
		{"put", "/v1/jobs/{id}/stdin", []string{"200", "401", "404", "409"}},
		{"post", "/v1/jobs/{id}/stdin/close", []string{"204", "401", "404", "409"}},
		{"get", "/v1/jobs/{id}/attach", []string{"101", "400", "401", "404"}},
		{"get", "/v1/sandboxes/{id}/ports/{port}/tcp", []string{"101", "400", "401", "403", "404", "409", "502"}},
		{"post", "/v1/sandboxes/{id}/ports/{port}/links", []string{"201", "400", "401", "403", "404", "409"}},
		{"get", "/v1/sandboxes/{id}/ports/{port}/{path}", []string{"200", "401", "403", "404", "409", "502"}},
		{"get", "/v1/previews/{token}/{path}", []string{"307", "404"}},
		{"head", "/v1/sandboxes/{id}/ports/{port}/{path}", []string{"200", "401", "403", "404", "409", "502"}},
		{"head", "/v1/previews/{token}/{path}", []string{"307", "404"}},
		{"post", "/v1/sandboxes/{id}/ports/{port}/{path}", []string{"200", "401", "403", "404", "409", "502"}},
		{"post", "/v1/previews/{token}/{path}", []string{"307", "404"}},
		{"put", "/v1/sandboxes/{id}/ports/{port}/{path}", []string{"200", "401", "403", "404", "409", "502"}},
		{"put", "/v1/previews/{token}/{path}", []string{"307", "404"}},
		{"patch", "/v1/sandboxes/{id}/ports/{port}/{path}", []string{"200", "401", "403", "404", "409", "502"}},
		{"patch", "/v1/previews/{token}/{path}", []string{"307", "404"}},
		{"delete", "/v1/sandboxes/{id}/ports/{port}/{path}", []string{"200", "401", "403", "404", "409", "502"}},
		{"delete", "/v1/previews/{token}/{path}", []string{"307", "404"}},
		{"options", "/v1/sandboxes/{id}/ports/{port}/{path}", []string{"200", "401", "403", "404", "409", "502"}},
		{"options", "/v1/previews/{token}/{path}", []string{"307", "404"}},
		{"get", "/v1/sandboxes/{id}/browser", []string{"200", "401", "404", "409", "500"}},
		{"get", "/v1/sandboxes/{id}/browser/json", []string{"200", "401", "403", "404", "409", "502", "503"}},
		{"head", "/v1/sandboxes/{id}/browser/json", []string{"200", "401", "403", "404", "409", "502", "503"}},
		{"post", "/v1/sandboxes/{id}/browser/json", []string{"200", "401", "403", "404", "409", "502", "503"}},
		{"put", "/v1/sandboxes/{id}/browser/json", []string{"200", "401", "403", "404", "409", "502", "503"}},
		{"patch", "/v1/sandboxes/{id}/browser/json", []string{"200", "401", "403", "404", "409", "502", "503"}},
		{"delete", "/v1/sandboxes/{id}/browser/json", []string{"200", "401", "403", "404", "409", "502", "503"}},
		{"options", "/v1/sandboxes/{id}/browser/json", []string{"200", "401", "403", "404", "409", "502", "503"}},
		{"get", "/v1/sandboxes/{id}/browser/json/{path}", []string{"200", "401", "403", "404", "409", "502", "503"}},
		{"head", "/v1/sandboxes/{id}/browser/json/{path}", []string{"200", "401", "403", "404", "409", "502", "503"}},
		{"post", "/v1/sandboxes/{id}/browser/json/{path}", []string{"200", "401", "403", "404", "409", "502", "503"}},
		{"put", "/v1/sandboxes/{id}/browser/json/{path}", []string{"200", "401", "403", "404", "409", "502", "503"}},
		{"patch", "/v1/sandboxes/{id}/browser/json/{path}", []string{"200", "401", "403", "404", "409", "502", "503"}},
		{"delete", "/v1/sandboxes/{id}/browser/json/{path}", []string{"200", "401", "403", "404", "409", "502", "503"}},
		{"options", "/v1/sandboxes/{id}/browser/json/{path}", []string{"200", "401", "403", "404", "409", "502", "503"}},
		{"get", "/v1/sandboxes/{id}/browser/devtools/{path}", []string{"101", "400", "401", "403", "404", "409", "502", "503"}},
		{"get", "/v1/sandboxes/{id}/browser/playwright", []string{"101", "400", "401", "403", "404", "409", "502", "503"}},
		{"post", "/v1/sandboxes/{id}/browser/actions", []string{"200", "400", "401", "404", "409", "413", "500", "502", "503", "504"}},
		{"post", "/v1/sandboxes/{id}/computer/actions", []string{"200", "400", "401", "404", "409", "413", "500", "503"}},
		{"get", "/v1/sandboxes/{id}/display/vnc", []string{"101", "400", "401", "404", "409", "503"}},
		{"post", "/v1/sandboxes/{id}/display/links", []string{"201", "400", "401", "404", "409", "413", "500"}},
		{"get", "/v1/displays/{token}/vnc", []string{"101", "400", "404", "409", "503"}},
		{"get", "/v1/sandboxes/{id}/display/viewer", []string{"303", "400", "401", "404", "409"}},
		{"post", "/v1/sandboxes/{id}/display/recording", []string{"201", "400", "401", "404", "409", "503"}},
		{"post", "/v1/traces/{id}/replay", []string{"200", "400", "401", "404", "409"}},
		{"get", "/v1/sandboxes/{id}/display/recording", []string{"200", "401", "404", "409"}},
		{"delete", "/v1/sandboxes/{id}/display/recording", []string{"200", "401", "404", "409"}},
		{"post", "/v1/sandboxes/{id}/browser/recording", []string{"201", "400", "401", "404", "409", "503"}},
		{"get", "/v1/sandboxes/{id}/browser/recording", []string{"200", "401", "404", "409"}},
		{"delete", "/v1/sandboxes/{id}/browser/recording", []string{"200", "401", "404", "409"}},
		{"get", "/v1/displays/{token}/viewer", []string{"200", "404", "409"}},
		{"get", "/v1/displays/{token}/control", []string{"200", "400", "404", "409"}},
		{"get", "/viewer/{file}", []string{"200"}},
		{"get", "/v1/sandboxes/{id}/control", []string{"200", "400", "401", "404", "409", "500"}},
		{"post", "/v1/sandboxes/{id}/control", []string{"200", "400", "401", "404", "409", "413", "500"}},
		{"delete", "/v1/sandboxes/{id}/control", []string{"200", "401", "404", "409", "500"}},
		{"post", "/v1/sandboxes/{id}/control/requests", []string{"201", "400", "401", "404", "409", "413", "500"}},
		{"get", "/v1/sandboxes/{id}/browser/downloads", []string{"200", "401", "404", "409", "500"}},
		{"post", "/v1/sandboxes/{id}/browser/downloads/keep", []string{"200", "400", "401", "404", "409", "413", "500", "503"}},
		{"get", "/v1/sandboxes/{id}/trace", []string{"200", "400", "401", "404", "500"}},
		{"post", "/v1/sandboxes/{id}/trace/events", []string{"201", "400", "401", "404", "413", "500"}},
		{"get", "/v1/sandboxes/{id}/trace/export", []string{"200", "401", "404", "500"}},
		{"post", "/v1/sandboxes/{id}/trace/pause", []string{"200", "400", "401", "404", "409", "500"}},
		{"post", "/v1/sandboxes/{id}/trace/resume", []string{"200", "400", "401", "404", "409", "500"}},
		{"post", "/v1/sandboxes/{id}/trace/step", []string{"200", "400", "401", "404", "409", "500"}},
		{"post", "/v1/sandboxes/{id}/trace/abort", []string{"200", "400", "401", "404", "409", "500"}},
		{"post", "/v1/sandboxes/{id}/browser/profile/save", []string{"200", "400", "401", "404", "409", "413", "500", "503"}},
		{"post", "/v1/sandboxes/{id}/browser/profile/load", []string{"200", "400", "401", "404", "409", "500", "503"}},
		{"post", "/v1/sandboxes/{id}/browser/links", []string{"201", "400", "401", "403", "404", "409", "413", "500"}},
		{"get", "/v1/browsers/{token}/json", []string{"200", "403", "404", "409", "502", "503"}},
		{"head", "/v1/browsers/{token}/json", []string{"200", "403", "404", "409", "502", "503"}},
		{"post", "/v1/browsers/{token}/json", []string{"200", "403", "404", "409", "502", "503"}},
		{"put", "/v1/browsers/{token}/json", []string{"200", "403", "404", "409", "502", "503"}},
		{"patch", "/v1/browsers/{token}/json", []string{"200", "403", "404", "409", "502", "503"}},
		{"delete", "/v1/browsers/{token}/json", []string{"200", "403", "404", "409", "502", "503"}},
		{"options", "/v1/browsers/{token}/json", []string{"200", "403", "404", "409", "502", "503"}},
		{"get", "/v1/browsers/{token}/json/{path}", []string{"200", "403", "404", "409", "502", "503"}},
		{"head", "/v1/browsers/{token}/json/{path}", []string{"200", "403", "404", "409", "502", "503"}},
		{"post", "/v1/browsers/{token}/json/{path}", []string{"200", "403", "404", "409", "502", "503"}},
		{"put", "/v1/browsers/{token}/json/{path}", []string{"200", "403", "404", "409", "502", "503"}},
		{"patch", "/v1/browsers/{token}/json/{path}", []string{"200", "403", "404", "409", "502", "503"}},
		{"delete", "/v1/browsers/{token}/json/{path}", []string{"200", "403", "404", "409", "502", "503"}},
		{"options", "/v1/browsers/{token}/json/{path}", []string{"200", "403", "404", "409", "502", "503"}},
		{"get", "/v1/browsers/{token}/devtools/{path}", []string{"101", "400", "403", "404", "409", "502", "503"}},
		{"get", "/v1/browsers/{token}/playwright", []string{"101", "400", "403", "404", "409", "502", "503"}},
		{"post", "/v1/mcp/servers", []string{"201", "400", "401", "403", "404", "409", "413", "429", "501", "502", "503"}},
		{"get", "/v1/mcp/servers", []string{"200", "401"}},
		{"get", "/v1/mcp/servers/{id}", []string{"200", "401", "404"}},
		{"delete", "/v1/mcp/servers/{id}", []string{"204", "401"}},
		{"get", "/v1/mcp/servers/{id}/tools", []string{"200", "401", "404", "503"}},
		{"get", "/v1/mcp/servers/{id}/pins", []string{"200", "401", "404"}},
		{"post", "/v1/mcp/servers/{id}/pins/{tool}/approve", []string{"200", "400", "401", "403", "404", "409"}},
		{"get", "/v1/mcp/servers/{id}/approvals", []string{"200", "401", "404"}},
		{"post", "/v1/mcp/servers/{id}/approvals/{approval}", []string{"200", "400", "401", "403", "404", "409"}},
		{"get", "/v1/mcp/servers/{id}/calls", []string{"200", "400", "401", "404"}},
		{"get", "/v1/mcp/catalog", []string{"200", "401"}},
		{"post", "/v1/mcp/catalog", []string{"201", "400", "401", "403", "409"}},
		{"get", "/v1/mcp/catalog/{name}", []string{"200", "401", "404"}},
		{"delete", "/v1/mcp/catalog/{name}", []string{"204", "401", "403", "404"}},
		{"post", mcpEndpoint, []string{"200", "202", "400", "401", "403", "404", "503"}},
		{"get", mcpEndpoint, []string{"200", "400", "401", "403", "404", "405", "503"}},
		{"delete", mcpEndpoint, []string{"204", "400", "401", "403", "404", "503"}},
		{"post", "/v1/skills", []string{"200", "201", "400", "401", "413"}},
		{"get", "/v1/skills", []string{"200", "401"}},
		{"get", "/v1/skills/{name}", []string{"200", "401", "404"}},
		{"get", "/v1/skills/{name}/revisions", []string{"200", "401", "404"}},
		{"get", "/v1/skills/{name}/revisions/{revision}", []string{"200", "400", "401", "404"}},
		{"get", "/v1/skills/{name}/files/{path}", []string{"200", "400", "401", "404"}},
		{"post", "/v1/skills/{name}/runs", []string{"200", "400", "401", "403", "404", "409", "413", "429", "503"}},
		{"post", skillsMCPEndpoint, []string{"200", "202", "400", "401", "413", "415"}},
		{"get", skillsMCPEndpoint, []string{"401", "405"}},
		{"delete", skillsMCPEndpoint, []string{"401", "405"}},
		{"post", sandboxMCPEndpoint, []string{"200", "202", "400", "401", "403", "404"}},
		{"get", sandboxMCPEndpoint, []string{"200", "400", "401"}},
		{"delete", sandboxMCPEndpoint, []string{"204", "400", "401"}},
		// The OpenSandbox SDK's API (docs/compat-opensandbox.md): its own
		// auth headers and {code, message} errors.
		{"post", "/opensandbox/v1/sandboxes", []string{"202"}},
		{"get", "/opensandbox/v1/sandboxes", []string{"200"}},
		{"get", "/opensandbox/v1/sandboxes/{id}", []string{"200"}},
		{"delete", "/opensandbox/v1/sandboxes/{id}", []string{"204"}},
		{"post", "/opensandbox/v1/sandboxes/{id}/renew-expiration", []string{"200"}},
		{"post", "/opensandbox/v1/sandboxes/{id}/pause", []string{"202"}},
		{"post", "/opensandbox/v1/sandboxes/{id}/resume", []string{"202"}},
		{"get", "/opensandbox/v1/sandboxes/{id}/endpoints/{port}", []string{"200"}},
		{"post", "/opensandbox/v1/metrics/events", []string{"204"}},
		{"get", "/opensandbox/sandboxes/{id}/execd/ping", []string{"200"}},
		{"post", "/opensandbox/sandboxes/{id}/execd/command", []string{"200"}},
		{"delete", "/opensandbox/sandboxes/{id}/execd/command", []string{"200"}},
		{"get", "/opensandbox/sandboxes/{id}/execd/command/{a}/{b}", []string{"200"}},
		{"post", "/opensandbox/sandboxes/{id}/execd/files/upload", []string{"200"}},
		{"get", "/opensandbox/sandboxes/{id}/execd/files/download", []string{"200"}},
		{"get", "/opensandbox/sandboxes/{id}/execd/files/info", []string{"200"}},
		{"delete", "/opensandbox/sandboxes/{id}/execd/files", []string{"200"}},
		{"post", "/opensandbox/sandboxes/{id}/execd/files/mv", []string{"200"}},
		{"get", "/opensandbox/sandboxes/{id}/execd/files/search", []string{"200"}},
		{"get", "/opensandbox/sandboxes/{id}/execd/directories/list", []string{"200"}},
		{"post", "/opensandbox/sandboxes/{id}/execd/directories", []string{"200"}},
		{"delete", "/opensandbox/sandboxes/{id}/execd/directories", []string{"200"}},
		{"post", "/opensandbox/sandboxes/{id}/execd/code/context", []string{"200"}},
		{"get", "/opensandbox/sandboxes/{id}/execd/code/contexts/{context_id}", []string{"200"}},
		{"delete", "/opensandbox/sandboxes/{id}/execd/code/contexts/{context_id}", []string{"200"}},
		{"post", "/opensandbox/sandboxes/{id}/execd/code", []string{"200"}},
		// The E2B SDKs' API (docs/compat-e2b.md): its own auth headers and
		// {code, message} errors.
		{"post", "/e2b/sandboxes", []string{"201"}},
		{"get", "/e2b/sandboxes", []string{"200"}},
		{"post", "/e2b/v2/sandboxes", []string{"201"}},
		{"get", "/e2b/v2/sandboxes", []string{"200"}},
		{"get", "/e2b/sandboxes/{id}", []string{"200"}},
		{"delete", "/e2b/sandboxes/{id}", []string{"204"}},
		{"post", "/e2b/sandboxes/{id}/timeout", []string{"204"}},
		{"post", "/e2b/v2/sandboxes/{id}/connect", []string{"200", "201"}},
		{"post", "/e2b/sandboxes/{id}/pause", []string{"204"}},
		{"post", "/e2b/sandboxes/{id}/snapshots", []string{"201"}},
		{"post", "/e2b/sandboxes/{id}/fork", []string{"201"}},
		{"get", "/e2b/snapshots", []string{"200"}},
		{"delete", "/e2b/templates/{templateID}", []string{"204"}},
		{"post", "/e2b/volumes", []string{"201"}},
		{"get", "/e2b/volumes", []string{"200"}},
		{"get", "/e2b/volumes/{volumeID}", []string{"200"}},
		{"delete", "/e2b/volumes/{volumeID}", []string{"204"}},
		{"get", "/e2b/volumecontent/{volumeID}/file", []string{"200", "206"}},
		{"put", "/e2b/volumecontent/{volumeID}/file", []string{"200"}},
		{"get", "/e2b/volumecontent/{volumeID}/dir", []string{"200"}},
		{"post", "/e2b/volumecontent/{volumeID}/dir", []string{"201"}},
		{"get", "/e2b/volumecontent/{volumeID}/path", []string{"200"}},
		{"patch", "/e2b/volumecontent/{volumeID}/path", []string{"200"}},
		{"delete", "/e2b/volumecontent/{volumeID}/path", []string{"204"}},
		{"get", "/e2b/health", []string{"204"}},
		{"get", "/e2b/files", []string{"200"}},
		{"post", "/e2b/files", []string{"200"}},
		{"post", "/e2b/process.Process/{method}", []string{"200"}},
		{"post", "/e2b/filesystem.Filesystem/{method}", []string{"200"}},
		{"post", "/e2b/execute", []string{"200"}},
		{"post", "/e2b/contexts", []string{"200"}},
		{"delete", "/e2b/contexts/{id}", []string{"204"}},
		{"get", "/e2b/ports/{port}/{path}", []string{"200"}},
		{"head", "/e2b/ports/{port}/{path}", []string{"200"}},
		{"post", "/e2b/ports/{port}/{path}", []string{"200"}},
		{"put", "/e2b/ports/{port}/{path}", []string{"200"}},
		{"patch", "/e2b/ports/{port}/{path}", []string{"200"}},
		{"delete", "/e2b/ports/{port}/{path}", []string{"200"}},
		{"options", "/e2b/ports/{port}/{path}", []string{"200"}},
	}
}

// mcpEndpoint is an MCP server instance's Streamable HTTP endpoint: it
// takes the instance's own token, not an API key, and its transport
// errors are the MCP transport's (text/plain or JSON-RPC), not problems.
const mcpEndpoint = "/v1/mcp/servers/{id}/mcp"

// skillsMCPEndpoint is the tenant's skills MCP server: it takes the API
// key (bearerAuth) like any /v1 route, but its transport errors are the
// MCP transport's too; only the service's own 401 is a problem.
const skillsMCPEndpoint = "/v1/mcp/skills"

// sandboxMCPEndpoint is the service's own MCP server of sandbox tools:
// the API key, and the MCP transport's errors as the skills MCP server's.
const sandboxMCPEndpoint = "/v1/mcp/sandbox"

// problemErrors reports whether the 4xx answers of path are problem details.
func problemErrors(path string) bool {
	return path != "/readyz" && path != mcpEndpoint && path != skillsMCPEndpoint && path != sandboxMCPEndpoint && !strings.HasPrefix(path, "/e2b/") && !strings.HasPrefix(path, "/opensandbox/")
}

func TestOpenAPIRoutes(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.1.") {
		t.Errorf("openapi = %q, want 3.1.x", v)
	}
	if dig(doc, "components", "securitySchemes", "bearerAuth", "scheme") != "bearer" {
		t.Error("no bearerAuth security scheme")
	}
	for _, r := range apiRoutes() {
		op, ok := dig(doc, "paths", r.path, r.method).(map[string]any)
		if !ok {
			t.Errorf("%s %s missing", strings.ToUpper(r.method), r.path)
			continue
		}
		name := strings.ToUpper(r.method) + " " + r.path
		sec, overridden := op["security"]
		// Preview, browser and display links carry their own credential in the path, MCP
		// endpoints their instance's token.
		public := !strings.HasPrefix(r.path, "/v1/") || strings.HasPrefix(r.path, "/v1/previews/") ||
			strings.HasPrefix(r.path, "/v1/browsers/") || strings.HasPrefix(r.path, "/v1/displays/") || r.path == mcpEndpoint
		if public && (!overridden || len(sec.([]any)) != 0) {
			t.Errorf("%s must declare security: []", name)
		}
		if !public && overridden {
			t.Errorf("%s must not override the bearerAuth security", name)
		}
		for _, st := range r.statuses {
			resp := resolve(doc, dig(op, "responses", st))
			if resp == nil {
				t.Errorf("%s: no %s response", name, st)
				continue
			}
			if st[0] >= '4' && problemErrors(r.path) && dig(resp, "content", "application/problem+json") == nil {
				t.Errorf("%s: %s response is not application/problem+json", name, st)
			}
		}
		for st := range dig(op, "responses").(map[string]any) {
			if st[0] >= '4' && problemErrors(r.path) && dig(resolve(doc, dig(op, "responses", st)), "content", "application/problem+json") == nil {
				t.Errorf("%s: %s response is not application/problem+json", name, st)
			}
		}
	}
	// No route beyond the served ones: the document must not promise more.
	want := map[string]bool{}
	for _, r := range apiRoutes() {
		want[r.method+" "+r.path] = true
	}
	for path, item := range dig(doc, "paths").(map[string]any) {
		for method := range item.(map[string]any) {
			if method == "parameters" {
				continue
			}
			if !want[method+" "+path] {
				t.Errorf("document lists %s %s which is not served", strings.ToUpper(method), path)
			}
		}
	}
}

// params returns the names of the parameters of an operation, including
// those of its path item.
func params(doc map[string]any, path, method string) []string {
	var names []string
	for _, list := range []any{dig(doc, "paths", path, "parameters"), dig(doc, "paths", path, method, "parameters")} {
		l, _ := list.([]any)
		for _, p := range l {
			if n, ok := dig(resolve(doc, p), "name").(string); ok {
				names = append(names, n)
			}
		}
	}
	return names
}

func TestOpenAPIHeaders(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	for _, r := range apiRoutes() {
		if r.path == "/metrics" {
			continue
		}
		if !slices.Contains(params(doc, r.path, r.method), "X-Request-ID") {
			t.Errorf("%s %s does not accept X-Request-ID", r.method, r.path)
		}
		for st := range dig(doc, "paths", r.path, r.method, "responses").(map[string]any) {
			resp := resolve(doc, dig(doc, "paths", r.path, r.method, "responses", st))
			if dig(resp, "headers", "X-Request-ID") == nil {
				t.Errorf("%s %s %s does not echo X-Request-ID", r.method, r.path, st)
			}
		}
	}
	checks := []struct {
		path, method, status string
		param                string
		headers              []string
	}{
		{"/v1/sandboxes", "post", "201", "Idempotency-Key", []string{"ETag", "Location"}},
		{"/v1/sandboxes/{id}", "get", "200", "id", []string{"ETag"}},
		{"/v1/sandboxes/{id}", "patch", "200", "If-Match", []string{"ETag"}},
		{"/v1/sandboxes", "get", "200", "metadata", nil},
		{"/v1/sandboxes", "get", "200", "state", nil},
		{"/v1/sandboxes", "get", "200", "profile", nil},
		{"/v1/sandboxes/{id}/exec", "post", "202", "Accept", []string{"Location"}},
		{"/v1/sandboxes/{id}/exec", "post", "200", "Accept", []string{"Location", "X-Genesis-Job-ID"}},
		{"/v1/jobs/{id}/logs", "get", "200", "Last-Event-ID", []string{"X-Genesis-Job-ID"}},
		{"/v1/jobs/{id}/logs", "get", "200", "cursor", nil},
		{"/v1/jobs/{id}/logs", "get", "200", "follow", nil},
		{"/v1/sandboxes/{id}/sessions", "post", "201", "id", []string{"Location"}},
		{"/v1/sandboxes/{id}/contexts", "post", "201", "id", []string{"Location"}},
		{"/v1/tenants/{name}", "patch", "200", "If-Match", []string{"ETag"}},
		{"/v1/audit", "get", "200", "cursor", nil},
	}
	for _, c := range checks {
		if !slices.Contains(params(doc, c.path, c.method), c.param) {
			t.Errorf("%s %s lacks parameter %s", c.method, c.path, c.param)
		}
		for _, h := range c.headers {
			if dig(doc, "paths", c.path, c.method, "responses", c.status, "headers", h) == nil {
				t.Errorf("%s %s %s lacks header %s", c.method, c.path, c.status, h)
			}
		}
	}
}

func TestOpenAPISchemasMatchWireTypes(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	types := map[string]any{
		"Problem":              client.Problem{},
		"Health":               client.Health{},
		"Resources":            client.Resources{},
		"CreateSandboxRequest": client.CreateSandboxRequest{},
		"Sandbox":              client.Sandbox{},
		"SandboxList":          client.SandboxList{},
		"PatchSandboxRequest":  client.PatchSandboxRequest{},
		"ExecRequest":          client.ExecRequest{},
		"ExecResult":           client.ExecResult{},
		"Job":                  client.Job{},
		"Profile":              client.Profile{},
		"ProfileList":          client.ProfileList{},
		"ImageBuild":           client.ImageBuild{},
		"Image":                client.Image{},
		"ImageList":            client.ImageList{},
		"RuntimeInfo":          client.RuntimeInfo{},
		"Feature":              client.Feature{},
		"FilesUploaded":        client.UploadFilesResult{},
		"UploadedFile":         client.UploadedFile{},
		"Capabilities":         client.Capabilities{},
		"TruncatedEvent":       client.TruncatedEvent{},
		"ExitEvent":            client.ExitEvent{},
		"Session":              client.Session{},
		"CreateContextRequest": client.CreateContextRequest{},
		"RunCodeRequest":       client.RunCodeRequest{},
		"CodeError":            client.CodeError{},
		"RichOutput":           client.RichOutput{},
		"RunCodeResult":        client.RunCodeResult{},
		"Quotas":               client.Quotas{},
		"QuotasPatch":          client.QuotasPatch{},
		"Usage":                client.Usage{},
		"Tenant":               client.Tenant{},
		"TenantList":           client.TenantList{},
		"CreateTenantRequest":  client.CreateTenantRequest{},
		"UpdateTenantRequest":  client.UpdateTenantRequest{},
		"APIKey":               client.APIKey{},
		"APIKeyList":           client.APIKeyList{},
		"CreateAPIKeyRequest":  client.CreateAPIKeyRequest{},
		"AuditRecord":          client.AuditRecord{},
		"AuditPage":            client.AuditPage{},
		"ArtifactRequest":      client.ArtifactRequest{},
		"ArtifactSummary":      client.ArtifactSummary{},
		"Artifact":             client.Artifact{},
		"SkippedArtifact":      client.SkippedArtifact{},
		"ArtifactList":         client.ArtifactList{},
		"FileInfo":             client.FileInfo{},
		"FileList":             client.FileList{},
		"FileWritten":          client.FileWritten{},
		"MkdirRequest":         client.MkdirRequest{},
		"MoveRequest":          client.MoveRequest{},
		"DeleteFileRequest":    client.DeleteFileRequest{},
		"ChmodRequest":         client.ChmodRequest{},
		"ExtractResult":        client.ExtractResult{},
		"SearchRequest":        client.SearchRequest{},
		"SearchResult":         client.SearchResult{},
		"ReplaceRequest":       client.ReplaceRequest{},
		"ReplaceResult":        client.ReplaceResult{},
		"ProfilePool":          client.ProfilePool{},
		"ProfileLease":         client.ProfileLease{},
		"AcquireLeaseRequest":  client.AcquireLeaseRequest{},
		"Lease":                client.Lease{},
		"LeaseList":            client.LeaseList{},
		"RenewLeaseRequest":    client.RenewLeaseRequest{},
		"Pool":                 client.Pool{},
		"PoolList":             client.PoolList{},
		"MCPToolRules":         client.MCPToolRules{},
		"MCPPermissions":       client.MCPPermissions{},
		"MCPSpec":              client.MCPSpec{},
		"MCPCreateRequest":     client.MCPCreateRequest{},
		"MCPDecision":          client.MCPDecision{},
		"MCPImplementation":    client.MCPImplementation{},
		"MCPServer":            client.MCPServer{},
		"MCPServerList":        client.MCPServerList{},
		"MCPTool":              client.MCPTool{},
		"MCPToolList":          client.MCPToolList{},
		"MCPPinChange":         client.MCPPinChange{},
		"MCPPin":               client.MCPPin{},
		"MCPPinList":           client.MCPPinList{},
		"MCPCallRecord":        client.MCPCallRecord{},
		"MCPCallPage":          client.MCPCallPage{},
		"MCPCatalogEntry":      client.MCPCatalogEntry{},
		"MCPApproval":          client.MCPApproval{},
		"MCPApprovalList":      client.MCPApprovalList{},
		"MCPApprovalDecision":  client.MCPApprovalDecision{},
		"MCPCatalog":           client.MCPCatalog{},
		"SkillManifest":        client.SkillManifest{},
		"SkillFile":            client.SkillFile{},
		"SkillSecretFinding":   client.SkillSecretFinding{},
		"SkillReport":          client.SkillReport{},
		"SkillRevision":        client.SkillRevision{},
		"SkillList":            client.SkillList{},
		"SkillRevisionList":    client.SkillRevisionList{},
		"SkillInputFile":       client.SkillInputFile{},
		"SkillRunRequest":      client.SkillRunRequest{},
		"SkillRunDecision":     client.SkillRunDecision{},
		"SkillRun":             client.SkillRun{},
		"Diff":                 client.Diff{},
		"DiffFile":             client.DiffFile{},
		"PatchResult":          client.PatchResult{},
		"PatchRequest":         client.PatchRequest{},
		// The data of stdout and stderr events; the client decodes it into
		// LogEvent.Offset and LogEvent.Data.
		"OutputEvent": struct {
			Offset int64  `json:"offset"`
			Data   string `json:"data"`
		}{},
	}
	for name, v := range types {
		schema, ok := dig(doc, "components", "schemas", name).(map[string]any)
		if !ok {
			t.Errorf("schema %s missing", name)
			continue
		}
		var props, required []string
		deprecated := map[string]bool{} // aliases the types' MarshalJSON adds (client/versions.go)
		for p, ps := range dig(schema, "properties").(map[string]any) {
			if d, _ := ps.(map[string]any)["deprecated"].(bool); d {
				deprecated[p] = true
				continue
			}
			props = append(props, p)
		}
		if l, ok := schema["required"].([]any); ok {
			for _, r := range l {
				if !deprecated[r.(string)] {
					required = append(required, r.(string))
				}
			}
		}
		fields, always := jsonFields(reflect.TypeOf(v))
		sort.Strings(props)
		sort.Strings(required)
		if !slices.Equal(props, fields) {
			t.Errorf("schema %s properties %v, Go fields %v", name, props, fields)
		}
		if !slices.Equal(required, always) {
			t.Errorf("schema %s required %v, Go fields without omitempty %v", name, required, always)
		}
	}
}

// jsonFields returns the sorted JSON names of a struct's fields and of
// those without omitempty.
func jsonFields(t reflect.Type) (all, always []string) {
	for i := range t.NumField() {
		name, opts, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "-" || name == "" {
			continue
		}
		all = append(all, name)
		if !strings.Contains(opts, "omitempty") {
			always = append(always, name)
		}
	}
	sort.Strings(all)
	sort.Strings(always)
	return all, always
}

// TestOpenAPIEventStreams checks that the streaming answers are documented
// as text/event-stream with the events the client decodes.
func TestOpenAPIEventStreams(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	for _, op := range []struct{ path, method, status string }{
		{"/v1/jobs/{id}/logs", "get", "200"},
		{"/v1/sandboxes/{id}/exec", "post", "200"},
	} {
		media := dig(doc, "paths", op.path, op.method, "responses", op.status, "content", "text/event-stream")
		if media == nil {
			t.Errorf("%s %s %s is not text/event-stream", op.method, op.path, op.status)
			continue
		}
		example, _ := dig(media, "example").(string)
		want := []string{"event: " + client.EventStdout, "event: " + client.EventExit, "id: "}
		if op.method == "post" {
			want = append(want, "id: 0\nevent: "+client.EventJob+"\n")
		}
		for _, w := range want {
			if !strings.Contains(example, w) {
				t.Errorf("%s %s: example lacks %q", op.method, op.path, w)
			}
		}
	}
	desc, _ := dig(doc, "paths", "/v1/jobs/{id}/logs", "get", "description").(string)
	for _, ev := range []string{client.EventStdout, client.EventStderr, client.EventTruncated, client.EventExit, "keepalive", "Last-Event-ID"} {
		if !strings.Contains(desc, ev) {
			t.Errorf("logs description does not mention %s", ev)
		}
	}
}

func TestOpenAPIRefsResolve(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				if !strings.HasPrefix(ref, "#/") || resolve(doc, v) == nil {
					t.Errorf("%s: $ref %q does not resolve", path, ref)
				}
			}
			for k, e := range v {
				walk(path+"/"+k, e)
			}
		case []any:
			for _, e := range v {
				walk(path, e)
			}
		}
	}
	walk("#", doc)
}
