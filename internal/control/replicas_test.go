package control_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/assemble"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/controltest"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/store/pgtest"
	"genesis.dev/sandbox/internal/store/postgres"
	"genesis.dev/sandbox/internal/store/sqlstore"
	"genesis.dev/sandbox/internal/tenant"
)

// TestQuotasAcrossInstances: two service instances on one PostgreSQL
// count a tenant's quotas in the database. In every round, concurrent
// creates through both never pass max_sandboxes and concurrent cold leases
// through both never pass max_leases (a lease being made holds its place in
// the database); what is refused is refused as quota_exceeded, and no lease
// hold is left behind.
func TestQuotasAcrossInstances(t *testing.T) {
	const maxSandboxes, maxLeases, perInstance, rounds = 3, 2, 4, 4
	hs := twoInstances(t, func(c *config.Config) {
		c.Tenants["a"] = config.Tenant{Quotas: tenant.Quotas{MaxSandboxes: maxSandboxes}}
		c.Tenants["b"] = config.Tenant{Quotas: tenant.Quotas{MaxLeases: maxLeases}}
	})
	ctx := t.Context()
	// race runs perInstance calls of op through each instance at once and
	// returns the ids of the sandboxes made; every other call must have been
	// refused for the tenant's quota.
	race := func(what string, op func(h *harness) (string, error)) []string {
		t.Helper()
		var mu sync.Mutex
		var made []string
		var wg sync.WaitGroup
		start := make(chan struct{})
		for _, h := range hs {
			for range perInstance {
				wg.Go(func() {
					<-start
					id, err := op(h)
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						made = append(made, id)
					case !errors.Is(err, errdefs.ErrResourceExhausted) || errdefs.Code(err) != "quota_exceeded":
						t.Errorf("%s: %v; want success or quota_exceeded", what, err)
					}
				})
			}
		}
		close(start)
		wg.Wait()
		return made
	}
	liveOf := func(tenantName string) int {
		t.Helper()
		list, err := hs[0].St.ListSandboxes(ctx, store.SandboxFilter{Tenant: tenantName, States: []sandbox.State{
			sandbox.StateCreated, sandbox.StateStarting, sandbox.StateReady, sandbox.StateLeased, sandbox.StateBusy, sandbox.StateDraining}})
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	}
	for round := range rounds {
		made := race("create", func(h *harness) (string, error) {
			sb, err := h.Svc.CreateSandbox(ctx, withTenant(control.CreateSandboxInput{}, "a"))
			if err != nil {
				return "", err
			}
			return sb.ID, nil
		})
		if len(made) != maxSandboxes {
			t.Fatalf("round %d: %d creates of tenant a succeeded through two instances; want exactly max_sandboxes %d", round, len(made), maxSandboxes)
		}
		if n := liveOf("a"); n != maxSandboxes {
			t.Fatalf("round %d: tenant a holds %d live sandboxes; want %d", round, n, maxSandboxes)
		}
		for _, id := range made {
			if err := hs[0].Svc.DeleteSandbox(context.Background(), "a", id); err != nil {
				t.Fatal(err)
			}
		}

		leased := race("cold lease", func(h *harness) (string, error) {
			out, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "b", Profile: controltest.Profile, TTLSeconds: ttl(60)})
			if err != nil {
				return "", err
			}
			return out.Lease.ID, nil
		})
		if len(leased) != maxLeases {
			t.Fatalf("round %d: %d cold leases of tenant b succeeded through two instances; want exactly max_leases %d", round, len(leased), maxLeases)
		}
		if n, err := hs[1].St.CountLeaseHolds(ctx, "b", hs[1].Clock.Now()); err != nil || n != 0 {
			t.Fatalf("round %d: %d lease holds of b left (%v); want 0", round, n, err)
		}
		for _, id := range leased {
			if err := hs[1].Svc.ReleaseLease(context.Background(), "b", id); err != nil {
				t.Fatal(err)
			}
		}
		if err := hs[1].Svc.WaitRecycles(ctx); err != nil {
			t.Fatal(err)
		}
		if n := liveOf("a") + liveOf("b"); n != 0 {
			t.Fatalf("round %d: %d live sandboxes of a and b after deleting and releasing all", round, n)
		}
	}
}

// twoInstances starts two services, instance-0 and instance-1, on one new
// PostgreSQL database.
func twoInstances(t *testing.T, configure func(*config.Config)) []*harness {
	t.Helper()
	dsn := pgtest.Start(t)
	var hs []*harness
	for i := range 2 {
		st, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		hs = append(hs, &harness{controltest.NewOpts(t, controltest.Options{
			Configure: configure, Store: st, Instance: fmt.Sprintf("instance-%d", i)})})
	}
	return hs
}

