package control_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/controltest"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/testenv"
)

// endingGate is a SandboxEnding hook that holds the recycle of one sandbox
// (the first thing a recycle does is tell the hooks) until it is opened:
// the window between a release's answer and its recycle, held open.
type endingGate struct {
	mu      sync.Mutex
	id      string
	entered chan struct{} // closed when the recycle of id reaches the hook
	open    chan struct{}
}

func newEndingGate() *endingGate {
	return &endingGate{entered: make(chan struct{}), open: make(chan struct{})}
}

func (g *endingGate) Name() string { return "ending-gate" }

func (g *endingGate) hold(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.id = id
}

func (g *endingGate) SandboxEnding(_ context.Context, id, _ string) {
	g.mu.Lock()
	held := id == g.id
	if held {
		g.id = "" // once: a later destroy of it passes
		close(g.entered)
	}
	g.mu.Unlock()
	if held {
		<-g.open
	}
}

// let opens the gate (once).
func (g *endingGate) let() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

var _ control.SandboxEndingHook = (*endingGate)(nil)

func gatedResetHarness(t *testing.T, g *endingGate) *harness {
	h := &harness{controltest.NewOpts(t, controltest.Options{Hooks: []control.Hook{g}, Configure: withResetPool(1, 3)})}
	if !h.Agents.AsUser() {
		t.Skip("agents cannot run as the sandbox user here; a reset needs that")
	}
	return h
}

// TestReleaseAnswersBeforeRecycle: a release answers while its sandbox's
// recycle has not started; in between the sandbox is draining (its lease
// released in the same write), refuses the old holder's calls, counts as
// pending and is never handed to the next lease; then the recycle resets
// it and returns it to the pool.
func TestReleaseAnswersBeforeRecycle(t *testing.T) {
	t.Parallel()
	g := newEndingGate()
	h := gatedResetHarness(t, g)
	ctx := context.Background()
	h.waitIdle(1)
	out, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "a", Profile: controltest.Profile, TTLSeconds: ttl(60),
		Env: map[string]string{"LEASE_VAR": "secret-a"}})
	if err != nil {
		t.Fatal(err)
	}
	id := out.Sandbox.ID
	h.waitIdle(1) // the claim's refill
	g.hold(id)
	defer g.let()
	done := make(chan error, 1)
	go func() { done <- h.Svc.ReleaseLeaseNoWait(ctx, "a", out.Lease.ID) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the release did not answer while its recycle was held")
	}
	<-g.entered // the recycle runs, held at its first step

	if l, err := h.Svc.GetLease(ctx, "a", out.Lease.ID); err != nil || l.State != sandbox.LeaseReleased {
		t.Fatalf("lease after the answer: %+v %v", l, err)
	}
	if r := h.Record(id); r.State != sandbox.StateDraining || r.Tenant != "a" {
		t.Fatalf("sandbox after the answer: %s of %q, want draining (still the holder's until reset)", r.State, r.Tenant)
	}
	if st := h.Svc.RecycleStats(); st.Pending != 1 || st.Reset != 0 {
		t.Errorf("recycle stats while held: %+v, want 1 pending", st)
	}
	_, err = h.Jobs.Exec(ctx, jobs.ExecInput{Tenant: "a", SandboxID: id, Command: []string{"true"}})
	wantProblem(t, "the old holder's exec while its sandbox is recycled", err, http.StatusConflict, "sandbox_not_running")
	// The next leases take the other members or a cold sandbox, never it.
	for i := range 2 {
		next, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "b", Profile: controltest.Profile, TTLSeconds: ttl(60)})
		if err != nil {
			t.Fatal(err)
		}
		if next.Sandbox.ID == id {
			t.Fatalf("lease %d got the sandbox still being recycled", i)
		}
	}

	g.let()
	h.recycled(t)
	r := h.Record(id)
	if r.State != sandbox.StateIdle || r.Tenant != "" || r.Env["LEASE_VAR"] != "" {
		t.Fatalf("sandbox after its recycle: %s of %q env %v, want an idle member without the holder's env", r.State, r.Tenant, r.Env)
	}
	if st := h.Svc.RecycleStats(); st.Pending != 0 || st.Reset != 1 || st.Destroyed != 0 || st.Failed != 0 || st.Seconds <= 0 {
		t.Errorf("recycle stats after: %+v, want one reset", st)
	}
}

