package control_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/controltest"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/tenancy"
	"genesis.dev/sandbox/internal/testenv"
)

// capacityExhausted reports whether err is the 503 of a request that got no
// host capacity, with a retry hint.
func capacityExhausted(err error) bool {
	_, hint := errdefs.RetryAfter(err)
	return errors.Is(err, errdefs.ErrUnavailable) && errdefs.Code(err) == "capacity_exhausted" &&
		errdefs.HTTPStatus(err) == http.StatusServiceUnavailable && hint
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestCapacity(t *testing.T) {
	t.Parallel()
	t.Run("sequential", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, func(c *config.Config) { c.Limits.MaxSandboxes = 1 })
		ctx := context.Background()
		first := h.Create("a", control.CreateSandboxInput{})
		_, err := h.Svc.CreateSandbox(ctx, withTenant(control.CreateSandboxInput{}, "b"))
		if !capacityExhausted(err) {
			t.Fatalf("second create: %v (code %s), want 503 capacity_exhausted with Retry-After", err, errdefs.Code(err))
		}
		if r := h.Records(); len(r) != 1 || len(h.Containers()) != 1 {
			t.Fatalf("%d records and %d containers after the refused create, want 1 and 1", len(r), len(h.Containers()))
		}
		// A destroyed sandbox frees its slot.
		if err := h.Svc.DeleteSandbox(ctx, "a", first.ID); err != nil {
			t.Fatal(err)
		}
		h.Create("b", control.CreateSandboxInput{})
	})
	t.Run("concurrent", func(t *testing.T) {
		t.Parallel()
		const limit, tries = 2, 12
		h := newHarness(t, func(c *config.Config) { c.Limits.MaxSandboxes = limit })
		var wg sync.WaitGroup
		errs := make(chan error, tries)
		for range tries {
			wg.Go(func() {
				_, err := h.Svc.CreateSandbox(context.Background(), withTenant(control.CreateSandboxInput{}, "a"))
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		ok := 0
		for err := range errs {
			switch {
			case err == nil:
				ok++
			case !capacityExhausted(err):
				t.Errorf("create: %v, want success or capacity_exhausted", err)
			}
		}
		live, err := h.Svc.ListSandboxes(context.Background(), store.SandboxFilter{States: []sandbox.State{sandbox.StateReady}})
		if err != nil {
			t.Fatal(err)
		}
		if ok != limit || len(live) != limit || len(h.Containers()) != limit || len(h.Records()) != limit {
			t.Errorf("%d creates succeeded, %d ready, %d containers, %d records; want %d each (capacity)",
				ok, len(live), len(h.Containers()), len(h.Records()), limit)
		}
	})
	t.Run("cpu", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, func(c *config.Config) { c.Capacity.CPU = 1 }) // the test profile takes 0.5
		h.Create("a", control.CreateSandboxInput{})
		h.Create("a", control.CreateSandboxInput{})
		_, err := h.Svc.CreateSandbox(context.Background(), withTenant(control.CreateSandboxInput{}, "a"))
		if !capacityExhausted(err) {
			t.Fatalf("third create over the CPU capacity: %v, want capacity_exhausted", err)
		}
		_, err = h.Svc.CreateSandbox(context.Background(), withTenant(control.CreateSandboxInput{
			Resources: sandbox.Resources{CPU: 2}}, "a"))
		if !errors.Is(err, errdefs.ErrInvalidArgument) || errdefs.Code(err) != "exceeds_capacity" {
			t.Fatalf("create larger than the host: %v (code %s), want exceeds_capacity", err, errdefs.Code(err))
		}
	})
}

