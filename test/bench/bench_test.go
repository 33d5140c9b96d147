package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// BenchmarkExecRoundTrip measures, per runtime, sequential execs of `true`
// through the HTTP API on one running sandbox, and `docker exec <container>
// true` on the same container as a reference.
func BenchmarkExecRoundTrip(b *testing.B) {
	s := startService(b)
	iters := envInt(b, "GENESIS_BENCH_EXEC_ITERS", 500)
	dockerIters := envInt(b, "GENESIS_BENCH_DOCKER_EXEC_ITERS", 30)
	const warmup = 10
	tbl := NewTable("runtime", "n", "p50 ms", "p99 ms", "mean ms", "min ms", "max ms", "exec/s", "docker exec p50")
	s.eachRuntime(b, func(b *testing.B, rt string) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		sb, err := s.create(ctx, rt)
		if err != nil {
			b.Fatalf("create (%s): %v", rt, err)
		}
		defer func() {
			if err := s.remove(ctx, sb.ID); err != nil {
				b.Error(err)
			}
		}()
		req := client.ExecRequest{Command: []string{"true"}}
		exec := func() error {
			res, err := s.client.Exec(ctx, sb.ID, req)
			if err != nil {
				return err
			}
			if res.ExitCode != 0 {
				return fmt.Errorf("true exited %d (%s): %q", res.ExitCode, res.ExitReason, res.Stderr)
			}
			return nil
		}
		for range warmup {
			if err := exec(); err != nil {
				b.Fatalf("warm-up exec (%s): %v", rt, err)
			}
		}
		samples := make([]time.Duration, 0, iters)
		start := time.Now()
		for range iters {
			t0 := time.Now()
			if err := exec(); err != nil {
				b.Fatalf("exec (%s): %v", rt, err)
			}
			samples = append(samples, time.Since(t0))
		}
		elapsed := time.Since(start)
		sum := Summarize(samples)
		rate := float64(iters) / elapsed.Seconds()
		reportSummary(b, "", sum)
		b.ReportMetric(rate, "exec/s")

		container, err := containerOf(ctx, sb.ID)
		if err != nil {
			b.Fatal(err)
		}
		var dsamples []time.Duration
		for i := range dockerIters + 1 { // the first one warms up
			t0 := time.Now()
			if _, err := dockerCLI(ctx, "exec", container, "true"); err != nil {
				b.Fatal(err)
			}
			if i > 0 {
				dsamples = append(dsamples, time.Since(t0))
			}
		}
		dsum := Summarize(dsamples)
		b.ReportMetric(Ms(dsum.P50), "docker-exec-p50-ms")
		tbl.Row(rt, strconv.Itoa(sum.N), FormatMs(sum.P50), FormatMs(sum.P99), FormatMs(sum.Mean),
			FormatMs(sum.Min), FormatMs(sum.Max), fmt.Sprintf("%.1f", rate),
			fmt.Sprintf("%s (n=%d)", FormatMs(dsum.P50), dsum.N))
	})
	printTable(fmt.Sprintf("exec `true` round trip over HTTP, sequential after %d warm-ups, ms; docker exec via the CLI", warmup), tbl)
}

// idleSandbox is one sandbox of BenchmarkMemory and what was read about it.
type idleSandbox struct {
	id, runtime, container string
	agentKiB               int64 // runc: host VmRSS of the agent; runsc: /proc/1 VmRSS inside
	sentryKiB, goferKiB    int64 // runsc only: host VmRSS of runsc-sandbox and runsc-gofer
}

