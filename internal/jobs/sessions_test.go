package jobs_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// TestSessionJobKeepsTheCallersCommand: a session's exec runs inside the
// session's wrapper (saved cwd and environment), but its job record, and so
// the sandbox's job list and the job's trace, keeps the script or command
// the caller gave.
func TestSessionJobKeepsTheCallersCommand(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	sb := h.Create("a", control.CreateSandboxInput{})
	se, err := h.Jobs.CreateSession(ctx, "a", sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Jobs.SessionExec(ctx, se.ID, jobs.ExecInput{Tenant: "a", Script: "cd /tmp && export A=41"}); err != nil {
		t.Fatal(err)
	}
	out, err := h.Jobs.SessionExec(ctx, se.ID, jobs.ExecInput{Tenant: "a", Script: `echo "$((A+1)) $(pwd)"`})
	if err != nil || strings.TrimSpace(string(out.Stdout)) != "42 /tmp" {
		t.Fatalf("the session's state did not carry over: %q %v", out.Stdout, err)
	}
	if out.Job.Script != `echo "$((A+1)) $(pwd)"` || len(out.Job.Command) != 0 {
		t.Errorf("the answer's job shows %q %q, want the caller's script", out.Job.Script, out.Job.Command)
	}
	cmd, err := h.Jobs.SessionExec(ctx, se.ID, jobs.ExecInput{Tenant: "a", Command: []string{"printf", "%s|", "a b"}, Cwd: "sub"})
	if err != nil || cmd.Job.Cwd != "sub" || !slices.Equal(cmd.Job.Command, []string{"printf", "%s|", "a b"}) || cmd.Job.Script != "" {
		t.Fatalf("a command with a relative cwd in the session: %+v %v", cmd, err)
	}
	list, err := h.St.ListJobs(ctx, store.JobFilter{Tenant: "a", SandboxID: sb.ID})
	if err != nil || len(list) != 3 {
		t.Fatalf("jobs: %d %v", len(list), err)
	}
	for _, j := range list {
		if strings.Contains(j.Script, "__gs_") || strings.Contains(j.Script, "trap") {
			t.Errorf("job %s records the session wrapper: %q", j.ID, j.Script)
		}
	}
}

// TestSessionOfKind: a shell session's id is not found as a code context
// (and closing it as one changes nothing); as a shell session it is found
// and closed.
func TestSessionOfKind(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	sb := h.Create("a", control.CreateSandboxInput{})
	se, err := h.Jobs.CreateSession(ctx, "a", sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Jobs.GetSessionOf(ctx, "a", se.ID, sandbox.SessionPython); !errdefs.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "context") {
		t.Errorf("a shell session as a context: %v, want not found naming a context", err)
	}
	if err := h.Jobs.CloseSessionOf(ctx, "a", se.ID, sandbox.SessionPython); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Errorf("closing a shell session as a context: %v, want not found", err)
	}
	if got, err := h.Jobs.GetSessionOf(ctx, "a", se.ID, sandbox.SessionShell); err != nil || got.State != sandbox.SessionActive {
		t.Fatalf("the shell session: %+v %v, want it active", got, err)
	}
	if err := h.Jobs.CloseSessionOf(ctx, "a", se.ID, sandbox.SessionShell); err != nil {
		t.Fatal(err)
	}
	if got, err := h.Jobs.GetSessionOf(ctx, "a", se.ID, sandbox.SessionShell); err != nil || got.State != sandbox.SessionClosed {
		t.Errorf("after closing: %+v %v, want it closed", got, err)
	}
}

// TestJobLogFrom: a reader's cursor must be an event id of the job's log
// (invalid_cursor otherwise); 0 is the start, past the end waits.
func TestJobLogFrom(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	sb := h.Create("a", control.CreateSandboxInput{})
	out, err := h.Jobs.Exec(ctx, jobs.ExecInput{Tenant: "a", SandboxID: sb.ID, Script: "echo hi"})
	if err != nil {
		t.Fatal(err)
	}
	if j, l, err := h.Jobs.JobLogFrom(ctx, "a", out.Job.ID, 0); err != nil || j.ID != out.Job.ID || l == nil {
		t.Fatalf("from the start: %v", err)
	}
	for _, c := range []int64{-1, 1} { // 1 is inside the first event
		if _, _, err := h.Jobs.JobLogFrom(ctx, "a", out.Job.ID, c); errdefs.Code(err) != "invalid_cursor" {
			t.Errorf("cursor %d: %v, want invalid_cursor", c, err)
		}
	}
	if _, _, err := h.Jobs.JobLogFrom(ctx, "b", out.Job.ID, 0); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another tenant's job: %v, want not found", err)
	}
}