// A create with wait_seconds waits in its tenant's queue and gets the slot a
// destroyed sandbox frees.
func TestCreateWaitsForCapacity(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *config.Config) { c.Capacity.Sandboxes = 1 })
	ctx := context.Background()
	first := h.Create("a", control.CreateSandboxInput{})

	for _, bad := range []int64{-1, h.Cfg.Capacity.MaxWaitSeconds + 1} {
		_, err := h.Svc.CreateSandbox(ctx, withTenant(control.CreateSandboxInput{WaitSeconds: bad}, "b"))
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("wait_seconds %d: %v, want invalid argument", bad, err)
		}
	}
	type result struct {
		sb  *sandbox.Sandbox
		err error
	}
	done := make(chan result, 1)
	go func() {
		sb, err := h.Svc.CreateSandbox(ctx, withTenant(control.CreateSandboxInput{WaitSeconds: 60}, "b"))
		done <- result{sb, err}
	}()
	waitFor(t, "the create to queue", func() bool { return h.Svc.AdmissionStats().Tenants["b"].Queued == 1 })
	if err := h.Svc.DeleteSandbox(ctx, "a", first.ID); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.sb.State != sandbox.StateReady {
		t.Fatalf("waiting create: %v, want a ready sandbox", r.err)
	}
	st := h.Svc.AdmissionStats()
	if b := st.Tenants["b"]; b.Waits != 1 || b.Grants != 1 || st.InUse.Sandboxes != 1 || st.Wait.Count != 1 {
		t.Errorf("stats after the wait: %+v", st)
	}

	// A short wait ends with 503 and leaves nothing behind.
	start := time.Now()
	_, err := h.Svc.CreateSandbox(ctx, withTenant(control.CreateSandboxInput{WaitSeconds: 1}, "a"))
	if !capacityExhausted(err) || time.Since(start) < time.Second {
		t.Fatalf("create after %v: %v, want capacity_exhausted after the 1 s wait", time.Since(start), err)
	}
	if n := len(h.Records()); n != 2 {
		t.Errorf("%d records, want 2 (the timed out create made none)", n)
	}
}

// Sandboxes that end by any path give their capacity back; concurrent
// idempotent retries hold one slot.
func TestCapacityReleasedByEveryEnd(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *config.Config) { c.Capacity.Sandboxes = 3 })
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if _, err := h.Svc.CreateSandbox(ctx, withTenant(control.CreateSandboxInput{IdempotencyKey: "k", WaitSeconds: 30}, "a")); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := h.Svc.AdmissionStats().InUse.Sandboxes; n != 1 {
		t.Fatalf("%d sandboxes of capacity in use after idempotent retries, want 1", n)
	}
	ttl := h.Create("a", control.CreateSandboxInput{TTLSeconds: 1})
	gone := h.Create("a", control.CreateSandboxInput{})
	// The container vanishes: the reconciler marks the sandbox failed.
	if err := h.Drv.Remove(ctx, gone.ContainerID); err != nil {
		t.Fatal(err)
	}
	h.Clock.Advance(2 * time.Second) // past ttl's TTL
	if err := h.Svc.Reconcile(ctx, false); err != nil {
		t.Fatal(err)
	}
	if s := h.Record(ttl.ID).State; s != sandbox.StateDestroyed {
		t.Fatalf("TTL sandbox is %s, want destroyed", s)
	}
	if s := h.Record(gone.ID).State; s != sandbox.StateFailed {
		t.Fatalf("sandbox without container is %s, want failed", s)
	}
	if n := h.Svc.AdmissionStats().InUse.Sandboxes; n != 1 {
		t.Fatalf("%d sandboxes of capacity in use, want 1 (the expired and the failed one gave theirs back)", n)
	}
}

