package agent_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/agent/agentclient"
	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// tcpServer listens on 127.0.0.1 and runs serve for every connection until
// the test ends; it returns the port.
func tcpServer(tb testing.TB, serve func(c *net.TCPConn)) int {
	tb.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	tb.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				serve(c.(*net.TCPConn))
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

func echo(c *net.TCPConn) {
	io.Copy(c, c)
	c.CloseWrite()
}

func dialPort(t testing.TB, c *agentclient.Client, port int) net.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := c.DialPort(ctx, port)
	if err != nil {
		t.Fatalf("DialPort(%d): %v", port, err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// roundTrip writes data while reading the echo back and checks it byte for
// byte; CloseWrite after the data must end the echo with EOF.
func roundTrip(t *testing.T, conn net.Conn, data []byte) {
	t.Helper()
	conn.SetDeadline(time.Now().Add(60 * time.Second))
	werr := make(chan error, 1)
	go func() {
		_, err := conn.Write(data)
		if err == nil {
			err = conn.(interface{ CloseWrite() error }).CloseWrite()
		}
		werr <- err
	}()
	got, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("read echo: %v (got %d bytes)", err, len(got))
	}
	if err := <-werr; err != nil {
		t.Fatalf("write: %v", err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("echo of %d bytes came back as %d bytes (sha256 %x, want %x)", len(data), len(got), sha256.Sum256(got), sha256.Sum256(data))
	}
}

func randomBytes(t testing.TB, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDialPortEcho(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	port := tcpServer(t, echo)
	// ctx bounds the connect only: the connection outlives it.
	ctx, cancel := context.WithCancel(context.Background())
	conn, err := a.client.DialPort(ctx, port)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	roundTrip(t, conn, randomBytes(t, 6<<20))
}

func TestDialPortHalfClose(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	// The service reads until EOF, then answers with what it got.
	port := tcpServer(t, func(c *net.TCPConn) {
		h := sha256.New()
		n, err := io.Copy(h, c)
		if err != nil {
			return
		}
		fmt.Fprintf(c, "%d %x", n, h.Sum(nil))
	})
	conn := dialPort(t, a.client, port)
	data := randomBytes(t, 3<<20)
	if _, err := conn.Write(data); err != nil {
		t.Fatal(err)
	}
	cw, ok := conn.(interface{ CloseWrite() error })
	if !ok {
		t.Fatalf("%T has no CloseWrite", conn)
	}
	if err := cw.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	got, err := io.ReadAll(conn)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d %x", len(data), sha256.Sum256(data)); string(got) != want {
		t.Fatalf("answer %q, want %q", got, want)
	}
	if _, err := conn.Write([]byte("late")); err == nil {
		t.Fatal("write after CloseWrite succeeded")
	}
}

func TestDialPortServiceCloses(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	port := tcpServer(t, func(c *net.TCPConn) { c.Write([]byte("bye")) })
	conn := dialPort(t, a.client, port)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(conn)
	if err != nil || string(got) != "bye" {
		t.Fatalf("read %q, %v; want bye and EOF", got, err)
	}
	// The exchange is over: writes fail soon (not necessarily the first).
	deadline := time.Now().Add(10 * time.Second)
	conn.SetWriteDeadline(deadline)
	for {
		if _, err := conn.Write([]byte("x")); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("writes still succeed after the service closed")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestDialPortRefused(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	start := time.Now()
	_, err = a.client.DialPort(context.Background(), port)
	if el := time.Since(start); el > time.Second {
		t.Errorf("refused dial took %v", el)
	}
	if !errors.Is(err, errdefs.ErrBadGateway) || errdefs.Code(err) != agentproto.CodePortUnreachable {
		t.Fatalf("DialPort of a closed port: %v (code %q), want ErrBadGateway with code %s", err, errdefs.Code(err), agentproto.CodePortUnreachable)
	}
	for _, p := range []int{0, -1, 65536} {
		if _, err := a.client.DialPort(context.Background(), p); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("DialPort(%d): %v, want ErrInvalidArgument", p, err)
		}
	}
}

// TestDialPortRouteRejectsBadPorts asks the agent itself (the client checks
// ports before sending): 400 for anything but 1..65535.
func TestDialPortRouteRejectsBadPorts(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", a.socket)
		},
	}}
	for _, p := range []string{"0", "65536", "-5", "80x", "0080", "99999999999999999999"} {
		resp, err := hc.Post("http://agent/v1/ports/"+p+"/dial", "application/octet-stream", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("port %q: status %d, want 400", p, resp.StatusCode)
		}
	}
}

// TestRoutes checks the router's answers for wrong methods and paths.
func TestRoutes(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", a.socket)
		},
	}}
	tests := []struct {
		method, path string
		status       int
		code, allow  string
	}{
		{"GET", "/v1/ports/80/dial", 405, "method_not_allowed", "POST"},
		{"POST", "/v1/ping", 405, "method_not_allowed", "GET, HEAD"},
		{"GET", "/v1/exec", 405, "method_not_allowed", "POST"},
		{"PATCH", "/v1/jobs", 405, "method_not_allowed", "GET, HEAD, POST"},
		{"POST", "/v1/jobs/x/stdin", 405, "method_not_allowed", "PUT"},
		{"GET", "/v1/nothing", 404, "not_found", ""},
		{"GET", "/v1/jobs/x/y/z", 404, "not_found", ""},
		{"GET", "/v1/jobs/nobody", 404, "not_found", ""},
		{"GET", "/v1/jobs", 200, "", ""},
		{"GET", "/v1/jobs/", 200, "", ""},
		{"GET", "/v1/terminals/", 200, "", ""},
	}
	for _, tc := range tests {
		req, _ := http.NewRequest(tc.method, "http://agent"+tc.path, nil)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e agentproto.Error
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: status %d, want %d", tc.method, tc.path, resp.StatusCode, tc.status)
			continue
		}
		if tc.code == "" {
			continue
		}
		if err := json.Unmarshal(body, &e); err != nil || e.Code != tc.code || resp.Header.Get("Allow") != tc.allow {
			t.Errorf("%s %s: body %q (Allow %q), want code %s, Allow %q", tc.method, tc.path, body, resp.Header.Get("Allow"), tc.code, tc.allow)
		}
	}
}

