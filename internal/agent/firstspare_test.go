package agent_test

import (
	"context"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
)

// TestFirstSpareWaitsForTheFirstCommand: a new agent starts no job shim
// beside its own start and its ping (firstSpareLater); its first command
// makes it start one.
func TestFirstSpareWaitsForTheFirstCommand(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	agentPID := a.pid()
	spares := func() int {
		return len(procsWhere(func(p procInfo) bool { return p.ppid == agentPID && idleSpare(p.pid) }))
	}
	n := spares()
	p, err := a.client.Ping(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Past firstSpareAfter (250 ms) the timer may have started one: only
	// a count taken before it says something.
	if n != 0 && p.UptimeMS < 250 {
		t.Fatalf("%d spare shims %d ms after the agent's start, before any command", n, p.UptimeMS)
	}
	execOK(t, a.client, agentproto.ExecRequest{Command: []string{"true"}})
	deadline := time.Now().Add(10 * time.Second)
	for spares() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no spare shim within 10 s of the first command")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
