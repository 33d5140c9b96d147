package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// leaseHops are the hops of the lease answer's Server-Timing header
// (httpapi's leaseTimings), in the order it writes them.
var leaseHops = []string{"pre", "check", "policy", "claim", "handler"}

// recordParts are the parts of an exec's record hop in its Server-Timing
// header (httpapi's execTimings): the job's row, its trace event, its log.
var recordParts = []string{"rec-job", "rec-trace", "rec-log"}

// leaseHopsHeld is the profile of the held sandbox of BenchmarkLeaseHops:
// the pool profile's recipe and resources without a pool, so that the
// held sandbox is not counted among the pool's sandboxes.
const leaseHopsHeld = "bench-held"

var leaseHopsHeldProfile = fmt.Sprintf(`  - name: %s
    recipe: %s
    allowed_runtimes: [runc, runsc]
    default_risk_level: low
    resources: {cpu: 1, memory_mb: 512, pids: 256}
    network: none
    user: "1000:1000"
`, leaseHopsHeld, profile)

// BenchmarkLeaseHops measures, per runtime, where the time of warm lease →
// first echo goes (GENESIS_BENCH_LEASE_HOPS_ITERS rounds, default 40), with
// the service answering with Server-Timing (GENESIS_SERVER_TIMING=1): the
// lease (pre, check, policy, claim, handler; outside: the connection and
// the audit record written after the handler), the first `echo hi` in the
// leased sandbox, a second one, and, for comparison in the same round, an
// echo in a held (created, not leased) sandbox that has run
// many commands. Each exec is broken down as BenchmarkExecHops does.
// GENESIS_BENCH_LEASE_HOPS_AGE_MS, if set, waits that long between the
// pool settling and the lease: a member's age apart from the pool's own
// work. GENESIS_BENCH_LEASE_HOPS_PRE, if set, names a program the leased
// sandbox runs (untimed) before the first echo.
func BenchmarkLeaseHops(b *testing.B) {
	b.Setenv("GENESIS_SERVER_TIMING", "1")
	// GENESIS_BENCH_LEASE_HOPS_DIR runs another build's binaries (as
	// make bench-speed builds them); one without the lease's Server-Timing
	// shows its lease as a total only.
	s := startServiceIn(b, os.Getenv("GENESIS_BENCH_LEASE_HOPS_DIR"), speedLeaseConfig+leaseHopsHeldProfile)
	iters := envInt(b, "GENESIS_BENCH_LEASE_HOPS_ITERS", 40)
	age := time.Duration(envInt(b, "GENESIS_BENCH_LEASE_HOPS_AGE_MS", 0)) * time.Millisecond
	pre := os.Getenv("GENESIS_BENCH_LEASE_HOPS_PRE")
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute, DisableCompression: true}}
	defer hc.CloseIdleConnections()
	echoHops := append(append([]string{}, execHops...), recordParts...)
	cols := append(append([]string{}, echoHops...), "outside", "total")
	tbl := NewTable(append([]string{"runtime", "call (p50 ms)"}, cols...)...)
	ltbl := NewTable(append([]string{"runtime", "lease (p50 ms)"}, append(append([]string{}, leaseHops...), "outside", "total")...)...)
	s.eachRuntime(b, func(b *testing.B, rt string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		held, err := s.client.CreateSandbox(ctx, client.CreateSandboxRequest{Profile: leaseHopsHeld, Runtime: rt}, "")
		if err != nil {
			b.Fatal(err)
		}
		s.mu.Lock()
		s.live[held.ID] = true
		s.mu.Unlock()
		defer func() { _ = s.remove(ctx, held.ID) }()
		for range 20 {
			if _, _, err := rawCall(ctx, hc, s, http.MethodPost, "/v1/sandboxes/"+held.ID+"/exec", `{"command":["echo","hi"]}`); err != nil {
				b.Fatal(err)
			}
		}
		calls := []string{"first echo", "second echo", "held echo"}
		per := map[string]map[string][]time.Duration{}
		for _, c := range append(calls, "lease") {
			per[c] = map[string][]time.Duration{}
		}
		add := func(call string, hops []string, m map[string]time.Duration, d time.Duration) {
			for _, h := range hops {
				per[call][h] = append(per[call][h], m[h])
			}
			per[call]["outside"] = append(per[call]["outside"], d-m["handler"])
			per[call]["total"] = append(per[call]["total"], d)
		}
		for range iters {
			s.waitSettled(b, speedPoolProfile+"-"+rt)
			time.Sleep(age)
			t0 := time.Now()
			body, timing, err := rawCall(ctx, hc, s, http.MethodPost, "/v1/leases", fmt.Sprintf(`{"profile":%q,"runtime":%q,"ttl_seconds":300}`, speedPoolProfile, rt))
			d := time.Since(t0)
			if err != nil {
				b.Fatal(err)
			}
			var l struct {
				LeaseID   string `json:"lease_id"`
				SandboxID string `json:"sandbox_id"`
				Warm      bool   `json:"warm"`
			}
			if err := json.Unmarshal(body, &l); err != nil {
				b.Fatal(err)
			}
			if !l.Warm {
				b.Fatalf("lease %s was not served warm although its pool had settled", l.LeaseID)
			}
			m, err := parseTiming(timing, leaseHops)
			if err != nil && timing != "" {
				b.Fatal(err)
			}
			add("lease", leaseHops, m, d)
			if pre != "" {
				// Another command first, untimed: is the first echo slow as
				// the sandbox's first command, or as echo's first run?
				if _, _, err := rawCall(ctx, hc, s, http.MethodPost, "/v1/sandboxes/"+l.SandboxID+"/exec", fmt.Sprintf(`{"command":[%q]}`, pre)); err != nil {
					b.Fatal(err)
				}
			}
			for _, c := range calls {
				id := l.SandboxID
				if c == "held echo" {
					id = held.ID
				}
				t0 := time.Now()
				_, timing, err := rawCall(ctx, hc, s, http.MethodPost, "/v1/sandboxes/"+id+"/exec", `{"command":["echo","hi"]}`)
				d := time.Since(t0)
				if err != nil {
					b.Fatalf("%s: %v", c, err)
				}
				m, err := parseTiming(timing, execHops)
				if err != nil {
					b.Fatal(err)
				}
				add(c, echoHops, m, d)
			}
			if _, _, err := rawCall(ctx, hc, s, http.MethodDelete, "/v1/leases/"+l.LeaseID, ""); err != nil {
				b.Fatal(err)
			}
		}
		row := []string{rt, "lease"}
		for _, h := range append(append([]string{}, leaseHops...), "outside", "total") {
			row = append(row, FormatMs(Summarize(per["lease"][h]).P50))
		}
		ltbl.Row(row...)
		for _, c := range calls {
			row := []string{rt, c}
			for _, h := range cols {
				row = append(row, FormatMs(Summarize(per[c][h]).P50))
			}
			tbl.Row(row...)
			b.ReportMetric(Ms(Summarize(per[c]["total"]).P50), strings.ReplaceAll(c, " ", "-")+"-p50-ms")
		}
		b.ReportMetric(Ms(Summarize(per["lease"]["total"]).P50), "lease-p50-ms")
	})
	printTable(fmt.Sprintf("where a warm lease's time goes (Server-Timing; %d rounds, member age after settling %v), ms p50", iters, age), ltbl)
	printTable("where the echoes' time goes (first and second in the leased sandbox, one in a held sandbox, same round), ms p50", tbl)
}

