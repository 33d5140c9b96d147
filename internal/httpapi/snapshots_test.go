package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"genesis.dev/sandbox/client"
)

// TestSnapshotRoutesRefuse: where the runtime keeps nothing (the fake
// driver pauses and saves nothing) the routes answer 501 with the reason;
// another tenant's sandbox and snapshots are not found; bad input is 400;
// nothing changes the sandbox.
func TestSnapshotRoutesRefuse(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	sb, _ := a.createHTTP(keyA, client.CreateSandboxRequest{})
	base := "/v1/sandboxes/" + sb.ID
	for _, tc := range []struct {
		method, path, key, body string
		status                  int
		code                    string
	}{
		{"POST", base + "/pause", keyA, "", http.StatusNotImplemented, "not_supported"},
		{"POST", base + "/hibernate", keyA, "", http.StatusNotImplemented, "not_supported"},
		{"POST", base + "/snapshots", keyA, `{"name":"x"}`, http.StatusNotImplemented, "not_supported"},
		{"POST", base + "/snapshots", keyA, `{"name":"../x"}`, http.StatusBadRequest, "invalid_name"},
		{"POST", base + "/fork", keyA, `{"count":0}`, http.StatusBadRequest, "invalid_count"},
		{"POST", base + "/rollback", keyA, `{}`, http.StatusBadRequest, "invalid_snapshot"},
		{"POST", base + "/rollback", keyA, `{"snapshot_id":"snap_0123456789abcdef"}`, http.StatusNotFound, "not_found"},
		{"POST", base + "/pause", keyB, "", http.StatusNotFound, "not_found"},
		{"GET", base + "/snapshots", keyB, "", http.StatusNotFound, "not_found"},
		{"GET", "/v1/snapshots/snap_0123456789abcdef", keyA, "", http.StatusNotFound, "not_found"},
		{"GET", "/v1/snapshots/../x", keyA, "", http.StatusNotFound, ""},
		{"DELETE", "/v1/snapshots/snap_0123456789abcdef", keyA, "", http.StatusNoContent, ""},
		{"POST", "/v1/sandboxes", keyA, `{"snapshot_id":"snap_0123456789abcdef"}`, http.StatusNotFound, "not_found"},
	} {
		resp, body := a.do(req{method: tc.method, path: tc.path, key: tc.key, body: tc.body})
		if resp.StatusCode != tc.status || (tc.code != "" && !strings.Contains(string(body), `"code":"`+tc.code+`"`)) {
			t.Errorf("%s %s: %d %s; want %d %s", tc.method, tc.path, resp.StatusCode, body, tc.status, tc.code)
		}
	}
	resp, body := a.do(req{method: "GET", path: base, key: keyA})
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"state":"ready"`) {
		t.Errorf("the sandbox after the refusals: %d %s", resp.StatusCode, body)
	}
	resp, body = a.do(req{method: "GET", path: "/v1/snapshots", key: keyA})
	if resp.StatusCode != 200 || string(body) != `{"items":[]}`+"\n" {
		t.Errorf("no snapshots: %d %q", resp.StatusCode, body)
	}
}
