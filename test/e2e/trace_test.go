package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// TestTrace runs, under runc and runsc, a caller's task status, a
// synchronous exec, a background job and an annotation in one sandbox, and
// checks its trace holds them as one ordered log (dense seqs, the jobs
// started by the agent and finished with their exit), that the CLI's
// follow prints the same events, and that the trace is still read after
// the sandbox is deleted.
func TestTrace(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "code-python-basic")
	svc := e.start(t)
	c := svc.client()
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "code-python-basic", Runtime: rt, RiskLevel: "low"})
			if _, err := c.PostTraceEvent(callCtx(t), sb.ID, client.TraceEventRequest{Kind: "task.status", Data: json.RawMessage(`{"status":"running"}`)}); err != nil {
				t.Fatal(err)
			}
			if r := execOK(t, c, sb.ID, "echo hi; exit 3"); r.ExitCode != 3 {
				t.Fatalf("exec: %+v", r)
			}
			job, err := c.StartJob(callCtx(t), sb.ID, client.ExecRequest{Command: []string{"sh", "-c", "echo bg"}, TimeoutMS: 30_000})
			if err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				j, err := c.GetJob(callCtx(t), job.ID)
				if err != nil {
					t.Fatal(err)
				}
				if j.State != "running" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("job %s still running", job.ID)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if _, err := c.PostTraceEvent(callCtx(t), sb.ID, client.TraceEventRequest{Kind: "annotation", Actor: "human:reviewer", Data: json.RawMessage(`{"text":"done"}`)}); err != nil {
				t.Fatal(err)
			}
			var got []string
			if err := c.FollowTrace(callCtx(t), sb.ID, 0, false, func(ev client.TraceEvent) error {
				if ev.Seq != int64(len(got)+1) {
					return fmt.Errorf("seq %d after %d events", ev.Seq, len(got))
				}
				var d struct {
					Command  []string `json:"command"`
					Script   string   `json:"script"`
					ExitCode *int     `json:"exit_code"`
				}
				_ = json.Unmarshal(ev.Data, &d)
				s := ev.Actor + " " + ev.Kind
				switch {
				case ev.Kind == "job.started":
					s += " " + strings.Join(d.Command, " ") + d.Script
				case ev.Kind == "job.finished" && d.ExitCode != nil:
					s += fmt.Sprintf(" exit %d", *d.ExitCode)
				}
				got = append(got, s)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			want := []string{
				"api task.status",
				"agent job.started echo hi; exit 3", "system job.finished exit 3",
				"agent job.started sh -c echo bg", "system job.finished exit 0",
				"human:reviewer annotation",
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("trace:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if r := svc.cli(t, "trace", "follow", "--no-follow", "--cursor", "4", sb.ID); r.code != 0 ||
				strings.Count(r.stdout, "\n") != 2 || !strings.HasPrefix(r.stdout, "5\t") || !strings.Contains(r.stdout, "human:reviewer\tannotation") {
				t.Fatalf("genesis trace follow: %s", r)
			}
			// Pause: the next exec is refused at once with 409 paused until
			// a step lets one through; abort cancels a running job and
			// refuses actions until resume. All of it is in the trace.
			long, err := c.StartJob(callCtx(t), sb.ID, client.ExecRequest{Command: []string{"sleep", "300"}, TimeoutMS: 600_000})
			if err != nil {
				t.Fatal(err)
			}
			if r := svc.cli(t, "trace", "pause", "--actor", "human:ann", sb.ID); r.code != 0 || !strings.HasPrefix(r.stdout, "paused") {
				t.Fatalf("genesis trace pause: %s", r)
			}
			refused := func(code string) {
				t.Helper()
				start := time.Now()
				_, err := c.Exec(callCtx(t), sb.ID, client.ExecRequest{Script: "true", TimeoutMS: 30_000})
				var ae *client.APIError
				if !errors.As(err, &ae) || ae.Status != 409 || ae.Problem.Code != code {
					t.Fatalf("exec while %s: %v", code, err)
				}
				if d := time.Since(start); d > 5*time.Second {
					t.Fatalf("exec while %s answered after %v, not at once", code, d)
				}
			}
			refused("paused")
			if st, err := c.InterruptTrace(callCtx(t), sb.ID, "step", ""); err != nil || st.Steps != 1 {
				t.Fatalf("step: %+v %v", st, err)
			}
			execOK(t, c, sb.ID, "true")
			refused("paused")
			st, err := c.InterruptTrace(callCtx(t), sb.ID, "abort", "human:ann")
			if err != nil || st.State != "aborted" || len(st.CanceledJobs) != 1 || st.CanceledJobs[0] != long.ID {
				t.Fatalf("abort: %+v %v", st, err)
			}
			// The canceled job's end is in the trace (followed, not polled)
			// before the next action is tried, so the order below is fixed.
			fctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			errEnded := errors.New("ended")
			err = c.FollowTrace(fctx, sb.ID, 0, true, func(ev client.TraceEvent) error {
				var d struct {
					JobID string `json:"job_id"`
					State string `json:"state"`
				}
				_ = json.Unmarshal(ev.Data, &d)
				if ev.Kind == "job.finished" && d.JobID == long.ID {
					if d.State != "canceled" {
						return fmt.Errorf("aborted job finished %s", d.State)
					}
					return errEnded
				}
				return nil
			})
			cancel()
			if !errors.Is(err, errEnded) {
				t.Fatalf("following the trace to the aborted job's end: %v", err)
			}
			refused("aborted")
			if _, err := c.InterruptTrace(callCtx(t), sb.ID, "resume", ""); err != nil {
				t.Fatal(err)
			}
			execOK(t, c, sb.ID, "true")
			var kinds []string
			if err := c.FollowTrace(callCtx(t), sb.ID, int64(len(want)), false, func(ev client.TraceEvent) error {
				kinds = append(kinds, ev.Actor+" "+ev.Kind)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			wantKinds := []string{
				"agent job.started", "human:ann interrupt.pause", "system action.refused",
				"api interrupt.step", "system interrupt.stepped", "agent job.started", "system job.finished", "system action.refused",
				"human:ann interrupt.abort", "system job.finished", "system action.refused", "api interrupt.resume",
				"agent job.started", "system job.finished",
			}
			if strings.Join(kinds, "\n") != strings.Join(wantKinds, "\n") {
				t.Fatalf("trace of the interrupts:\n%s\nwant:\n%s", strings.Join(kinds, "\n"), strings.Join(wantKinds, "\n"))
			}
			if err := c.DeleteSandbox(callCtx(t), sb.ID); err != nil {
				t.Fatal(err)
			}
			page, err := c.TracePage(callCtx(t), sb.ID, 0, 100)
			if n := len(want) + len(wantKinds); err != nil || len(page.Events) != n || page.Next != int64(n) {
				t.Fatalf("trace after delete: %+v %v", page, err)
			}
		})
	}
}

// TestTracePauseGatesSessionsAndContexts: a paused sandbox's agent is
// refused at once (409 paused) for a shell session's exec and a code
// context's run too, and both work again after resume, with the context's
// state kept.
func TestTracePauseGatesSessionsAndContexts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "code-python-basic")
	svc := e.start(t)
	c := svc.client()
	rt := e.runtimes(t)[len(e.runtimes(t))-1] // runsc where present
	sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "code-python-basic", Runtime: rt, RiskLevel: "low"})
	ses, err := c.CreateSession(callCtx(t), sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	cx, err := c.CreateContext(callCtx(t), sb.ID, client.CreateContextRequest{Language: "python"})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := c.RunCode(callCtx(t), cx.ID, client.RunCodeRequest{Code: "x = 41"}); err != nil || r.Status != "ok" {
		t.Fatalf("run: %+v %v", r, err)
	}
	if _, err := c.InterruptTrace(callCtx(t), sb.ID, "pause", "human:ann"); err != nil {
		t.Fatal(err)
	}
	var ae *client.APIError
	if _, err := c.SessionExec(callCtx(t), ses.ID, client.ExecRequest{Script: "echo hi"}); !errors.As(err, &ae) || ae.Status != 409 || ae.Problem.Code != "paused" {
		t.Errorf("session exec while paused: %v", err)
	}
	if _, err := c.RunCode(callCtx(t), cx.ID, client.RunCodeRequest{Code: "x += 1"}); !errors.As(err, &ae) || ae.Status != 409 || ae.Problem.Code != "paused" {
		t.Errorf("code run while paused: %v", err)
	}
	if _, err := c.InterruptTrace(callCtx(t), sb.ID, "resume", ""); err != nil {
		t.Fatal(err)
	}
	if r, err := c.SessionExec(callCtx(t), ses.ID, client.ExecRequest{Script: "echo hi"}); err != nil || r.Stdout != "hi\n" {
		t.Errorf("session exec after resume: %+v %v", r, err)
	}
	if r, err := c.RunCode(callCtx(t), cx.ID, client.RunCodeRequest{Code: "x + 1"}); err != nil || r.Value == nil || *r.Value != "42" {
		t.Errorf("code run after resume (the refused run changed nothing): %+v %v", r, err)
	}
}
