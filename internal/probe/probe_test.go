package probe

import (
	"strings"
	"testing"

	"genesis.dev/sandbox/internal/driver"
)

func probeOf(healthy ...bool) driver.ProbeResult {
	res := driver.ProbeResult{Healthy: false}
	for i, h := range healthy {
		name := []string{"runc", "runsc"}[i]
		res.Runtimes = append(res.Runtimes, driver.RuntimeInfo{Name: name, Healthy: h})
		if h {
			res.Healthy = true
		} else {
			res.Runtimes[i].Error = "smoke run: deadline exceeded"
			res.Runtimes[i].TimedOut = true
		}
	}
	if !res.Healthy {
		res.Error = "no runtime passed its smoke run"
	}
	return res
}

func TestProbeToleratesBlipsOfHealthyRuntimes(t *testing.T) {
	prev := probeOf(true, true)
	var fails map[string]int
	for i := 1; i <= probeBlips; i++ {
		res := probeOf(false, true)
		fails = keepThroughBlips(&res, prev, fails)
		if !res.Runtimes[0].Healthy || !res.Healthy || !strings.Contains(res.Runtimes[0].Error, "deadline exceeded") {
			t.Fatalf("failure %d of a runtime that passed before: %+v; want still healthy with the error shown", i, res)
		}
		prev = res
	}
	res := probeOf(false, true)
	fails = keepThroughBlips(&res, prev, fails)
	if res.Runtimes[0].Healthy {
		t.Fatalf("after %d failures in a row the runtime still reads healthy: %+v", probeBlips+1, res)
	}
	prev = res
	// A runtime that never passed is not helped, and a pass resets the count.
	res = probeOf(false, false)
	keepThroughBlips(&res, prev, fails)
	if res.Runtimes[0].Healthy || res.Runtimes[1].Healthy != true {
		t.Fatalf("got %+v; want runc unhealthy (it failed before) and runsc kept (it passed before)", res)
	}
	// A failure that is not a missed deadline counts at once.
	res = probeOf(true, false)
	res.Runtimes[1].TimedOut = false
	keepThroughBlips(&res, probeOf(true, true), nil)
	if res.Runtimes[1].Healthy {
		t.Fatalf("a runtime error (not a timeout) was tolerated: %+v", res)
	}
	res = probeOf(true, true)
	if got := keepThroughBlips(&res, prev, fails); len(got) != 0 {
		t.Fatalf("a passing probe left failure counts %v", got)
	}
}
