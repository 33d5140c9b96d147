package control

import (
	"testing"

	"genesis.dev/sandbox/internal/sandbox"
)

func TestPoolState(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		draining, failing bool
		idle, minIdle     int
		want              string
	}{
		{false, false, 2, 2, PoolReady},
		{false, false, 3, 2, PoolReady},
		{false, false, 1, 2, PoolFilling},
		{false, true, 2, 2, PoolFailing}, // idle members left, but no new one can be made
		{true, true, 0, 2, PoolDraining},
		{false, false, 0, 0, PoolReady},
	} {
		if got := poolState(c.draining, c.failing, c.idle, c.minIdle); got != c.want {
			t.Errorf("poolState(%v, %v, %d, %d) = %s, want %s", c.draining, c.failing, c.idle, c.minIdle, got, c.want)
		}
	}
}

func TestPoolKeyName(t *testing.T) {
	t.Parallel()
	if got := (poolKey{"tool-basic", sandbox.RuntimeRunc, ""}).name(); got != "tool-basic-runc" {
		t.Errorf("plain pool name %q", got)
	}
	if got := (poolKey{"tool-basic", sandbox.RuntimeRunsc, "snap_0123456789abcdef"}).name(); got != "tool-basic-runsc-snap_0123456789abcdef" {
		t.Errorf("snapshot pool name %q", got)
	}
}
