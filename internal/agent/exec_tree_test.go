package agent_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
)

// escapeTimeoutScript leaves a sleep in its own session while the main
// sleep runs into the exec's timeout.
const escapeTimeoutScript = "setsid sleep 1017 & sleep 1018"

// treeMarkVar names the environment variable that marks the processes of
// one test's agent: the agent passes its environment on to every job, and
// a process keeps the environment it was started with however it leaves
// its session or whoever adopts it. Matching on it, a test sees the
// processes its own agent made, never those of a test beside it (in this
// binary or another one on the host) that runs the same commands.
const treeMarkVar = "SANDBOX_TEST_TREE"

// markedAgent is an agent whose descendants carry a mark unique to it.
type markedAgent struct {
	*agentProc
	mark string // treeMarkVar=..., as it appears in /proc/PID/environ
}

// startMarkedAgent starts an agent that marks every process it starts.
func startMarkedAgent(t *testing.T) *markedAgent {
	t.Helper()
	mark := treeMarkVar + "=" + rand.Text()
	return &markedAgent{agentProc: startAgent(t, mark), mark: mark}
}

// sleeps returns the pids of this agent's processes running sleep with
// one of args: any sleep on the host that carries the agent's mark, so
// that a daemon that left the agent's tree is still found.
func (a *markedAgent) sleeps(args ...string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		argv := strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
		if len(argv) != 2 || !strings.HasSuffix(argv[0], "sleep") || !slices.Contains(args, argv[1]) {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue // gone, or its environment is unreadable: not ours
		}
		if slices.Contains(strings.Split(string(env), "\x00"), a.mark) {
			out = append(out, pid)
		}
	}
	return out
}

// TestExecTimeoutKillsEscapedTree: a sync exec's timeout (and a canceled
// call) kills its whole tree, including a child that left its session.
func TestExecTimeoutKillsEscapedTree(t *testing.T) {
	t.Parallel()
	a := startMarkedAgent(t)
	start := time.Now()
	res := execOK(t, a.client, agentproto.ExecRequest{Script: escapeTimeoutScript, TimeoutMS: 1000})
	if res.ExitReason != agentproto.ExitReasonTimeout || time.Since(start) > 5*time.Second {
		t.Fatalf("exec %+v after %v, want a timeout after about 1 s", res, time.Since(start))
	}
	// The exit is reported once the tree is gone.
	if left := a.sleeps("1017", "1018"); len(left) > 0 {
		t.Fatalf("sleeps left after the exec's timeout: %v", left)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := a.client.Exec(ctx, agentproto.ExecRequest{Script: "setsid sleep 1019 & exec sleep 1020"})
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(a.sleeps("1019", "1020")) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the canceled exec's sleeps did not start")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	deadline = time.Now().Add(5 * time.Second)
	for {
		left := a.sleeps("1019", "1020")
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sleeps left after the exec was canceled: %v", left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestExecTimeoutKillsEscapedTreeInContainers(t *testing.T) {
	for _, rt := range []string{"runc", "runsc"} {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			if !slices.Contains(runtimesUnderTest(t), rt) {
				t.Skipf("docker runtime %s not configured", rt)
			}
			c := startContainer(t, rt)
			res := execOK(t, c.client, agentproto.ExecRequest{Script: escapeTimeoutScript, TimeoutMS: 1000})
			if res.ExitReason != agentproto.ExitReasonTimeout {
				t.Fatalf("exec %+v, want a timeout", res)
			}
			// An exec that exits at once, leaving a daemon (a double fork
			// into its own session), leaves nothing either: the agent
			// adopted the daemon and swept it before answering.
			if res := execOK(t, c.client, agentproto.ExecRequest{Script: "(setsid sleep 1016 </dev/null >/dev/null 2>&1 &)"}); res.ExitCode != 0 {
				t.Fatalf("daemonizing exec %+v", res)
			}
			// The listing itself must not name what it looks for.
			out := execOK(t, c.client, agentproto.ExecRequest{Script: `for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline 2>/dev/null; echo; done`})
			for _, l := range strings.Split(string(out.Stdout), "\n") {
				if strings.HasPrefix(l, "sleep 101") {
					t.Errorf("left after the execs: %q", l)
				}
			}
			if left := containerProcs(t, c); len(left) > 0 {
				t.Errorf("processes left after the execs: %q", left)
			}
		})
	}
}

