package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Verdict is what a targets row says of its target.
type Verdict int

// The verdicts. The zero value is NotMeasured, so that a figure nobody
// recorded says so.
const (
	NotMeasured Verdict = iota
	Met
	NotMet
	NoTarget // the row is a comparison or a detail, with no target of its own
)

func (v Verdict) String() string {
	switch v {
	case Met:
		return "met"
	case NotMet:
		return "NOT met"
	case NoTarget:
		return "—"
	default:
		return "not measured"
	}
}

// VerdictOf is Met when ok, else NotMet.
func VerdictOf(ok bool) Verdict {
	if ok {
		return Met
	}
	return NotMet
}

// Compared is one comparison of a targets row: what it is and its p50, in
// the row's unit.
type Compared struct {
	What string
	P50  float64
}

// TargetRow is one line of the targets summary (`make bench-targets`): a
// figure of issue 40 under one runtime, this build's p50/p90/p99, the p50
// of what it is compared with in the same run, the target and its verdict.
// Rows are keyed by Figure and Runtime.
type TargetRow struct {
	Target  int    // issue 40's target number, 1–7
	Figure  string // what is measured
	Runtime string // runc, runsc, or "" for a figure of the host
	Unit    string // of P50, P90, P99 and the comparisons: "ms" or "MiB/s"
	N       int    // samples; 0 when it was not measured
	P50     float64
	P90     float64
	P99     float64
	Compare []Compared
	Goal    string // the target in words; "" for none
	Verdict Verdict
	Note    string // what else the benchmark says: CPU, rate, what binds, why not measured
}

// MsRow is a TargetRow in milliseconds from a sample's summary.
func MsRow(target int, figure, runtime string, s Summary) TargetRow {
	return TargetRow{Target: target, Figure: figure, Runtime: runtime, Unit: "ms", N: s.N,
		P50: Ms(s.P50), P90: Ms(s.P90), P99: Ms(s.P99)}
}

// key identifies the row of a figure under a runtime.
func (r TargetRow) key() string { return r.Figure + "\x00" + r.Runtime }

// LoadStats describes samples of the host's 1-minute load average, in the
// order they were taken.
func LoadStats(samples []float64) string {
	if len(samples) == 0 {
		return "unknown"
	}
	var sum float64
	for _, v := range samples {
		sum += v
	}
	return fmt.Sprintf("start %.2f, mean %.2f, max %.2f, end %.2f",
		samples[0], sum/float64(len(samples)), slices.Max(samples), samples[len(samples)-1])
}

// MergeTargets lays the recorded rows over the expected ones: each
// expected row (figure, runtime, target, no sample) is replaced by the
// recorded row of the same figure and runtime, and stays "not measured"
// when there is none; recorded rows that were not expected follow, in the
// order recorded. A recorded row without a goal takes the expected one's.
func MergeTargets(expected, recorded []TargetRow) []TargetRow {
	byKey := map[string]TargetRow{}
	for _, r := range recorded {
		byKey[r.key()] = r // the last recording of a figure wins
	}
	out := make([]TargetRow, 0, len(expected)+len(recorded))
	seen := map[string]bool{}
	for _, e := range expected {
		r, ok := byKey[e.key()]
		if !ok {
			e.N, e.Verdict = 0, NotMeasured
			out = append(out, e)
			seen[e.key()] = true
			continue
		}
		if r.Goal == "" {
			r.Goal = e.Goal
		}
		if r.Target == 0 {
			r.Target = e.Target
		}
		out = append(out, r)
		seen[e.key()] = true
	}
	for _, r := range recorded {
		if !seen[r.key()] {
			out = append(out, byKey[r.key()])
			seen[r.key()] = true
		}
	}
	return out
}

// formatValue renders v in unit: milliseconds with two decimals, rates
// without.
func formatValue(v float64, unit string) string {
	if unit == "ms" {
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

// mdCell escapes a table cell of Markdown.
func mdCell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
}

// TargetsHeader is what the summary says above its table.
type TargetsHeader struct {
	Build    string    // this build's revision
	Baseline string    // the baseline's revision, "" for none
	Start    time.Time // when the run started
	Wall     time.Duration
	Load     string // LoadStats of the whole run
}

// RenderTargets renders the summary of a `make bench-targets` run as
// Markdown: a heading, the load average during the run and one table row
// per figure and runtime.
func RenderTargets(h TargetsHeader, rows []TargetRow) string {
	var sb strings.Builder
	base := "no baseline (BASE= empty: this build alone)"
	if h.Baseline != "" {
		base = "baseline " + h.Baseline
	}
	fmt.Fprintf(&sb, "# Issue 40 targets: this build %s vs %s\n\n", h.Build, base)
	fmt.Fprintf(&sb, "Run %s, %s wall; 1-min load average during the run: %s.\n\n",
		h.Start.UTC().Format(time.RFC3339), h.Wall.Round(time.Second), h.Load)
	sb.WriteString("| # | figure | runtime | n | p50 | p90 | p99 | unit | comparisons, p50 | target | verdict | notes |\n")
	sb.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	counts := map[Verdict]int{}
	for _, r := range rows {
		counts[r.Verdict]++
		rt := r.Runtime
		if rt == "" {
			rt = "host"
		}
		cells := []string{fmt.Sprint(r.Target), r.Figure, rt}
		if r.N == 0 {
			cells = append(cells, "0", "", "", "", r.Unit, "")
		} else {
			var cmp []string
			for _, c := range r.Compare {
				cmp = append(cmp, c.What+" "+formatValue(c.P50, r.Unit))
			}
			cells = append(cells, fmt.Sprint(r.N), formatValue(r.P50, r.Unit), formatValue(r.P90, r.Unit),
				formatValue(r.P99, r.Unit), r.Unit, strings.Join(cmp, "; "))
		}
		goal := r.Goal
		if goal == "" {
			goal = "—"
		}
		cells = append(cells, goal, r.Verdict.String(), r.Note)
		for i, c := range cells {
			cells[i] = mdCell(c)
		}
		sb.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	fmt.Fprintf(&sb, "\n%d met, %d not met, %d not measured.\n", counts[Met], counts[NotMet], counts[NotMeasured])
	return sb.String()
}
