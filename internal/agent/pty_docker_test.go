package agent_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"genesis.dev/sandbox/internal/agent/agentclient"
	"genesis.dev/sandbox/internal/agent/agentproto"
)

// TestTerminalInContainers runs a terminal in a locked-down container as the
// unprivileged sandbox user, under runc and under gVisor (whose devpts and
// /dev/ptmx are its own implementation).
func TestTerminalInContainers(t *testing.T) {
	for _, rt := range []string{"runc", "runsc"} {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			if !slices.Contains(runtimesUnderTest(t), rt) {
				t.Skipf("docker runtime %s not configured", rt)
			}
			c := startContainer(t, rt)
			startTerm(t, c.client, agentproto.TerminalStartRequest{ID: "sh", Cols: 90, Rows: 20, Env: map[string]string{"PS1": "$ "}})
			r := attach(t, c.client, "sh", agentclient.AttachOptions{Replay: true})
			r.send(t, "echo user=$(id -u) cwd=$(pwd) tty=$(tty) size=$(stty size)\n")
			r.waitFor(t, "user=1000 cwd=/workspace tty=/dev/pts/")
			r.waitFor(t, "size=20 90")

			ctx, cancel := context.WithTimeout(context.Background(), termWait)
			defer cancel()
			if _, err := c.client.ResizeTerminal(ctx, "sh", 120, 33); err != nil {
				t.Fatal(err)
			}
			r.send(t, "echo size=$(stty size)\n")
			r.waitFor(t, "size=33 120")

			// Reattach: the kept output comes first.
			r2 := attach(t, c.client, "sh", agentclient.AttachOptions{Replay: true})
			r2.waitFor(t, "size=33 120")
			if !strings.Contains(r2.output(), "user=1000") {
				t.Errorf("replay lacks earlier output: %q", r2.output())
			}

			r.send(t, "exit 3\n")
			if x := r.waitExit(t); x.ExitCode != 3 {
				t.Fatalf("exit %+v, want 3", x)
			}
			if x := r2.waitExit(t); x.ExitCode != 3 {
				t.Fatalf("second attachment: exit %+v, want 3", x)
			}

			// DELETE kills a terminal whose shell ignores SIGTERM and SIGHUP.
			startTerm(t, c.client, agentproto.TerminalStartRequest{ID: "stubborn", Command: []string{"/bin/sh", "-c", "trap '' TERM HUP; sleep 1000 & sleep 1000"}})
			r3 := attach(t, c.client, "stubborn", agentclient.AttachOptions{Replay: true})
			if err := c.client.DeleteTerminal(ctx, "stubborn"); err != nil {
				t.Fatal(err)
			}
			if x := r3.waitExit(t); x.Signal != "SIGKILL" {
				t.Fatalf("exit after delete %+v, want SIGKILL", x)
			}
			waitCond(t, "no process left but the agent", func() bool { return len(containerProcs(t, c)) == 0 })
		})
	}
}
