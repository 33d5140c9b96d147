package agent_test

import (
	"context"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
)

// TestFirstSpare: a new agent starts no job shim before its first exec
// has answered (that exec runs in the direct slot, without one), and one
// right after it; with no exec, the first comes after
// GENESIS_AGENT_FIRST_SPARE_MS.
func TestFirstSpare(t *testing.T) {
	t.Parallel()
	idleSpares := func(a *agentProc) int {
		return len(procsWhere(func(p procInfo) bool { return p.ppid == a.pid() && p.state != 'Z' && idleSpare(p.pid) }))
	}
	waitSpare := func(t *testing.T, a *agentProc, after string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for idleSpares(a) != 1 {
			if time.Now().After(deadline) {
				t.Fatalf("%d idle spares %s, want 1", idleSpares(a), after)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	t.Run("after the first exec", func(t *testing.T) {
		t.Parallel()
		a := startAgent(t, "GENESIS_AGENT_FIRST_SPARE_MS=600000")
		if n := idleSpares(a); n != 0 {
			t.Fatalf("%d idle spares before the first exec, want 0", n)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		res, err := a.client.Exec(ctx, agentproto.ExecRequest{Command: []string{"echo", "hi"}})
		if err != nil || string(res.Stdout) != "hi\n" {
			t.Fatalf("first exec: %v, %q", err, res.Stdout)
		}
		waitSpare(t, a, "after the first exec")
	})
	t.Run("after the delay", func(t *testing.T) {
		t.Parallel()
		a := startAgent(t, "GENESIS_AGENT_FIRST_SPARE_MS=1")
		waitSpare(t, a, "without an exec")
	})
}
