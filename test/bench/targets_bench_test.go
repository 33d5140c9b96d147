package bench

import (
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// expectedTargets are the rows of the targets summary, in its order, each
// with its target (issue 40, "Targets"); a row nobody recorded stays "not
// measured".
var expectedTargets = []TargetRow{
	{Target: 1, Figure: "exec `true`, HTTP", Runtime: "runc", Unit: "ms", Goal: "p50 ≤ 2.50, p99 ≤ 6.00"},
	{Target: 1, Figure: "exec `true`, HTTP", Runtime: "runsc", Unit: "ms", Goal: "p50 ≤ 14.00"},
	{Target: 1, Figure: "exec `true`, gRPC", Runtime: "runc", Unit: "ms"},
	{Target: 1, Figure: "exec `true`, gRPC", Runtime: "runsc", Unit: "ms"},
	{Target: 2, Figure: "warm lease → first echo", Runtime: "runc", Unit: "ms", Goal: "p50 ≤ 3.00"},
	{Target: 2, Figure: "warm lease → first echo", Runtime: "runsc", Unit: "ms", Goal: "p50 ≤ 15.00"},
	{Target: 2, Figure: "release answers", Runtime: "runc", Unit: "ms", Goal: "p50 ≤ 10.00"},
	{Target: 2, Figure: "release answers", Runtime: "runsc", Unit: "ms", Goal: "p50 ≤ 10.00"},
	{Target: 3, Figure: "cold create → first output", Runtime: "runc", Unit: "ms", Goal: "p50 ≤ 0.8× docker run"},
	{Target: 3, Figure: "cold create → first output", Runtime: "runsc", Unit: "ms", Goal: "p50 ≤ 0.9× docker run"},
	{Target: 4, Figure: "stdout → Go client, base64", Runtime: "runc", Unit: "MiB/s", Goal: "p50 ≥ 400"},
	{Target: 4, Figure: "stdout → Go client, base64", Runtime: "runsc", Unit: "MiB/s", Goal: "p50 ≥ 400"},
	{Target: 4, Figure: "stdout → Go client, text", Runtime: "runc", Unit: "MiB/s", Goal: "p50 ≥ 400"},
	{Target: 4, Figure: "stdout → Go client, text", Runtime: "runsc", Unit: "MiB/s", Goal: "p50 ≥ 400"},
	{Target: 5, Figure: "load: exec `true` on the runc sandboxes", Runtime: "", Unit: "ms", Goal: "≥ 500 execs/s, p99 ≤ 50, 0 errors"},
	{Target: 6, Figure: "browser screenshot (png, kept)", Runtime: "runc", Unit: "ms"},
	{Target: 6, Figure: "browser screenshot (png, kept)", Runtime: "runsc", Unit: "ms", Goal: "p50 ≤ 80.00"},
	{Target: 6, Figure: "browser click, actions API", Runtime: "runc", Unit: "ms", Goal: "p50 ≤ direct CDP p50 + 1.00"},
	{Target: 6, Figure: "browser click, actions API", Runtime: "runsc", Unit: "ms", Goal: "p50 ≤ direct CDP p50 + 1.00"},
	{Target: 7, Figure: "MCP tools/call (echo)", Runtime: "runc", Unit: "ms", Goal: noRegression},
	{Target: 7, Figure: "MCP tools/call (echo)", Runtime: "runsc", Unit: "ms", Goal: noRegression},
	{Target: 7, Figure: "desktop left click", Runtime: "runc", Unit: "ms", Goal: noRegression},
	{Target: 7, Figure: "desktop left click", Runtime: "runsc", Unit: "ms", Goal: noRegression},
	{Target: 7, Figure: "desktop screenshot 1280×800", Runtime: "runc", Unit: "ms", Goal: noRegression},
	{Target: 7, Figure: "desktop screenshot 1280×800", Runtime: "runsc", Unit: "ms", Goal: noRegression},
}

// noRegression is target 7's goal: no slower than the baseline build by
// more than a tenth, at the median.
const noRegression = "p50 ≤ 1.1× baseline p50"

// judgeNoRegression is target 7's verdict of this build's sample against
// the baseline's (none: not measured).
func judgeNoRegression(r *TargetRow, this, base Summary, baseLabel string) {
	if base.N == 0 {
		r.Verdict, r.Note = NotMeasured, strings.TrimPrefix(r.Note+"; no baseline to compare with", "; ")
		return
	}
	r.Compare = append(r.Compare, Compared{baseLabel, Ms(base.P50)})
	r.Verdict = VerdictOf(float64(this.P50) <= 1.1*float64(base.P50))
}

// targetRecorder collects the rows the benchmarks record while
// BenchmarkTargets runs them; outside it recording does nothing.
var targetRecorder struct {
	mu   sync.Mutex
	on   bool
	rows []TargetRow
}

// recordTarget adds a row to the targets summary of the run, if one is
// being made.
func recordTarget(r TargetRow) {
	targetRecorder.mu.Lock()
	defer targetRecorder.mu.Unlock()
	if targetRecorder.on {
		targetRecorder.rows = append(targetRecorder.rows, r)
	}
}

// baselineLabel is how the rows name the baseline build.
func baselineLabel() string {
	return "baseline " + cmp.Or(os.Getenv("GENESIS_BENCH_BASELINE_REV"), "build")
}

// baselineDir is the directory of the baseline build's binaries named by
// GENESIS_BENCH_BASELINE_BIN (the path of its sandbox-service, as make
// bench-speed passes it, or the directory holding it), "" when unset.
func baselineDir(tb testing.TB) string {
	tb.Helper()
	v := os.Getenv("GENESIS_BENCH_BASELINE_BIN")
	if v == "" {
		return ""
	}
	fi, err := os.Stat(v)
	if err != nil {
		tb.Fatalf("GENESIS_BENCH_BASELINE_BIN=%s: %v", v, err)
	}
	dir := v
	if !fi.IsDir() {
		dir = filepath.Dir(v)
	}
	for _, f := range []string{"sandbox-service", "genesis-agent", "genesis-egress"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			tb.Fatalf("GENESIS_BENCH_BASELINE_BIN=%s: %v (the baseline's sandbox-service, with genesis-agent and genesis-egress beside it)", v, err)
		}
	}
	return dir
}

