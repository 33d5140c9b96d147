package httpapi_test

import (
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apipkg "genesis.dev/sandbox/api"
	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/controltest"
	"genesis.dev/sandbox/internal/httpapi"
	"genesis.dev/sandbox/internal/slowlog"
	"genesis.dev/sandbox/internal/slowlog/slowlogtest"
)

// TestSlowRequestLog checks the slow request log through the API's root
// handler, on a clock the test moves by a set step at each reading (the
// request's start and its end): a synchronous exec slower than its
// timeout and the threshold logs one line with its route, status,
// tenant, sandbox, request id and the exec's hops, and counts in
// genesis_http_slow_requests_total; the same exec within its timeout
// (given or the default), a streamed exec and a fast request log nothing.
func TestSlowRequestLog(t *testing.T) {
	t.Parallel()
	root := worldWritableDir(t) // a file root the host agent (uid 1000) can write, for the transfers
	a := newAPI(t, func(c *config.Config) {
		for i := range c.Profiles {
			if c.Profiles[i].Name == controltest.Profile {
				c.Profiles[i].FileRoots = []string{root}
			}
		}
	})
	st := a.Stack
	var step atomic.Int64 // how long each request takes on the clock
	var ticks atomic.Int64
	t0 := time.Now()
	clock := func() time.Time { return t0.Add(time.Duration(ticks.Add(1) * step.Load())) }
	var logged slowlogtest.Buffer
	metrics := httpapi.NewMetrics(httpapi.MetricsConfig{})
	slow, err := slowlog.New(slowlog.Config{Threshold: 2 * time.Second, Logger: slog.New(slog.NewJSONHandler(&logged, nil)),
		Counted: metrics.ObserveSlowRequest, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := httpapi.New(httpapi.Config{PublicURL: testPublicURL, Control: st.Control, Tenancy: st.Tenancy, Terminals: st.Terminals,
		Files: st.Files, Jobs: st.Jobs, Artifacts: st.Artifacts, Keys: map[string]string{keyA: "a"}, Metrics: metrics,
		SlowLog: slow, ExecTimeout: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	s := &api{Harness: a.Harness, srv: srv, url: ts.URL, hc: ts.Client()}
	sb, _ := s.createHTTP(keyA, client.CreateSandboxRequest{})
	execPath := "/v1/sandboxes/" + sb.ID + "/exec"

	// Slower than its timeout and the threshold.
	step.Store(int64(5 * time.Second))
	resp, body := s.do(req{method: "POST", path: execPath, key: keyA, body: `{"command":["true"],"timeout_ms":1000}`})
	if resp.StatusCode != 200 {
		t.Fatalf("exec: %d %s", resp.StatusCode, body)
	}
	lines := logged.Lines(t)
	if len(lines) != 1 {
		t.Fatalf("want one slow request line, got %v", lines)
	}
	line := lines[0]
	for k, want := range map[string]any{"level": "WARN", "method": "POST", "route": "POST /v1/sandboxes/{id}/exec", "status": 200.0,
		"duration_ms": 5000.0, "tenant": "a", "sandbox": sb.ID, "request_id": resp.Header.Get(apipkg.HeaderRequestID), "allowed_ms": 1000.0} {
		if line[k] != want {
			t.Errorf("%s = %v, want %v (line %v)", k, line[k], want, line)
		}
	}
	hops, _ := line["hops_ms"].(map[string]any)
	for _, h := range []string{"pre", "attach", "record", "agent", "finish", "rec-job", "fin-job"} {
		if ms, ok := hops[h].(float64); !ok || ms < 0 {
			t.Errorf("hops_ms has no %s: %v", h, line["hops_ms"])
		}
	}
	if hops["agent"].(float64) <= 0 {
		t.Errorf("the agent took no time: %v", hops)
	}
	if resp.Header.Get("Server-Timing") != "" {
		t.Errorf("Server-Timing %q without Config.ServerTiming", resp.Header.Get("Server-Timing"))
	}
	step.Store(0)
	_, body = s.do(req{method: "GET", path: "/metrics"})
	if want := `genesis_http_slow_requests_total{route="POST /v1/sandboxes/{id}/exec"} 1`; !strings.Contains(string(body), want) {
		t.Errorf("/metrics has no %s", want)
	}

	// Not slow: within a long timeout, given or the default; streamed;
	// fast.
	step.Store(int64(50 * time.Second))
	for _, body := range []string{`{"command":["true"],"timeout_ms":120000}`, `{"command":["true"]}`} {
		if resp, b := s.do(req{method: "POST", path: execPath, key: keyA, body: body}); resp.StatusCode != 200 {
			t.Fatalf("exec %s: %d %s", body, resp.StatusCode, b)
		}
	}
	step.Store(int64(time.Hour))
	if resp, b := s.do(req{method: "POST", path: execPath, key: keyA, body: `{"command":["true"],"timeout_ms":1000}`,
		header: map[string]string{"Accept": "text/event-stream"}}); resp.StatusCode != 200 || !strings.Contains(string(b), "event:") {
		t.Fatalf("streamed exec: %d %s", resp.StatusCode, b)
	}
	step.Store(0)
	if resp, b := s.do(req{method: "GET", path: "/v1/sandboxes/" + sb.ID, key: keyA}); resp.StatusCode != 200 {
		t.Fatalf("get: %d %s", resp.StatusCode, b)
	}
	if lines := logged.Lines(t); len(lines) != 0 {
		t.Errorf("logged %v", lines)
	}

	// A file moves at its client's pace: each MiB it moves allows a
	// second (slowlog.TransferRate), the upload's and the download's.
	const size = 8 << 20
	filePath := "/v1/sandboxes/" + sb.ID + "/files?path=big.bin&overwrite=true"
	step.Store(int64(9 * time.Second)) // within 8 s for the bytes and the 2 s threshold
	if resp, b := s.do(req{method: "PUT", path: filePath, key: keyA, body: strings.Repeat("x", size)}); resp.StatusCode/100 != 2 {
		t.Fatalf("upload: %d %s", resp.StatusCode, b)
	}
	if resp, b := s.do(req{method: "GET", path: filePath, key: keyA}); resp.StatusCode != 200 || len(b) != size {
		t.Fatalf("download: %d, %d bytes", resp.StatusCode, len(b))
	}
	if lines := logged.Lines(t); len(lines) != 0 {
		t.Errorf("transfers within their time logged %v", lines)
	}
	step.Store(int64(11 * time.Second))
	if resp, b := s.do(req{method: "GET", path: filePath, key: keyA}); resp.StatusCode != 200 || len(b) != size {
		t.Fatalf("download: %d, %d bytes", resp.StatusCode, len(b))
	}
	if lines := logged.Lines(t); len(lines) != 1 || lines[0]["bytes"] != float64(size) || lines[0]["allowed_ms"] != 8000.0 {
		t.Errorf("want one line of the slow download with bytes %d and allowed_ms 8000, got %v", size, lines)
	}
}

// worldWritableDir makes a directory anyone may write, removed after t.
func worldWritableDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gslow")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}
