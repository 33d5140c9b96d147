package control_test

import (
	"context"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/controltest"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/sandbox"
)

// gatedDriver holds ImagePresent (a create's last driver call before its
// record is stored) until gate is closed.
type gatedDriver struct {
	driver.Driver
	gate chan struct{}
}

func (d *gatedDriver) ImagePresent(ctx context.Context, ref string) (bool, error) {
	select {
	case <-d.gate:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	return d.Driver.ImagePresent(ctx, ref)
}

// TestDrainWaitsForPoolCreates: a pool member whose create is in flight
// (no record yet) when the drain starts does not outlive the drain.
func TestDrainWaitsForPoolCreates(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	h := newHarnessWith(t, withPool(1, 1), func(c *control.Config) { c.Driver = &gatedDriver{Driver: c.Driver, gate: gate} })
	ctx := context.Background()
	h.waitStarting(1)
	drained := make(chan error, 1)
	go func() { drained <- h.Svc.Drain(ctx, time.Second) }()
	close(gate)
	select {
	case err := <-drained:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the drain did not end")
	}
	// Whatever the in-flight create did, it is over and nothing lives.
	h.waitStarting(0)
	for _, r := range h.Records() {
		if r.State != sandbox.StateDestroyed && r.State != sandbox.StateFailed {
			t.Errorf("sandbox %s is %s after the drain; want none live", r.ID, r.State)
		}
	}
	h.WaitAgents(0)
}

// testPool returns the view of the test profile's pool.
func (h *harness) testPool() control.PoolView {
	h.T.Helper()
	views, err := h.Svc.Pools(context.Background())
	if err != nil {
		h.T.Fatal(err)
	}
	for _, v := range views {
		if v.Profile == controltest.Profile {
			return v
		}
	}
	h.T.Fatalf("no pool of %s: %+v", controltest.Profile, views)
	return control.PoolView{}
}

// waitStarting polls until n members of the test pool are being made.
func (h *harness) waitStarting(n int64) {
	h.T.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for h.testPool().Starting != n {
		if time.Now().After(deadline) {
			h.T.Fatalf("pool never had %d member creates in flight: %+v", n, h.testPool())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
