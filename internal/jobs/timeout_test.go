package jobs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/testenv"
)

// TestDefaultTimeoutIsForSyncExecOnly: limits.default_exec_timeout_ms
// bounds a synchronous exec and a streamed one, but a background job
// without a timeout of its own has none (its record says 0) and outlives
// that default; a background job that asks for a timeout still gets it.
func TestDefaultTimeoutIsForSyncExecOnly(t *testing.T) {
	t.Parallel()
	const def = 400 // ms
	h := newHarness(t, func(c *config.Config) { c.Limits.DefaultExecTimeoutMS = def })
	ctx := context.Background()
	sb := h.Create("a", control.CreateSandboxInput{})

	// A background job that runs for longer than the exec default.
	bg, err := h.Jobs.StartJob(ctx, jobs.ExecInput{Tenant: "a", SandboxID: sb.ID,
		Command: []string{"sh", "-c", fmt.Sprintf("sleep %.1f; echo done", 3*def/1000.0)}})
	if err != nil {
		t.Fatal(err)
	}
	if bg.TimeoutMS != 0 {
		t.Errorf("background job without a timeout is recorded with timeout_ms %d, want 0 (none)", bg.TimeoutMS)
	}
	streamed, err := h.Jobs.StartJob(ctx, jobs.ExecInput{Tenant: "a", SandboxID: sb.ID, Command: []string{"sleep", "30"}, Streamed: true})
	if err != nil {
		t.Fatal(err)
	}
	if streamed.TimeoutMS != def {
		t.Errorf("streamed exec: timeout_ms %d, want the exec default %d", streamed.TimeoutMS, def)
	}
	asked, err := h.Jobs.StartJob(ctx, jobs.ExecInput{Tenant: "a", SandboxID: sb.ID, Command: []string{"sleep", "30"}, TimeoutMS: 300})
	if err != nil {
		t.Fatal(err)
	}

	// The synchronous exec is killed at the default.
	out, err := h.Jobs.Exec(ctx, jobs.ExecInput{Tenant: "a", SandboxID: sb.ID, Command: []string{"sleep", "30"}})
	if err != nil {
		t.Fatal(err)
	}
	if out.Job.TimeoutMS != def || out.Job.ExitReason != sandbox.ExitTimeout {
		t.Errorf("sync exec: timeout_ms %d, exit_reason %s; want %d, timeout", out.Job.TimeoutMS, out.Job.ExitReason, def)
	}

	final := func(id string) *sandbox.Job {
		var j *sandbox.Job
		testenv.Eventually(t, 20*time.Second, 20*time.Millisecond, "job "+id+" ends", func() (bool, string) {
			j, err = h.Jobs.GetJob(ctx, "a", id)
			if err != nil {
				return false, err.Error()
			}
			return j.State.Final(), string(j.State)
		})
		return j
	}
	if j := final(bg.ID); j.ExitReason != sandbox.ExitExited || j.ExitCode == nil || *j.ExitCode != 0 ||
		j.FinishedAt.Sub(*j.StartedAt) < 2*def*time.Millisecond {
		t.Errorf("background job: %s, exit %v after %v; want exited 0 after more than %v", j.ExitReason, j.ExitCode,
			j.FinishedAt.Sub(*j.StartedAt), 2*def*time.Millisecond)
	}
	if j := final(streamed.ID); j.ExitReason != sandbox.ExitTimeout {
		t.Errorf("streamed exec: exit_reason %s, want timeout", j.ExitReason)
	}
	if j := final(asked.ID); j.ExitReason != sandbox.ExitTimeout || j.TimeoutMS != 300 {
		t.Errorf("background job with timeout_ms 300: %s, timeout_ms %d; want timeout, 300", j.ExitReason, j.TimeoutMS)
	}
}

// TestPortHintNamesTheEndedJob: a background job whose command names a
// port is told of, once it ended, for that port and no other.
func TestPortHintNamesTheEndedJob(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	sb := h.Create("a", control.CreateSandboxInput{})
	j, err := h.Jobs.StartJob(ctx, jobs.ExecInput{Tenant: "a", SandboxID: sb.ID, Command: []string{"sh", "-c", "exit 3", "server", "--port=9123"}})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, 20*time.Millisecond, "the job's end is told of", func() (bool, string) {
		hint := h.Jobs.PortHint(sb.ID, 9123)
		return strings.Contains(hint, j.ID) && strings.Contains(hint, "exit_reason exited"), hint
	})
	for _, port := range []int{912, 9124, 123} {
		if hint := h.Jobs.PortHint(sb.ID, port); hint != "" {
			t.Errorf("port %d: hint %q, want none", port, hint)
		}
	}
	if hint := h.Jobs.PortHint("sbx_other", 9123); hint != "" {
		t.Errorf("another sandbox: hint %q", hint)
	}
	if err := h.Svc.DeleteSandbox(ctx, "a", sb.ID); err != nil {
		t.Fatal(err)
	}
	if hint := h.Jobs.PortHint(sb.ID, 9123); hint != "" {
		t.Errorf("after the sandbox ended: hint %q", hint)
	}
}
