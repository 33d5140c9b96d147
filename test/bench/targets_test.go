package bench

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestVerdictString(t *testing.T) {
	t.Parallel()
	for v, want := range map[Verdict]string{NotMeasured: "not measured", Met: "met", NotMet: "NOT met", NoTarget: "—"} {
		if v.String() != want {
			t.Errorf("Verdict(%d) = %q, want %q", v, v.String(), want)
		}
	}
	if VerdictOf(true) != Met || VerdictOf(false) != NotMet {
		t.Error("VerdictOf does not map true to Met and false to NotMet")
	}
	var zero TargetRow
	if zero.Verdict != NotMeasured {
		t.Error("a row nobody judged must say not measured")
	}
}

func TestLoadStats(t *testing.T) {
	t.Parallel()
	if got, want := LoadStats([]float64{1, 3, 2}), "start 1.00, mean 2.00, max 3.00, end 2.00"; got != want {
		t.Errorf("LoadStats = %q, want %q", got, want)
	}
	if got := LoadStats(nil); got != "unknown" {
		t.Errorf("LoadStats(nil) = %q, want unknown", got)
	}
}

func TestMsRow(t *testing.T) {
	t.Parallel()
	r := MsRow(1, "exec", "runc", Summarize(ms(1, 2, 3, 4)))
	if r.Unit != "ms" || r.N != 4 || r.P50 != 2 || r.P90 != 4 || r.P99 != 4 || r.Target != 1 {
		t.Errorf("MsRow = %+v", r)
	}
}

func TestMergeTargets(t *testing.T) {
	t.Parallel()
	expected := []TargetRow{
		{Target: 1, Figure: "exec", Runtime: "runc", Unit: "ms", Goal: "p50 ≤ 2.50"},
		{Target: 1, Figure: "exec", Runtime: "runsc", Unit: "ms", Goal: "p50 ≤ 14.00"},
		{Target: 5, Figure: "load", Unit: "ms", Goal: "≥ 500 execs/s"},
	}
	recorded := []TargetRow{
		{Figure: "extra", Runtime: "runc", Unit: "ms", N: 3, P50: 9, Verdict: NoTarget},
		{Figure: "exec", Runtime: "runc", Unit: "ms", N: 10, P50: 3, Verdict: NotMet},
		{Figure: "exec", Runtime: "runc", Unit: "ms", N: 20, P50: 2, Verdict: Met}, // a later recording wins
	}
	got := MergeTargets(expected, recorded)
	if len(got) != 4 {
		t.Fatalf("got %d rows, want 4: %+v", len(got), got)
	}
	if r := got[0]; r.N != 20 || r.Verdict != Met || r.Goal != "p50 ≤ 2.50" || r.Target != 1 {
		t.Errorf("row 0 = %+v, want the last recording with the expected goal and target", r)
	}
	for _, i := range []int{1, 2} {
		if r := got[i]; r.N != 0 || r.Verdict != NotMeasured || r.Goal != expected[i].Goal {
			t.Errorf("row %d = %+v, want %s not measured", i, r, expected[i].Figure)
		}
	}
	if r := got[3]; r.Figure != "extra" || r.N != 3 {
		t.Errorf("row 3 = %+v, want the unexpected recording after the expected ones", r)
	}
	if len(MergeTargets(expected, nil)) != len(expected) {
		t.Error("with nothing recorded every expected row must stay")
	}
}