// targetsDefaults are the rounds of each part in BenchmarkTargets when
// the environment does not set them: sized so that the run without the
// load step takes at most about 25 minutes on a 2-vCPU host.
var targetsDefaults = map[string]string{
	"GENESIS_BENCH_SPEED_EXEC_ITERS":   "300",
	"GENESIS_BENCH_SPEED_DOCKER_ITERS": "30",
	"GENESIS_BENCH_SPEED_LEASE_ITERS":  "100",
	"GENESIS_BENCH_SPEED_COLD_ITERS":   "30",
	"GENESIS_BENCH_CLIENT_STREAM_MIB":  "256",
	"GENESIS_BENCH_STREAM_RUNS":        "6",
	"GENESIS_BENCH_BROWSER_ACTIONS":    "30",
	"GENESIS_BENCH_BROWSER_CLICKS":     "150",
	"GENESIS_BENCH_MCP_ITERS":          "500",
	"GENESIS_BENCH_DESKTOP_ACTIONS":    "150",
	// Only the parts with a figure of issue 40.
	"GENESIS_BENCH_BROWSER_PARTS": "actions",
	"GENESIS_BENCH_DESKTOP_PARTS": "actions",
	// The Python SDK's stream rows are not one of the figures.
	"GENESIS_BENCH_STREAM_PYTHON": "0",
}