// TestExecLeavesNoDaemon: a sync exec that exits at once, leaving a
// daemonized child (a double fork into its own session), leaves nothing
// behind either way it runs: in the agent's direct slot, and under a shim
// (a second exec while the first holds the slot).
func TestExecLeavesNoDaemon(t *testing.T) {
	t.Parallel()
	a := startMarkedAgent(t)
	ctx := context.Background()
	// The first exec holds the direct slot, where the agent is the
	// command's parent; the one beside it runs under a shim.
	holder := make(chan agentproto.ExecResult, 1)
	go func() {
		res, err := a.client.Exec(ctx, agentproto.ExecRequest{Script: "echo $PPID; (setsid sleep 1021 &); sleep 1"})
		if err != nil {
			t.Error(err)
		}
		holder <- res
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(a.sleeps("1021")) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first exec's daemon did not start")
		}
		time.Sleep(5 * time.Millisecond)
	}
	beside := execOK(t, a.client, agentproto.ExecRequest{Script: "echo $PPID; (setsid sleep 1022 &)"})
	first := <-holder
	agentPID := strconv.Itoa(a.pid())
	if got := strings.TrimSpace(string(first.Stdout)); got != agentPID {
		t.Errorf("first exec's parent %s, want the agent %s (the direct slot)", got, agentPID)
	}
	if got := strings.TrimSpace(string(beside.Stdout)); got == agentPID || got == "" {
		t.Errorf("second exec's parent %q, want a shim, not the agent %s", got, agentPID)
	}
	// Each result is answered once its tree is gone.
	if left := a.sleeps("1021", "1022"); len(left) > 0 {
		t.Fatalf("daemons left after their execs ended: %v", left)
	}
}

// TestExecSparesOlderOrphans: an exec in the direct slot kills its own
// tree, not a process the agent adopted before it started (the orphan of a
// job whose shim was killed), and a terminal's tree goes when it ends.
func TestExecSparesOlderOrphans(t *testing.T) {
	t.Parallel()
	a := startMarkedAgent(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := a.client.StartJob(ctx, agentproto.JobStartRequest{ExecRequest: agentproto.ExecRequest{JobID: "escapee",
		Script: "(setsid sleep 1023 </dev/null >/dev/null 2>&1 &); sleep 0.2; kill -KILL $PPID; exec sleep 1000"}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := a.client.JobInfo(ctx, "escapee")
		if err != nil {
			t.Fatal(err)
		}
		if !info.Running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the job whose shim was killed did not end")
		}
		time.Sleep(10 * time.Millisecond)
	}
	stray := a.sleeps("1023")
	if len(stray) != 1 {
		t.Fatalf("stray sleeps %v, want one", stray)
	}
	execOK(t, a.client, agentproto.ExecRequest{Script: "(setsid sleep 1024 &)"})
	if left := a.sleeps("1024"); len(left) > 0 {
		t.Errorf("the exec's own daemon survived: %v", left)
	}
	if got := a.sleeps("1023"); !slices.Equal(got, stray) {
		t.Errorf("the older stray %v is now %v: an exec killed a process that was not its own", stray, got)
	}
	syscall.Kill(stray[0], syscall.SIGKILL)

	// A terminal's whole tree goes when its process exits.
	if _, err := a.client.StartTerminal(ctx, agentproto.TerminalStartRequest{ID: "t", Command: []string{"/bin/sh", "-c",
		"(setsid sleep 1025 </dev/null >/dev/null 2>&1 &); sleep 0.2"}}); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		info, err := a.client.TerminalInfo(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		if !info.Running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the terminal did not end")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if left := a.sleeps("1025"); len(left) > 0 {
		t.Errorf("the terminal's daemon survived its end: %v", left)
	}
}
