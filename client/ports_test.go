package client

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestForwardPort forwards a loopback listener to a fake service's port
// WebSocket: bytes go through both ways and a local end of input reaches
// the far side, a port nobody listens on is reported to onError with the
// service's problem and the local connection is closed, and the end of ctx
// closes the listener and returns nil.
func TestForwardPort(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/sandboxes/sbx_1/ports/9000/tcp" {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, `{"status":502,"code":"port_unreachable","detail":"nothing listens on port 9001"}`)
			return
		}
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		conn := websocket.NetConn(r.Context(), ws, websocket.MessageBinary)
		defer conn.Close()
		io.Copy(conn, conn) // an echo server in the sandbox
	}))
	t.Cleanup(srv.Close)
	c := New(srv.URL, "k")

	forward := func(port int) (net.Addr, chan error, chan error, context.CancelFunc) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		reported, ret := make(chan error, 1), make(chan error, 1)
		go func() {
			ret <- c.ForwardPort(ctx, ln, "sbx_1", port, func(_ net.Addr, err error) { reported <- err })
		}()
		return ln.Addr(), reported, ret, cancel
	}

	addr, reported, ret, cancel := forward(9000)
	lc, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	lc.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := lc.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(lc, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo: %q %v", buf, err)
	}
	// The local end of input ends the far side's copy, and so the
	// connection.
	lc.(*net.TCPConn).CloseWrite()
	if n, err := lc.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("after the end of input: %d %v, want EOF", n, err)
	}
	lc.Close()
	cancel()
	if err := wait(t, ret); err != nil {
		t.Fatalf("ForwardPort after the end of ctx: %v", err)
	}
	select {
	case err := <-reported:
		t.Fatalf("reported %v for a good port", err)
	default:
	}
	if _, err := net.Dial("tcp", addr.String()); err == nil {
		t.Fatal("the listener is still open after the end of ctx")
	}

	addr, reported, ret, cancel = forward(9001)
	defer cancel()
	lc, err = net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	lc.SetDeadline(time.Now().Add(30 * time.Second))
	var ae *APIError
	if err := wait(t, reported); !errors.As(err, &ae) || ae.Status != http.StatusBadGateway || ae.Problem.Code != "port_unreachable" {
		t.Fatalf("unreachable port reported %v", err)
	}
	if n, err := lc.Read(buf); n != 0 || err == nil {
		t.Fatalf("the local connection of an unreachable port: %d %v, want closed", n, err)
	}
	cancel()
	if err := wait(t, ret); err != nil {
		t.Fatal(err)
	}
}

// wait receives from ch within 30 seconds.
func wait(t *testing.T, ch chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("nothing within 30s")
		return nil
	}
}
