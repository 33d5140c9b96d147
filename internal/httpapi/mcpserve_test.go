package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestMCPServeTransportProblems: the MCP transport's own refusals of a
// request at /v1/mcp/sandbox (another tenant's session, a session that is
// not open, a malformed message) are problems with a stable code, as every
// other error of the API, and the session goes on for its own tenant.
func TestMCPServeTransportProblems(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	mcp := map[string]string{"Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2025-06-18"}
	with := func(extra map[string]string) map[string]string {
		h := map[string]string{}
		for k, v := range mcp {
			h[k] = v
		}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	resp, body := a.do(req{method: "POST", path: "/v1/mcp/sandbox", key: keyA, header: mcp,
		body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`})
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize: %d session %q: %s", resp.StatusCode, session, body)
	}
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`

	resp, body = a.do(req{method: "POST", path: "/v1/mcp/sandbox", key: keyB, header: with(map[string]string{"Mcp-Session-Id": session}), body: list})
	p := checkProblem(t, resp, body, http.StatusForbidden, "permission_denied")
	checkSentence(t, "another tenant's session", p.Detail)
	if !strings.Contains(p.Detail, "another tenant") {
		t.Errorf("another tenant's session: detail %q", p.Detail)
	}

	resp, body = a.do(req{method: "POST", path: "/v1/mcp/sandbox", key: keyA, header: with(map[string]string{"Mcp-Session-Id": "nope"}), body: list})
	p = checkProblem(t, resp, body, http.StatusNotFound, "not_found")
	checkSentence(t, "unknown session", p.Detail)
	if !strings.Contains(p.Detail, "initialize a new one") {
		t.Errorf("unknown session: detail %q", p.Detail)
	}

	resp, body = a.do(req{method: "POST", path: "/v1/mcp/sandbox", key: keyA, header: with(map[string]string{"Mcp-Session-Id": session}), body: `garbage`})
	p = checkProblem(t, resp, body, http.StatusBadRequest, "invalid_argument")
	checkSentence(t, "malformed message", p.Detail)

	resp, body = a.do(req{method: "POST", path: "/v1/mcp/sandbox", key: keyA, header: with(map[string]string{"Mcp-Session-Id": session}), body: list})
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"create_sandbox"`) {
		t.Errorf("tools/list of the session's own tenant: %d %.200s", resp.StatusCode, body)
	}
	resp, body = a.do(req{method: "DELETE", path: "/v1/mcp/sandbox", key: keyA, header: with(map[string]string{"Mcp-Session-Id": session})})
	if resp.StatusCode/100 != 2 {
		t.Errorf("DELETE the session: %d %s", resp.StatusCode, body)
	}
}
