package agent

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
)

// TestTokenListener: a TCP connection reaches the agent only after the
// sandbox's token (the listener holds its SHA-256 only); a wrong or short
// preface is closed unserved, and so is the SHA-256 itself presented as a
// token. A new token closes every connection admitted before but the one
// kept, and admits only itself.
func TestTokenListener(t *testing.T) {
	token := bytes.Repeat([]byte{7}, agentproto.TokenBytes)
	sum := sha256.Sum256(token)
	if _, err := listenTCP("127.0.0.1:0", sum[:5], slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("listenTCP accepted a short SHA-256")
	}
	ln, err := listenTCP("127.0.0.1:0", sum[:], slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func(preface string) net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, preface); err != nil {
			t.Fatal(err)
		}
		return c
	}
	wrong := bytes.Repeat([]byte{8}, agentproto.TokenBytes)
	for _, bad := range []string{
		agentproto.TokenPreface + hex.EncodeToString(wrong) + "\n",
		agentproto.TokenPreface + hex.EncodeToString(sum[:]) + "\n",
		agentproto.TokenPreface + hex.EncodeToString(token) + "x",
		"GENESIS-AGENT-TOKEX " + hex.EncodeToString(token) + "\n",
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + string(bytes.Repeat([]byte("x"), 60)),
	} {
		c := dial(bad)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		// Closed by the agent: EOF, or a reset when bytes were left unread.
		n, err := c.Read(make([]byte, 1))
		if ne, ok := err.(net.Error); n != 0 || err == nil || (ok && ne.Timeout()) {
			t.Errorf("after preface %.30q: read %d, %v; want the connection closed", bad, n, err)
		}
		c.Close()
	}
	select {
	case c := <-accepted:
		t.Fatalf("a connection without the token was accepted: %v", c.RemoteAddr())
	default:
	}
	admitted := func(preface string) (client, server net.Conn) {
		t.Helper()
		client = dial(preface)
		select {
		case server = <-accepted:
			if server.RemoteAddr().String() != client.LocalAddr().String() {
				t.Errorf("accepted %v; want %v", server.RemoteAddr(), client.LocalAddr())
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the connection with the token was not accepted")
		}
		return client, server
	}
	good, keep := admitted(agentproto.TokenPreface + hex.EncodeToString(token) + "\n")
	defer good.Close()
	other, _ := admitted(agentproto.TokenPreface + hex.EncodeToString(token) + "\n")
	defer other.Close()

	// A new token: the other connection is closed, the kept one stays.
	token2 := bytes.Repeat([]byte{9}, agentproto.TokenBytes)
	if n := ln.rekey(sha256.Sum256(token2), keep); n != 1 {
		t.Errorf("rekey closed %d connections, want 1", n)
	}
	_ = other.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := other.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("the connection of the old token: read %d, %v; want it closed", n, err)
	}
	if _, err := keep.Write([]byte("x")); err != nil {
		t.Errorf("the kept connection was closed: %v", err)
	}
	_ = good.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := good.Read(make([]byte, 1)); n != 1 || err != nil {
		t.Errorf("reading through the kept connection: %d %v", n, err)
	}
	old := dial(agentproto.TokenPreface + hex.EncodeToString(token) + "\n")
	_ = old.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := old.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("a new connection with the old token: read %d, %v; want it closed", n, err)
	}
	old.Close()
	c2, s2 := admitted(agentproto.TokenPreface + hex.EncodeToString(token2) + "\n")
	c2.Close()
	s2.Close()
	keep.Close()
	ln.mu.Lock()
	left := len(ln.conns)
	ln.mu.Unlock()
	if left != 0 {
		t.Errorf("%d closed connections are still kept by the listener", left)
	}
}
