package control_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/controltest"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// withPool gives the test profile a warm runc pool.
func withPool(minIdle, maxTotal int) func(*config.Config) {
	return func(c *config.Config) {
		c.WarmPools = true
		c.Intervals.PoolCheck = time.Hour
		for i := range c.Profiles {
			if c.Profiles[i].Name == controltest.Profile {
				c.Profiles[i].Pools = []config.PoolSpec{{Runtime: sandbox.RuntimeRunc, MinIdle: minIdle, MaxTotal: maxTotal}}
				c.Profiles[i].Lease = config.LeasePolicy{DefaultTTLSeconds: 60, MaxTTLSeconds: 600}
			}
		}
	}
}

// waitIdle polls until the test pool holds n idle members.
func (h *harness) waitIdle(n int) control.PoolView {
	h.T.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		views, err := h.Svc.Pools(context.Background())
		if err != nil {
			h.T.Fatal(err)
		}
		for _, v := range views {
			if v.Profile == controltest.Profile && v.Counts[sandbox.StateIdle] == n && v.Starting == 0 {
				return v
			}
		}
		if time.Now().After(deadline) {
			h.T.Fatalf("pool never held %d idle members: %+v", n, views)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func ttl(n int64) *int64 { return &n }

func wantProblem(t *testing.T, what string, err error, status int, code string) {
	t.Helper()
	if err == nil || errdefs.HTTPStatus(err) != status || errdefs.Code(err) != code {
		t.Errorf("%s: error %v (status %d, code %q), want %d %s", what, err, errdefs.HTTPStatus(err), errdefs.Code(err), status, code)
	}
}

// TestLeaseWarmClaim: a lease from a warm pool hands over an idle member
// (invisible to tenants before), applies env and metadata without a
// restart, keeps the sandbox busy while a job runs, refills the pool, and
// a release destroys the sandbox.
func TestLeaseWarmClaim(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withPool(2, 4))
	ctx := context.Background()
	h.waitIdle(2)
	if list, _ := h.Svc.ListSandboxes(ctx, store.SandboxFilter{Tenant: "a"}); len(list) != 0 {
		t.Fatalf("pool members visible to a tenant: %d", len(list))
	}
	before := map[string]bool{}
	for _, c := range h.Containers() {
		before[c.ID] = true
	}
	out, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "a", Profile: controltest.Profile, TTLSeconds: ttl(30),
		Holder: "h1", Env: map[string]string{"LEASE_VAR": "from-claim"}, Metadata: map[string]string{"run": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	l, sb := out.Lease, out.Sandbox
	if !l.Warm || sb.State != sandbox.StateLeased || sb.Tenant != "a" || sb.Metadata["run"] != "1" || l.Holder != "h1" {
		t.Fatalf("warm claim: lease %+v sandbox %+v", l, sb)
	}
	// The refill the claim wakes may start a container at once; what
	// matters is that the lease got one that was already running.
	if c, ok := h.Container(sb.ID); !ok || !before[c.ID] {
		t.Errorf("the warm claim did not hand over a container that ran before it (container %+v, found %v)", c, ok)
	}
	res, err := h.Jobs.Exec(ctx, jobs.ExecInput{Tenant: "a", SandboxID: sb.ID, Script: `echo "$LEASE_VAR"`})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "from-claim" {
		t.Fatalf("claim env not applied: %q %v", res.Stdout, err)
	}
	if _, err := h.Svc.GetLease(ctx, "b", l.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another tenant reads the lease: %v", err)
	}
	wantProblem(t, "foreign release", h.Svc.ReleaseLease(ctx, "b", l.ID), http.StatusNotFound, "lease_not_found")

	job, err := h.Jobs.StartJob(ctx, jobs.ExecInput{Tenant: "a", SandboxID: sb.ID, Command: []string{"sleep", "30"}})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, h, sb.ID, sandbox.StateBusy)
	if _, err := h.Jobs.CancelJob(ctx, "a", job.ID); err != nil {
		t.Fatal(err)
	}
	waitState(t, h, sb.ID, sandbox.StateLeased)

	v := h.waitIdle(2) // refilled right after the claim
	if v.Hits != 1 || v.Counts[sandbox.StateLeased] != 1 {
		t.Errorf("pool after one claim: %+v", v)
	}
	renewed, err := h.Svc.RenewLease(ctx, "a", l.ID, ttl(120))
	if err != nil || !renewed.ExpiresAt.After(l.ExpiresAt) || h.Record(sb.ID).ExpiresAt.Before(renewed.ExpiresAt) {
		t.Fatalf("renew: %+v %v", renewed, err)
	}
	wantProblem(t, "renew past the profile maximum", func() error { _, err := h.Svc.RenewLease(ctx, "a", l.ID, ttl(601)); return err }(), 400, "invalid_ttl")
	if err := h.Svc.ReleaseLease(ctx, "a", l.ID); err != nil {
		t.Fatal(err)
	}
	h.recycled(t)
	if got := h.Record(sb.ID).State; got != sandbox.StateDestroyed {
		t.Errorf("released sandbox is %s, want destroyed", got)
	}
	if err := h.Svc.ReleaseLease(ctx, "a", l.ID); err != nil {
		t.Errorf("second release: %v, want success", err)
	}
	_, err = h.Svc.RenewLease(ctx, "a", l.ID, nil)
	wantProblem(t, "renew of a released lease", err, http.StatusConflict, "lease_released")
	got, _ := h.Svc.GetLease(ctx, "a", l.ID)
	if got.State != sandbox.LeaseReleased || got.EndedAt == nil {
		t.Errorf("released lease reads %+v", got)
	}
}

func waitState(t *testing.T, h *harness, id string, want sandbox.State) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for h.Record(id).State != want {
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s is %s, want %s", id, h.Record(id).State, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLeaseBadInput: refusals are clear and change nothing.
func TestLeaseBadInput(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withPool(0, 2))
	ctx := context.Background()
	acquire := func(in control.AcquireLeaseInput) error {
		in.Tenant = "a"
		if in.Profile == "" {
			in.Profile = controltest.Profile
		}
		_, err := h.Svc.AcquireLease(ctx, in)
		return err
	}
	wantProblem(t, "unknown profile", acquire(control.AcquireLeaseInput{Profile: "nope"}), 404, "profile_not_found")
	wantProblem(t, "ttl 0", acquire(control.AcquireLeaseInput{TTLSeconds: ttl(0)}), 400, "invalid_ttl")
	wantProblem(t, "ttl -1", acquire(control.AcquireLeaseInput{TTLSeconds: ttl(-1)}), 400, "invalid_ttl")
	wantProblem(t, "ttl over max", acquire(control.AcquireLeaseInput{TTLSeconds: ttl(601)}), 400, "invalid_ttl")
	wantProblem(t, "negative wait", acquire(control.AcquireLeaseInput{WaitSeconds: -1}), 400, "invalid_argument")
	wantProblem(t, "reserved env", acquire(control.AcquireLeaseInput{Env: map[string]string{"GENESIS_AGENT_X": "1"}}), 400, "invalid_argument")
	wantProblem(t, "weak runtime for high risk", acquire(control.AcquireLeaseInput{RiskLevel: "high", Runtime: "runc"}), 400, "runtime_not_allowed")
	_, err := h.Svc.GetLease(ctx, "a", "lse_0000000000000000")
	wantProblem(t, "unknown lease", err, 404, "lease_not_found")
	h.AssertNothingCreated()
}

// TestLeaseExpiryReaped: a lease past its expiry reads expired at once, the
// reconciler ends it and destroys its sandbox, and it cannot be renewed.
func TestLeaseExpiryReaped(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	out, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "a", Profile: controltest.Profile, TTLSeconds: ttl(5)})
	if err != nil {
		t.Fatal(err)
	}
	if out.Lease.Warm {
		t.Error("a lease without a pool says warm")
	}
	h.Clock.Advance(6 * time.Second)
	if l, _ := h.Svc.GetLease(ctx, "a", out.Lease.ID); l.State != sandbox.LeaseExpired {
		t.Errorf("lease past expiry reads %s", l.State)
	}
	_, err = h.Svc.RenewLease(ctx, "a", out.Lease.ID, nil)
	wantProblem(t, "renew of an expired lease", err, 409, "lease_expired")
	wantProblem(t, "release of an expired lease", h.Svc.ReleaseLease(ctx, "a", out.Lease.ID), 409, "lease_expired")
	if err := h.Svc.Reconcile(ctx, false); err != nil {
		t.Fatal(err)
	}
	if got := h.Record(out.Sandbox.ID).State; got != sandbox.StateDestroyed {
		t.Errorf("sandbox of the reaped lease is %s", got)
	}
	stored, _ := h.St.GetLease(ctx, "", out.Lease.ID)
	if stored.State != sandbox.LeaseExpired || stored.EndReason != "ttl expired" {
		t.Errorf("reaped lease stored as %+v", stored)
	}
	h.AssertGone(out.Sandbox.ID)
}

