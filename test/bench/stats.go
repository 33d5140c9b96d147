package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Summary describes a sample of durations.
type Summary struct {
	N    int
	Min  time.Duration
	Max  time.Duration
	Mean time.Duration
	P50  time.Duration
	P90  time.Duration
	P99  time.Duration
}

// Summarize returns the summary of samples, with nearest-rank percentiles.
// It does not modify samples; an empty sample gives the zero Summary.
func Summarize(samples []time.Duration) Summary {
	if len(samples) == 0 {
		return Summary{}
	}
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	var sum time.Duration
	for _, d := range sorted {
		sum += d
	}
	return Summary{
		N:    len(sorted),
		Min:  sorted[0],
		Max:  sorted[len(sorted)-1],
		Mean: sum / time.Duration(len(sorted)),
		P50:  Percentile(sorted, 50),
		P90:  Percentile(sorted, 90),
		P99:  Percentile(sorted, 99),
	}
}

// Percentile returns the nearest-rank p-th percentile of sorted (ascending):
// the smallest sample such that at least p percent of the samples are less
// than or equal to it. p is clamped to [0, 100]; an empty slice gives 0.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	p = min(max(p, 0), 100)
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank-1, 0), len(sorted)-1)]
}

// Ms is d in milliseconds.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// FormatMs renders d in milliseconds with two decimals.
func FormatMs(d time.Duration) string { return fmt.Sprintf("%.2f", Ms(d)) }

// FormatKiB renders a size given in KiB as MiB with one decimal.
func FormatKiB(kib int64) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }

// Table collects rows of text and renders them as aligned columns.
type Table struct {
	rows [][]string
}

// NewTable returns a table with the given column headers.
func NewTable(header ...string) *Table { return &Table{rows: [][]string{header}} }

// Row appends one row.
func (t *Table) Row(cells ...string) { t.rows = append(t.rows, cells) }

// String renders the table, starting with a newline so that it lines up
// when logged.
func (t *Table) String() string {
	var sb strings.Builder
	sb.WriteByte('\n')
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, r := range t.rows {
		fmt.Fprintln(tw, strings.Join(r, "\t")+"\t")
	}
	tw.Flush()
	return sb.String()
}
