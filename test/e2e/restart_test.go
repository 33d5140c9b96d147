package e2e

import (
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/sandbox"
)

// restartAfterKill starts the service of e again after it was killed, and
// has the sandboxes deleted through the new service when t ends (the
// deletes registered at their creation ran through the dead one).
func restartAfterKill(t *testing.T, e *env, sandboxIDs ...string) *service {
	t.Helper()
	svc := e.start(t)
	for _, id := range sandboxIDs {
		e.deleteOnCleanup(t, id)
	}
	return svc
}

// TestJobsSurviveRestart kills the service with SIGKILL while, in a runc
// and a runsc sandbox, a background job writes output over about 8 s (part
// of its log already read) and then waits for a signal file, a synchronous
// exec runs, and a shell session holds saved state; then it starts the
// service again on the same data dir.
// Each background job's log, resumed from the last cursor, must be complete
// and exact, and the job must end with its real exit code (the restarted
// service re-attached to the agent's job); each synchronous job must end
// lost; each session must still start in its saved cwd with its exported
// variables.
func TestJobsSurviveRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "tool-basic")
	svc1 := e.start(t)
	var cases []*restartCase
	for _, rt := range e.runtimes(t) {
		cases = append(cases, &restartCase{rt: rt})
	}
	// Sequential, in this test's goroutine: parallel subtests could wait
	// for a free slot longer than the jobs run.
	for _, c := range cases {
		c.setup(t, e, svc1)
	}
	for _, c := range cases {
		c.start(t, svc1)
	}

	svc1.kill(t)
	running := map[string]bool{}
	syncJobs := map[string]string{} // sandbox id → synchronous job id
	for _, j := range unfinishedJobs(t, filepath.Join(e.dataDir, "genesis.db")) {
		running[j.ID] = true
		if j.Mode == sandbox.JobModeSync {
			syncJobs[j.SandboxID] = j.ID
		}
	}
	var ids []string
	for _, c := range cases {
		select {
		case err := <-c.syncErr:
			if err == nil {
				t.Errorf("%s: the synchronous exec reported success although the service was killed under it", c.rt)
			}
		case <-time.After(stopTimeout):
			t.Fatalf("%s: the synchronous exec did not return after the service was killed", c.rt)
		}
		c.syncJobID = syncJobs[c.sandboxID]
		if !running[c.jobID] || c.syncJobID == "" {
			t.Fatalf("%s: store of the killed service: background job %s running %v, synchronous job %q; want both unfinished", c.rt, c.jobID, running[c.jobID], c.syncJobID)
		}
		ids = append(ids, c.sandboxID)
	}

	svc2 := restartAfterKill(t, e, ids...)
	t.Run("after", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.rt, func(t *testing.T) {
				t.Parallel()
				c.after(t, svc2)
			})
		}
	})
}

// restartCase is what TestJobsSurviveRestart sets up in one runtime's
// sandbox before the kill.
type restartCase struct {
	rt                   string
	sandboxID, sessionID string
	jobID, syncJobID     string
	log                  *jobLog
	readBefore           int
	syncErr              chan error // the synchronous exec's outcome
}

// The background job writes restartRounds chunks 0.1 s apart (8 s or
// more), then waits until restartGo exists and exits 7. The wait, not the
// rounds' length, keeps it running when both runtimes' jobs have been
// started and the service is killed, however slow the machine; the test
// creates the file after the restart.
const restartRounds, restartOutChunk, restartErrChunk = 80, 20000, 7000

const restartGo = "/tmp/gs-go"

// setup creates the sandbox and the session with saved state.
func (c *restartCase) setup(t *testing.T, e *env, svc *service) {
	t.Helper()
	c.sandboxID = e.createSandbox(t, client.CreateSandboxRequest{Profile: "tool-basic", Runtime: c.rt}).ID
	raw := svc.raw()
	c.sessionID = createSession(t, raw, c.sandboxID).ID
	if res := sessionExec(t, raw, c.sessionID, "cd /tmp && export A=1"); res.ExitCode != 0 {
		t.Fatalf("%s: session exec: exit %d, stderr %q", c.rt, res.ExitCode, res.Stderr)
	}
}

