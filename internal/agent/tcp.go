package agent

import (
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// prefaceTimeout bounds how long a new TCP connection may take to present
// its token.
const prefaceTimeout = 10 * time.Second

// tokenListener admits only connections that open with the agent's token
// (agentproto.TokenPreface). Checks run concurrently, so a slow or silent
// peer holds up nobody else.
type tokenListener struct {
	net.Listener
	want []byte // the preface line expected, token in hex
	log  *slog.Logger
	ok   chan net.Conn
	errs chan error
	once sync.Once
	done chan struct{}
}

func listenTCP(addr string, token []byte, log *slog.Logger) (*tokenListener, error) {
	if len(token) != agentproto.TokenBytes {
		return nil, fmt.Errorf("agent: a TCP listener needs a %d-byte token in %s: %w", agentproto.TokenBytes, agentproto.TokenEnv, errdefs.ErrInvalidArgument)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("agent: listen on %s: %v: %w", addr, err, errdefs.ErrUnavailable)
	}
	t := &tokenListener{Listener: ln, log: log, ok: make(chan net.Conn), errs: make(chan error, 1), done: make(chan struct{}),
		want: []byte(agentproto.TokenPreface + hex.EncodeToString(token) + "\n")}
	go t.acceptLoop()
	return t, nil
}

func (t *tokenListener) acceptLoop() {
	for {
		c, err := t.Listener.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			select {
			case t.errs <- err:
			case <-t.done:
			}
			return
		}
		go t.admit(c)
	}
}

// admit reads the preface and hands the connection on, or closes it.
func (t *tokenListener) admit(c net.Conn) {
	got := make([]byte, len(t.want))
	_ = c.SetReadDeadline(time.Now().Add(prefaceTimeout))
	_, err := io.ReadFull(c, got)
	_ = c.SetReadDeadline(time.Time{})
	if err != nil || subtle.ConstantTimeCompare(got, t.want) != 1 {
		t.log.Warn("refused a connection without the agent's token", "peer", c.RemoteAddr().String())
		c.Close()
		return
	}
	select {
	case t.ok <- c:
	case <-t.done:
		c.Close()
	}
}

func (t *tokenListener) Accept() (net.Conn, error) {
	select {
	case c := <-t.ok:
		return c, nil
	case err := <-t.errs:
		return nil, err
	case <-t.done:
		return nil, net.ErrClosed
	}
}

func (t *tokenListener) Close() error {
	t.once.Do(func() { close(t.done) })
	return t.Listener.Close()
}