// A restarted service accounts for the sandboxes it adopts.
func TestCapacityAdoptedAfterRestart(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *config.Config) { c.Capacity.Sandboxes = 2 })
	ctx := context.Background()
	kept := h.Create("a", control.CreateSandboxInput{})
	h.Create("b", control.CreateSandboxInput{})
	h.Svc.Close()
	svc, err := control.New(control.Config{
		Settings: h.Cfg, Store: h.St, Driver: h.Drv, AgentDir: testenv.AgentDir(t), InstanceID: controltest.Instance, Now: h.Clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	if n := svc.AdmissionStats().InUse.Sandboxes; n != 2 {
		t.Fatalf("restarted service accounts for %d sandboxes, want 2", n)
	}
	if _, err := svc.CreateSandbox(ctx, withTenant(control.CreateSandboxInput{Profile: controltest.Profile}, "a")); !capacityExhausted(err) {
		t.Fatalf("create on a full host after restart: %v, want capacity_exhausted", err)
	}
	if err := svc.DeleteSandbox(ctx, "a", kept.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateSandbox(ctx, withTenant(control.CreateSandboxInput{Profile: controltest.Profile}, "a")); err != nil {
		t.Fatalf("create after a delete freed the adopted slot: %v", err)
	}
}

// Queues take their weight from the tenant's record: from the config and
// from tenants made through the API.
func TestQueueWeightFromTenantRecord(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *config.Config) {
		c.Capacity.Sandboxes = 1
		c.Tenants["a"] = config.Tenant{Weight: 3}
	})
	ctx := context.Background()
	if _, err := h.Tenancy.CreateTenant(ctx, tenancy.TenantInput{Name: "made", Weight: 5}); err != nil {
		t.Fatal(err)
	}
	holder := h.Create("b", control.CreateSandboxInput{})
	var wg sync.WaitGroup
	for _, tenant := range []string{"a", "made"} {
		wg.Go(func() {
			_, err := h.Svc.CreateSandbox(ctx, withTenant(control.CreateSandboxInput{WaitSeconds: 60, Profile: controltest.Profile}, tenant))
			if err != nil {
				t.Errorf("%s: %v", tenant, err)
			}
		})
	}
	waitFor(t, "both creates to queue", func() bool { return h.Svc.AdmissionStats().Waiting == 2 })
	st := h.Svc.AdmissionStats()
	if st.Tenants["a"].Weight != 3 || st.Tenants["made"].Weight != 5 {
		t.Errorf("queue weights a=%d made=%d, want 3 and 5", st.Tenants["a"].Weight, st.Tenants["made"].Weight)
	}
	// Let both through: each frees the slot for the next.
	if err := h.Svc.DeleteSandbox(ctx, "b", holder.ID); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		waitFor(t, "a create to be granted", func() bool {
			list, _ := h.Svc.ListSandboxes(ctx, store.SandboxFilter{States: []sandbox.State{sandbox.StateReady}})
			return len(list) == 1
		})
		list, _ := h.Svc.ListSandboxes(ctx, store.SandboxFilter{States: []sandbox.State{sandbox.StateReady}})
		if err := h.Svc.DeleteSandbox(ctx, list[0].Tenant, list[0].ID); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
}

// Pool refill takes only capacity nobody waits for: a cold lease for the
// whole host waits while a smaller pool member would fit; the refill is
// refused, and the lease gets the host once the other lease ends. Once
// nobody waits, the pool refills.
func TestPoolRefillYieldsToWaitingRequests(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *config.Config) {
		withPool(1, 3)(c)
		c.Capacity.CPU = 1 // two members of the test profile (0.5 CPU each)
	})
	ctx := context.Background()
	lease := func(tenant string, cpu float64, wait int64) (*control.LeaseOutput, error) {
		return h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: tenant, Profile: controltest.Profile, RiskLevel: "low",
			WaitSeconds: wait, Resources: sandbox.Resources{CPU: cpu}})
	}
	poolRefused := func(n uint64) func() bool {
		return func() bool { return h.Svc.AdmissionStats().Tenants[""].Rejected == n }
	}
	h.waitIdle(1)
	a, err := lease("a", 0, 0)
	if err != nil || !a.Lease.Warm {
		t.Fatalf("first lease: %v, want a warm claim", err)
	}
	h.waitIdle(1) // the refill took the rest of the host
	type result struct {
		out *control.LeaseOutput
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := lease("c", 1, 60) // the whole host: a cold create
		done <- result{out, err}
	}()
	waitFor(t, "the large lease to queue", func() bool { return h.Svc.AdmissionStats().Waiting == 1 })
	b, err := lease("b", 0, 0)
	if err != nil || !b.Lease.Warm {
		t.Fatalf("second lease: %v, want a warm claim", err)
	}
	waitFor(t, "the refill after the claim to be refused (host full)", poolRefused(1))

	// Half the host is free now, enough for a member, but the large lease
	// waits for it.
	if err := h.Svc.ReleaseLease(ctx, "a", a.Lease.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the refill after the release to be refused (a request waits)", poolRefused(2))
	st := h.Svc.AdmissionStats()
	if v := h.waitIdle(0); st.InUse.CPU != 0.5 || st.Waiting != 1 {
		t.Fatalf("after the release: %v CPU in use, %d waiting, pool %+v; want 0.5, 1 and no idle member", st.InUse.CPU, st.Waiting, v)
	}
	if err := h.Svc.ReleaseLease(ctx, "b", b.Lease.ID); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.out.Lease.Warm || r.out.Sandbox.Resources.CPU != 1 {
		t.Fatalf("large lease: %v, want a cold lease of 1 CPU", r.err)
	}
	// Nobody waits any more: the slot the large lease frees refills the pool.
	if err := h.Svc.ReleaseLease(ctx, "c", r.out.Lease.ID); err != nil {
		t.Fatal(err)
	}
	h.waitIdle(1)
}
