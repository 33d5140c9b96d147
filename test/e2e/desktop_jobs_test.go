package e2e

import (
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// TestDesktopHelperJobs: the processes the service starts in a desktop
// sandbox are recorded jobs under each runtime. A launched program's
// job_id and a display recording's job_id answer GET /v1/jobs/{id}; the
// launched program's output is in its job's log and its exit code in its
// record, and the recorder's job ends once the recording is stopped.
func TestDesktopHelperJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "desktop-vnc")
	svc := e.start(t)
	c := svc.client()
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			sb := createDesktop(t, c, rt)
			res, err := c.ComputerActions(callCtx(t), sb.ID, client.ComputerActionsRequest{Actions: []client.ComputerAction{
				{Action: "launch", Command: []string{"sh", "-c", "echo launched-$DISPLAY; exit 7"}}}})
			if err != nil || !res.OK {
				t.Fatalf("launch: %+v %v", res, err)
			}
			launchID := res.Results[0].JobID
			if !strings.HasPrefix(launchID, "job_") {
				t.Fatalf("launch's job_id %q is not a job's id", launchID)
			}
			var j *client.Job
			eventually(t, 30*time.Second, "the launched program's job ends", func() (bool, string) {
				j, err = c.GetJob(callCtx(t), launchID)
				return err == nil && j.State == "failed", fmt_(j, err)
			})
			if j.SandboxID != sb.ID || j.ExitCode == nil || *j.ExitCode != 7 {
				t.Fatalf("launched program's job: %+v, want sandbox %s and exit code 7", j, sb.ID)
			}
			var out strings.Builder
			if err := c.StreamLogs(callCtx(t), launchID, client.StreamOptions{}, func(ev client.LogEvent) error {
				if ev.Event == "stdout" {
					out.Write(ev.Data)
				}
				return nil
			}); err != nil {
				t.Fatalf("the launched program's log: %v", err)
			}
			if got := strings.TrimSpace(out.String()); !strings.HasPrefix(got, "launched-:") {
				t.Errorf("the launched program's log says %q, want launched-:<display>", got)
			}

			rec, err := c.StartRecording(callCtx(t), sb.ID, client.RecordingRequest{FPS: 5, SegmentSeconds: 1})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(rec.JobID, "job_") {
				t.Fatalf("recording's job_id %q is not a job's id", rec.JobID)
			}
			if j, err := c.GetJob(callCtx(t), rec.JobID); err != nil || j.State != "running" || j.SandboxID != sb.ID {
				t.Fatalf("the recorder's job while it records: %s, want running in %s", fmt_(j, err), sb.ID)
			}
			eventually(t, 30*time.Second, "a segment is kept", func() (bool, string) {
				st, err := c.GetRecording(callCtx(t), sb.ID)
				return err == nil && st.Segments >= 1, fmt_(st, err)
			})
			stopped, err := c.StopRecording(callCtx(t), sb.ID)
			if err != nil || stopped.State != "stopped" || stopped.JobID != rec.JobID {
				t.Fatalf("stop: %s, want stopped with job %s", fmt_(stopped, err), rec.JobID)
			}
			eventually(t, 30*time.Second, "the recorder's job ends", func() (bool, string) {
				j, err := c.GetJob(callCtx(t), rec.JobID)
				return err == nil && j.State != "running" && j.State != "pending", fmt_(j, err)
			})
		})
	}
}
