package agent_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// TestDialPortRawEcho: the raw dial (a connection of its own, upgraded)
// carries bytes both ways unchanged, outlives its ctx, and is not one of
// the client's connections.
func TestDialPortRawEcho(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	port := tcpServer(t, echo)
	dials := a.client.Dials()
	ctx, cancel := context.WithCancel(context.Background())
	conn, err := a.client.DialPortRaw(ctx, port)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	roundTrip(t, conn, randomBytes(t, 6<<20))
	if d := a.client.Dials(); d != dials {
		t.Errorf("the raw dial counted as a client connection: %d dials, were %d", d, dials)
	}
}

// TestDialPortRawHalfClose: CloseWrite ends what the caller sends (the
// service reads EOF) while the service's answer still comes back.
func TestDialPortRawHalfClose(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	port := tcpServer(t, func(c *net.TCPConn) {
		h := sha256.New()
		n, err := io.Copy(h, c)
		if err != nil {
			return
		}
		fmt.Fprintf(c, "%d %x", n, h.Sum(nil))
	})
	conn, err := a.client.DialPortRaw(context.Background(), port)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	data := randomBytes(t, 3<<20)
	if _, err := conn.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := conn.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
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
}

// TestDialPortRawServiceCloses: the service closing its side ends the
// caller's reads with EOF.
func TestDialPortRawServiceCloses(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	port := tcpServer(t, func(c *net.TCPConn) { c.Write([]byte("bye")) })
	conn, err := a.client.DialPortRaw(context.Background(), port)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(conn)
	if err != nil || string(got) != "bye" {
		t.Fatalf("read %q, %v; want bye and EOF", got, err)
	}
}

// TestDialPortRawRefused: a port nobody listens on answers as DialPort
// does, quickly; a bad port is refused before anything is sent.
func TestDialPortRawRefused(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	start := time.Now()
	_, err = a.client.DialPortRaw(context.Background(), port)
	if el := time.Since(start); el > time.Second {
		t.Errorf("refused dial took %v", el)
	}
	if !errors.Is(err, errdefs.ErrBadGateway) || errdefs.Code(err) != agentproto.CodePortUnreachable {
		t.Fatalf("DialPortRaw of a closed port: %v (code %q), want ErrBadGateway with code %s", err, errdefs.Code(err), agentproto.CodePortUnreachable)
	}
	if _, err := a.client.DialPortRaw(context.Background(), 0); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("DialPortRaw(0): %v, want ErrInvalidArgument", err)
	}
}
