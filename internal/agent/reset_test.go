package agent_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/agent/agentclient"
	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// holderLeftovers is what a previous holder leaves in a sandbox: files in
// every writable place (one in a directory it made unreadable), a
// background job that ignores SIGTERM, and a setsid orphan of a job that
// killed its own shim (a second, finished job). dirs are the places to
// write into.
func holderLeftovers(t *testing.T, c *agentclient.Client, dirs ...string) {
	t.Helper()
	script := "set -e\n"
	for _, d := range dirs {
		script += "echo secret > " + d + "/f; mkdir -p " + d + "/d/e; echo x > " + d + "/d/e/g; ln -s /etc " + d + "/l; chmod 000 " + d + "/d\n"
	}
	if res := execOK(t, c, agentproto.ExecRequest{Script: script}); res.ExitCode != 0 {
		t.Fatalf("writing leftovers: %d %s", res.ExitCode, res.Stderr)
	}
	// A stray: a process in its own session whose job lost its shim. Every
	// exec, job and terminal runs under a subreaper that kills its whole
	// tree when it ends, so a stray comes only from a tree whose shim was
	// killed from inside the sandbox: the agent then kills the job's group
	// and adopts the rest.
	pidFile := dirs[0] + "/orphan.pid"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.StartJob(ctx, agentproto.JobStartRequest{ExecRequest: agentproto.ExecRequest{JobID: "escapee", Script: "" +
		"(setsid sh -c 'echo $$ > " + pidFile + "; trap \"\" TERM HUP; exec sleep 1000' </dev/null >/dev/null 2>&1 &)\n" +
		"while [ ! -s " + pidFile + " ]; do sleep 0.05; done; kill -KILL $PPID; exec sleep 1000"}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := c.JobInfo(ctx, "escapee")
		if err != nil {
			t.Fatal(err)
		}
		if !info.Running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the job that leaves the stray did not end")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := c.StartJob(ctx, agentproto.JobStartRequest{ExecRequest: agentproto.ExecRequest{
		JobID: "stubborn", Script: "trap '' TERM; while :; do sleep 1; done"}}); err != nil {
		t.Fatal(err)
	}
}

// resetOK resets and fails the test on an error.
func resetOK(t *testing.T, c *agentclient.Client) agentproto.ResetResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := c.Reset(ctx)
	if err != nil {
		t.Fatalf("reset: %v", err)
	}
	return res
}

func TestResetHostProcess(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		t.Skip("needs root to run the agent as an unprivileged user")
	}
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ws, scratch := filepath.Join(dir, "ws"), filepath.Join(dir, "scratch")
	for _, d := range []string{ws, scratch, filepath.Join(dir, "run")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, sandboxUID, sandboxUID); err != nil {
			t.Fatal(err)
		}
	}
	a := startAgentAs(t, filepath.Join(dir, "run", "a.sock"), &syscall.Credential{Uid: sandboxUID, Gid: sandboxUID, Groups: []uint32{}},
		"GENESIS_AGENT_RESET_DIRS="+ws+":"+scratch)
	holderLeftovers(t, a.client, ws, scratch)
	if n := len(descendantsOf(a.pid())); n < 3 {
		t.Fatalf("%d processes below the agent before the reset, want the job's and the orphan", n)
	}

	// The holder puts a listening socket of its own at the agent's name.
	os.Remove(a.socket)
	planted, err := net.Listen("unix", a.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer planted.Close()
	var reached atomic.Bool
	go func() {
		for {
			c, err := planted.Accept()
			if err != nil {
				return
			}
			reached.Store(true)
			c.Close()
		}
	}()

	before := map[int]bool{}
	for _, p := range descendantsOf(a.pid()) {
		before[p.pid] = true
	}
	res := resetOK(t, a.client)
	// The agent listens on its name again: a fresh dial reaches it.
	fresh := agentclient.Dial(a.socket)
	defer fresh.Close()
	pctx, pcancel := context.WithTimeout(context.Background(), 10*time.Second)
	if p, err := fresh.Ping(pctx); err != nil || p.PID != a.pid() || reached.Load() {
		t.Errorf("a fresh dial after the reset: %+v %v (the holder's socket reached: %v)", p, err, reached.Load())
	}
	pcancel()
	if res.Killed < 2 || res.JobsDropped != 2 || res.Removed < 10 || len(res.Emptied) != 2 || res.RootScanned {
		// Killed: the job and the orphan at least.
		t.Errorf("reset result %+v", res)
	}
	// Only the agent's own spare shim may run below it now, one started
	// after the sweep (primeAfterReset), none of before it. (A shim being
	// started is the agent's fork until its exec: it is judged once it is
	// an idle spare or the deadline passes.)
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := descendantsOf(a.pid())
		spares := 0
		for _, p := range left {
			if before[p.pid] {
				t.Fatalf("process of before the reset below the agent after it: %+v (all: %+v)", p, left)
			}
			if idleSpare(p.pid) {
				spares++
			}
		}
		if len(left) > 0 && spares == len(left) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("below the agent 10 s after the reset: %+v, want only an idle spare shim", left)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, d := range []string{ws, scratch} {
		if ents, err := os.ReadDir(d); err != nil || len(ents) > 0 {
			t.Errorf("%s after reset: %v entries, err %v", d, len(ents), err)
		}
	}
	ctx := context.Background()
	jobs, err := a.client.ListJobs(ctx)
	if err != nil || len(jobs) != 0 {
		t.Errorf("jobs after reset: %+v, %v", jobs, err)
	}
	if _, err := a.client.JobInfo(ctx, "stubborn"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("job of the previous holder after reset: %v, want not found", err)
	}
	// The agent works as before: jobs and execs run.
	if r := execOK(t, a.client, agentproto.ExecRequest{Command: []string{"true"}}); r.ExitCode != 0 {
		t.Errorf("exec after reset: %+v", r)
	}
	// A second reset of a clean sandbox succeeds and finds nothing.
	if res := resetOK(t, a.client); res.Removed != 0 || res.JobsDropped != 0 {
		t.Errorf("second reset %+v", res)
	}
}

