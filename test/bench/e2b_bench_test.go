package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/testenv"
)

// BenchmarkE2BFirstOutput measures, per runtime, create → first command
// output through the E2B adapter with the unmodified `e2b` npm SDK
// (Sandbox.create('base') then commands.run('echo hi')) and through the
// OpenSandbox adapter with `@alibaba-group/opensandbox`
// (Sandbox.create({image: 'ubuntu'}) then commands.run) against the same
// through our own API (POST /v1/leases of tool-basic, then POST exec), in
// the same run on the same service, cold (no warm pools). The runtime is
// the tenant's policy's in both: runsc through a tenant whose requests are
// raised to high risk.
func BenchmarkE2BFirstOutput(b *testing.B) {
	untrusted := randomKey(b)
	s := startServiceWith(b, fmt.Sprintf("tenants: {untrusted: {min_risk_level: high, api_keys: [%q]}}\n", untrusted))
	e2bFirstOutput(b, s, untrusted, "cold")
}

// BenchmarkE2BFirstOutputWarm is BenchmarkE2BFirstOutput with warm pools of
// tool-basic under runc and runsc (min_idle 4); each path starts from a
// full pool and claims started sandboxes while the pool keeps up.
func BenchmarkE2BFirstOutputWarm(b *testing.B) {
	untrusted := randomKey(b)
	s := startServiceWith(b, fmt.Sprintf(`tenants: {untrusted: {min_risk_level: high, api_keys: [%q]}}
warm_pools: true
profiles:
  - name: tool-basic
    recipe: tool-basic
    allowed_runtimes: [runc, runsc]
    default_risk_level: low
    resources: {cpu: 1, memory_mb: 512, pids: 256}
    network: none
    user: "1000:1000"
    pools: [{runtime: runc, min_idle: 4, max_total: 12}, {runtime: runsc, min_idle: 4, max_total: 12}]
    lease: {default_ttl_seconds: 600, max_ttl_seconds: 3600, on_release: destroy}
`, untrusted))
	e2bFirstOutput(b, s, untrusted, "warm pools")
}

// waitWarm waits until the tool-basic pool of runtime holds its min_idle
// idle members (a no-op without pools), so each path starts from a full
// pool; it reports the pool's hits and misses so far.
func waitWarm(b *testing.B, s *service, runtime string) (hits, misses int64) {
	deadline := time.Now().Add(opTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		pools, err := s.client.Pools(ctx)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		full := true
		for _, p := range pools.Items {
			if p.Profile == profile && p.Runtime == runtime {
				full = p.Counts["idle"] >= p.MinIdle
				hits, misses = p.Hits, p.Misses
			}
		}
		if full {
			return hits, misses
		}
		if time.Now().After(deadline) {
			b.Fatalf("pool %s/%s not warm after %s", profile, runtime, opTimeout)
		}
		time.Sleep(200 * time.Millisecond) // polling a pool's fill, not timing anything
	}
}

