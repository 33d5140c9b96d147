package jobs_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
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

// waitService polls the state of service name of sandbox id until cond
// holds.
func waitService(t *testing.T, s *jobs.Services, id, name string, what string, cond func(jobs.ServiceState) bool) jobs.ServiceState {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, st := range s.Of(id) {
			if st.Name == name && cond(st) {
				return st
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("service %s of %s: %s not within 20s (now %+v)", name, id, what, s.Of(id))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestProfileServices runs a profile's services in real agents (host
// processes under the fake driver): started once the sandbox is ready,
// restarted with backoff after they exit, not restarted under
// restart: never, their output in the job log, and stopped with the
// sandbox.
func TestProfileServices(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *config.Config) {
		p, _ := c.Profile(controltest.Profile)
		p.Services = []config.ServiceSpec{
			{Name: "crashy", Command: []string{"sh", "-c", "echo run-$$; exit 3"}},
			{Name: "once", Command: []string{"true"}, Restart: config.RestartNever},
			{Name: "long", Command: []string{"sleep", "1000"}},
		}
	})
	sb := h.Create("a", control.CreateSandboxInput{})
	svcs := h.Services

	st := waitService(t, svcs, sb.ID, "crashy", "a restart", func(s jobs.ServiceState) bool { return s.Restarts >= 1 })
	if st.LastExit == nil || *st.LastExit != 3 {
		t.Errorf("crashy: last exit %v, want 3", st.LastExit)
	}
	once := waitService(t, svcs, sb.ID, "once", "exited", func(s jobs.ServiceState) bool { return s.State == "exited" })
	if once.Restarts != 0 || once.LastExit == nil || *once.LastExit != 0 {
		t.Errorf("once: %+v", once)
	}
	long := waitService(t, svcs, sb.ID, "long", "running", func(s jobs.ServiceState) bool { return s.State == "running" })

	// The crashing service's output is kept like any job's. st.JobID is
	// the run that has just started (Restarts counts it): its log is read
	// to its end (follow), since its output may not be written yet.
	_, l, err := h.Jobs.JobLog(context.Background(), "", st.JobID)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	rctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := l.Read(rctx, 0, true, func(e jobs.LogEvent) error {
		if e.Type == jobs.FrameStdout {
			out.Write(e.Payload)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "run-") {
		t.Errorf("crashy's log: %q", out.String())
	}
	// A service does not hold the sandbox busy.
	if got := h.Record(sb.ID).State; got != sandbox.StateReady {
		t.Errorf("sandbox with running services is %s, want ready", got)
	}

	// Deleting the sandbox stops the supervision and the service's job.
	if err := h.Svc.DeleteSandbox(context.Background(), "a", sb.ID); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		j, err := h.Jobs.GetJob(context.Background(), "", long.JobID)
		if err == nil && j.State.Final() && svcs.Of(sb.ID) == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after delete: job %+v (%v), services %+v", j, err, svcs.Of(sb.ID))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPoolMemberWaitsForServices: a pool member is idle only once its
// profile services with a ready port answer on it, so a warm lease never
// waits for them; until then it is not handed out.
func TestPoolMemberWaitsForServices(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close() // the "service" listens when the test says so
	h := newHarness(t, func(c *config.Config) {
		c.WarmPools = true
		c.Intervals.PoolCheck = time.Hour
		p, _ := c.Profile(controltest.Profile)
		p.Pools = []config.PoolSpec{{Runtime: sandbox.RuntimeRunc, MinIdle: 1, MaxTotal: 1}}
		p.Lease = config.LeasePolicy{DefaultTTLSeconds: 60, MaxTTLSeconds: 600, OnRelease: config.ReleaseReset}
		p.Services = []config.ServiceSpec{{Name: "web", Command: []string{"sleep", "1000"}, ReadyPort: port}}
	})
	ctx := context.Background()
	// The member exists and its service runs, but its port is closed.
	var member *sandbox.Sandbox
	deadline := time.Now().Add(20 * time.Second)
	for member == nil {
		list, err := h.St.ListSandboxes(ctx, store.SandboxFilter{ExcludeFinal: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, sb := range list {
			if sb.Tenant == "" && slices.ContainsFunc(h.Services.Of(sb.ID), func(s jobs.ServiceState) bool { return s.State == "running" }) {
				member = sb
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pool member with a running service: %+v", list)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st := h.Record(member.ID).State; st == sandbox.StateIdle {
		t.Fatalf("the member is idle while its service's port is closed")
	}

	ln, err = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatalf("listening on the service's port again: %v", err)
	}
	defer ln.Close()
	deadline = time.Now().Add(20 * time.Second)
	for h.Record(member.ID).State != sandbox.StateIdle {
		if time.Now().After(deadline) {
			t.Fatalf("the member never became idle once its service answered: %s, %+v", h.Record(member.ID).State, h.Services.Of(member.ID))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st := h.Services.Of(member.ID); len(st) != 1 || st[0].State != "ready" || st[0].Ready == nil {
		t.Errorf("service state of the idle member: %+v", st)
	}
	l, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "a", Profile: controltest.Profile, Runtime: "runc"})
	if err != nil || !l.Lease.Warm || l.Sandbox.ID != member.ID {
		t.Fatalf("lease after the service answered: %+v %v; want the member, warm", l, err)
	}
	first := h.Services.Of(member.ID)[0].JobID

	// Released and reset (which kills every process), the member is idle
	// again only with its service restarted and answering, as nobody's:
	// the service's job is not the previous holder's.
	if err := h.Svc.ReleaseLease(ctx, "a", l.Lease.ID); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		st := h.Services.Of(member.ID)
		if h.Record(member.ID).State == sandbox.StateIdle && h.Record(member.ID).Tenant == "" {
			if len(st) != 1 || st[0].State != "ready" || st[0].JobID == first {
				t.Fatalf("the reset member is idle with its service %+v (the first run was %s)", st, first)
			}
			if _, err := h.Jobs.GetJob(ctx, "a", st[0].JobID); err == nil {
				t.Errorf("the reset member's service job %s belongs to the previous holder", st[0].JobID)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the released member never came back idle: %+v, services %+v", h.Record(member.ID), st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestServiceHold: a held service is stopped (gracefully by its stop
// function, else canceled), not restarted while held, and started again
// by resume; a second hold is refused while the first lasts.
func TestServiceHold(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *config.Config) {
		p, _ := c.Profile(controltest.Profile)
		p.Services = []config.ServiceSpec{{Name: "long", Command: []string{"sleep", "1000"}},
			{Name: "crashy", Command: []string{"sh", "-c", "exit 3"}}}
	})
	sb := h.Create("a", control.CreateSandboxInput{})
	svcs := h.Services
	ctx := context.Background()
	first := waitService(t, svcs, sb.ID, "long", "running", func(s jobs.ServiceState) bool { return s.State == "running" })

	// A service waiting out a restart backoff is held at once: after three
	// restarts the backoff is 8 s, and the hold has 4.
	waitService(t, svcs, sb.ID, "crashy", "a fourth backoff", func(s jobs.ServiceState) bool { return s.Restarts >= 3 && s.State == "backoff" })
	hctx, cancel := context.WithTimeout(ctx, 4*time.Second)
	resumeCrashy, err := svcs.Hold(hctx, sb.ID, "crashy", nil)
	cancel()
	if err != nil {
		t.Fatalf("holding a service in its backoff: %v", err)
	}
	if err := resumeCrashy(ctx); err != nil {
		t.Fatalf("resuming the crashing service: %v", err)
	}

	// Without a stop function the service's job is canceled.
	resume, err := svcs.Hold(ctx, sb.ID, "long", nil)
	if err != nil {
		t.Fatal(err)
	}
	if j, err := h.Jobs.GetJob(ctx, "", first.JobID); err != nil || !j.State.Final() {
		t.Fatalf("the held service's job: %+v %v; want it ended", j, err)
	}
	if st := svcs.Of(sb.ID)[0]; st.State != "held" || st.JobID != first.JobID {
		t.Fatalf("held service: %+v", st)
	}
	if _, err := svcs.Hold(ctx, sb.ID, "long", nil); errdefs.Code(err) != "service_held" {
		t.Fatalf("a second hold: %v; want service_held", err)
	}
	if _, err := svcs.Hold(ctx, sb.ID, "nope", nil); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("holding an unknown service: %v", err)
	}
	if err := resume(ctx); err != nil {
		t.Fatal(err)
	}
	second := svcs.Of(sb.ID)[0]
	if second.State != "running" || second.JobID == first.JobID || second.Restarts != 0 {
		t.Fatalf("resumed service: %+v (first job %s)", second, first.JobID)
	}

	// With a stop function that ends the job, nothing is canceled for it.
	stopped := false
	resume, err = svcs.Hold(ctx, sb.ID, "long", func(ctx context.Context) error {
		stopped = true
		_, err := h.Jobs.CancelJob(ctx, "", second.JobID)
		return err
	})
	if err != nil || !stopped {
		t.Fatalf("hold with a stop function: %v (called %v)", err, stopped)
	}
	if st := svcs.Of(sb.ID)[0]; st.State != "held" {
		t.Fatalf("held service: %+v", st)
	}
	if err := resume(ctx); err != nil {
		t.Fatal(err)
	}
	if st := svcs.Of(sb.ID)[0]; st.State != "running" || st.JobID == second.JobID {
		t.Fatalf("resumed again: %+v", st)
	}
}
