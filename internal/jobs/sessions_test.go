package jobs_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/jobs"
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
