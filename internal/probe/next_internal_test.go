package probe

import (
	"testing"
	"time"

	"genesis.dev/sandbox/internal/driver"
)

// TestNextProbeBacksOff: while a runtime stays unhealthy the re-checks
// come after 10 s, 20 s, 40 s, ... up to the interval; a healthy probe
// goes back to the interval and the next failure to the short retry.
func TestNextProbeBacksOff(t *testing.T) {
	p := &Prober{}
	set := func(healthy bool) {
		p.res = driver.ProbeResult{Healthy: true, Runtimes: []driver.RuntimeInfo{{Name: "runsc", Healthy: healthy}}}
	}
	const interval, retry = 5 * time.Minute, 10 * time.Second
	set(false)
	var got []time.Duration
	for range 7 {
		got = append(got, p.next(interval, retry))
	}
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, interval, interval}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("re-checks while unhealthy: %v; want %v", got, want)
		}
	}
	set(true)
	if d := p.next(interval, retry); d != interval {
		t.Errorf("healthy: next probe in %v; want %v", d, interval)
	}
	set(false)
	if d := p.next(interval, retry); d != retry {
		t.Errorf("unhealthy again: next probe in %v; want %v", d, retry)
	}
}