// TestEndAnotherInstancesSandbox: an instance that ends a sandbox of
// another takes its record first, so that its own death mid-way leaves the
// drain to the leader's adoption of its sandboxes, not to the owner's
// stuck-drain bound.
func TestEndAnotherInstancesSandbox(t *testing.T) {
	hs := twoInstances(t, nil)
	ctx := t.Context()
	sb, err := hs[0].Svc.CreateSandbox(ctx, withTenant(control.CreateSandboxInput{}, "a"))
	if err != nil {
		t.Fatal(err)
	}
	if sb.Instance != "instance-0" {
		t.Fatalf("made by %q", sb.Instance)
	}
	if err := hs[1].Svc.DeleteSandbox(ctx, "a", sb.ID); err != nil {
		t.Fatal(err)
	}
	got, err := hs[0].St.GetSandbox(ctx, "", sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != sandbox.StateDestroyed || got.Instance != "instance-1" {
		t.Errorf("after instance-1 deleted instance-0's sandbox: %s, owned by %s; want destroyed, instance-1", got.State, got.Instance)
	}
}

// diesAfterLeaseEnd is an instance's store that stops writing sandboxes
// once it has ended a lease, as if its process died right after that
// write.
type diesAfterLeaseEnd struct {
	*sqlstore.Store
	dead atomic.Bool
}

var errDied = errors.New("the process died")

func (d *diesAfterLeaseEnd) EndLease(ctx context.Context, e store.LeaseEnd) (*sandbox.Lease, *sandbox.Sandbox, error) {
	l, sb, err := d.Store.EndLease(ctx, e)
	d.dead.Store(true)
	return l, sb, err
}

func (d *diesAfterLeaseEnd) UpdateSandbox(ctx context.Context, id string, version int64, now time.Time, fn func(*sandbox.Sandbox) error) (*sandbox.Sandbox, error) {
	if d.dead.Load() {
		return nil, errDied
	}
	return d.Store.UpdateSandbox(ctx, id, version, now, fn)
}

func (d *diesAfterLeaseEnd) TakeSandbox(ctx context.Context, id, from, to string, now time.Time) error {
	if d.dead.Load() {
		return errDied
	}
	return d.Store.TakeSandbox(ctx, id, from, to, now)
}

// TestLeaseEndTakesAnotherInstancesSandbox: the release, through one
// instance, of a lease on another instance's sandbox drains the sandbox
// and makes it the releasing instance's in one write. Should the releasing
// process die right after it, the draining record names that dead
// instance, whose sandboxes the leader adopts and finishes at once; named
// after its live owner it would look like a drain still under way and
// wait out the stuck-drain bound.
func TestLeaseEndTakesAnotherInstancesSandbox(t *testing.T) {
	dsn := pgtest.Start(t)
	var hs []*harness
	var dying *diesAfterLeaseEnd
	for i := range 2 {
		st, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		o := controltest.Options{Store: st, Instance: fmt.Sprintf("instance-%d", i)}
		if i == 1 {
			dying = &diesAfterLeaseEnd{Store: st}
			o.Assemble = func(c *assemble.Config) { c.Store = dying }
		}
		hs = append(hs, &harness{controltest.NewOpts(t, o)})
	}
	ctx := t.Context()
	out, err := hs[0].Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "a", Profile: controltest.Profile, TTLSeconds: ttl(60)})
	if err != nil {
		t.Fatal(err)
	}
	if sb, err := hs[0].St.GetSandbox(ctx, "", out.Lease.SandboxID); err != nil || sb.Instance != "instance-0" {
		t.Fatalf("leased sandbox %+v, %v; want one of instance-0", sb, err)
	}
	if err := hs[1].Svc.ReleaseLease(ctx, "a", out.Lease.ID); !errors.Is(err, errDied) {
		t.Logf("release through the instance that dies: %v", err)
	}
	if err := hs[1].Svc.WaitRecycles(ctx); err != nil {
		t.Logf("recycles of the instance that dies: %v", err)
	}
	if !dying.dead.Load() {
		t.Fatal("the release did not end the lease through EndLease")
	}
	got, err := hs[0].St.GetSandbox(ctx, "", out.Lease.SandboxID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != sandbox.StateDraining || got.Instance != "instance-1" {
		t.Errorf("after instance-1 ended the lease and died: %s, owned by %s; want draining, instance-1", got.State, got.Instance)
	}
}
