package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// BenchmarkColdCreate measures, per runtime, a cold create (no warm pool):
// the time from POST /v1/sandboxes until the answer of the first exec
// (`echo hi`) has arrived with its output. Each create is interleaved with
// its reference, `docker run --rm --network none --runtime <runtime>
// <the profile's image> echo hi` through the Docker CLI, in rotating
// order, so that both see the same machine; the ratio of the two is the
// figure of issue 40 (target: ≤ 0.8 under runc, ≤ 0.9 under runsc). Each
// sandbox is deleted outside the timed section (docker run's --rm removal is
// inside its own: that is what a docker run costs).
//
// With GENESIS_BENCH_BASELINE_BIN naming a directory that holds (or the
// path of) sandbox-service and genesis-agent built from another commit (go build
// -trimpath; the agent with CGO_ENABLED=0), a second service runs from it
// and its creates join the rotation: the previous build, measured in the
// same run.
//
// The service runs at log level debug, and its "create timeline" lines
// (one per create: the time of each step, control's timeline) are read
// back into a per-step table, so that the run says where the time goes.
func BenchmarkColdCreate(b *testing.B) {
	s := startServiceLogging(b, "", "debug")
	var base *service
	if dir := baselineDir(b); dir != "" {
		base = startServiceFrom(b, dir, "", "warn")
	}
	iters := envInt(b, "GENESIS_BENCH_ITERS", 100)
	tbl := NewTable("runtime", "path", "n", "failed", "p50 ms", "p90 ms", "p99 ms", "mean ms", "min ms", "max ms")
	ratios := NewTable("runtime", "build", "p50 / docker run p50", "p90 / p90", "p99 / p99", "create p50", "1st exec p50")
	s.eachRuntime(b, func(b *testing.B, rt string) {
		ours := &coldRuns{svc: s, rt: rt}
		var old *coldRuns
		if base != nil {
			old = &coldRuns{svc: base, rt: rt}
		}
		var docker []time.Duration
		var dockerFailures []string
		dockerRun := func() {
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			defer cancel()
			t0 := time.Now()
			out, err := dockerCLI(ctx, "run", "--rm", "--network", "none", "--runtime", rt, s.image, "echo", "hi")
			d := time.Since(t0)
			switch {
			case err != nil:
				dockerFailures = append(dockerFailures, err.Error())
			case out != "hi":
				b.Fatalf("docker run (%s) printed %q, want hi", rt, out)
			default:
				docker = append(docker, d)
			}
		}
		steps := []func(){func() { ours.one(b) }, dockerRun}
		if old != nil {
			steps = append(steps, func() { old.one(b) })
		}
		// Each round runs the steps in the next of their orders, so that
		// none always runs right after the same other's cleanup (with a
		// rotation of three, each would: ours after the baseline's,
		// the baseline's after docker run's).
		orders := permutations(len(steps))
		for i := range iters {
			for _, k := range orders[i%len(orders)] {
				steps[k]()
			}
		}
		for _, f := range dockerFailures {
			fmt.Printf("docker run (%s) failed: %s\n", rt, f)
		}
		ours.check(b, iters)
		if len(dockerFailures) > iters/10 || len(docker) == 0 {
			b.Fatalf("%d of %d docker runs under %s failed", len(dockerFailures), iters, rt)
		}
		sum, dsum := Summarize(ours.total), Summarize(docker)
		b.ReportMetric(float64(len(ours.failures)), "failed")
		reportSummary(b, "", sum)
		reportSummary(b, "docker-run-", dsum)
		b.ReportMetric(Ms(Summarize(ours.create).P50), "create-p50-ms")
		b.ReportMetric(Ms(Summarize(ours.first).P50), "first-exec-p50-ms")
		b.ReportMetric(durRatio(sum.P50, dsum.P50), "ratio-p50")
		b.ReportMetric(durRatio(sum.P90, dsum.P90), "ratio-p90")
		row := func(path string, sm Summary, failed int) {
			tbl.Row(rt, path, strconv.Itoa(sm.N), strconv.Itoa(failed), FormatMs(sm.P50), FormatMs(sm.P90), FormatMs(sm.P99),
				FormatMs(sm.Mean), FormatMs(sm.Min), FormatMs(sm.Max))
		}
		ratioRow := func(build string, c *coldRuns) {
			sm := Summarize(c.total)
			ratios.Row(rt, build, fmt.Sprintf("%.2f×", durRatio(sm.P50, dsum.P50)), fmt.Sprintf("%.2f×", durRatio(sm.P90, dsum.P90)),
				fmt.Sprintf("%.2f×", durRatio(sm.P99, dsum.P99)), FormatMs(Summarize(c.create).P50), FormatMs(Summarize(c.first).P50))
		}
		row("this build: create → 1st output", sum, len(ours.failures))
		if old != nil {
			old.check(b, iters)
			osum := Summarize(old.total)
			b.ReportMetric(Ms(osum.P50), "baseline-p50-ms")
			row("baseline build: create → 1st output", osum, len(old.failures))
		}
		row("docker run --rm --network none", dsum, len(dockerFailures))
		ratioRow("this", ours)
		if old != nil {
			ratioRow("baseline", old)
		}
	})
	printTable(fmt.Sprintf("cold create → first command output vs docker run, interleaved, ms (%s, image %s)", profile, s.image), tbl)
	printTable("cold create / docker run", ratios)
	logText, err := os.ReadFile(s.logPath)
	if err != nil {
		b.Fatal(err)
	}
	steps := NewTable("runtime", "step", "n", "p50 ms", "p90 ms", "p99 ms", "mean ms")
	for _, rt := range s.runtimes {
		names, byStep := CreateTimelines(string(logText), rt)
		for _, name := range names {
			sm := Summarize(byStep[name])
			steps.Row(rt, name, strconv.Itoa(sm.N), FormatMs(sm.P50), FormatMs(sm.P90), FormatMs(sm.P99), FormatMs(sm.Mean))
		}
	}
	printTable("where a cold create's time goes, per step (this build's create timeline; first exec not included)", steps)
}

