package control_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/assemble"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/controltest"
	"genesis.dev/sandbox/internal/driver/fake"
)

// heldStarts is the fake driver whose container starts wait, while hold
// is set, until release is closed.
type heldStarts struct {
	*fake.Driver
	hold    atomic.Bool
	held    atomic.Int64
	release chan struct{}
}

func (d *heldStarts) Start(ctx context.Context, id string) error {
	if d.hold.Load() {
		d.held.Add(1)
		<-d.release
	}
	return d.Driver.Start(ctx, id)
}

// TestCreateSlotQueue: a create that finds every create slot taken waits
// for one as long as its request waits for capacity, even past a create's
// own bound (agent_ready_timeout + 3 docker_call_timeouts), and then has
// that whole bound for itself. The queue ate into that bound before: in a
// burst of cold leases on a busy host (TestTwoReplicas at a load average
// of 150) the late ones failed 504 "waiting for a create slot" or with an
// agent that "did not answer within 30s" after waiting a few seconds, a
// request that would have waited 300 s.
func TestCreateSlotQueue(t *testing.T) {
	t.Parallel()
	var d *heldStarts
	h := controltest.NewOpts(t, controltest.Options{
		Configure: func(c *config.Config) {
			c.Intervals.AgentReadyTimeout = time.Second
			c.Intervals.DockerCallTimeout = 500 * time.Millisecond
		},
		Assemble: func(ac *assemble.Config) {
			d = &heldStarts{Driver: ac.Driver.(*fake.Driver), release: make(chan struct{})}
			ac.Driver = d
		},
	})
	const bound = time.Second + 3*500*time.Millisecond // a create's own bound
	const slots = 4                                    // creates run at once
	ctx := context.Background()
	d.hold.Store(true)
	var wg sync.WaitGroup
	for range slots {
		wg.Go(func() {
			_, _ = h.Svc.CreateSandbox(ctx, control.CreateSandboxInput{Tenant: "a", Profile: controltest.Profile})
		})
	}
	defer wg.Wait()
	for deadline := time.Now().Add(30 * time.Second); d.held.Load() < slots; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			close(d.release)
			t.Fatalf("%d of %d creates reached their container's start", d.held.Load(), slots)
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := h.Svc.CreateSandbox(ctx, control.CreateSandboxInput{Tenant: "b", Profile: controltest.Profile, WaitSeconds: 30})
		done <- err
	}()
	select {
	case err := <-done:
		close(d.release)
		t.Fatalf("a create queued behind %d running ones ended while they ran, within its request's wait: %v", slots, err)
	case <-time.After(bound + time.Second):
	}
	if n := d.held.Load(); n != slots {
		close(d.release)
		t.Fatalf("%d container starts with %d creates running at once", n, slots)
	}
	d.hold.Store(false)
	close(d.release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the queued create, once a slot was free: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the queued create did not end within 30 s of the slots coming free")
	}
}
