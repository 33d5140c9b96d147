package e2e

import (
	"encoding/json"
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
			if err := c.DeleteSandbox(callCtx(t), sb.ID); err != nil {
				t.Fatal(err)
			}
			page, err := c.TracePage(callCtx(t), sb.ID, 0, 100)
			if err != nil || len(page.Events) != len(want) || page.Next != int64(len(want)) {
				t.Fatalf("trace after delete: %+v %v", page, err)
			}
		})
	}
}
