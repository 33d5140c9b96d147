package files

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"genesis.dev/sandbox/internal/agent/agentclient"
	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/sandbox"
)

// pingAgent serves an agent's ping (HTTP/2 without TLS, as agents do) with
// roots as its file roots, counting the pings.
func pingAgent(t *testing.T, roots []string) (*agentclient.Client, *atomic.Int32) {
	t.Helper()
	var pings atomic.Int32
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: &protos, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != agentproto.PathPing {
			http.NotFound(w, r)
			return
		}
		pings.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(agentproto.Ping{Protocol: agentproto.Version, FileRoots: roots})
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	c := agentclient.New(func(ctx context.Context) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", ln.Addr().String())
	})
	t.Cleanup(c.Close)
	return c, &pings
}

// TestFileRoots: a profile naming the sandbox user's home takes the roots
// the agent reports (asked once); an agent that reports none leaves the
// profile's other roots; a profile without the home never asks.
func TestFileRoots(t *testing.T) {
	t.Parallel()
	sb := &sandbox.Sandbox{ID: "sbx_x"}
	for _, tc := range []struct {
		name      string
		profile   []string
		reported  []string
		want      string
		wantPings int32
	}{
		{"default roots", nil, []string{"/workspace", "/tmp", "/home/sandbox"}, "/workspace /tmp /home/sandbox", 1},
		{"an agent that reports none", nil, nil, "/workspace /tmp", 1},
		{"narrowed", []string{"/workspace"}, []string{"/elsewhere"}, "/workspace", 0},
		{"home first", []string{"~", "/data"}, []string{"/home/sandbox", "/data"}, "/home/sandbox /data", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, pings := pingAgent(t, tc.reported)
			a := &control.Attachment{Sandbox: sb, Profile: &config.Profile{FileRoots: tc.profile}, Agent: c}
			for range 2 {
				roots, err := fileRoots(context.Background(), a)
				if err != nil || strings.Join(roots, " ") != tc.want {
					t.Fatalf("fileRoots = %v, %v; want %s", roots, err, tc.want)
				}
			}
			if got := pings.Load(); got != tc.wantPings {
				t.Errorf("%d pings, want %d", got, tc.wantPings)
			}
		})
	}
	// A profile whose only root is the home, with an agent that reports
	// none, has no usable root: refused, not a panic on roots[0].
	c, _ := pingAgent(t, nil)
	if _, err := fileRoots(context.Background(), &control.Attachment{Sandbox: sb, Profile: &config.Profile{FileRoots: []string{"~"}}, Agent: c}); err == nil ||
		!strings.Contains(err.Error(), "no usable file root") {
		t.Errorf("no usable root: %v", err)
	}
}
