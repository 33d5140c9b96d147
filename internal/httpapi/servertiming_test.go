package httpapi_test

import (
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/httpapi"
)

// TestServerTiming checks that, with Config.ServerTiming, a synchronous
// exec's answer tells where its time went — every hop, the agent's time
// above zero, the hops within the handler's — and that without it (the
// default) no answer carries the header.
func TestServerTiming(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	st := a.Stack
	srv, err := httpapi.New(httpapi.Config{PublicURL: testPublicURL, Control: st.Control, Tenancy: st.Tenancy, Terminals: st.Terminals,
		Files: st.Files, Jobs: st.Jobs, Artifacts: st.Artifacts, Keys: map[string]string{keyA: "a"}, ServerTiming: true})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	timed := &api{Harness: a.Harness, srv: srv, url: ts.URL, hc: ts.Client()}

	sb, _ := a.createHTTP(keyA, client.CreateSandboxRequest{})
	exec := req{method: "POST", path: "/v1/sandboxes/" + sb.ID + "/exec", key: keyA, body: `{"command":["true"]}`}
	resp, body := timed.do(exec)
	if resp.StatusCode != 200 {
		t.Fatalf("exec: %d %s", resp.StatusCode, body)
	}
	hops := map[string]float64{}
	for part := range strings.SplitSeq(resp.Header.Get("Server-Timing"), ",") {
		name, dur, ok := strings.Cut(strings.TrimSpace(part), ";dur=")
		if !ok {
			t.Fatalf("Server-Timing %q: part %q", resp.Header.Get("Server-Timing"), part)
		}
		ms, err := strconv.ParseFloat(dur, 64)
		if err != nil || ms < 0 {
			t.Fatalf("Server-Timing %q: %s=%q", resp.Header.Get("Server-Timing"), name, dur)
		}
		hops[name] = ms
	}
	sum := 0.0
	for _, h := range []string{"pre", "attach", "record", "agent", "finish"} {
		if _, ok := hops[h]; !ok {
			t.Fatalf("Server-Timing %q has no %s", resp.Header.Get("Server-Timing"), h)
		}
		sum += hops[h]
	}
	for lap, parts := range map[string][]string{"record": {"rec-job", "rec-trace", "rec-log"}, "finish": {"fin-job", "fin-trace", "fin-log"}} {
		psum := 0.0
		for _, p := range parts {
			if _, ok := hops[p]; !ok {
				t.Fatalf("Server-Timing %q has no %s", resp.Header.Get("Server-Timing"), p)
			}
			psum += hops[p]
		}
		if hops[parts[0]] <= 0 || psum > hops[lap]+0.01 {
			t.Errorf("Server-Timing %q: the job's row took no time, or the parts of %s add up to more than it", resp.Header.Get("Server-Timing"), lap)
		}
	}
	if hops["agent"] <= 0 || hops["handler"] < sum-0.01 {
		t.Errorf("Server-Timing %q: the agent took no time, or the hops add up to more than the handler", resp.Header.Get("Server-Timing"))
	}

	// Off by default; and only a synchronous exec is timed.
	if resp, _ := a.do(exec); resp.StatusCode != 200 || resp.Header.Get("Server-Timing") != "" {
		t.Errorf("default server: %d, Server-Timing %q", resp.StatusCode, resp.Header.Get("Server-Timing"))
	}
	if resp, _ := timed.do(req{method: "GET", path: "/v1/sandboxes/" + sb.ID, key: keyA}); resp.Header.Get("Server-Timing") != "" {
		t.Errorf("GET sandbox answered Server-Timing %q", resp.Header.Get("Server-Timing"))
	}
}