func TestRenderTargets(t *testing.T) {
	t.Parallel()
	rows := MergeTargets(expectedTargets, []TargetRow{
		{Target: 1, Figure: "exec `true`, HTTP", Runtime: "runc", Unit: "ms", N: 300, P50: 2.371, P90: 3.09, P99: 5.344,
			Compare: []Compared{{"baseline abc123", 2.38}, {"docker exec", 73}}, Verdict: Met},
		{Target: 4, Figure: "stdout → Go client, text", Runtime: "runsc", Unit: "MiB/s", N: 3, P50: 425.4, P90: 400.2, P99: 390,
			Verdict: Met, Note: "service CPU 1.20 ms/MiB | x"},
		{Target: 5, Figure: "load: exec `true` on the runc sandboxes", Unit: "ms", N: 6000, P50: 20, P90: 40, P99: 530, Verdict: NotMet},
	})
	start := time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)
	md := RenderTargets(TargetsHeader{Build: "abc1234", Baseline: "2086070", Start: start, Wall: 1234 * time.Second, Load: "start 1.00, mean 2.00, max 3.00, end 2.00"}, rows)
	for _, want := range []string{
		"# Issue 40 targets: this build abc1234 vs baseline 2086070",
		"2026-12-07T03:00:00Z, 20m34s wall; 1-min load average during the run: start 1.00, mean 2.00, max 3.00, end 2.00.",
		"| 1 | exec `true`, HTTP | runc | 300 | 2.37 | 3.09 | 5.34 | ms | baseline abc123 2.38; docker exec 73.00 | p50 ≤ 2.50, p99 ≤ 6.00 | met |  |",
		"| 4 | stdout → Go client, text | runsc | 3 | 425 | 400 | 390 | MiB/s |  | p50 ≥ 400 | met | service CPU 1.20 ms/MiB \\| x |",
		"| 5 | load: exec `true` on the runc sandboxes | host | 6000 | 20.00 | 40.00 | 530.00 | ms |  | ≥ 500 execs/s, p99 ≤ 50, 0 errors | NOT met |  |",
		"| 1 | exec `true`, HTTP | runsc | 0 |  |  |  | ms |  | p50 ≤ 14.00 | not measured |  |",
		"| 1 | exec `true`, gRPC | runc | 0 |  |  |  | ms |  | — | not measured |  |",
		"\n2 met, 1 not met, " + strconv.Itoa(len(expectedTargets)-3) + " not measured.\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the summary lacks %q:\n%s", want, md)
		}
	}
	// Every table line has the header's number of cells (escaped pipes
	// are not cell borders).
	var tableLines []string
	for l := range strings.Lines(md) {
		if strings.HasPrefix(l, "|") {
			tableLines = append(tableLines, strings.ReplaceAll(l, `\|`, ""))
		}
	}
	if len(tableLines) != 2+len(expectedTargets) {
		t.Fatalf("%d table lines, want %d:\n%s", len(tableLines), 2+len(expectedTargets), md)
	}
	for _, l := range tableLines {
		if n, want := strings.Count(l, "|"), strings.Count(tableLines[0], "|"); n != want {
			t.Errorf("%d borders in %q, want %d", n, l, want)
		}
	}
	if md2 := RenderTargets(TargetsHeader{Build: "abc1234", Start: start}, nil); !strings.Contains(md2, "vs no baseline") {
		t.Errorf("without a baseline the heading must say so:\n%s", md2)
	}
}

// TestExpectedTargets: the summary has a row for every target of issue 40,
// under both runtimes where the target has one, each row once.
func TestExpectedTargets(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	targets := map[int]bool{}
	for _, r := range expectedTargets {
		if seen[r.key()] {
			t.Errorf("%s (%s) is listed twice", r.Figure, r.Runtime)
		}
		seen[r.key()] = true
		targets[r.Target] = true
		if r.Unit == "" {
			t.Errorf("%s (%s) has no unit", r.Figure, r.Runtime)
		}
	}
	for n := 1; n <= 7; n++ {
		if !targets[n] {
			t.Errorf("no row of target %d", n)
		}
	}
	for _, r := range expectedTargets {
		if r.Runtime == "runc" && !seen[r.Figure+"\x00runsc"] {
			t.Errorf("%s has a runc row but no runsc row", r.Figure)
		}
	}
}

func TestJudgeNoRegression(t *testing.T) {
	t.Parallel()
	this := Summarize(ms(10, 11, 12))
	r := MsRow(7, "x", "runc", this)
	judgeNoRegression(&r, this, Summarize(ms(10, 10, 10)), "baseline b")
	if r.Verdict != Met || !slices.Equal(r.Compare, []Compared{{"baseline b", 10}}) {
		t.Errorf("11 vs 10: %+v, want met with the baseline compared", r)
	}
	judgeNoRegression(&r, this, Summarize(ms(9, 9, 9)), "baseline b")
	if r.Verdict != NotMet {
		t.Errorf("11 vs 9: %v, want NOT met", r.Verdict)
	}
	r = MsRow(7, "x", "runc", this)
	judgeNoRegression(&r, this, Summary{}, "baseline b")
	if r.Verdict != NotMeasured || !strings.Contains(r.Note, "no baseline") {
		t.Errorf("without a baseline: %+v, want not measured and why", r)
	}
}

func TestBaselineDir(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"sandbox-service", "genesis-agent", "genesis-egress"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range []string{dir, filepath.Join(dir, "sandbox-service")} {
		t.Setenv("GENESIS_BENCH_BASELINE_BIN", v)
		if got := baselineDir(t); got != dir {
			t.Errorf("GENESIS_BENCH_BASELINE_BIN=%s: baselineDir = %q, want %q", v, got, dir)
		}
	}
	t.Setenv("GENESIS_BENCH_BASELINE_BIN", "")
	if got := baselineDir(t); got != "" {
		t.Errorf("unset: baselineDir = %q, want empty", got)
	}
}

func TestBenchParts(t *testing.T) {
	t.Setenv("GENESIS_BENCH_TEST_PARTS", "actions,ready")
	part := benchParts("GENESIS_BENCH_TEST_PARTS")
	if !part("actions") || !part("ready") || part("cold") {
		t.Error("benchParts must select exactly the listed parts")
	}
	if !benchParts("GENESIS_BENCH_TEST_PARTS_UNSET")("anything") {
		t.Error("an unset variable must select every part")
	}
}