// e2bFirstOutput runs the comparison on s; untrusted is the key of the
// tenant whose requests run under runsc.
func e2bFirstOutput(b *testing.B, s *service, untrusted, label string) {
	root := testenv.ModuleRoot(b)
	for _, sdk := range []string{"e2bclient/node_modules/e2b", "osclient/node_modules/@alibaba-group/opensandbox"} {
		if _, err := os.Stat(filepath.Join(root, "test", filepath.FromSlash(sdk))); err != nil {
			b.Fatalf("an SDK is not installed (make test-deps): %v", err)
		}
	}
	iters := envInt(b, "GENESIS_BENCH_ITERS", 20)
	tbl := NewTable("runtime", "path", "n", "p50 ms", "p99 ms", "mean ms", "create p50", "1st output p50")
	s.eachRuntime(b, func(b *testing.B, rt string) {
		key := s.key
		if rt == "runsc" {
			key = untrusted
		}
		c := client.New(s.url, key, client.WithHTTPClient(s.http))
		h0, m0 := waitWarm(b, s, rt)
		var total, create, first []time.Duration
		for range iters {
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			t0 := time.Now()
			l, err := c.AcquireLease(ctx, client.AcquireLeaseRequest{Profile: profile})
			if err != nil {
				b.Fatalf("lease: %v", err)
			}
			t1 := time.Now()
			res, err := c.Exec(ctx, l.SandboxID, client.ExecRequest{Command: []string{"echo", "hi"}})
			t2 := time.Now()
			if err != nil || res.Stdout != "hi\n" {
				b.Fatalf("exec: %+v %v", res, err)
			}
			if l.Runtime != rt {
				b.Fatalf("lease under %s, want %s", l.Runtime, rt)
			}
			if err := c.ReleaseLease(ctx, l.LeaseID); err != nil {
				b.Fatal(err)
			}
			cancel()
			total, create, first = append(total, t2.Sub(t0)), append(create, t1.Sub(t0)), append(first, t2.Sub(t1))
		}
		h1, m1 := waitWarm(b, s, rt)
		own := Summarize(total)
		tbl.Row(rt, "/v1 (Go client)", strconv.Itoa(own.N), FormatMs(own.P50), FormatMs(own.P99), FormatMs(own.Mean),
			FormatMs(Summarize(create).P50), FormatMs(Summarize(first).P50))

		// An SDK's own script (bench.mjs) with its environment: the
		// create, the first output and their sum, per iteration.
		sdk := func(dir string, env ...string) (total, create, first []time.Duration) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(iters)*opTimeout)
			defer cancel()
			cmd := exec.CommandContext(ctx, "node", filepath.Join(root, "test", dir, "bench.mjs"), strconv.Itoa(iters))
			cmd.Env = append(os.Environ(), env...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				b.Fatalf("%s/bench.mjs: %v\n%s", dir, err, stderr.String())
			}
			var ms struct{ Total, Create, First []float64 }
			if err := json.Unmarshal(out, &ms); err != nil {
				b.Fatalf("%s/bench.mjs output %q: %v", dir, out, err)
			}
			dur := func(v []float64) []time.Duration {
				d := make([]time.Duration, len(v))
				for i, x := range v {
					d[i] = time.Duration(x * float64(time.Millisecond))
				}
				return d
			}
			return dur(ms.Total), dur(ms.Create), dur(ms.First)
		}
		eTotal, eCreate, eFirst := sdk("e2bclient", "E2B_API_URL="+s.url+"/e2b", "E2B_SANDBOX_URL="+s.url+"/e2b", "E2B_API_KEY="+key)
		h2, m2 := waitWarm(b, s, rt)
		oTotal, oCreate, oFirst := sdk("osclient", "OPEN_SANDBOX_DOMAIN="+strings.TrimPrefix(s.url, "http://")+"/opensandbox", "OPEN_SANDBOX_API_KEY="+key)
		h3, m3 := waitWarm(b, s, rt)
		if label != "cold" {
			fmt.Printf("%s pool hits/misses: /v1 %d/%d, /e2b %d/%d, /opensandbox %d/%d\n", rt, h1-h0, m1-m0, h2-h1, m2-m1, h3-h2, m3-m2)
		}
		e2b := Summarize(eTotal)
		tbl.Row(rt, "/e2b (e2b SDK)", strconv.Itoa(e2b.N), FormatMs(e2b.P50), FormatMs(e2b.P99), FormatMs(e2b.Mean),
			FormatMs(Summarize(eCreate).P50), FormatMs(Summarize(eFirst).P50))
		osb := Summarize(oTotal)
		tbl.Row(rt, "/opensandbox (SDK)", strconv.Itoa(osb.N), FormatMs(osb.P50), FormatMs(osb.P99), FormatMs(osb.Mean),
			FormatMs(Summarize(oCreate).P50), FormatMs(Summarize(oFirst).P50))
		reportSummary(b, "opensandbox-", osb)
		reportSummary(b, "e2b-", e2b)
		b.ReportMetric(Ms(own.P50), "own-p50-ms")
	})
	printTable("create → first command output: the E2B and OpenSandbox adapters (their npm SDKs) vs our own API, ms, "+label, tbl)
}
