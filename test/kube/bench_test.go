//go:build kube

package kube

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/test/bench"
)

// benchConfig is a pool of two tool-basic members under each runtime.
const benchConfig = `warm_pools: true
profiles:
  - name: bench
    recipe: tool-basic
    allowed_runtimes: [runc, runsc]
    default_risk_level: low
    resources: {cpu: 0.5, memory_mb: 256, pids: 128}
    network: none
    user: "1000:1000"
    pools: [{runtime: runc, min_idle: 2, max_total: 6}, {runtime: runsc, min_idle: 2, max_total: 6}]
    lease: {default_ttl_seconds: 300, max_ttl_seconds: 600, on_release: destroy}
`

// BenchmarkFirstOutput measures, on Kubernetes Pods and on Docker in the
// same run, cold create → first output (create a sandbox, `echo hi` in
// it) and warm lease → first output (lease a pool member, `echo hi`), per
// runtime. GENESIS_BENCH_ITERS sets the iterations of each (default 10).
// A runtime the backend cannot run is reported with the probe's reason.
func BenchmarkFirstOutput(b *testing.B) {
	iters := 10
	if v := os.Getenv("GENESIS_BENCH_ITERS"); v != "" {
		iters, _ = strconv.Atoi(v)
	}
	clearManagedPods(b)
	tbl := bench.NewTable("backend", "runtime", "path", "n", "p50 ms", "p99 ms", "mean ms", "max ms")
	for _, backend := range []string{"kubernetes", "docker"} {
		extra := benchConfig
		if backend == "docker" {
			extra = "driver: docker\n" + benchConfig
		}
		dir := b.TempDir()
		s := startService(b, dir, extra)
		c := s.client()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		caps, err := c.Capabilities(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for _, rt := range []string{"runc", "runsc"} {
			usable := false
			why := "not probed"
			for _, ri := range caps.Runtimes {
				if ri.Name == rt {
					usable, why = ri.Healthy, ri.Error
				}
			}
			if !usable {
				if len(why) > 60 {
					why = why[:60] + "…"
				}
				tbl.Row(backend, rt, "unavailable: "+why, "", "", "", "", "")
				continue
			}
			var cold, warm []time.Duration
			for range iters {
				t0 := time.Now()
				sb, err := c.CreateSandbox(ctx, client.CreateSandboxRequest{Profile: "bench", Runtime: rt}, "")
				if err != nil {
					b.Fatalf("%s %s create: %v", backend, rt, err)
				}
				res, err := c.Exec(ctx, sb.ID, client.ExecRequest{Command: []string{"echo", "hi"}})
				if err != nil || res.Stdout != "hi\n" {
					b.Fatalf("%s %s first echo: %+v %v", backend, rt, res, err)
				}
				cold = append(cold, time.Since(t0))
				if err := c.DeleteSandbox(ctx, sb.ID); err != nil {
					b.Fatal(err)
				}
			}
			for range iters {
				waitPool(b, c, "bench-"+rt, 2)
				t0 := time.Now()
				l, err := c.AcquireLease(ctx, client.AcquireLeaseRequest{Profile: "bench", Runtime: rt})
				if err != nil {
					b.Fatalf("%s %s lease: %v", backend, rt, err)
				}
				res, err := c.Exec(ctx, l.SandboxID, client.ExecRequest{Command: []string{"echo", "hi"}})
				if err != nil || res.Stdout != "hi\n" {
					b.Fatalf("%s %s first echo: %+v %v", backend, rt, res, err)
				}
				warm = append(warm, time.Since(t0))
				if !l.Warm {
					b.Fatalf("%s %s lease was cold with a pool of idle members", backend, rt)
				}
				if err := c.ReleaseLease(ctx, l.LeaseID); err != nil {
					b.Fatal(err)
				}
			}
			for _, r := range []struct {
				path string
				d    []time.Duration
			}{{"cold create → first output", cold}, {"warm lease → first output", warm}} {
				sum := bench.Summarize(r.d)
				tbl.Row(backend, rt, r.path, strconv.Itoa(sum.N), bench.FormatMs(sum.P50), bench.FormatMs(sum.P99), bench.FormatMs(sum.Mean), bench.FormatMs(sum.Max))
				b.ReportMetric(bench.Ms(sum.P50), fmt.Sprintf("%s-%s-%s-p50-ms", backend, rt, map[bool]string{true: "cold", false: "warm"}[r.path[0] == 'c']))
			}
		}
		cancel()
		s.stop()
		if backend == "docker" {
			// A stopped service leaves its pool's containers for the next
			// start to adopt; this data dir has no next start.
			rm := exec.Command("sh", "-c", "docker ps -aq --filter label=dev.genesis.instance="+readInstance(b, dir)+" | xargs -r docker rm -f")
			if out, err := rm.CombinedOutput(); err != nil {
				b.Errorf("removing the Docker pool's containers: %v %s", err, out)
			}
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("\n## first output on Kubernetes Pods and on Docker — %s, load average %s%s\n", time.Now().Format(time.RFC3339), string(load[:14]), tbl)
	clearManagedPods(b)
}
