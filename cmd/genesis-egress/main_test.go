package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/egress"
	"genesis.dev/sandbox/internal/egress/egressclient"
	"genesis.dev/sandbox/internal/testenv"
)

func TestVersionAndUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"version"}, &out, &errb); code != 0 {
		t.Fatalf("version exit %d", code)
	}
	var v map[string]string
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || v["version"] == "" {
		t.Fatalf("version output %q: %v", out.String(), err)
	}
	if code := run([]string{"nope"}, &out, &errb); code != 2 {
		t.Fatalf("unknown subcommand exit %d", code)
	}
	if code := run([]string{"serve", "--log-level", "loud"}, &out, &errb); code != 2 {
		t.Fatalf("bad flag exit %d", code)
	}
}

// TestServeAsProcess runs the static binary, configures a sandbox on a
// loopback address over the control socket, resolves through it, and stops
// it with SIGTERM.
func TestServeAsProcess(t *testing.T) {
	if os.Geteuid() != 0 && os.Getenv("CI") != "true" {
		t.Skip("serving DNS on port 53 needs root (make test runs as root)")
	}
	bin := testenv.EgressBinary(t)
	sock := filepath.Join(t.TempDir(), "control.sock")
	cmd := exec.Command(bin, "serve", "--control-socket", sock)
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := egressclient.Dial(sock)
	defer c.Close()
	if _, err := c.WaitReady(ctx, 10*time.Millisecond); err != nil {
		t.Fatalf("%v; logs: %s", err, logs.String())
	}
	ip := netip.AddrFrom4([4]byte{127, 99, byte(rand.IntN(250)), byte(rand.IntN(250) + 1)})
	_, err := c.PutSandbox(ctx, "sb-proc", egress.SandboxConfig{LocalIP: ip.String(),
		Policy: egress.Policy{Mode: egress.ModeAllowlist, Allow: []egress.Rule{{Host: "pkg.example"}}}})
	if err != nil {
		t.Fatal(err)
	}
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, net.JoinHostPort(ip.String(), "53"))
	}}
	if a, err := r.LookupNetIP(ctx, "ip4", "pkg.example"); err != nil || len(a) != 1 || a[0] != ip {
		t.Fatalf("lookup pkg.example = %v, %v", a, err)
	}
	if _, err := r.LookupNetIP(ctx, "ip4", "evil.example"); err == nil {
		t.Fatal("evil.example resolved")
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v; logs: %s", err, logs.String())
		}
	case <-ctx.Done():
		t.Fatal("no exit after SIGTERM")
	}
	if !strings.Contains(logs.String(), "sandbox added") {
		t.Fatalf("logs: %s", logs.String())
	}
}
