package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// TestTraceReplay records an agent's desktop session (launch a window,
// a shell job, a click, typing, a sensitive typing) under runc and runsc,
// replays it onto a fresh sandbox of the same profile where one thing was
// changed beforehand (a file the job tests for), and checks the report:
// the actions run again the same (their screenshots within the threshold),
// the job's different exit is reported, the redacted text is skipped, and
// the looking-only polls are skipped; a target of another profile is 400.
func TestTraceReplay(t *testing.T) {
	e := newEnv(t, "")
	e.requireImage(t, "desktop-vnc")
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	c := svc.client()
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			src := createDesktop(t, c, rt)
			act := func(a ...client.ComputerAction) {
				t.Helper()
				if res, err := c.ComputerActions(callCtx(t), src.ID, client.ComputerActionsRequest{Actions: a}); err != nil || !res.OK {
					t.Fatalf("%s: %+v %v", a[0].Action, res, err)
				}
			}
			act(client.ComputerAction{Action: "launch", Command: []string{"xterm", "-fa", "DejaVu Sans Mono", "-fs", "12", "-geometry", "80x20+0+0"}})
			eventually(t, 30*time.Second, "the xterm window", func() (bool, string) {
				res, err := c.ComputerActions(callCtx(t), src.ID, client.ComputerActionsRequest{Actions: []client.ComputerAction{{Action: "list_windows"}}})
				return err == nil && len(res.Results[0].Windows) > 0, fmt.Sprint(res, err)
			})
			if r := execOK(t, c, src.ID, "for i in $(seq 100); do cat /proc/[0-9]*/comm 2>/dev/null | grep -qx bash && exit 0; sleep 0.1; done; exit 1"); r.ExitCode != 0 {
				t.Fatalf("the xterm's shell: %+v", r)
			}
			execOK(t, c, src.ID, "test ! -e /workspace/marker")
			act(client.ComputerAction{Action: "left_click", Coordinate: []int{300, 150}})
			act(client.ComputerAction{Action: "type", Text: "echo replayed\n"})
			act(client.ComputerAction{Action: "type", Text: "secret", Sensitive: true})
			act(client.ComputerAction{Action: "key", Text: "ctrl+u"})

			// Another profile is refused; the target is fresh, with a marker.
			other := e.createSandbox(t, client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt, RiskLevel: "low"})
			if _, err := c.ReplayTrace(callCtx(t), src.ID, client.ReplayRequest{TargetSandbox: other.ID}); client.ErrorCode(err) != "profile_mismatch" {
				t.Errorf("replay onto tool-basic: %v, want 400 profile_mismatch", err)
			}
			tgt := createDesktop(t, c, rt)
			execOK(t, c, tgt.ID, "touch /workspace/marker")
			ctx, cancel := contextWithTimeout(3 * time.Minute)
			defer cancel()
			rep, err := c.ReplayTrace(ctx, src.ID, client.ReplayRequest{TargetSandbox: tgt.ID})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, st := range rep.Steps {
				got = append(got, st.Kind+" "+st.Action+" "+st.Status)
			}
			// The two xterm-shell polls and the marker test are jobs; the
			// list_windows polls only look.
			joined := strings.Join(got, "\n")
			for _, w := range []string{
				"computer.action.started launch same",
				"job.started sync same",
				"job.started sync differs",
				"computer.action.started left_click same",
				"computer.action.started type same",
				"computer.action.started type skipped",
				"computer.action.started key same",
			} {
				if !strings.Contains(joined, w) {
					t.Errorf("replay lacks %q:\n%s", w, joined)
				}
			}
			for _, st := range rep.Steps {
				// The replayed typing ran in the target's xterm: the screen
				// after each input action is the recorded one.
				if st.Kind == "computer.action.started" && st.Status == "same" && st.Action != "launch" && (st.ScreenshotDiff == nil || *st.ScreenshotDiff > 0.02) {
					t.Errorf("a replayed action's screenshot was not compared or differs: %+v", st)
				}
				if st.Kind == "job.started" && st.Status == "differs" && (st.ExitCode == nil || *st.ExitCode != 1 || st.RecordedExitCode == nil || *st.RecordedExitCode != 0) {
					t.Errorf("the differing job: %+v", st)
				}
			}
			if rep.Differs != 1 || rep.Failed != 0 {
				t.Errorf("replay: %d differ, %d failed, want 1 and 0:\n%s", rep.Differs, rep.Failed, joined)
			}
			if r := svc.cli(t, "trace", "replay", src.ID, other.ID); r.code == 0 || !strings.Contains(r.stderr, "profile_mismatch") {
				t.Errorf("genesis trace replay onto another profile: %s", r)
			}
		})
	}
}
