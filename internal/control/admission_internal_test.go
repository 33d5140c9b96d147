package control

import (
	"context"
	"runtime"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/config"
)

// TestAdmissionRemoteCapacity: with sandboxes on this host, unset CPU and
// memory totals come from the host; with sandboxes elsewhere (a cluster),
// from the sandbox count at the largest limits, and what the config sets
// stays as set.
func TestAdmissionRemoteCapacity(t *testing.T) {
	cfg, err := config.Default()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Capacity.Sandboxes = 10
	one := func(context.Context, string) int { return 1 }
	local, err := newAdmission(cfg, false, time.Now, one)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := local.Stats().Capacity.CPU, float64(runtime.NumCPU())*cfg.Capacity.CPUOvercommit; got != want {
		t.Errorf("local CPU capacity %v; want the host's %v", got, want)
	}
	remote, err := newAdmission(cfg, true, time.Now, one)
	if err != nil {
		t.Fatal(err)
	}
	c := remote.Stats().Capacity
	if c.CPU != 10*cfg.Limits.MaxCPU || c.MemoryMB != 10*cfg.Limits.MaxMemoryMB || c.Sandboxes != 10 {
		t.Errorf("remote capacity %+v; want 10 sandboxes at %v CPU and %d MB each", c, cfg.Limits.MaxCPU, cfg.Limits.MaxMemoryMB)
	}
	cfg.Capacity.CPU = 3
	if remote, err = newAdmission(cfg, true, time.Now, one); err != nil {
		t.Fatal(err)
	}
	if got := remote.Stats().Capacity.CPU; got != 3 {
		t.Errorf("remote CPU capacity set to 3 reads %v", got)
	}
}
