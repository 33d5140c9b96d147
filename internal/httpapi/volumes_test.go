package httpapi_test

import (
	"net/http"
	"testing"

	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/store"
)

// TestVolumesUnsupported: a server without volumes (sandboxes on other
// hosts) answers every volume route 501 volumes_unsupported, and a
// control service without a volume manager refuses a create that asks for
// volumes the same way, before it records anything.
func TestVolumesUnsupported(t *testing.T) {
	t.Parallel()
	a := newAPIWith(t, nil, func(c *control.Config) { c.Volumes = nil })
	for _, r := range []req{
		{method: "GET", path: "/v1/volumes"},
		{method: "POST", path: "/v1/volumes", body: `{"name":"v","size_mb":8}`},
		{method: "GET", path: "/v1/volumes/v"},
		{method: "DELETE", path: "/v1/volumes/v"},
		{method: "GET", path: "/v1/volumes/v/files?path=x"},
		{method: "PUT", path: "/v1/volumes/v/files?path=x", body: "x"},
		{method: "GET", path: "/v1/volumes/v/files/list"},
		{method: "GET", path: "/v1/volumes/v/files/stat?path=x"},
		{method: "POST", path: "/v1/volumes/v/files/delete", body: `{"path":"x"}`},
	} {
		r.key = keyA
		if resp, body := a.do(r); resp.StatusCode != http.StatusNotImplemented || problemCode(t, body) != "volumes_unsupported" {
			t.Errorf("%s %s: %d %s", r.method, r.path, resp.StatusCode, body)
		}
	}
	resp, body := a.do(req{method: "POST", path: "/v1/sandboxes", key: keyA,
		body: `{"profile":"tool-basic","volumes":[{"volume":"v","path":"/mnt/v"}]}`})
	if resp.StatusCode != http.StatusNotImplemented || problemCode(t, body) != control.CodeVolumesUnsupported {
		t.Errorf("create with volumes: %d %s", resp.StatusCode, body)
	}
	if list, err := a.Stack.Control.ListSandboxes(t.Context(), store.SandboxFilter{Tenant: "a"}); err != nil || len(list) != 0 {
		t.Errorf("a refused create left records: %d %v", len(list), err)
	}
}

// TestE2BVolumeMountsRefused: the E2B adapter does not map the SDK's
// volumes, so a create that asks for volumeMounts is refused (501) and
// makes nothing, rather than answered with a sandbox without them.
func TestE2BVolumeMountsRefused(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	resp, body := a.do(req{method: "POST", path: "/e2b/sandboxes", body: `{"templateID":"test","timeout":300,"volumeMounts":[{"name":"v","path":"/mnt/v"}]}`,
		header: map[string]string{"X-API-KEY": keyA}})
	if resp.StatusCode != http.StatusNotImplemented {
		t.Errorf("create with volumeMounts: %d %s", resp.StatusCode, body)
	}
	if list, err := a.Stack.Control.ListSandboxes(t.Context(), store.SandboxFilter{Tenant: "a"}); err != nil || len(list) != 0 {
		t.Errorf("a refused create left records: %d %v", len(list), err)
	}
}
