package agentclient

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// fakeAgent serves handler over HTTP/2 cleartext on a Unix socket and counts
// the connections clients open.
func fakeAgent(t *testing.T, handler http.HandlerFunc) (string, *atomic.Int32) {
	t.Helper()
	dir, err := os.MkdirTemp("", "gac")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "a.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var conns atomic.Int32
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true) // HTTP/1 off: the client must speak h2c
	srv := &http.Server{
		Handler:   handler,
		Protocols: &protos,
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		},
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock, &conns
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func TestClientRoundTripsOnOneConnection(t *testing.T) {
	t.Parallel()
	sock, conns := fakeAgent(t, func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			http.Error(w, "want HTTP/2", http.StatusHTTPVersionNotSupported)
			return
		}
		switch r.URL.Path {
		case agentproto.PathPing:
			writeJSON(w, 200, agentproto.Ping{Protocol: agentproto.Version, PID: 1, Kernel: "k"})
		case agentproto.PathExec:
			var req agentproto.ExecRequest
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				writeJSON(w, 400, agentproto.Error{Code: "invalid_argument", Message: err.Error()})
				return
			}
			writeJSON(w, 200, agentproto.ExecResult{ExitReason: "exited", Stdout: []byte(strings.Join(req.Command, " "))})
		}
	})
	c := Dial(sock)
	defer c.Close()
	ctx := context.Background()
	p, err := c.WaitReady(ctx, time.Millisecond)
	if err != nil || p.PID != 1 || p.Kernel != "k" {
		t.Fatalf("WaitReady = %+v, %v", p, err)
	}
	done := make(chan error, 10)
	for range 10 {
		go func() {
			res, err := c.Exec(ctx, agentproto.ExecRequest{Command: []string{"echo", "x"}})
			if err == nil && string(res.Stdout) != "echo x" {
				err = errors.New("wrong result " + string(res.Stdout))
			}
			done <- err
		}()
	}
	for range 10 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("client opened %d connections, want 1", n)
	}
}

func TestClientErrorClasses(t *testing.T) {
	t.Parallel()
	sock, _ := fakeAgent(t, func(w http.ResponseWriter, r *http.Request) {
		var req agentproto.ExecRequest
		json.NewDecoder(r.Body).Decode(&req)
		switch req.JobID {
		case "bad":
			writeJSON(w, 400, agentproto.Error{Code: "invalid_argument", Message: "command is empty"})
		case "busy":
			writeJSON(w, 503, agentproto.Error{Code: "unavailable", Message: "shutting down"})
		case "boom":
			writeJSON(w, 500, agentproto.Error{Code: "internal", Message: "pipe failed"})
		case "garbage":
			w.WriteHeader(200)
			w.Write([]byte("{not json"))
		case "hang":
			<-r.Context().Done()
		}
	})
	c := Dial(sock)
	defer c.Close()
	tests := []struct {
		job  string
		want error
		msg  string
	}{
		{"bad", errdefs.ErrInvalidArgument, "command is empty"},
		{"busy", errdefs.ErrUnavailable, "shutting down"},
		{"boom", errdefs.ErrInternal, "pipe failed"},
		{"garbage", errdefs.ErrInternal, "decode"},
	}
	for _, tc := range tests {
		_, err := c.Exec(context.Background(), agentproto.ExecRequest{JobID: tc.job})
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: err = %v, want %v containing %q", tc.job, err, tc.want, tc.msg)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Exec(ctx, agentproto.ExecRequest{JobID: "hang"}); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errdefs.ErrDeadlineExceeded) {
		t.Errorf("hang: err = %v, want a deadline error", err)
	}
}

func TestClientUnavailable(t *testing.T) {
	t.Parallel()
	c := Dial(filepath.Join(t.TempDir(), "none.sock"))
	defer c.Close()
	if _, err := c.Exec(context.Background(), agentproto.ExecRequest{Command: []string{"true"}}); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("Exec without agent: %v, want ErrUnavailable", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err := c.WaitReady(ctx, 5*time.Millisecond)
	if !errors.Is(err, errdefs.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitReady without agent: %v, want ErrUnavailable and DeadlineExceeded", err)
	}
}

func TestNewTakesADialer(t *testing.T) {
	t.Parallel()
	sock, conns := fakeAgent(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, agentproto.Ping{Protocol: agentproto.Version, PID: 7})
	})
	var dials atomic.Int32
	c := New(func(ctx context.Context) (net.Conn, error) {
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	})
	defer c.Close()
	for range 3 {
		if p, err := c.Ping(context.Background()); err != nil || p.PID != 7 {
			t.Fatalf("Ping = %+v, %v", p, err)
		}
	}
	if dials.Load() != 1 || conns.Load() != 1 {
		t.Fatalf("%d dials, %d connections; want 1 and 1", dials.Load(), conns.Load())
	}
	failing := New(func(context.Context) (net.Conn, error) { return nil, errors.New("no route") })
	if _, err := failing.Ping(context.Background()); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("Ping through a failing dialer: %v, want ErrUnavailable", err)
	}
}

func TestClientRedialsAfterItsConnectionEnds(t *testing.T) {
	t.Parallel()
	sock, conns := fakeAgent(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, agentproto.Ping{Protocol: agentproto.Version, PID: 3})
	})
	var mu sync.Mutex
	var dialled []net.Conn
	c := New(func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, "unix", sock)
		if err == nil {
			mu.Lock()
			dialled = append(dialled, nc)
			mu.Unlock()
		}
		return nc, err
	})
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	// The socket breaks under the client (as when the agent dies): once
	// the connection noticed, the next call dials a new one.
	mu.Lock()
	dialled[0].Close()
	mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := c.Ping(ctx)
		if err == nil {
			break
		}
		if !errors.Is(err, errdefs.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("Ping after the connection broke: %v", err)
		}
	}
	// Close drops the connection; the client still works.
	c.Close()
	if _, err := c.Ping(ctx); err != nil {
		t.Fatalf("Ping after Close: %v", err)
	}
	if n := conns.Load(); n != 3 {
		t.Fatalf("agent saw %d connections, want 3", n)
	}
}

// TestWaitReadyWakeDialsAtOnce: a wake makes WaitReadyWake ping at once,
// not at its next poll (an hour away here), and a refusal right after a
// wake is retried soon.
func TestWaitReadyWakeDialsAtOnce(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "gac")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "a.sock")
	c := Dial(sock)
	defer c.Close()
	wake := make(chan struct{}, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type result struct {
		p   agentproto.Ping
		err error
	}
	done := make(chan result, 1)
	go func() {
		p, err := c.WaitReadyWake(ctx, time.Hour, wake)
		done <- result{p, err}
	}()
	// A wake while nothing listens: refused, retried soon, still refused.
	wake <- struct{}{}
	time.Sleep(20 * time.Millisecond) // past the quick retries; WaitReadyWake must still wait
	select {
	case r := <-done:
		t.Fatalf("WaitReadyWake returned without an agent: %+v, %v", r.p, r.err)
	default:
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: &protos, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, agentproto.Ping{Protocol: agentproto.Version, PID: 7})
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	wake <- struct{}{}
	r := <-done
	if r.err != nil || r.p.PID != 7 {
		t.Fatalf("WaitReadyWake after the wake = %+v, %v; want the agent's ping", r.p, r.err)
	}
}
