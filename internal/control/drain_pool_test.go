package control_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/controltest"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/driver/local"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store/pgtest"
	"genesis.dev/sandbox/internal/store/postgres"
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

// TestPoolDrainWaitsForMemberCreates: a member whose create is in flight
// when its pool is drained does not outlive the drain, and the drained pool
// starts no new member.
func TestPoolDrainWaitsForMemberCreates(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	h := newHarnessWith(t, withPool(1, 2), func(c *control.Config) { c.Driver = &gatedDriver{Driver: c.Driver, gate: gate} })
	ctx := context.Background()
	h.waitStarting(1)
	type drained struct {
		views []control.PoolView
		err   error
	}
	done := make(chan drained, 1)
	go func() {
		views, err := h.Svc.DrainPool(ctx, controltest.Profile+"-runc")
		done <- drained{views, err}
	}()
	// The drain is under way (the pool says so) before the create goes on.
	for deadline := time.Now().Add(30 * time.Second); !h.testPool().Draining; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the pool never said draining")
		}
	}
	close(gate)
	var d drained
	select {
	case d = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the drain did not end")
	}
	if d.err != nil || len(d.views) != 1 || d.views[0].Starting != 0 || d.views[0].Counts[sandbox.StateIdle] != 0 {
		t.Fatalf("drain: %+v %v", d.views, d.err)
	}
	// When DrainPool answers, the member is gone: no live record, no agent.
	for _, r := range h.Records() {
		if r.State != sandbox.StateDestroyed && r.State != sandbox.StateFailed {
			t.Errorf("sandbox %s is %s after the pool drain; want none live", r.ID, r.State)
		}
	}
	if n := h.Agents.Running(); n != 0 {
		t.Errorf("%d agent processes run after the pool drain, want 0", n)
	}
}

// TestStopTakingKeepsMemberInFlight: an instance that hands its sandboxes
// over (shared pools: instances on one PostgreSQL, sandboxes every
// instance reaches) keeps a pool member whose create is in flight when it
// stops taking work. The member ends idle, for the leader to adopt, as the
// pool's other members do; it is not destroyed as a drain destroys it.
func TestStopTakingKeepsMemberInFlight(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	st, err := postgres.Open(t.Context(), postgres.Config{DSN: pgtest.Start(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h := &harness{controltest.NewOpts(t, controltest.Options{Store: st, Configure: withPool(1, 1), Tune: func(c *control.Config) {
		l, err := local.New(local.Config{Driver: c.Driver, Root: filepath.Join(c.Settings.DataDir, "sandboxes"), AgentDir: c.AgentDir, Logger: c.Logger})
		if err != nil {
			t.Fatal(err)
		}
		c.Sandboxer = l
		c.Driver = &gatedDriver{Driver: c.Driver, gate: gate}
	}})}
	if !h.Svc.HandsOver() {
		t.Fatal("an instance on PostgreSQL with a sandboxer does not hand over")
	}
	h.waitStarting(1)
	stopped := make(chan error, 1)
	go func() { stopped <- h.Svc.StopTaking(context.Background()) }()
	for deadline := time.Now().Add(30 * time.Second); !h.Svc.Draining(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the service never said draining")
		}
	}
	close(gate)
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("StopTaking did not return")
	}
	var idle int
	for _, r := range h.Records() {
		switch r.State {
		case sandbox.StateIdle:
			idle++
		default:
			t.Errorf("pool member %s is %s (%q) after StopTaking; want idle", r.ID, r.State, r.FailureReason)
		}
	}
	if idle != 1 {
		t.Errorf("%d idle members after StopTaking; want the one in flight", idle)
	}
}