// start starts the background job, reads part of its log, and starts the
// synchronous exec.
func (c *restartCase) start(t *testing.T, svc *service) {
	t.Helper()
	raw := svc.raw()
	ctx, cancel := contextWithTimeout(callTimeout)
	defer cancel()
	script := fmt.Sprintf(`cd /tmp || exit 90
i=0
while [ $i -lt %d ]; do
  head -c %d /dev/urandom | tee -a gs-r.out
  head -c %d /dev/urandom | tee -a gs-r.err >&2
  sleep 0.1
  i=$((i+1))
done
while [ ! -e %s ]; do sleep 0.1; done
exit 7
`, restartRounds, restartOutChunk, restartErrChunk, restartGo)
	// The job must outlive the whole test, whose length a loaded machine
	// stretches (the restart waits for the runtimes' smoke runs): its
	// timeout is the test binary's own limit (30 min), not a guess at how
	// long the steps take. The test ends it with restartGo.
	c.jobID = raw.startJob(t, c.sandboxID, execBody{Script: script, MaxOutputBytes: 4 << 20, TimeoutMS: 1_800_000}).ID
	c.log = &jobLog{}
	if err := raw.readLogs(ctx, c.jobID, c.log, logRequest{stop: func(l *jobLog) bool { return len(l.stdout) >= 5*restartOutChunk }}); err != nil {
		t.Fatal(err)
	}
	if c.log.exit != nil || len(c.log.stdout) < 5*restartOutChunk {
		t.Fatalf("%s: before the kill: exit %v, %d stdout bytes; want a running job with some output", c.rt, c.log.exit, len(c.log.stdout))
	}
	c.readBefore = len(c.log.stdout)

	c.syncErr = make(chan error, 1)
	go func() {
		_, _, err := raw.try(http.MethodPost, "/v1/sandboxes/"+c.sandboxID+"/exec", execBody{Command: []string{"sleep", "61"}, TimeoutMS: 120_000}, nil)
		c.syncErr <- err
	}()
	eventually(t, 30*time.Second, c.rt+": the synchronous job runs", func() (bool, string) {
		got := cmdlines(t, raw, c.sandboxID)
		return slices.Contains(got, "sleep 61"), strings.Join(got, " | ")
	})
}

// after checks the background job, the synchronous job and the session
// through the restarted service.
func (c *restartCase) after(t *testing.T, svc *service) {
	raw := svc.raw()
	l := c.log
	// Let the background job end now that it outlived the kill.
	if res := raw.exec(t, c.sandboxID, "touch "+restartGo); res.ExitCode != 0 {
		t.Fatalf("%s: creating %s: exit %d, stderr %q", c.rt, restartGo, res.ExitCode, res.Stderr)
	}
	raw.followLogs(t, c.jobID, l, 3*time.Minute)
	t.Logf("read %d stdout bytes before the kill, the remaining %d after the restart", c.readBefore, len(l.stdout)-c.readBefore)

	const outLen, errLen = restartRounds * restartOutChunk, restartRounds * restartErrChunk
	x := l.exit
	if x.State != "failed" || x.ExitReason != "exited" || x.ExitCode == nil || *x.ExitCode != 7 {
		t.Errorf("exit event after the restart: %s; want failed, exited, code 7", x)
	}
	if x.StdoutBytes != outLen || x.StderrBytes != errLen {
		t.Errorf("exit event counts: %s; want %d and %d bytes", x, outLen, errLen)
	}
	sums := sandboxSums(t, raw, c.sandboxID, "/tmp/gs-r.out", "/tmp/gs-r.err")
	if len(l.stdout) != outLen || sha256Hex(l.stdout) != sums[0] {
		t.Errorf("stdout across the restart: %d bytes sha256 %s; the job wrote %d bytes sha256 %s", len(l.stdout), sha256Hex(l.stdout), outLen, sums[0])
	}
	if len(l.stderr) != errLen || sha256Hex(l.stderr) != sums[1] {
		t.Errorf("stderr across the restart: %d bytes sha256 %s; the job wrote %d bytes sha256 %s", len(l.stderr), sha256Hex(l.stderr), errLen, sums[1])
	}
	j := raw.waitJob(t, c.jobID, finalWithin)
	if j.State != "failed" || j.ExitReason != "exited" || j.ExitCode == nil || *j.ExitCode != 7 || j.StdoutBytes != outLen {
		t.Errorf("GET job after the restart: %+v; want failed, exited, code 7, %d stdout bytes", j, outLen)
	}

	eventually(t, 30*time.Second, "the synchronous job is lost after the restart", func() (bool, string) {
		j := raw.getJob(t, c.syncJobID)
		return j.State == "lost" && j.ExitReason == "lost" && j.FinishedAt != nil, j.State + "/" + j.ExitReason
	})
	lost := &jobLog{}
	raw.followLogs(t, c.syncJobID, lost, time.Minute)
	if lost.exit.State != "lost" || lost.exit.ExitReason != "lost" || lost.exit.ExitCode != nil {
		t.Errorf("exit event of the lost job: %s; want lost, lost, no exit code", lost.exit)
	}

	if res := sessionExec(t, raw, c.sessionID, `pwd; echo "$A"`); res.ExitCode != 0 || res.Stdout != "/tmp\n1\n" {
		t.Errorf("session after the restart: exit %d stdout %q stderr %q; want /tmp and 1", res.ExitCode, res.Stdout, res.Stderr)
	}
}
