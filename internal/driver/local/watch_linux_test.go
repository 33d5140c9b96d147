package local

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

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
	// Another name (the identity file the agent writes first) is no wake.
	if err := os.WriteFile(filepath.Join(l.RunDir(id), "identity"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(l.RunDir(id), "agent.sock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("no wake within 10 s of the socket's name appearing in the run directory")
	}
}

// TestNamesSocket: only an event naming the agent's socket counts, among
// several in one read.
func TestNamesSocket(t *testing.T) {
	t.Parallel()
	event := func(name string, padTo int) []byte {
		b := make([]byte, unix.SizeofInotifyEvent+padTo)
		(*unix.InotifyEvent)(unsafe.Pointer(&b[0])).Len = uint32(padTo)
		copy(b[unix.SizeofInotifyEvent:], name)
		return b
	}
	other := event(".identity.tmp", 16)
	sock := event("agent.sock", 16)
	if namesSocket(other) || namesSocket(event("agent.sock.x", 16)) {
		t.Error("an event of another name counted")
	}
	if !namesSocket(append(append([]byte{}, other...), sock...)) {
		t.Error("the socket's event after another's did not count")
	}
	if namesSocket(sock[:len(sock)-4]) {
		t.Error("a truncated event counted")
	}
}
