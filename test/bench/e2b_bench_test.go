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
	"testing"
	"time"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/testenv"
)

// BenchmarkE2BFirstOutput measures, per runtime, create → first command
// output through the E2B adapter with the unmodified `e2b` npm SDK
// (Sandbox.create('base') then commands.run('echo hi')) against the same
// through our own API (POST /v1/leases of tool-basic, then POST exec), in
// the same run on the same service, cold (no warm pools). The runtime is
// the tenant's policy's in both: runsc through a tenant whose requests are
// raised to high risk.
func BenchmarkE2BFirstOutput(b *testing.B) {
	root := testenv.ModuleRoot(b)
	if _, err := os.Stat(filepath.Join(root, "test", "e2bclient", "node_modules", "e2b")); err != nil {
		b.Fatalf("the E2B SDK is not installed (make test-deps): %v", err)
	}
	untrusted := randomKey(b)
	s := startServiceWith(b, fmt.Sprintf("tenants: {untrusted: {min_risk_level: high, api_keys: [%q]}}\n", untrusted))
	iters := envInt(b, "GENESIS_BENCH_ITERS", 20)
	tbl := NewTable("runtime", "path", "n", "p50 ms", "p99 ms", "mean ms", "create p50", "1st output p50")
	s.eachRuntime(b, func(b *testing.B, rt string) {
		key := s.key
		if rt == "runsc" {
			key = untrusted
		}
		c := client.New(s.url, key, client.WithHTTPClient(s.http))
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
		own := Summarize(total)
		tbl.Row(rt, "/v1 (Go client)", strconv.Itoa(own.N), FormatMs(own.P50), FormatMs(own.P99), FormatMs(own.Mean),
			FormatMs(Summarize(create).P50), FormatMs(Summarize(first).P50))

		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(iters)*opTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "node", filepath.Join(root, "test", "e2bclient", "bench.mjs"), strconv.Itoa(iters))
		cmd.Env = append(os.Environ(), "E2B_API_URL="+s.url+"/e2b", "E2B_SANDBOX_URL="+s.url+"/e2b", "E2B_API_KEY="+key)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("bench.mjs: %v\n%s", err, stderr.String())
		}
		var ms struct{ Total, Create, First []float64 }
		if err := json.Unmarshal(out, &ms); err != nil {
			b.Fatalf("bench.mjs output %q: %v", out, err)
		}
		dur := func(v []float64) []time.Duration {
			d := make([]time.Duration, len(v))
			for i, x := range v {
				d[i] = time.Duration(x * float64(time.Millisecond))
			}
			return d
		}
		e2b := Summarize(dur(ms.Total))
		tbl.Row(rt, "/e2b (e2b SDK)", strconv.Itoa(e2b.N), FormatMs(e2b.P50), FormatMs(e2b.P99), FormatMs(e2b.Mean),
			FormatMs(Summarize(dur(ms.Create)).P50), FormatMs(Summarize(dur(ms.First)).P50))
		reportSummary(b, "e2b-", e2b)
		b.ReportMetric(Ms(own.P50), "own-p50-ms")
	})
	printTable("create → first command output: the E2B adapter (npm e2b SDK) vs our own API, ms, cold", tbl)
}
