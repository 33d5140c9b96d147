package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/assemble"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/controltest"
	"genesis.dev/sandbox/internal/httpapi"
	"genesis.dev/sandbox/internal/ports"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/tenant"
)

// The HTTP API is tested through a real HTTP client on loopback against the
// service harness of internal/controltest (the control layer over the fake
// driver, with a real genesis-agent host process per started container).

// API keys of the two test tenants.
const (
	keyA     = "key-a-0123456789abcdef"
	keyB     = "key-b-0123456789abcdef"
	keyAdmin = "key-admin-0123456789abcdef"
	// keyApproverA is a key of tenant a from the config with the scope
	// approve (tenants.a.approver_keys).
	keyApproverA = "key-approver-a-0123456789abcdef"
)

// api is a harness with the HTTP API served on loopback.
type api struct {
	*controltest.Harness
	srv *httpapi.Server
	url string
	hc  *http.Client
}

// maxBody is the body limit of the test server.
const maxBody = 64 << 10

func newAPI(t *testing.T, configure func(*config.Config)) *api {
	t.Helper()
	return newAPIWith(t, configure, nil)
}

// newAPIWith is newAPI with tune changing the control service's own
// settings before it starts.
func newAPIWith(t *testing.T, configure func(*config.Config), tune func(*control.Config)) *api {
	t.Helper()
	keys := map[string]string{keyA: "a", keyB: "b", keyAdmin: config.AdminTenant}
	h := controltest.NewOpts(t, controltest.Options{Configure: func(c *config.Config) {
		c.AdminAPIKey = keyAdmin
		c.PublicURL = testPublicURL
		c.E2B.Enabled, c.E2B.Templates = true, map[string]string{"base": "tool-basic", "test": controltest.Profile}
		c.OpenSandbox.Enabled, c.OpenSandbox.Images = true, map[string]string{"ubuntu": "tool-basic", "test": controltest.Profile}
		if configure != nil {
			configure(c)
		}
	}, Tune: tune, Assemble: func(c *assemble.Config) {
		c.ConfigKeys = tenant.ConfigKeyIDs(keys)
		maps.Copy(c.ConfigKeys, tenant.ConfigKeyIDs(map[string]string{keyApproverA: "a"}))
	}})
	st := h.Stack
	srv, err := httpapi.New(httpapi.Config{
		Metrics:      httpapi.NewMetrics(httpapi.MetricsConfig{TenantLabels: h.Cfg.Metrics.TenantLabels}),
		Snapshots:    st.Snapshots,
		Changes:      st.Changes,
		PublicURL:    testPublicURL,
		Previews:     st.Previews,
		Trace:        st.Trace,
		Browser:      st.Browser,
		Desktop:      st.Desktop,
		MCP:          st.MCP,
		MCPServe:     st.MCPServe,
		Skills:       st.Skills,
		Control:      st.Control,
		Tenancy:      st.Tenancy,
		Terminals:    st.Terminals,
		Files:        st.Files,
		Ports:        st.Ports,
		Services:     st.Services,
		Jobs:         st.Jobs,
		Artifacts:    st.Artifacts,
		Keys:         keys,
		ApproverKeys: map[string]string{keyApproverA: "a"},
		MaxBodyBytes: maxBody,
		E2B:          st.E2B,
		OpenSandbox:  st.OpenSandbox,
	})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return &api{Harness: h, srv: srv, url: ts.URL, hc: ts.Client()}
}

// testPublicURL is the public URL the test servers hand back URLs under.
const testPublicURL = "http://genesis.test:8080"

// testPreviews places previews on *.localhost (the default's form).
func testPreviews(t *testing.T) *ports.Origins {
	t.Helper()
	o, err := ports.ParseOrigins("http://*.localhost:8080")
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// req describes one HTTP request to the test server.
type req struct {
	method, path, key, body string
	header                  map[string]string
	// host, if set, is the request's Host (a preview origin's).
	host string
}

// do sends r and returns the response with its body read.
func (a *api) do(r req) (*http.Response, []byte) {
	a.T.Helper()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	hr, err := http.NewRequest(r.method, a.url+r.path, body)
	if err != nil {
		a.T.Fatal(err)
	}
	if r.key != "" {
		hr.Header.Set("Authorization", "Bearer "+r.key)
	}
	if r.body != "" {
		hr.Header.Set("Content-Type", "application/json")
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	if r.host != "" {
		hr.Host = r.host
	}
	resp, err := a.hc.Do(hr)
	if err != nil {
		a.T.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		a.T.Fatalf("%s %s: reading body: %v", r.method, r.path, err)
	}
	return resp, b
}

// decodeJSON decodes b into a T, failing the test on error.
func decodeJSON[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decoding %q: %v", b, err)
	}
	return v
}

// createHTTP creates a sandbox of the tenant of key through the API.
func (a *api) createHTTP(key string, cr client.CreateSandboxRequest) (client.Sandbox, *http.Response) {
	a.T.Helper()
	if cr.Profile == "" {
		cr.Profile = controltest.Profile
	}
	b, _ := json.Marshal(cr)
	resp, body := a.do(req{method: "POST", path: "/v1/sandboxes", key: key, body: string(b)})
	if resp.StatusCode != http.StatusCreated {
		a.T.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	return decodeJSON[client.Sandbox](a.T, body), resp
}

// jobs lists the job records of a sandbox.
func (a *api) jobs(sandboxID string) []*sandbox.Job {
	a.T.Helper()
	list, err := a.St.ListJobs(context.Background(), store.JobFilter{SandboxID: sandboxID})
	if err != nil {
		a.T.Fatal(err)
	}
	return list
}