func TestResetRefusedOutsideContainer(t *testing.T) {
	t.Parallel()
	a := startAgent(t) // no reset directories, not the container's init
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := a.client.Reset(ctx); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("reset of a host agent without reset dirs: %v, want a refusal", err)
	}
}

// descendantsOf lists the live (non-zombie) processes below pid.
func descendantsOf(pid int) []procInfo {
	all := allProcs()
	below := map[int]bool{pid: true}
	for changed := true; changed; {
		changed = false
		for _, p := range all {
			if below[p.ppid] && !below[p.pid] {
				below[p.pid], changed = true, true
			}
		}
	}
	return slices.DeleteFunc(all, func(p procInfo) bool { return p.pid == pid || !below[p.pid] || p.state == 'Z' })
}

// procWalk lists, from inside a sandbox, every process but pid 1 and the
// walking shell itself, as "pid:comm".
const procWalk = `for d in /proc/[0-9]*; do p=${d#/proc/}; [ "$p" = 1 ] || [ "$p" = $$ ] || [ ! -r $d/stat ] || { read -r s < $d/stat && echo "$p:$s"; }; done`

func TestResetInContainers(t *testing.T) {
	for _, rt := range []string{"runc", "runsc"} {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			if !slices.Contains(runtimesUnderTest(t), rt) {
				t.Skipf("docker runtime %s not configured", rt)
			}
			testResetInContainer(t, rt)
		})
	}
}

func testResetInContainer(t *testing.T, rt string) {
	// A sticky, root-owned mount the sandbox user can write into but not
	// clean: a reset must fail there rather than report success.
	stuck := t.TempDir()
	if err := os.Chmod(stuck, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	c := startContainer(t, rt, "--tmpfs", "/scratch:rw,mode=1777", "-v", stuck+":/stuck")
	places := []string{"/workspace", "/tmp", "/dev/shm", "/scratch"}
	holderLeftovers(t, c.client, places...)
	// Files of the user on the writable root, outside every listed place.
	execOK(t, c.client, agentproto.ExecRequest{Script: "mkdir -p /workspace/.x /srv/drop/x && echo s > /stuck/mine && echo s > /srv/drop/x/y"})
	before := execOK(t, c.client, agentproto.ExecRequest{Script: procWalk})
	if n := strings.Count(string(before.Stdout), "\n"); n < 3 {
		t.Fatalf("processes before reset:\n%s", before.Stdout)
	}

	res := resetOK(t, c.client)
	t.Logf("%s: reset %+v", rt, res)
	if !res.RootScanned || res.JobsDropped != 2 || res.Killed < 2 {
		t.Errorf("reset result %+v", res)
	}
	for _, p := range append(places, "/stuck") {
		if !slices.Contains(res.Emptied, p) {
			t.Errorf("%s not among the emptied places %v", p, res.Emptied)
		}
	}
	out := execOK(t, c.client, agentproto.ExecRequest{Script: "ls -A " + strings.Join(places, " ") + " /stuck /srv/drop; echo ---; " + procWalk})
	files, procs, _ := strings.Cut(string(out.Stdout), "---\n")
	for _, line := range strings.Split(files, "\n") {
		if line != "" && !strings.HasSuffix(line, ":") {
			t.Errorf("left after reset: %q (ls:\n%s)", line, files)
		}
	}
	// Only the walking shell's own children (ls, the subshell reading
	// stat) may show; none of the holder's sleeps.
	if strings.Contains(procs, "sleep") {
		t.Errorf("processes of the previous holder after reset:\n%s", procs)
	}

	// The second reset looks only in the writable directories the first
	// found: what the next holder leaves on the root is still found.
	execOK(t, c.client, agentproto.ExecRequest{Script: "mkdir -p /srv/drop/d && echo s > /srv/drop/d/f && echo s > /srv/drop/g"})
	res = resetOK(t, c.client)
	if res.Removed != 3 {
		t.Errorf("second reset removed %d entries, want the 3 under /srv/drop (%+v)", res.Removed, res)
	}
	if out := execOK(t, c.client, agentproto.ExecRequest{Script: "ls -A /srv/drop"}); len(out.Stdout) != 0 {
		t.Errorf("left under /srv/drop after the second reset: %q", out.Stdout)
	}

	// Now a root file in the sticky mount: the user cannot remove it, so
	// the reset fails and says what is left.
	if err := os.WriteFile(filepath.Join(stuck, "root-owned"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := c.client.Reset(ctx)
	if err == nil || !strings.Contains(err.Error(), "reset left") || !strings.Contains(err.Error(), "/stuck/root-owned") {
		t.Fatalf("reset with an undeletable file: %v, want a failure naming it", err)
	}
}