// rawCall sends method path with body (JSON; "" for none) to s and returns
// the answer's body and Server-Timing header; a status above 299 is an
// error.
func rawCall(ctx context.Context, hc *http.Client, s *service, method, path, body string) ([]byte, string, error) {
	var rd io.Reader
	if body != "" {
		rd = bytes.NewReader([]byte(body))
	}
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, rd)
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Authorization", "Bearer "+s.key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, "", err
	}
	if resp.StatusCode > 299 {
		return nil, "", fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, out)
	}
	return out, resp.Header.Get("Server-Timing"), nil
}

// parseTiming is parseServerTiming checking for hops.
func parseTiming(h string, hops []string) (map[string]time.Duration, error) {
	m := map[string]time.Duration{}
	for part := range strings.SplitSeq(h, ",") {
		name, dur, ok := strings.Cut(strings.TrimSpace(part), ";dur=")
		if !ok {
			continue
		}
		var ms float64
		if _, err := fmt.Sscan(dur, &ms); err != nil {
			return nil, fmt.Errorf("Server-Timing %q: %v", h, err)
		}
		m[name] = time.Duration(ms * float64(time.Millisecond))
	}
	for _, hop := range hops {
		if _, ok := m[hop]; !ok {
			return nil, fmt.Errorf("Server-Timing %q has no %s (is GENESIS_SERVER_TIMING honoured?)", h, hop)
		}
	}
	return m, nil
}
