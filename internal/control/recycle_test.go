package control_test

import (
	"context"
	"crypto/sha256"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/controltest"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/driver/local"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/sandbox"
)

// withResetPool gives the test profile a warm runc pool whose released
// sandboxes are reset and returned.
func withResetPool(minIdle, maxTotal int) func(*config.Config) {
	return func(c *config.Config) {
		withPool(minIdle, maxTotal)(c)
		for i := range c.Profiles {
			if c.Profiles[i].Name == controltest.Profile {
				c.Profiles[i].Lease.OnRelease = config.ReleaseReset
			}
		}
	}
}

// resetHarness is a harness whose agents run as the sandbox user, which a
// reset needs (as root the agent refuses it).
func resetHarness(t *testing.T, minIdle, maxTotal int) *harness {
	h := newHarness(t, withResetPool(minIdle, maxTotal))
	if !h.Agents.AsUser() {
		t.Skip("agents cannot run as the sandbox user here; a reset needs that")
	}
	return h
}

// TestLeaseResetReturnsToPool: with on_release: reset a released warm
// sandbox is wiped (files, jobs, sessions, env, metadata) and handed to the
// next lease, of another tenant, as the same sandbox and container.
func TestLeaseResetReturnsToPool(t *testing.T) {
	t.Parallel()
	h := resetHarness(t, 1, 2)
	ctx := context.Background()
	h.waitIdle(1)
	out, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "a", Profile: controltest.Profile, TTLSeconds: ttl(60),
		Env: map[string]string{"LEASE_VAR": "secret-a"}, Metadata: map[string]string{"owner": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	sb := out.Sandbox
	cont, _ := h.Container(sb.ID)
	ws := filepath.Join(h.SandboxDir(sb.ID), "workspace")
	if res, err := h.Jobs.Exec(ctx, jobs.ExecInput{Tenant: "a", SandboxID: sb.ID,
		Script: `mkdir -p ` + ws + `/d && echo "$LEASE_VAR" > ` + ws + `/d/f`}); err != nil || *res.Job.ExitCode != 0 {
		t.Fatalf("writing to the workspace: %+v %v", res, err)
	}
	job, err := h.Jobs.StartJob(ctx, jobs.ExecInput{Tenant: "a", SandboxID: sb.ID, Script: "trap '' TERM; while :; do sleep 1; done"})
	if err != nil {
		t.Fatal(err)
	}
	se, err := h.Jobs.CreateSession(ctx, "a", sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	h.waitIdle(1) // the claim's refill

	if err := h.Svc.ReleaseLease(ctx, "a", out.Lease.ID); err != nil {
		t.Fatal(err)
	}
	h.recycled(t)
	rec := h.Record(sb.ID)
	if rec.State != sandbox.StateIdle || rec.Tenant != "" || len(rec.Env) != 0 || len(rec.Metadata) != 0 || rec.ExpiresAt != nil {
		t.Fatalf("reset sandbox record %+v, want an idle member without the holder's env and metadata", rec)
	}
	if ents, err := os.ReadDir(ws); err != nil || len(ents) != 0 {
		t.Errorf("workspace after reset: %d entries, %v", len(ents), err)
	}
	if j, err := h.Jobs.GetJob(ctx, "a", job.ID); err != nil || j.State != sandbox.JobCanceled {
		t.Errorf("job of the released lease: %+v %v, want canceled", j, err)
	}
	_, err = h.Jobs.SessionExec(ctx, se.ID, jobs.ExecInput{Tenant: "a", Script: "true"})
	wantProblem(t, "session of the released lease", err, http.StatusConflict, "session_closed")
	v := h.testPool()
	if v.Recycled != 1 || v.ResetFailed != 0 || v.Counts[sandbox.StateIdle] != 2 {
		t.Errorf("pool after the reset: %+v", v)
	}

	// The oldest idle member is the reset one: the next lease gets it.
	out2, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "b", Profile: controltest.Profile, TTLSeconds: ttl(60)})
	if err != nil {
		t.Fatal(err)
	}
	if out2.Sandbox.ID != sb.ID {
		t.Fatalf("second lease got %s, want the reset sandbox %s", out2.Sandbox.ID, sb.ID)
	}
	if c, _ := h.Container(sb.ID); c.ID != cont.ID {
		t.Errorf("second lease runs in container %s, want the same container %s", c.ID, cont.ID)
	}
	res, err := h.Jobs.Exec(ctx, jobs.ExecInput{Tenant: "b", SandboxID: sb.ID, Script: `echo "[$LEASE_VAR]"; ls -A ` + ws})
	if err != nil || string(res.Stdout) != "[]\n" {
		t.Errorf("second holder sees %q (%v), want no env and an empty workspace", res.Stdout, err)
	}
	if _, err := h.Svc.GetSandbox(ctx, "a", sb.ID); err == nil {
		t.Errorf("the first holder still sees the sandbox")
	}
}