// TestLeaseCapacityWait: with the host full a lease waits up to
// wait_seconds and gets the slot a release frees; without waiting it gets
// 503 capacity_exhausted with a retry hint.
func TestLeaseCapacityWait(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *config.Config) { c.Limits.MaxSandboxes = 1 })
	ctx := context.Background()
	first, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "a", Profile: controltest.Profile})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "b", Profile: controltest.Profile})
	wantProblem(t, "full host, no wait", err, 503, "capacity_exhausted")
	if d, ok := errdefs.RetryAfter(err); !ok || d <= 0 {
		t.Errorf("no retry hint: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "b", Profile: controltest.Profile, WaitSeconds: 60})
		done <- err
	}()
	if err := h.Svc.ReleaseLease(ctx, "a", first.Lease.ID); err != nil {
		t.Fatal(err)
	}
	h.recycled(t)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("waiting lease: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the waiting lease did not get the freed slot")
	}
}

// TestColdLeaseTTLFromGrant: a cold lease that waited for capacity (or
// whose sandbox was slow to start, as on a busy host) longer than its
// TTL is still granted its whole TTL from the grant: the wait is not the
// holder's time. Counted from the request, it was granted expired, and
// the reaper ended it under its holder's first command.
func TestColdLeaseTTLFromGrant(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *config.Config) { c.Limits.MaxSandboxes = 1 })
	ctx := context.Background()
	first, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "a", Profile: controltest.Profile})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		out *control.LeaseOutput
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "b", Profile: controltest.Profile, TTLSeconds: ttl(5), WaitSeconds: 60})
		done <- result{out, err}
	}()
	for deadline := time.Now().Add(30 * time.Second); h.Svc.AdmissionStats().Waiting == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the second lease never waited for capacity")
		}
	}
	h.Clock.Advance(time.Minute) // the wait outlasts the 5 s TTL
	if err := h.Svc.ReleaseLease(ctx, "a", first.Lease.ID); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the waiting lease did not get the freed slot")
	}
	if r.err != nil {
		t.Fatalf("waiting lease: %v", r.err)
	}
	granted := h.Clock.Now()
	if left := r.out.Lease.ExpiresAt.Sub(granted); left < 4*time.Second || left > 5*time.Second {
		t.Errorf("a lease of 5 s granted after a minute's wait expires in %v", left)
	}
	if l, err := h.Svc.GetLease(ctx, "b", r.out.Lease.ID); err != nil || l.State != sandbox.LeaseActive {
		t.Fatalf("the lease just granted reads %+v, %v; want active", l, err)
	}
	if sb := h.Record(r.out.Sandbox.ID); sb.ExpiresAt == nil || !sb.ExpiresAt.Equal(r.out.Lease.ExpiresAt) {
		t.Errorf("its sandbox expires at %v, the lease at %v", sb.ExpiresAt, r.out.Lease.ExpiresAt)
	}
	// The reaper leaves it to its holder.
	if err := h.Svc.Reconcile(ctx, false); err != nil {
		t.Fatal(err)
	}
	if got := h.Record(r.out.Sandbox.ID).State; got != sandbox.StateLeased {
		t.Errorf("the sandbox of a lease granted just now is %s after a reconcile", got)
	}
}

