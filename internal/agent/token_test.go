package agent_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/agent/agentclient"
	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/testenv"
)

// startAgentTCP runs the agent on a TCP port of loopback, given the
// SHA-256 of its token, and returns it and its address.
func startAgentTCP(t *testing.T, sum [32]byte) (*agentProc, string) {
	t.Helper()
	a := &agentProc{stderr: &lockedBuffer{}, exited: make(chan struct{})}
	a.cmd = exec.Command(agentBin, "serve", "--listen", "127.0.0.1:0")
	a.cmd.Env = append(os.Environ(), "GENESIS_AGENT_LOG_LEVEL=debug", agentproto.TokenSHA256Env+"="+hex.EncodeToString(sum[:]))
	a.cmd.Stderr = a.stderr
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		a.err = a.cmd.Wait()
		close(a.exited)
	}()
	t.Cleanup(func() {
		killChildrenOf(a.cmd.Process.Pid)
		a.stop(t)
		if t.Failed() {
			t.Logf("agent log:\n%s", a.stderr.String())
		}
	})
	on := regexp.MustCompile(`on="tcp (127\.0\.0\.1:\d+)"`)
	var addr string
	testenv.Eventually(t, 10*time.Second, 5*time.Millisecond, "the agent to listen", func() (bool, string) {
		if m := on.FindStringSubmatch(a.stderr.String()); m != nil {
			addr = m[1]
			return true, ""
		}
		return false, a.stderr.String()
	})
	return a, addr
}

// tokenClient is a client of the agent at addr that opens each
// connection with token.
func tokenClient(t *testing.T, addr string, token []byte) *agentclient.Client {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	c := agentclient.New(func(ctx context.Context) (net.Conn, error) {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		if _, err := conn.Write([]byte(agentproto.TokenPreface + hex.EncodeToString(token) + "\n")); err != nil {
			conn.Close()
			return nil, err
		}
		return conn, nil
	})
	t.Cleanup(c.Close)
	return c
}

// pings reports whether c reaches the agent within a few seconds.
func pings(c *agentclient.Client) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := c.Ping(ctx)
	return err == nil
}

// TestAgentTokenOverTCP: an agent on TCP is given the SHA-256 of its token,
// never the token, so its own jobs find nothing in its environment they
// could present; a new token (POST /v1/token) admits only itself from then
// on and closes every connection but the one that asked, so nothing opened
// with the old token goes on working.
func TestAgentTokenOverTCP(t *testing.T) {
	t.Parallel()
	newToken := func() ([]byte, [32]byte) {
		b := make([]byte, agentproto.TokenBytes)
		_, _ = rand.Read(b)
		return b, sha256.Sum256(b)
	}
	token0, sum0 := newToken()
	a, addr := startAgentTCP(t, sum0)
	service, other := tokenClient(t, addr, token0), tokenClient(t, addr, token0)
	if !pings(service) || !pings(other) {
		t.Fatal("clients with the token are refused")
	}
	if pings(tokenClient(t, addr, sum0[:])) {
		t.Fatal("the token's SHA-256 opens the agent")
	}

	// What a job of the sandbox can read of the agent's environment.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := service.Exec(ctx, agentproto.ExecRequest{JobID: "environ", Command: []string{"cat", "/proc/" + strconv.Itoa(a.pid()) + "/environ"}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("reading the agent's environ: %+v %v", res, err)
	}
	if out := string(res.Stdout); !strings.Contains(out, hex.EncodeToString(sum0[:])) || strings.Contains(out, hex.EncodeToString(token0)) {
		t.Fatalf("the agent's environ, as a job reads it, holds the token or not its SHA-256:\n%s", res.Stdout)
	}

	token1, sum1 := newToken()
	if err := service.SetToken(ctx, sum1); err != nil {
		t.Fatal(err)
	}
	if !pings(service) {
		t.Error("the connection that changed the token was closed")
	}
	if pings(other) {
		t.Error("a connection opened with the old token still reaches the agent (or could open again)")
	}
	if pings(tokenClient(t, addr, token0)) {
		t.Error("the old token opens a new connection")
	}
	if !pings(tokenClient(t, addr, token1)) {
		t.Error("the new token is refused")
	}
}