// BenchmarkMemory measures the idle RSS of genesis-agent in a sandbox and
// the service's own RSS with no sandboxes and with idle ones alive.
func BenchmarkMemory(b *testing.B) {
	s := startService(b)
	perRuntime := envInt(b, "GENESIS_BENCH_IDLE", 10)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	svc0, err := s.rssKiB()
	if err != nil {
		b.Fatal(err)
	}
	// Four creates at a time, as many as the service runs at once: the
	// sandboxes only have to be alive together, and a shorter window leaves
	// less room for anything else on this Docker daemon to disturb them.
	var sbs []*idleSandbox
	for _, rt := range s.runtimes {
		for range perRuntime {
			sbs = append(sbs, &idleSandbox{runtime: rt})
		}
	}
	errs := make([]error, len(sbs))
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i, sb := range sbs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			created, err := s.create(ctx, sb.runtime)
			if err != nil {
				errs[i] = fmt.Errorf("create (%s): %w", sb.runtime, err)
				return
			}
			sb.id = created.ID
			if sb.container, err = containerOf(ctx, sb.id); err != nil {
				errs[i] = err
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err) // the cleanup deletes those that were made
	}
	// Let the agents and the service settle after the creates: this is a
	// reading of a level, not a wait for an event.
	time.Sleep(3 * time.Second)
	svcN, err := s.rssKiB()
	if err != nil {
		b.Fatal(err)
	}
	for _, sb := range sbs {
		pid, err := hostPID(ctx, sb.container)
		if err != nil {
			b.Fatalf("%v (%s)", err, s.describe(ctx, sb.id))
		}
		if sb.runtime == "runc" {
			if sb.agentKiB, err = hostRSSKiB(pid); err != nil {
				b.Fatalf("agent of %s: %v", sb.id, err)
			}
			continue
		}
		res, err := s.client.Exec(ctx, sb.id, client.ExecRequest{Command: []string{"cat", "/proc/1/status"}})
		if err != nil {
			b.Fatalf("cat /proc/1/status in %s: %v", sb.id, err)
		}
		if sb.agentKiB, err = VmRSSKiB(res.Stdout); err != nil {
			b.Fatalf("/proc/1/status in %s: %v (exit %d, stderr %q)", sb.id, err, res.ExitCode, res.Stderr)
		}
		if sb.sentryKiB, err = hostRSSKiB(pid); err != nil {
			b.Fatalf("runsc-sandbox of %s: %v", sb.id, err)
		}
		gofer, err := goferOf(pid, sb.container)
		if err != nil {
			b.Fatalf("%s: %v", sb.id, err)
		}
		if sb.goferKiB, err = hostRSSKiB(gofer); err != nil {
			b.Fatalf("runsc-gofer of %s: %v", sb.id, err)
		}
	}
	for _, sb := range sbs {
		if err := s.remove(ctx, sb.id); err != nil {
			b.Error(err)
		}
	}
	svcAfter, err := s.rssKiB()
	if err != nil {
		b.Fatal(err)
	}

	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(svc0), "service-idle-KiB")
	b.ReportMetric(float64(svcN), fmt.Sprintf("service-%dsbx-KiB", len(sbs)))
	tbl := NewTable("what", "n", "min", "p50", "max")
	row := func(what, unit string, vals []int64) {
		if len(vals) == 0 {
			return
		}
		slices.Sort(vals)
		p50 := vals[(len(vals)+1)/2-1]
		b.ReportMetric(float64(p50), unit)
		tbl.Row(what, strconv.Itoa(len(vals)), FormatKiB(vals[0]), FormatKiB(p50), FormatKiB(vals[len(vals)-1]))
	}
	pick := func(rt string, f func(*idleSandbox) int64) []int64 {
		var out []int64
		for _, sb := range sbs {
			if sb.runtime == rt {
				out = append(out, f(sb))
			}
		}
		return out
	}
	row("runc: agent VmRSS (host /proc/<pid>/status)", "runc-agent-p50-KiB", pick("runc", func(x *idleSandbox) int64 { return x.agentKiB }))
	row("runsc: agent VmRSS (/proc/1/status inside)", "runsc-agent-p50-KiB", pick("runsc", func(x *idleSandbox) int64 { return x.agentKiB }))
	row("runsc: runsc-sandbox VmRSS (host)", "runsc-sentry-p50-KiB", pick("runsc", func(x *idleSandbox) int64 { return x.sentryKiB }))
	row("runsc: runsc-gofer VmRSS (host)", "runsc-gofer-p50-KiB", pick("runsc", func(x *idleSandbox) int64 { return x.goferKiB }))
	tbl.Row("service VmRSS, 0 sandboxes", "1", "", FormatKiB(svc0), "")
	tbl.Row(fmt.Sprintf("service VmRSS, %d idle sandboxes", len(sbs)), "1", "", FormatKiB(svcN), "")
	tbl.Row("service VmRSS, after deleting them", "1", "", FormatKiB(svcAfter), "")
	printTable(fmt.Sprintf("memory, VmRSS (%s)", profile), tbl)
	fmt.Println("runsc: /proc/1/status inside is gVisor's own accounting of the agent's memory; it leaves out the\n" +
		"Sentry (runsc-sandbox) and gofer, whose host RSS is listed separately (RSS counts shared binary pages in each).")
}
