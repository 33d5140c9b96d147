package bench

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestInterleaveRotatesAndThins(t *testing.T) {
	t.Parallel()
	var got []string
	mk := func(name string, every int) step {
		return step{name: name, every: every, run: func(context.Context) error { got = append(got, name); return nil }}
	}
	steps := []step{mk("a", 1), mk("b", 1), mk("d", 2)}
	if err := interleave(context.Background(), 4, steps); err != nil {
		t.Fatal(err)
	}
	// Round r starts at step r mod 3; d runs in rounds 0 and 2 only:
	// a b d | b a | d a b | a b.
	want := []string{"a", "b", "d", "b", "a", "d", "a", "b", "a", "b"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}

func TestInterleaveStopsAtTheFirstError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	calls := 0
	steps := []step{{name: "x", run: func(context.Context) error {
		calls++
		if calls == 3 {
			return boom
		}
		return nil
	}}}
	err := interleave(context.Background(), 10, steps)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "x (round 2)") || calls != 3 {
		t.Fatalf("err %v after %d calls, want boom in round 2 after 3", err, calls)
	}
}

func TestVerdictAndRatio(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	s := Summary{N: 10, P50: 2 * ms, P99: 7 * ms}
	for _, c := range []struct {
		p50, p99 time.Duration
		want     string
	}{
		{3 * ms, 0, "p50 ≤ 3.00: met"},
		{ms, 0, "p50 ≤ 1.00: NOT met"},
		{3 * ms, 6 * ms, "p50 ≤ 3.00, p99 ≤ 6.00: NOT met"},
		{2 * ms, 7 * ms, "p50 ≤ 2.00, p99 ≤ 7.00: met"},
	} {
		if got := verdict(s, c.p50, c.p99); got != c.want {
			t.Errorf("verdict(%v, %v) = %q, want %q", c.p50, c.p99, got, c.want)
		}
	}
	if got := ratio(s, Summary{N: 5, P50: 4 * ms}); got != "0.50×" {
		t.Errorf("ratio = %q, want 0.50×", got)
	}
	if got := ratio(s, Summary{}); got != "" {
		t.Errorf("ratio without a comparison = %q, want empty", got)
	}
}

func TestParseCapacity(t *testing.T) {
	t.Parallel()
	const metrics = `# HELP genesis_capacity Host capacity for sandboxes by resource.
# TYPE genesis_capacity gauge
genesis_capacity{resource="cpu"} 32
genesis_capacity{resource="memory_mb"} 48210
genesis_capacity{resource="sandboxes"} 200
genesis_capacity_in_use{resource="cpu"} 3.75
genesis_capacity_in_use{resource="memory_mb"} 3840
genesis_capacity_in_use{resource="sandboxes"} 30
genesis_capacity_other{resource="cpu"} 99
`
	got, err := parseCapacity(metrics)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]float64{"cpu": {3.75, 32}, "memory_mb": {3840, 48210}, "sandboxes": {30, 200}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if _, err := parseCapacity("up 1\n"); err == nil {
		t.Fatal("no capacity lines: want an error")
	}
	if _, err := parseCapacity(`genesis_capacity{resource="cpu"} x`); err == nil {
		t.Fatal("a malformed value: want an error")
	}
}
