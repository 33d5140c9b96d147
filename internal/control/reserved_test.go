package control_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/controltest"
	"genesis.dev/sandbox/internal/interactive"
	"genesis.dev/sandbox/internal/joblog"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/testenv"
)

// TestAttachReserved: a sandbox reserved to a workload is reached only by
// that workload (or the service's own supervision): every tenant route
// through Attach, and the routes that reuse a job follower's attachment
// (stdin, cancel), answer 403 sandbox_reserved, its owner's included.
func TestAttachReserved(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	sb := h.Create("a", control.CreateSandboxInput{Reserved: "mcp:one"})
	if sb.Reserved != "mcp:one" || h.Record(sb.ID).Reserved != "mcp:one" {
		t.Fatalf("created sandbox %+v", sb)
	}

	for _, o := range []control.AttachOptions{{}, {Busy: true}, {Reservation: "mcp:two"}} {
		_, err := h.Svc.Attach(ctx, "a", sb.ID, o)
		wantProblem(t, "attach with "+o.Reservation, err, http.StatusForbidden, control.CodeReserved)
	}
	_, err := h.Svc.Attach(ctx, "b", sb.ID, control.AttachOptions{Reservation: "mcp:one"})
	wantProblem(t, "another tenant naming the reservation", err, http.StatusNotFound, "not_found")
	for _, r := range []string{"mcp:one", control.AnyReservation} {
		a, err := h.Svc.Attach(ctx, "a", sb.ID, control.AttachOptions{Reservation: r})
		if err != nil {
			t.Fatalf("attach as %s: %v", r, err)
		}
		a.Release()
	}

	// The tenant's workload routes.
	_, err = h.Jobs.Exec(ctx, jobs.ExecInput{Tenant: "a", SandboxID: sb.ID, Command: []string{"cat", "/proc/1/environ"}})
	wantProblem(t, "exec", err, http.StatusForbidden, control.CodeReserved)
	_, err = h.Jobs.StartJob(ctx, jobs.ExecInput{Tenant: "a", SandboxID: sb.ID, Command: []string{"true"}})
	wantProblem(t, "background job", err, http.StatusForbidden, control.CodeReserved)
	_, err = h.Jobs.CreateSession(ctx, "a", sb.ID)
	wantProblem(t, "session", err, http.StatusForbidden, control.CodeReserved)
	_, err = h.Jobs.CreateContext(ctx, "a", sb.ID, "python")
	wantProblem(t, "code context", err, http.StatusForbidden, control.CodeReserved)
	_, _, err = h.Files.ReadFile(ctx, "a", sb.ID, http.MethodGet, "/proc/1/environ", nil)
	wantProblem(t, "file read", err, http.StatusForbidden, control.CodeReserved)
	_, err = h.Files.ListFiles(ctx, "a", sb.ID, "/", 1, 0)
	wantProblem(t, "file list", err, http.StatusForbidden, control.CodeReserved)
	_, err = h.Terminals.Open(ctx, interactive.TerminalOptions{Tenant: "a", SandboxID: sb.ID})
	wantProblem(t, "terminal", err, http.StatusForbidden, control.CodeReserved)

	// The workload's own server job, and what the tenant can do with it.
	const secret = "s3cret-value-of-the-operator"
	job, err := h.Jobs.StartServer(ctx, jobs.ExecInput{Tenant: "a", SandboxID: sb.ID, Reservation: "mcp:one",
		Script: `echo "token=$TOKEN" >&2; cat`, Env: map[string]string{"TOKEN": secret}, Secrets: []string{secret}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Jobs.OpenStdin(ctx, "a", job.ID)
	wantProblem(t, "the tenant writes the server's stdin", err, http.StatusForbidden, control.CodeReserved)
	err = h.Jobs.CloseStdin(ctx, "a", job.ID)
	wantProblem(t, "the tenant closes the server's stdin", err, http.StatusForbidden, control.CodeReserved)
	_, err = h.Jobs.CancelJob(ctx, "a", job.ID)
	wantProblem(t, "the tenant cancels the server", err, http.StatusForbidden, control.CodeReserved)

	w, err := h.Jobs.OpenStdinAs(ctx, "a", "mcp:one", job.ID)
	if err != nil {
		t.Fatalf("the workload writes its server's stdin: %v", err)
	}
	if _, err := io.WriteString(w, "echo "+secret+"\n"); err != nil {
		t.Fatal(err)
	}
	w.Close()
	// Its output is stored with the secret masked: the log the tenant
	// reads (stdout and stderr) never has it.
	masked := "echo ****************************\n"
	testenv.Eventually(t, 30*time.Second, 20*time.Millisecond, "the server's echo in its log", func() (bool, string) {
		_, log, err := h.Jobs.JobLog(ctx, "a", job.ID)
		if err != nil {
			return false, err.Error()
		}
		var so, se strings.Builder
		if err := log.Read(ctx, 0, false, func(e joblog.Event) error {
			switch e.Type {
			case agentproto.FrameStdout:
				so.Write(e.Payload)
			case agentproto.FrameStderr:
				se.Write(e.Payload)
			}
			return nil
		}); err != nil {
			return false, err.Error()
		}
		return so.String() == masked && se.String() == "token=****************************\n", so.String() + " | " + se.String()
	})
	if _, err := h.Jobs.CancelJobAs(ctx, "a", "mcp:one", job.ID); err != nil {
		t.Fatalf("the workload cancels its server: %v", err)
	}
}

// TestLeaseReserved: a lease taken reserved (cold, then warm from a pool
// whose profile resets released sandboxes) lists its reservation, is
// renewed and released by its tenant like any lease, and its sandbox is
// destroyed at the end, never reset and returned to the pool.
func TestLeaseReserved(t *testing.T) {
	t.Parallel()
	h := resetHarness(t, 1, 2)
	ctx := context.Background()
	h.waitIdle(1)
	for _, warm := range []bool{true, false} {
		in := control.AcquireLeaseInput{Tenant: "a", Profile: controltest.Profile, TTLSeconds: ttl(60), Reserved: "mcp:x"}
		if !warm {
			in.Resources = sandbox.Resources{MemoryMB: 128} // not the pool's: served cold
		}
		out, err := h.Svc.AcquireLease(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if out.Lease.Warm != warm || out.Lease.Reserved != "mcp:x" || out.Sandbox.Reserved != "mcp:x" || h.Record(out.Sandbox.ID).Reserved != "mcp:x" {
			t.Fatalf("lease (warm %v): %+v, sandbox %+v", warm, out.Lease, out.Sandbox)
		}
		list, err := h.Svc.ListLeases(ctx, control.LeaseFilter{Tenant: "a", SandboxID: out.Sandbox.ID})
		if err != nil || len(list) != 1 || list[0].Reserved != "mcp:x" {
			t.Fatalf("the tenant's list: %+v %v", list, err)
		}
		_, err = h.Jobs.Exec(ctx, jobs.ExecInput{Tenant: "a", SandboxID: out.Sandbox.ID, Command: []string{"true"}})
		wantProblem(t, "exec in the reserved lease's sandbox", err, http.StatusForbidden, control.CodeReserved)
		if l, err := h.Svc.RenewLease(ctx, "a", out.Lease.ID, ttl(120)); err != nil || l.Reserved != "mcp:x" {
			t.Fatalf("renew: %+v %v", l, err)
		}
		h.waitIdle(1)
		before := h.testPool().Recycled
		if err := h.Svc.ReleaseLease(ctx, "a", out.Lease.ID); err != nil {
			t.Fatal(err)
		}
		h.recycled(t)
		if r := h.Record(out.Sandbox.ID); r.State != sandbox.StateDestroyed {
			t.Errorf("released reserved sandbox (warm %v) is %s, want destroyed", warm, r.State)
		}
		if v := h.testPool(); v.Recycled != before {
			t.Errorf("the pool reset a reserved sandbox: %+v", v)
		}
	}
}

// TestReconcileStartupDestroysReserved: a reserved sandbox the previous
// process left running (its workload lived in that process) is destroyed
// at start-up and its lease ended, not kept until the lease expires.
func TestReconcileStartupDestroysReserved(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	out, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "a", Profile: controltest.Profile, TTLSeconds: ttl(600), Reserved: "mcp:gone"})
	if err != nil {
		t.Fatal(err)
	}
	plain := h.Create("a", control.CreateSandboxInput{})
	if err := h.Svc.Reconcile(ctx, false); err != nil {
		t.Fatal(err)
	}
	if r := h.Record(out.Sandbox.ID); r.State != sandbox.StateLeased {
		t.Fatalf("a periodic pass moved the reserved sandbox to %s", r.State)
	}
	if err := h.Svc.Reconcile(ctx, true); err != nil {
		t.Fatal(err)
	}
	if r := h.Record(out.Sandbox.ID); r.State != sandbox.StateDestroyed {
		t.Errorf("reserved sandbox after start-up: %s, want destroyed", r.State)
	}
	if l, err := h.Svc.GetLease(ctx, "a", out.Lease.ID); err != nil || l.State == sandbox.LeaseActive {
		t.Errorf("its lease after start-up: %+v %v", l, err)
	}
	if r := h.Record(plain.ID); r.State != sandbox.StateReady {
		t.Errorf("a plain sandbox after start-up: %s", r.State)
	}
}