// TestLeaseResetFailureDestroys: a reset that cannot empty the workspace
// (a root-owned file in a sticky directory the sandbox user cannot clean)
// fails closed: the sandbox is destroyed and the pool refills.
func TestLeaseResetFailureDestroys(t *testing.T) {
	t.Parallel()
	h := resetHarness(t, 1, 2)
	ctx := context.Background()
	h.waitIdle(1)
	out, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "a", Profile: controltest.Profile, TTLSeconds: ttl(60)})
	if err != nil {
		t.Fatal(err)
	}
	stuck := filepath.Join(h.SandboxDir(out.Sandbox.ID), "workspace", "stuck")
	if err := os.Mkdir(stuck, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(stuck, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stuck, "root-owned"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := h.Svc.ReleaseLease(ctx, "a", out.Lease.ID); err != nil {
		t.Fatal(err)
	}
	h.recycled(t)
	rec := h.Record(out.Sandbox.ID)
	if rec.State != sandbox.StateDestroyed || !strings.Contains(rec.FailureReason, "reset failed") {
		t.Fatalf("sandbox after a failed reset: %s (%q), want destroyed saying why", rec.State, rec.FailureReason)
	}
	if _, ok := h.Container(out.Sandbox.ID); ok {
		t.Errorf("the container of a sandbox whose reset failed is still there")
	}
	v := h.waitIdle(1)
	if v.Recycled != 0 || v.ResetFailed != 1 {
		t.Errorf("pool after a failed reset: %+v", v)
	}
}

// TestLeaseResetAfterRedialDestroys: a connection to the agent opened
// during the lease (here: the first one closed, the next call dials anew)
// may have reached a socket the holder put at the agent's address, so the
// sandbox is destroyed on release, not reset; one that kept its connection
// is reset.
func TestLeaseResetAfterRedialDestroys(t *testing.T) {
	t.Parallel()
	h := resetHarness(t, 1, 2)
	ctx := context.Background()
	h.waitIdle(1)
	exec := func(tenant, id string) {
		t.Helper()
		if res, err := h.Jobs.Exec(ctx, jobs.ExecInput{Tenant: tenant, SandboxID: id, Script: "true"}); err != nil || *res.Job.ExitCode != 0 {
			t.Fatalf("exec: %+v %v", res, err)
		}
	}
	out, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "a", Profile: controltest.Profile, TTLSeconds: ttl(60)})
	if err != nil {
		t.Fatal(err)
	}
	exec("a", out.Sandbox.ID)
	exec("a", out.Sandbox.ID) // the same connection: still trusted
	if err := h.Svc.ReleaseLease(ctx, "a", out.Lease.ID); err != nil {
		t.Fatal(err)
	}
	h.recycled(t)
	if got := h.Record(out.Sandbox.ID).State; got != sandbox.StateIdle {
		t.Fatalf("sandbox that kept its agent connection after release: %s, want idle (reset)", got)
	}

	out, err = h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "b", Profile: controltest.Profile, TTLSeconds: ttl(60)})
	if err != nil {
		t.Fatal(err)
	}
	if !out.Lease.Warm {
		t.Fatalf("second lease not from the pool: %+v", out.Lease)
	}
	exec("b", out.Sandbox.ID)
	h.Svc.AgentOf(out.Sandbox.ID).Close()
	exec("b", out.Sandbox.ID) // dialled during the lease
	if err := h.Svc.ReleaseLease(ctx, "b", out.Lease.ID); err != nil {
		t.Fatal(err)
	}
	h.recycled(t)
	if got := h.Record(out.Sandbox.ID).State; got != sandbox.StateDestroyed {
		t.Fatalf("sandbox whose agent was dialled again during the lease, after release: %s, want destroyed", got)
	}
	if v := h.testPool(); v.Recycled != 1 || v.ResetFailed != 0 {
		t.Errorf("pool: %+v, want the first reset only", v)
	}
}

