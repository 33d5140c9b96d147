package bench

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func ms(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"single p50", ms(7), 50, 7 * time.Millisecond},
		{"single p99", ms(7), 99, 7 * time.Millisecond},
		{"p0 is min", ms(1, 2, 3), 0, 1 * time.Millisecond},
		{"p100 is max", ms(1, 2, 3), 100, 3 * time.Millisecond},
		{"p50 of even n is lower middle", ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"p50 of odd n is middle", ms(1, 2, 3, 4, 5), 50, 3 * time.Millisecond},
		{"p99 of 100", hundred, 99, 99 * time.Millisecond},
		{"p50 of 100", hundred, 50, 50 * time.Millisecond},
		{"p99 of 10 is max", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10 * time.Millisecond},
		{"p above 100 clamps", ms(1, 2), 150, 2 * time.Millisecond},
		{"negative p clamps", ms(1, 2), -5, 1 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Percentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("Percentile(%v, %v) = %v, want %v", tt.sorted, tt.p, got, tt.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	in := ms(5, 1, 4, 2, 3)
	got := Summarize(in)
	want := Summary{N: 5, Min: 1 * time.Millisecond, Max: 5 * time.Millisecond,
		Mean: 3 * time.Millisecond, P50: 3 * time.Millisecond, P90: 5 * time.Millisecond, P99: 5 * time.Millisecond}
	if got != want {
		t.Errorf("Summarize = %+v, want %+v", got, want)
	}
	if in[0] != 5*time.Millisecond {
		t.Errorf("Summarize reordered its input: %v", in)
	}
	if (Summarize(nil) != Summary{}) {
		t.Errorf("Summarize(nil) = %+v, want zero", Summarize(nil))
	}
}

func TestVmRSSKiB(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		status  string
		want    int64
		wantErr bool
	}{
		{"linux", "Name:\tgenesis-agent\nVmPeak:\t  1 kB\nVmRSS:\t    9216 kB\nVmData:\t 3 kB\n", 9216, false},
		{"gvisor", "Name:\tgenesis-agent\nVmSize:\t10980 kB\nVmRSS:\t4544 kB\n", 4544, false},
		{"missing", "Name:\tkthreadd\nState:\tS\n", 0, true},
		{"bad unit", "VmRSS:\t12 MB\n", 0, true},
		{"not a number", "VmRSS:\tlots kB\n", 0, true},
		{"negative", "VmRSS:\t-3 kB\n", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := VmRSSKiB(tt.status)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("VmRSSKiB = %d, %v; want %d, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestTableAligns(t *testing.T) {
	t.Parallel()
	tb := NewTable("runtime", "p50 ms")
	tb.Row("runc", "1.25")
	tb.Row("runsc", "12.50")
	lines := strings.Split(strings.Trim(tb.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %d lines, want 3:\n%s", len(lines), tb)
	}
	for _, l := range lines[1:] {
		if len(l) != len(lines[0]) {
			t.Errorf("row %q is not as wide as the header %q", l, lines[0])
		}
	}
}

func TestPermutations(t *testing.T) {
	for n := range 5 {
		ps := permutations(n)
		want := 1
		for k := 2; k <= n; k++ {
			want *= k
		}
		seen := map[string]bool{}
		for _, p := range ps {
			if len(p) != n {
				t.Fatalf("permutations(%d) has %v", n, p)
			}
			s := fmt.Sprint(p)
			for k := range n {
				if !slices.Contains(p, k) {
					t.Fatalf("permutations(%d): %v lacks %d", n, p, k)
				}
			}
			seen[s] = true
		}
		if len(ps) != want || len(seen) != want {
			t.Fatalf("permutations(%d): %d orders, %d distinct, want %d", n, len(ps), len(seen), want)
		}
	}
}