func TestDialPortDeadlines(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	port := tcpServer(t, echo)
	conn := dialPort(t, a.client, port)
	conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	buf := make([]byte, 16)
	start := time.Now()
	if _, err := conn.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("read deadline took %v", el)
	}
	// A blocked read sees a deadline set while it waits.
	conn.SetReadDeadline(time.Time{})
	rerr := make(chan error, 1)
	go func() {
		_, err := conn.Read(buf)
		rerr <- err
	}()
	time.Sleep(20 * time.Millisecond)
	conn.SetReadDeadline(time.Now())
	select {
	case err := <-rerr:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("blocked read: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a deadline set during a read did not end it")
	}
	// The connection still works once the deadline is cleared.
	conn.SetDeadline(time.Time{})
	roundTrip(t, conn, []byte("still here"))
	// A write that cannot go through (nobody reads) ends at its deadline.
	release := make(chan struct{})
	stuck := tcpServer(t, func(c *net.TCPConn) { <-release })
	t.Cleanup(func() { close(release) }) // before the server's own cleanup
	wc := dialPort(t, a.client, stuck)
	wc.SetWriteDeadline(time.Now().Add(300 * time.Millisecond))
	n, err := wc.Write(make([]byte, 256<<20))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write to a stalled service: %d bytes, %v", n, err)
	}
	wc.Close()
	if _, err := wc.Read(buf); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read after Close: %v", err)
	}
}

func TestDialPortConcurrent(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	port := tcpServer(t, echo)
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			conn, err := a.client.DialPort(ctx, port)
			if err != nil {
				t.Errorf("dial %d: %v", i, err)
				return
			}
			defer conn.Close()
			msg := bytes.Repeat([]byte(strconv.Itoa(i)+" "), 10000)
			conn.SetDeadline(time.Now().Add(30 * time.Second))
			go func() {
				conn.Write(msg)
				conn.(interface{ CloseWrite() error }).CloseWrite()
			}()
			got, err := io.ReadAll(conn)
			if err != nil || !bytes.Equal(got, msg) {
				t.Errorf("conn %d: %d bytes, %v", i, len(got), err)
			}
		}()
	}
	wg.Wait()
	// The streams ended: the agent still answers on the same connection.
	if _, err := a.client.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkDialPortThroughput measures MiB/s through DialPort to a
// host-process agent: upload (into a service that discards) and download
// (from a service that sends zeros), 1 MiB per iteration.
func BenchmarkDialPortThroughput(b *testing.B) {
	a := startAgent(b)
	chunk := make([]byte, 1<<20)
	b.Run("upload", func(b *testing.B) {
		port := tcpServer(b, func(c *net.TCPConn) {
			n, _ := io.Copy(io.Discard, c)
			fmt.Fprintf(c, "%d", n)
		})
		conn := dialPort(b, a.client, port)
		b.SetBytes(int64(len(chunk)))
		b.ResetTimer()
		for range b.N {
			if _, err := conn.Write(chunk); err != nil {
				b.Fatal(err)
			}
		}
		conn.(interface{ CloseWrite() error }).CloseWrite()
		got, err := io.ReadAll(conn)
		b.StopTimer()
		if err != nil || string(got) != strconv.Itoa(b.N*len(chunk)) {
			b.Fatalf("service got %q bytes (%v), want %d", got, err, b.N*len(chunk))
		}
	})
	b.Run("download", func(b *testing.B) {
		port := tcpServer(b, func(c *net.TCPConn) {
			var s [8]byte
			if _, err := io.ReadFull(c, s[:]); err != nil {
				return
			}
			n, _ := strconv.Atoi(string(bytes.TrimSpace(s[:])))
			for range n {
				if _, err := c.Write(chunk); err != nil {
					return
				}
			}
		})
		conn := dialPort(b, a.client, port)
		b.SetBytes(int64(len(chunk)))
		b.ResetTimer()
		fmt.Fprintf(conn, "%-8d", b.N)
		n, err := io.Copy(io.Discard, conn)
		b.StopTimer()
		if err != nil || n != int64(b.N*len(chunk)) {
			b.Fatalf("read %d bytes (%v), want %d", n, err, b.N*len(chunk))
		}
	})
}