// TestPoolDrain: a drained pool destroys its idle members, hands out
// nothing and says draining.
func TestPoolDrain(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withPool(2, 3))
	ctx := context.Background()
	h.waitIdle(2)
	views, err := h.Svc.DrainPool(ctx, controltest.Profile+"-runc")
	if err != nil || len(views) != 1 || !views[0].Draining || views[0].Counts[sandbox.StateIdle] != 0 {
		t.Fatalf("drain: %+v %v", views, err)
	}
	_, err = h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "a", Profile: controltest.Profile, RiskLevel: "low"})
	wantProblem(t, "lease of a drained pool", err, 503, "pool_draining")
	_, err = h.Svc.DrainPool(ctx, "nope")
	wantProblem(t, "drain of an unknown pool", err, 404, "pool_not_found")
	h.WaitAgents(0)
}

// leaseWaits records the lease waits the service observes.
type leaseWaits struct {
	mu  sync.Mutex
	got []sandbox.Runtime
}

func (w *leaseWaits) ObserveLeaseWait(rt sandbox.Runtime, d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if d > 0 {
		w.got = append(w.got, rt)
	}
}

func (w *leaseWaits) runtimes() []sandbox.Runtime {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.got)
}

// TestLeaseWaitObserved: every grant's wait is observed by the service
// itself, a warm claim and a cold create alike, so leases that MCP
// servers, E2B and OpenSandbox creates take are measured as the leases
// API's are; a refused request is not a wait.
func TestLeaseWaitObserved(t *testing.T) {
	t.Parallel()
	waits := &leaseWaits{}
	h := newHarnessWith(t, withPool(1, 2), func(c *control.Config) { c.Metrics = waits })
	ctx := context.Background()
	h.waitIdle(1)
	warm, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "a", Profile: controltest.Profile, Runtime: "runc"})
	if err != nil || !warm.Lease.Warm {
		t.Fatalf("warm lease: %+v %v", warm, err)
	}
	cold, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "a", Profile: controltest.Profile, Runtime: "runsc"})
	if err != nil || cold.Lease.Warm {
		t.Fatalf("cold lease: %+v %v", cold, err)
	}
	if _, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "a", Profile: controltest.Profile, TTLSeconds: ttl(0)}); err == nil {
		t.Fatal("a lease with ttl 0 was granted")
	}
	if got := waits.runtimes(); !slices.Equal(got, []sandbox.Runtime{sandbox.RuntimeRunc, sandbox.RuntimeRunsc}) {
		t.Errorf("observed lease waits by runtime %v, want [runc runsc]", got)
	}
	for _, l := range []*control.LeaseOutput{warm, cold} {
		if err := h.Svc.ReleaseLease(ctx, "a", l.Lease.ID); err != nil {
			t.Fatal(err)
		}
		h.recycled(t)
	}
}