// TestLeaseResetOnlyPoolLike: a lease that did not come from the pool as
// one of its members (here: other resources, so it was created cold) is
// destroyed on release even though the profile resets.
func TestLeaseResetOnlyPoolLike(t *testing.T) {
	t.Parallel()
	h := resetHarness(t, 1, 3)
	ctx := context.Background()
	h.waitIdle(1)
	out, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "a", Profile: controltest.Profile, TTLSeconds: ttl(60),
		Resources: sandbox.Resources{MemoryMB: 128}})
	if err != nil {
		t.Fatal(err)
	}
	if out.Lease.Warm {
		t.Fatalf("a lease with other resources was served warm: %+v", out.Lease)
	}
	if err := h.Svc.ReleaseLease(ctx, "a", out.Lease.ID); err != nil {
		t.Fatal(err)
	}
	h.recycled(t)
	if got := h.Record(out.Sandbox.ID).State; got != sandbox.StateDestroyed {
		t.Errorf("cold-created leased sandbox after release: %s, want destroyed", got)
	}
	if v := h.testPool(); v.Recycled != 0 || v.ResetFailed != 0 {
		t.Errorf("pool counted a reset of a sandbox that was not its member: %+v", v)
	}
}

// TestLeaseResetOnExpiry: the reaper recycles the sandbox of an expired
// lease like a release does.
func TestLeaseResetOnExpiry(t *testing.T) {
	t.Parallel()
	h := resetHarness(t, 1, 1)
	ctx := context.Background()
	h.waitIdle(1)
	out, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "a", Profile: controltest.Profile, TTLSeconds: ttl(5),
		Env: map[string]string{"LEASE_VAR": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	h.Clock.Advance(6 * time.Second)
	if err := h.Svc.Reconcile(ctx, false); err != nil {
		t.Fatal(err)
	}
	if l, _ := h.St.GetLease(ctx, "", out.Lease.ID); l.State != sandbox.LeaseExpired {
		t.Errorf("lease after the reaper: %s, want expired", l.State)
	}
	rec := h.Record(out.Sandbox.ID)
	if rec.State != sandbox.StateIdle || rec.Tenant != "" || len(rec.Env) != 0 || rec.ExpiresAt != nil {
		t.Errorf("sandbox of the reaped lease: %+v, want an idle member again", rec)
	}
	if v := h.testPool(); v.Recycled != 1 {
		t.Errorf("pool after the reaper: %+v, want one recycled", v)
	}
}

// rekeyer is the local sandboxer with agent tokens (as driver/kube has
// them): it counts the token changes asked for and put to use.
type rekeyer struct {
	*local.Sandboxer
	next, used atomic.Int32
}

func (r *rekeyer) NextAgentToken(context.Context, string) (driver.AgentToken, error) {
	r.next.Add(1)
	return driver.AgentToken{Generation: 1, SHA256: sha256.Sum256([]byte("next"))}, nil
}

func (r *rekeyer) UseAgentToken(context.Context, string, driver.AgentToken) error {
	r.used.Add(1)
	return nil
}

// TestLeaseResetRekeysAgent: where agents admit connections by a token,
// a reset replaces the token before the sandbox goes back to its pool; an
// agent that does not take the new token (here one on a Unix socket, which
// has none) fails the reset closed: the sandbox is destroyed, and the new
// token is never put to use.
func TestLeaseResetRekeysAgent(t *testing.T) {
	t.Parallel()
	var rk *rekeyer
	h := newHarnessWith(t, withResetPool(1, 2), func(c *control.Config) {
		l, err := local.New(local.Config{Driver: c.Driver, Root: filepath.Join(c.Settings.DataDir, "sandboxes"), AgentDir: c.AgentDir, Logger: c.Logger})
		if err != nil {
			t.Fatal(err)
		}
		rk = &rekeyer{Sandboxer: l}
		c.Sandboxer = rk
	})
	if !h.Agents.AsUser() {
		t.Skip("agents cannot run as the sandbox user here; a reset needs that")
	}
	ctx := context.Background()
	h.waitIdle(1)
	out, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "a", Profile: controltest.Profile, TTLSeconds: ttl(60)})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Svc.ReleaseLease(ctx, "a", out.Lease.ID); err != nil {
		t.Fatal(err)
	}
	h.recycled(t)
	rec := h.Record(out.Sandbox.ID)
	if rec.State != sandbox.StateDestroyed || !strings.Contains(rec.FailureReason, "agent token") {
		t.Fatalf("sandbox whose agent refused a new token: %s (%q), want destroyed saying why", rec.State, rec.FailureReason)
	}
	if rk.next.Load() != 1 || rk.used.Load() != 0 {
		t.Errorf("token changes asked %d, put to use %d; want 1 and 0", rk.next.Load(), rk.used.Load())
	}
}