// TestReleaseCrashBeforeRecycle: a process that answered a release and
// died before the recycle leaves the sandbox draining; the next process's
// start-up destroys it (never hands it out un-reset) and its pool makes a
// fresh member. The dead process's recycle, let go afterwards, finds it
// destroyed and neither returns it nor ends it twice.
func TestReleaseCrashBeforeRecycle(t *testing.T) {
	t.Parallel()
	g := newEndingGate()
	h := gatedResetHarness(t, g)
	ctx := context.Background()
	h.waitIdle(1)
	out, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "a", Profile: controltest.Profile, TTLSeconds: ttl(60)})
	if err != nil {
		t.Fatal(err)
	}
	id := out.Sandbox.ID
	h.waitIdle(1)
	g.hold(id)
	defer g.let()
	if err := h.Svc.ReleaseLeaseNoWait(ctx, "a", out.Lease.ID); err != nil {
		t.Fatal(err)
	}
	<-g.entered // "killed" here: answered, the recycle not done

	// The next process over the same store and runtime.
	next, err := control.New(control.Config{
		Settings: h.Cfg, Store: h.St, Driver: h.Drv, AgentDir: testenv.AgentDir(t), InstanceID: controltest.Instance, Now: h.Clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := next.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	r := h.Record(id)
	if r.State != sandbox.StateDestroyed {
		t.Fatalf("after the restart the released sandbox is %s, want destroyed", r.State)
	}
	if _, ok := h.Container(id); ok {
		t.Errorf("the destroyed sandbox's container is still there")
	}
	waitFor(t, "the pool to hold an idle member", func() bool {
		views, err := next.Pools(ctx)
		for _, v := range views {
			if v.Profile == controltest.Profile {
				return err == nil && v.Counts[sandbox.StateIdle] >= 1 && v.Starting == 0
			}
		}
		return false
	})
	claimed, err := next.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "b", Profile: controltest.Profile, TTLSeconds: ttl(60)})
	if err != nil || claimed.Sandbox.ID == id {
		t.Fatalf("lease after the restart: %+v %v, want another sandbox", claimed, err)
	}

	// The dead process's recycle goes on (a real crash never would): it
	// must leave the destroyed record as it is.
	destroyedAt := h.Record(id).UpdatedAt
	g.let()
	h.recycled(t)
	if r := h.Record(id); r.State != sandbox.StateDestroyed || !r.UpdatedAt.Equal(destroyedAt) {
		t.Errorf("the late recycle changed the destroyed record: %s at %v (destroyed at %v)", r.State, r.UpdatedAt, destroyedAt)
	}
	if st := h.Svc.RecycleStats(); st.Reset != 0 {
		t.Errorf("the late recycle returned a destroyed sandbox to its pool: %+v", st)
	}
}

// TestLeaseWaitsForReset: a lease that finds its pool empty while a
// released member is being reset waits for it (briefly) instead of
// creating a sandbox cold, and gets it warm and wiped.
func TestLeaseWaitsForReset(t *testing.T) {
	t.Parallel()
	g := newEndingGate()
	h := &harness{controltest.NewOpts(t, controltest.Options{Hooks: []control.Hook{g}, Configure: withResetPool(1, 1)})}
	if !h.Agents.AsUser() {
		t.Skip("agents cannot run as the sandbox user here; a reset needs that")
	}
	ctx := context.Background()
	h.waitIdle(1)
	first, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "a", Profile: controltest.Profile, TTLSeconds: ttl(60),
		Env: map[string]string{"LEASE_VAR": "secret-a"}})
	if err != nil {
		t.Fatal(err)
	}
	id := first.Sandbox.ID
	g.hold(id)
	defer g.let()
	if err := h.Svc.ReleaseLeaseNoWait(ctx, "a", first.Lease.ID); err != nil {
		t.Fatal(err)
	}
	<-g.entered
	got := make(chan *control.LeaseOutput, 1)
	go func() {
		out, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "b", Profile: controltest.Profile, TTLSeconds: ttl(60)})
		if err != nil {
			t.Error(err)
		}
		got <- out
	}()
	select {
	case out := <-got:
		t.Fatalf("the lease did not wait for the reset under way: %+v", out)
	case <-time.After(100 * time.Millisecond):
	}
	g.let()
	out := <-got
	if out == nil {
		t.FailNow()
	}
	if !out.Lease.Warm || out.Sandbox.ID != id || out.Sandbox.Env["LEASE_VAR"] != "" {
		t.Fatalf("lease after the reset: warm %v sandbox %s env %v, want the reset member %s without the first holder's env",
			out.Lease.Warm, out.Sandbox.ID, out.Sandbox.Env, id)
	}
}
