package local

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/driver/fake"
)

// TestWatchAgentSeesTheSocketAppear: a name made in a sandbox's run
// directory (the agent's socket at its bind) is reported; a sandbox with
// no run directory cannot be watched (nil: the wait polls).
func TestWatchAgentSeesTheSocketAppear(t *testing.T) {
	t.Parallel()
	l, err := New(Config{Driver: fake.New(fake.Config{}), Root: t.TempDir(), AgentDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if w := l.WatchAgent(ctx, "sbx_none"); w != nil {
		t.Fatal("WatchAgent of a sandbox without a run directory is not nil")
	}
	const id = "sbx_watch"
	if err := os.MkdirAll(l.RunDir(id), 0o700); err != nil {
		t.Fatal(err)
	}
	wake := l.WatchAgent(ctx, id)
	if wake == nil {
		t.Fatal("WatchAgent = nil for an existing run directory")
	}
	select {
	case <-wake:
		t.Fatal("a wake before anything appeared")
	default:
	}
	if err := os.WriteFile(filepath.Join(l.RunDir(id), "agent.sock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("no wake within 10 s of a name appearing in the run directory")
	}
}
