package bench

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// leaseConfig, laid over the benchmark config, keeps warm pools of the
// benchmark profile under runc and runsc.
var leaseConfig = "warm_pools: true\nprofiles:\n" + pooledProfile("tool-basic", 4, 8, "")

// pooledProfile is a profile of the benchmark image named name with pools
// of minIdle..maxTotal members under runc and runsc, and the given lease
// policy ("" for none), as YAML list item.
func pooledProfile(name string, minIdle, maxTotal int, lease string) string {
	y := pooledProfileOf(name, "tool-basic", minIdle, maxTotal)
	if lease != "" {
		y += "    lease: " + lease + "\n"
	}
	return y
}

// pooledProfileOf is a profile named name of the image of recipe with
// pools of minIdle..maxTotal members under runc and runsc.
func pooledProfileOf(name, recipe string, minIdle, maxTotal int) string {
	return fmt.Sprintf(`  - name: %s
    recipe: %s
    allowed_runtimes: [runc, runsc]
    default_risk_level: low
    resources: {cpu: 1, memory_mb: 512, pids: 256}
    network: none
    user: "1000:1000"
    pools: [{runtime: runc, min_idle: %[3]d, max_total: %[4]d}, {runtime: runsc, min_idle: %[3]d, max_total: %[4]d}]
`, name, recipe, minIdle, maxTotal)
}

