package agent_test

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
)

// escapeTimeoutScript leaves a sleep in its own session while the main
// sleep runs into the exec's timeout.
const escapeTimeoutScript = "setsid sleep 1017 & sleep 1018"

// hostSleeps returns the pids of this host's processes running sleep with
// one of args.
func hostSleeps(args ...string) []int {
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
		if len(argv) == 2 && strings.HasSuffix(argv[0], "sleep") && slices.Contains(args, argv[1]) {
			out = append(out, pid)
		}
	}
	return out
}

// TestExecTimeoutKillsEscapedTree: a sync exec's timeout (and a canceled
// call) kills its whole tree, including a child that left its session.
func TestExecTimeoutKillsEscapedTree(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	start := time.Now()
	res := execOK(t, a.client, agentproto.ExecRequest{Script: escapeTimeoutScript, TimeoutMS: 1000})
	if res.ExitReason != agentproto.ExitReasonTimeout || time.Since(start) > 5*time.Second {
		t.Fatalf("exec %+v after %v, want a timeout after about 1 s", res, time.Since(start))
	}
	// The exit is reported once the tree is gone.
	if left := hostSleeps("1017", "1018"); len(left) > 0 {
		t.Fatalf("sleeps left after the exec's timeout: %v", left)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := a.client.Exec(ctx, agentproto.ExecRequest{Script: "setsid sleep 1019 & exec sleep 1020"})
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(hostSleeps("1019", "1020")) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the canceled exec's sleeps did not start")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	deadline = time.Now().Add(5 * time.Second)
	for {
		left := hostSleeps("1019", "1020")
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
			// The listing itself must not name what it looks for.
			out := execOK(t, c.client, agentproto.ExecRequest{Script: `for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline 2>/dev/null; echo; done`})
			for _, l := range strings.Split(string(out.Stdout), "\n") {
				if strings.HasPrefix(l, "sleep 101") {
					t.Errorf("left after the exec's timeout: %q", l)
				}
			}
			if left := containerProcs(t, c); len(left) > 0 {
				t.Errorf("processes left after the exec's timeout: %q", left)
			}
		})
	}
}