// coldRuns are the cold creates of one service under one runtime.
type coldRuns struct {
	svc                  *service
	rt                   string
	total, create, first []time.Duration
	failures             []string
}

// one makes one sandbox, runs its first exec, deletes it (untimed) and
// records the times.
func (c *coldRuns) one(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	t0 := time.Now()
	sb, err := c.svc.create(ctx, c.rt)
	t1 := time.Now()
	if err != nil {
		c.failures = append(c.failures, fmt.Sprintf("create after %s ms: %v", FormatMs(t1.Sub(t0)), err))
		return
	}
	res, err := c.svc.client.Exec(ctx, sb.ID, client.ExecRequest{Command: []string{"echo", "hi"}})
	t2 := time.Now()
	derr := c.svc.remove(ctx, sb.ID)
	switch {
	case derr != nil:
		b.Fatal(derr)
	case err != nil:
		c.failures = append(c.failures, fmt.Sprintf("first exec in %s: %v", sb.ID, err))
		return
	case res.ExitCode != 0 || res.Stdout != "hi\n":
		b.Fatalf("first exec in %s (%s): exit %d (%s), stdout %q, stderr %q",
			sb.ID, c.rt, res.ExitCode, res.ExitReason, res.Stdout, res.Stderr)
	}
	c.total = append(c.total, t2.Sub(t0))
	c.create = append(c.create, t1.Sub(t0))
	c.first = append(c.first, t2.Sub(t1))
}

// check prints the failures and stops the benchmark when so many failed
// that the numbers mean little; a failure is reported, not hidden.
func (c *coldRuns) check(b *testing.B, iters int) {
	for _, f := range c.failures {
		fmt.Printf("cold create (%s) failed: %s\n", c.rt, f)
	}
	if len(c.failures) > iters/10 || len(c.total) == 0 {
		b.Fatalf("%d of %d cold creates under %s failed", len(c.failures), iters, c.rt)
	}
}

// permutations answers every order of 0…n-1.
func permutations(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for at := range n {
			q := append(append(append(make([]int, 0, n), p[:at]...), n-1), p[at:]...)
			out = append(out, q)
		}
	}
	return out
}

// durRatio is a/b (0 when b is 0).
func durRatio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
