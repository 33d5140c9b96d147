package jobs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/controltest"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/sandbox"
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

	// The crashing service's output is kept like any job's.
	_, l, err := h.Jobs.JobLog(context.Background(), "", st.JobID)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := l.Read(context.Background(), 0, false, func(e jobs.LogEvent) error {
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
