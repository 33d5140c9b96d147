package agent_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
)

// TestIdleAgentSleeps: an agent with nothing to do does not wake up, so
// its container uses next to no CPU while idle, under either runtime. A
// host holds hundreds of idle sandboxes, and every periodic wake-up costs
// each of them CPU: the reaper's one-second tick (the only timer of an
// idle agent, and with it the Go runtime's own wake-ups) cost ≈ 2 ms a
// second under gVisor, a tenth of a CPU for 66 idle sandboxes.
//
// After one exec (so that a spare shim, a second process of the agent's
// binary, idles too), the test wants three seconds in a row in which the
// container used at most quiet of CPU each; a wake-up every second fails
// every window. The first windows may still hold the exec's end and the
// spare's start.
func TestIdleAgentSleeps(t *testing.T) {
	for _, rt := range []string{"runc", "runsc"} {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			if !slices.Contains(runtimesUnderTest(t), rt) {
				t.Skipf("docker runtime %s not configured", rt)
			}
			// What one second of an idle container may cost: the agent
			// before this test's fix used ≈ 0.28 ms a second under runc
			// and ≈ 2.1 ms under runsc; after it, 0 in most seconds (over a
			// minute 0.03 / 0.06 ms a second, most likely the backstop tick).
			quiet := 100 * time.Microsecond
			if rt == "runsc" {
				quiet = 500 * time.Microsecond
			}
			c := startContainer(t, rt)
			execOK(t, c.client, agentproto.ExecRequest{Command: []string{"true"}})
			read, err := containerCPU(c)
			if err != nil {
				t.Fatal(err)
			}
			prev, err := read()
			if err != nil {
				t.Fatal(err)
			}
			var windows []string
			deadline := time.Now().Add(30 * time.Second)
			for run := 0; run < 3; {
				if time.Now().After(deadline) {
					t.Fatalf("no three quiet seconds in a row within 30 s: the container's CPU each second was %s (quiet: ≤ %v)", strings.Join(windows, ", "), quiet)
				}
				time.Sleep(time.Second) // the window measured, not a wait for something
				now, err := read()
				if err != nil {
					t.Fatal(err)
				}
				d := now - prev
				prev = now
				windows = append(windows, d.String())
				if d <= quiet {
					run++
				} else {
					run = 0
				}
			}
			if rt == "runc" {
				// The spare shim was among the idle processes (the
				// host sees a runc container's processes; gVisor's are
				// inside its sentry).
				out, err := dockerCmd(15*time.Second, nil, "top", c.id, "-o", "pid,comm")
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(out, "genesis-spare") {
					t.Fatalf("no idle spare shim in the container:\n%s", out)
				}
			}
			t.Logf("%s: CPU per second idle: %s", rt, strings.Join(windows, ", "))
		})
	}
}
