package agent

import (
	"bytes"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
)

// TestTokenListener: a TCP connection reaches the agent only after the
// sandbox's token; a wrong or short preface is closed unserved.
func TestTokenListener(t *testing.T) {
	token := bytes.Repeat([]byte{7}, agentproto.TokenBytes)
	if _, err := listenTCP("127.0.0.1:0", token[:5], slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("listenTCP accepted a short token")
	}
	ln, err := listenTCP("127.0.0.1:0", token, slog.New(slog.DiscardHandler))
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
	good := dial(agentproto.TokenPreface + hex.EncodeToString(token) + "\n")
	defer good.Close()
	select {
	case c := <-accepted:
		if c.RemoteAddr().String() != good.LocalAddr().String() {
			t.Errorf("accepted %v; want %v", c.RemoteAddr(), good.LocalAddr())
		}
		c.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("the connection with the token was not accepted")
	}
}