// waitIdle polls GET /v1/pools (outside any timed section) until pool
// holds at least n idle members, and returns it.
func (s *service) waitIdle(b *testing.B, name string, n int) client.Pool {
	deadline := time.Now().Add(opTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		pl, err := s.client.Pools(ctx)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range pl.Items {
			if p.Name == name && p.Counts["idle"] >= n {
				return p
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("pool %s never held %d idle members: %+v\n%s", name, n, pl, s.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitSettled polls the pool (outside any timed section) until it holds
// min_idle idle members and nothing of it is being made or removed: the
// state of a warm pool that no recent claim disturbs.
func (s *service) waitSettled(b *testing.B, name string) client.Pool {
	deadline := time.Now().Add(opTimeout)
	for {
		p := s.waitIdle(b, name, 1)
		busy := p.Starting
		for state, n := range p.Counts {
			if state != "idle" && state != "leased" && state != "busy" {
				busy += int64(n)
			}
		}
		if p.Counts["idle"] >= p.MinIdle && busy == 0 {
			return p
		}
		if time.Now().After(deadline) {
			b.Fatalf("pool %s never settled: %+v\n%s", name, p, s.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// BenchmarkLeaseFirstEcho measures, per runtime, POST /v1/leases from a
// warm pool until the answer of the first exec (`echo hi`) has arrived with
// its output. Each lease is released outside the timed section. Two ways:
//
//   - settled: each iteration starts once the pool is full again and no
//     member is being made or destroyed (GENESIS_BENCH_ITERS, default 200):
//     a lease on a warm pool that no recent claim disturbs;
//   - back-to-back: each iteration starts as soon as the pool holds one
//     idle member (GENESIS_BENCH_B2B_ITERS, default 100), so the claims
//     run while the pool refills and destroys released members: the host
//     is busy making containers throughout.
//
// Every measured lease must be a warm claim (a cold one fails the run).
// The pool's refill rate is reported too.
func BenchmarkLeaseFirstEcho(b *testing.B) {
	s := startServiceWith(b, leaseConfig)
	modes := []struct {
		name  string
		iters int
	}{{"settled", envInt(b, "GENESIS_BENCH_ITERS", 200)}, {"back-to-back", envInt(b, "GENESIS_BENCH_B2B_ITERS", 100)}}
	tbl := NewTable("runtime", "pool", "n", "p50 ms", "p99 ms", "mean ms", "min ms", "max ms", "lease p50", "1st echo p50", "refill/s")
	s.eachRuntime(b, func(b *testing.B, rt string) {
		pool := profile + "-" + rt
		s.waitIdle(b, pool, 4)
		for _, mode := range modes {
			b.Run(mode.name, func(b *testing.B) {
				var total, lease, first []time.Duration
				ttl := int64(300)
				for range mode.iters {
					if mode.name == "settled" {
						s.waitSettled(b, pool)
					} else {
						s.waitIdle(b, pool, 1)
					}
					ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
					t0 := time.Now()
					l, err := s.client.AcquireLease(ctx, client.AcquireLeaseRequest{Profile: profile, Runtime: rt, TTLSeconds: &ttl})
					t1 := time.Now()
					if err != nil {
						cancel()
						b.Fatalf("lease (%s): %v", rt, err)
					}
					res, err := s.client.Exec(ctx, l.SandboxID, client.ExecRequest{Command: []string{"echo", "hi"}})
					t2 := time.Now()
					rerr := s.client.ReleaseLease(ctx, l.LeaseID)
					cancel()
					switch {
					case err != nil:
						b.Fatalf("first echo in %s (%s): %v", l.SandboxID, rt, err)
					case res.ExitCode != 0 || res.Stdout != "hi\n":
						b.Fatalf("first echo in %s (%s): exit %d, stdout %q", l.SandboxID, rt, res.ExitCode, res.Stdout)
					case rerr != nil:
						b.Fatalf("release %s: %v", l.LeaseID, rerr)
					case !l.Warm:
						b.Fatalf("lease %s under %s was not served warm although the pool had an idle member", l.LeaseID, rt)
					}
					total = append(total, t2.Sub(t0))
					lease = append(lease, t1.Sub(t0))
					first = append(first, t2.Sub(t1))
				}
				p := s.waitIdle(b, pool, 1)
				sum := Summarize(total)
				reportSummary(b, "", sum)
				b.ReportMetric(Ms(Summarize(lease).P50), "lease-p50-ms")
				b.ReportMetric(Ms(Summarize(first).P50), "first-echo-p50-ms")
				b.ReportMetric(p.RefillRate, "refill-per-s")
				tbl.Row(rt, mode.name, strconv.Itoa(sum.N), FormatMs(sum.P50), FormatMs(sum.P99), FormatMs(sum.Mean), FormatMs(sum.Min),
					FormatMs(sum.Max), FormatMs(Summarize(lease).P50), FormatMs(Summarize(first).P50), fmt.Sprintf("%.2f", p.RefillRate))
			})
		}
	})
	printTable(fmt.Sprintf("warm lease → first echo output, ms (%s, pool of %d idle)", profile, 4), tbl)
}

// recycleConfig keeps pools of two members of the benchmark image under
// runc and runsc for two profiles that differ only in lease.on_release.
var recycleConfig = "warm_pools: true\nprofiles:\n" + pooledProfile("tool-basic", 2, 2, "{on_release: destroy}") +
	pooledProfile("tool-basic-reset", 2, 2, "{on_release: reset}")

// BenchmarkLeaseRecycle measures, per runtime, how fast a pool of two
// sustains back-to-back leases when released sandboxes are destroyed (the
// pool cold-creates replacements) or reset and returned (on_release:
// reset): each cycle is lease → `echo hi` → release, the next cycle
// starting at once. It reports cycles per second, the release's p50/p99,
// the whole cycle's p50/p99 and how many leases were warm.
// GENESIS_BENCH_RECYCLE_ITERS sets the cycles per mode (default 40).
func BenchmarkLeaseRecycle(b *testing.B) {
	s := startServiceWith(b, recycleConfig)
	iters := envInt(b, "GENESIS_BENCH_RECYCLE_ITERS", 40)
	tbl := NewTable("runtime", "on_release", "n", "cycles/s", "release p50", "release p99", "cycle p50", "cycle p99", "warm", "recycled")
	s.eachRuntime(b, func(b *testing.B, rt string) {
		for _, mode := range []struct{ name, profile string }{{"destroy", "tool-basic"}, {"reset", "tool-basic-reset"}} {
			b.Run(mode.name, func(b *testing.B) {
				pool := mode.profile + "-" + rt
				s.waitIdle(b, pool, 2)
				before := s.waitIdle(b, pool, 2)
				var release, cycle []time.Duration
				warm := 0
				ttl := int64(300)
				start := time.Now()
				for range iters {
					ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
					t0 := time.Now()
					l, err := s.client.AcquireLease(ctx, client.AcquireLeaseRequest{Profile: mode.profile, Runtime: rt, TTLSeconds: &ttl, WaitSeconds: 60})
					if err != nil {
						cancel()
						b.Fatalf("lease (%s, %s): %v\n%s", rt, mode.name, err, s.logTail())
					}
					res, err := s.client.Exec(ctx, l.SandboxID, client.ExecRequest{Command: []string{"echo", "hi"}})
					if err != nil || res.ExitCode != 0 || res.Stdout != "hi\n" {
						cancel()
						b.Fatalf("echo in %s (%s): %+v %v", l.SandboxID, rt, res, err)
					}
					t1 := time.Now()
					err = s.client.ReleaseLease(ctx, l.LeaseID)
					t2 := time.Now()
					cancel()
					if err != nil {
						b.Fatalf("release %s: %v", l.LeaseID, err)
					}
					if l.Warm {
						warm++
					}
					release = append(release, t2.Sub(t1))
					cycle = append(cycle, t2.Sub(t0))
				}
				rate := float64(iters) / time.Since(start).Seconds()
				after := s.waitIdle(b, pool, 2)
				rel, cyc := Summarize(release), Summarize(cycle)
				reportSummary(b, "release-", rel)
				b.ReportMetric(Ms(cyc.P50), "cycle-p50-ms")
				b.ReportMetric(Ms(cyc.P99), "cycle-p99-ms")
				b.ReportMetric(rate, "cycles-per-s")
				b.ReportMetric(float64(warm)/float64(iters), "warm-fraction")
				recycled := after.Recycled - before.Recycled
				if mode.name == "reset" && after.ResetFailed != before.ResetFailed {
					b.Errorf("%d resets failed", after.ResetFailed-before.ResetFailed)
				}
				tbl.Row(rt, mode.name, strconv.Itoa(iters), fmt.Sprintf("%.2f", rate), FormatMs(rel.P50), FormatMs(rel.P99),
					FormatMs(cyc.P50), FormatMs(cyc.P99), fmt.Sprintf("%d/%d", warm, iters), strconv.FormatInt(recycled, 10))
			})
		}
	})
	printTable("sequential lease → echo → release on a pool of 2, ms", tbl)
}