// BenchmarkTargets is `make bench-targets`: every figure of issue 40's
// targets in one run, each against its comparisons (the baseline build of
// GENESIS_BENCH_BASELINE_BIN where the benchmark takes one, docker exec,
// docker run, the agent alone, direct CDP, a direct stdio MCP call), and
// then one summary table of all of them with the target's verdict and the
// host's load average over the whole run, printed and written to
// GENESIS_BENCH_TARGETS_OUT (a path; none: printed only). It runs, in
// order: BenchmarkSpeed (targets 1–3), BenchmarkStreamClient (4), the
// actions part of BenchmarkBrowser (6: screenshot), BenchmarkBrowserClick
// (6: click), BenchmarkMCPToolCall and the actions part of
// BenchmarkDesktop (7), and last BenchmarkLoad (5), which
// GENESIS_BENCH_TARGETS_LOAD=0 leaves out. Each part prints its own
// detailed table as it does alone; targetsDefaults sizes the rounds of
// those whose environment is unset. A part that fails leaves its rows
// "not measured" and the others run on. It runs only when
// GENESIS_BENCH_TARGETS=1 (the make target sets it), so that `make bench`
// does not run every part twice.
func BenchmarkTargets(b *testing.B) {
	if os.Getenv("GENESIS_BENCH_TARGETS") != "1" {
		b.Skip("run by make bench-targets (GENESIS_BENCH_TARGETS=1)")
	}
	for k, v := range targetsDefaults {
		if _, ok := os.LookupEnv(k); !ok {
			b.Setenv(k, v)
		}
	}
	targetRecorder.mu.Lock()
	targetRecorder.on, targetRecorder.rows = true, nil
	targetRecorder.mu.Unlock()
	defer func() {
		targetRecorder.mu.Lock()
		targetRecorder.on = false
		targetRecorder.mu.Unlock()
	}()
	start := time.Now()
	watch := watchLoad()
	parts := []struct {
		name string
		fn   func(*testing.B)
	}{
		{"speed", BenchmarkSpeed},
		{"stream", BenchmarkStreamClient},
		{"browser", BenchmarkBrowser},
		{"browser-click", BenchmarkBrowserClick},
		{"mcp", BenchmarkMCPToolCall},
		{"desktop", BenchmarkDesktop},
		{"load", BenchmarkLoad},
	}
	for _, p := range parts {
		if p.name == "load" && os.Getenv("GENESIS_BENCH_TARGETS_LOAD") == "0" {
			fmt.Println("\ntargets: the load step is left out (GENESIS_BENCH_TARGETS_LOAD=0)")
			continue
		}
		b.Run(p.name, p.fn)
	}
	samples := watch.stopSamples()
	targetRecorder.mu.Lock()
	rows := MergeTargets(expectedTargets, targetRecorder.rows)
	targetRecorder.mu.Unlock()
	if os.Getenv("GENESIS_BENCH_TARGETS_LOAD") == "0" {
		for i := range rows {
			if rows[i].Target == 5 && rows[i].N == 0 {
				rows[i].Note = "left out (GENESIS_BENCH_TARGETS_LOAD=0)"
			}
		}
	}
	build := "working tree"
	if out, err := exec.Command("git", "describe", "--always", "--dirty").Output(); err == nil {
		build = strings.TrimSpace(string(out))
	}
	base := ""
	if os.Getenv("GENESIS_BENCH_BASELINE_BIN") != "" {
		base = cmp.Or(os.Getenv("GENESIS_BENCH_BASELINE_REV"), os.Getenv("GENESIS_BENCH_BASELINE_BIN"))
	}
	md := RenderTargets(TargetsHeader{Build: build, Baseline: base, Start: start, Wall: time.Since(start), Load: LoadStats(samples)}, rows)
	fmt.Print("\n" + md)
	if out := os.Getenv("GENESIS_BENCH_TARGETS_OUT"); out != "" {
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(out, []byte(md), 0o644); err != nil {
			b.Fatal(err)
		}
		fmt.Printf("targets: written to %s\n", out)
	}
	b.ReportMetric(0, "ns/op")
}
