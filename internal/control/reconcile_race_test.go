package control_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/controltest"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// aroundRecords is a store that runs a function, once, just before the
// reconciler reads the live records (after it has listed the containers),
// and another just after (before it lists the networks).
type aroundRecords struct {
	store.Store
	fn, after atomic.Pointer[func()]
}

func (s *aroundRecords) ListSandboxes(ctx context.Context, f store.SandboxFilter) ([]*sandbox.Sandbox, error) {
	// The reconciler's listing: every live record of every instance.
	if !(f.Instance == "" && f.Tenant == "" && f.Profile == "" && len(f.States) > 0) {
		return s.Store.ListSandboxes(ctx, f)
	}
	if fn := s.fn.Swap(nil); fn != nil {
		(*fn)()
	}
	list, err := s.Store.ListSandboxes(ctx, f)
	if fn := s.after.Swap(nil); fn != nil {
		(*fn)()
	}
	return list, err
}

// gatedStart is a driver whose Start, while armed, waits for the gate.
type gatedStart struct {
	driver.Driver
	armed   atomic.Bool
	waiting chan struct{} // a Start waits at the gate
	gate    chan struct{} // closed to let it through
}

func (d *gatedStart) Start(ctx context.Context, id string) error {
	if d.armed.CompareAndSwap(true, false) {
		close(d.waiting)
		select {
		case <-d.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return d.Driver.Start(ctx, id)
}

// TestReconcileSandboxStartedDuringPass: the reconciler lists the
// containers before it reads the records, so a sandbox that was created or
// started in between is in its records as ready while the listing shows
// its container missing or not yet running. Such a sandbox is healthy and
// must be left alone; its container's state now is what counts.
func TestReconcileSandboxStartedDuringPass(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// startedBefore: the container exists (created, not started) when
		// the reconciler lists the containers; else it is all made later.
		startedBefore bool
	}{
		{name: "created and started after the listing", startedBefore: false},
		{name: "started after the listing", startedBefore: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var st *aroundRecords
			var drv *gatedStart
			h := newHarnessWith(t, nil, func(c *control.Config) {
				st = &aroundRecords{Store: c.Store}
				drv = &gatedStart{Driver: c.Driver, waiting: make(chan struct{}), gate: make(chan struct{})}
				c.Store, c.Driver = st, drv
			})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()

			created := make(chan *sandbox.Sandbox, 1)
			create := func() {
				sb, err := h.Svc.CreateSandbox(ctx, control.CreateSandboxInput{Tenant: "a", Profile: controltest.Profile})
				if err != nil {
					t.Errorf("CreateSandbox: %v", err)
				}
				created <- sb
			}
			var sb *sandbox.Sandbox
			if tc.startedBefore {
				drv.armed.Store(true)
				go create()
				select {
				case <-drv.waiting: // created, about to start
				case <-ctx.Done():
					t.Fatal("the create did not reach its start")
				}
				finish := func() {
					close(drv.gate)
					sb = <-created
				}
				st.fn.Store(&finish)
			} else {
				finish := func() {
					go create()
					sb = <-created
				}
				st.fn.Store(&finish)
			}
			if err := h.Svc.Reconcile(ctx, false); err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if sb == nil {
				t.Fatal("the sandbox was not made during the pass")
			}
			if r := h.Record(sb.ID); r.State != sandbox.StateReady || r.FailureReason != "" {
				t.Errorf("sandbox started during the pass is %s (%q) after it, want ready", r.State, r.FailureReason)
			}
			if c, ok := h.Container(sb.ID); !ok || !c.Running {
				t.Errorf("container of the sandbox started during the pass: %+v present=%v, want running", c, ok)
			}
			h.WaitAgents(1)
		})
	}
}

// TestReconcileNetworkOfSandboxMadeDuringPass: the reconciler reads the
// live records before it lists the sandbox networks, so the network of a
// sandbox made in between (its record comes first, then its network) is
// not among the records it read. That network is not an orphan and must
// be kept.
func TestReconcileNetworkOfSandboxMadeDuringPass(t *testing.T) {
	t.Parallel()
	var st *aroundRecords
	h := newHarnessWith(t, nil, func(c *control.Config) {
		st = &aroundRecords{Store: c.Store}
		c.Store = st
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var nw driver.Networker = h.Drv
	var sb *sandbox.Sandbox
	name := ""
	makeOne := func() {
		sb = h.Create("a", control.CreateSandboxInput{})
		// What a networked create does next: the sandbox's own network.
		name = "genesis-net-" + sb.ID
		if _, err := nw.CreateNetwork(ctx, driver.NetworkSpec{Name: name, Internal: true, Labels: map[string]string{
			driver.LabelInstance: controltest.Instance, driver.LabelSandbox: sb.ID, driver.LabelPurpose: driver.PurposeSandboxNetwork,
		}}); err != nil {
			t.Errorf("CreateNetwork: %v", err)
		}
	}
	st.after.Store(&makeOne)
	if err := h.Svc.Reconcile(ctx, false); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if sb == nil {
		t.Fatal("the sandbox was not made during the pass")
	}
	nets, err := nw.ListNetworks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kept := false
	for _, n := range nets {
		kept = kept || n.Name == name
	}
	if !kept {
		t.Errorf("the network %s of sandbox %s, made during the pass, was removed as an orphan", name, sb.ID)
	}
	if r := h.Record(sb.ID); r.State != sandbox.StateReady {
		t.Errorf("sandbox made during the pass is %s (%q), want ready", r.State, r.FailureReason)
	}
	h.WaitAgents(1)
}
