package httpapi_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/controltest"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/testenv"
)

// TestOpenAPICoversRoutes ties api/openapi.yaml to the served routes in both
// directions: every route is documented and every documented operation is
// served.
func TestOpenAPICoversRoutes(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	b, err := os.ReadFile(filepath.Join(testenv.ModuleRoot(t), "api", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("api/openapi.yaml: %v", err)
	}
	methods := map[string]bool{"get": true, "put": true, "post": true, "delete": true, "patch": true, "head": true, "options": true, "trace": true}
	documented := map[string]bool{}
	for path, item := range doc.Paths {
		for m := range item {
			if methods[m] {
				documented[strings.ToUpper(m)+" "+path] = true
			}
		}
	}
	if len(documented) == 0 {
		t.Fatal("no operations found under paths")
	}
	served := map[string]bool{}
	for _, r := range a.srv.Routes() {
		// OpenAPI writes a rest-of-path wildcard {path...} as {path}.
		r.Pattern = strings.ReplaceAll(r.Pattern, "...}", "}")
		key := r.Method + " " + r.Pattern
		served[key] = true
		if !documented[key] {
			t.Errorf("route %s is served but not documented in api/openapi.yaml", key)
		}
	}
	for key := range documented {
		if !served[key] {
			t.Errorf("operation %s is documented but not served", key)
		}
	}
	// Routes without auth are exactly the ones documented with security: [].
	for _, r := range a.srv.Routes() {
		r.Pattern = strings.ReplaceAll(r.Pattern, "...}", "}")
		op, _ := doc.Paths[r.Pattern][strings.ToLower(r.Method)].(map[string]any)
		sec, has := op["security"]
		public := has && len(sec.([]any)) == 0
		if public == r.Auth {
			t.Errorf("%s %s: auth=%v but OpenAPI security %v", r.Method, r.Pattern, r.Auth, sec)
		}
	}
}

func TestReadyz(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		break_ func(a *api)
		status int
		check  string // key of the failing check
	}{
		{name: "healthy", status: http.StatusOK},
		{name: "probe unhealthy", status: http.StatusServiceUnavailable, check: "driver", break_: func(a *api) {
			a.SetProbe(driver.ProbeResult{Driver: "fake", Healthy: false, Error: "daemon not answering"})
		}},
		{name: "no image present", status: http.StatusServiceUnavailable, check: "images", break_: func(a *api) {
			a.Drv.RemoveImage(controltest.Image)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := newAPI(t, nil)
			if tc.break_ != nil {
				tc.break_(a)
			}
			resp, body := a.do(req{method: "GET", path: "/readyz"})
			h := decodeJSON[client.Health](t, body)
			if resp.StatusCode != tc.status || h.Checks["store"] != "ok" {
				t.Fatalf("readyz: %d %+v, want %d with checks", resp.StatusCode, h, tc.status)
			}
			if tc.status == http.StatusOK {
				if h.Status != "ok" || h.Checks["driver"] != "ok" || h.Checks["image."+controltest.Profile] != "ok" {
					t.Errorf("ready answer %+v", h)
				}
				return
			}
			if h.Status != "unavailable" || h.Checks[tc.check] == "" || h.Checks[tc.check] == "ok" || resp.Header.Get("Retry-After") == "" {
				t.Errorf("not-ready answer %+v (Retry-After %q), want check %s failing", h, resp.Header.Get("Retry-After"), tc.check)
			}
		})
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	a.do(req{method: "GET", path: "/healthz"})
	a.do(req{method: "GET", path: "/healthz"})
	a.do(req{method: "GET", path: "/v1/sandboxes"}) // 401
	a.createHTTP(keyA, client.CreateSandboxRequest{})
	resp, body := a.do(req{method: "GET", path: "/metrics"})
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("metrics: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	text := string(body)
	for _, want := range []string{
		"# TYPE genesis_http_requests_total counter",
		`genesis_http_requests_total{route="GET /healthz",status="200"} 2`,
		`genesis_http_requests_total{route="GET /v1/sandboxes",status="401"} 1`,
		`genesis_http_requests_total{route="POST /v1/sandboxes",status="201"} 1`,
		`genesis_http_request_duration_seconds_count{route="GET /healthz",status="200"} 2`,
		`genesis_http_request_duration_seconds_bucket{route="GET /healthz",status="200",le="+Inf"} 2`,
		`genesis_sandbox_create_duration_seconds_count{runtime="runc"} 1`,
		`genesis_sandboxes{state="ready"} 1`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
	// Every sample line is name{labels} value.
	sample := regexp.MustCompile(`^[a-z_]+(\{[^}]*\})? [0-9.e+-]+$`)
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if !strings.HasPrefix(line, "#") && !sample.MatchString(line) {
			t.Errorf("malformed metrics line %q", line)
		}
	}
}

// TestCapabilitiesRuntimeFeatures: GET /v1/capabilities shows each
// runtime's state-keeping features as docs/snapshots.md names them (pause,
// fs_snapshot, memory_checkpoint), with the probe's method and reason.
func TestCapabilitiesRuntimeFeatures(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	p := controltest.ProbeWith("runc", "runsc")
	no := driver.Feature{Reason: "needs CRIU"}
	p.Runtimes[0].Features = driver.RuntimeFeatures{Pause: driver.Feature{Supported: true, Method: "cgroup freezer"},
		FSSnapshot: driver.Feature{Supported: true, Method: "docker commit"}, MemoryCheckpoint: no}
	p.Runtimes[1].Features = driver.RuntimeFeatures{Pause: driver.Feature{Supported: true, Method: "runsc pause"},
		FSSnapshot:       driver.Feature{Supported: true, Method: "runsc tar rootfs-upper"},
		MemoryCheckpoint: driver.Feature{Supported: true, Method: "runsc checkpoint"}}
	a.SetProbe(p)
	resp, body := a.do(req{method: "GET", path: "/v1/capabilities", key: keyA})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("capabilities: %d %s", resp.StatusCode, body)
	}
	var raw struct {
		Runtimes []struct {
			Name     string                    `json:"name"`
			Features map[string]map[string]any `json:"features"`
		} `json:"runtimes"`
	}
	if err := json.Unmarshal(body, &raw); err != nil || len(raw.Runtimes) != 2 {
		t.Fatalf("capabilities body %s: %v", body, err)
	}
	want := map[string]map[string]string{
		"runc":  {"pause": "cgroup freezer", "fs_snapshot": "docker commit", "memory_checkpoint": ""},
		"runsc": {"pause": "runsc pause", "fs_snapshot": "runsc tar rootfs-upper", "memory_checkpoint": "runsc checkpoint"},
	}
	for _, rt := range raw.Runtimes {
		for name, method := range want[rt.Name] {
			f, ok := rt.Features[name]
			if !ok {
				t.Errorf("%s: no feature %q in %v", rt.Name, name, rt.Features)
				continue
			}
			supported := method != ""
			if f["supported"] != supported || method != "" && f["method"] != method || !supported && f["reason"] != no.Reason {
				t.Errorf("%s %s: %v, want supported=%v method %q", rt.Name, name, f, supported, method)
			}
		}
	}
}
