package local

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/driver/fake"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/nofollow"
)

// reachingDriver is a driver that answers whether mounts below a
// directory reach its containers.
type reachingDriver struct {
	*fake.Driver
	dirs []string // what MountsReach was asked about
	ok   bool
	why  string
}

func (d *reachingDriver) MountsReach(dir string) (bool, string) {
	d.dirs = append(d.dirs, dir)
	return d.ok, d.why
}

// TestQuotaAvailableAsksTheDriver: a driver whose containers would not see
// the workspace mounts (the service in a container, its data dir on a
// volume) makes quotas unavailable with its reason, whatever the host could
// do; otherwise, and for a driver that does not say, the host decides.
func TestQuotaAvailableAsksTheDriver(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	plain, err := New(Config{Driver: fake.New(fake.Config{}), Root: root, AgentDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	hostOK, hostWhy := plain.quota.Available()
	if got, why := plain.QuotaAvailable(); got != hostOK || why != hostWhy {
		t.Errorf("QuotaAvailable without the driver's answer = %v %q, the host's is %v %q", got, why, hostOK, hostWhy)
	}

	d := &reachingDriver{Driver: fake.New(fake.Config{}), why: "on volume genesis-data"}
	l, err := New(Config{Driver: d, Root: root, AgentDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if ok, why := l.QuotaAvailable(); ok || why != d.why || len(d.dirs) != 1 || d.dirs[0] != root {
		t.Errorf("QuotaAvailable = %v %q (driver asked about %v); want false with the driver's reason about %s", ok, why, d.dirs, root)
	}
	d.ok, d.why = true, ""
	if ok, why := l.QuotaAvailable(); ok != hostOK || why != hostWhy {
		t.Errorf("QuotaAvailable with reaching mounts = %v %q; want the host's %v %q", ok, why, hostOK, hostWhy)
	}
}

// TestAgentSocketNotFollowed: what a sandbox puts at its agent's socket (a
// symlink to another sandbox's socket) is never followed: the dialer
// refuses it, and placing the socket for a restore replaces it with a
// socket, leaving the link's target alone.
func TestAgentSocketNotFollowed(t *testing.T) {
	t.Parallel()
	root, err := os.MkdirTemp("", "gl") // short: socket paths stay under 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	l, err := New(Config{Driver: fake.New(fake.Config{}), Root: root, AgentDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"sbx_a", "sbx_b"} {
		if err := os.MkdirAll(l.RunDir(id), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	other, err := net.Listen("unix", l.AgentAddress("sbx_b"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := os.Symlink(l.AgentAddress("sbx_b"), l.AgentAddress("sbx_a")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if c, err := l.AgentDialer("sbx_a")(ctx); err == nil || !errors.Is(err, nofollow.ErrNotSocket) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("dialling a's socket, a symlink to b's: %v, want ErrNotSocket", err)
	}
	c, err := l.AgentDialer("sbx_b")(ctx)
	if err != nil {
		t.Fatalf("dialling b's socket: %v", err)
	}
	c.Close()

	if err := l.placeSocket("sbx_a", os.Getuid(), os.Getgid()); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(l.AgentAddress("sbx_a")); err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("a's socket after placeSocket: %v %v, want a socket", fi, err)
	}
	if fi, err := os.Lstat(l.AgentAddress("sbx_b")); err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("b's socket after placeSocket of a: %v %v", fi, err)
	}
}

// TestAgentDialErrorHidesHostPath: a failed dial names the socket as the
// sandbox sees it, never the host's data dir, and keeps its class.
func TestAgentDialErrorHidesHostPath(t *testing.T) {
	root := t.TempDir()
	l := &Sandboxer{root: root, log: slog.New(slog.DiscardHandler)}
	_, err := l.AgentDialer("sbx_0000000000000000")(t.Context())
	if err == nil {
		t.Fatal("dialing a missing socket succeeded")
	}
	if strings.Contains(err.Error(), root) {
		t.Errorf("the error names the host path: %v", err)
	}
	if !strings.Contains(err.Error(), "/run/genesis/agent.sock") || !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("error %v: want the sandbox's path and class unavailable", err)
	}
}
