package agent

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// prefaceTimeout bounds how long a new TCP connection may take to present
// its token.
const prefaceTimeout = 10 * time.Second

// tokenListener admits only connections that open with the agent's token
// (agentproto.TokenPreface). It knows the token's SHA-256 only, never the
// token. Checks run concurrently, so a slow or silent peer holds up nobody
// else. It keeps the connections it admitted, so that a new token closes
// those opened with the old one.
type tokenListener struct {
	net.Listener
	log  *slog.Logger
	ok   chan net.Conn
	errs chan error
	once sync.Once
	done chan struct{}

	mu    sync.Mutex
	sum   [sha256.Size]byte // of the token
	conns map[*admittedConn]struct{}
}

// prefaceLen is the length of a preface line: the token in hex and "\n".
const prefaceLen = len(agentproto.TokenPreface) + 2*agentproto.TokenBytes + 1

func listenTCP(addr string, sum []byte, log *slog.Logger) (*tokenListener, error) {
	if len(sum) != sha256.Size {
		return nil, errdefs.Invalid("agent: a TCP listener needs the %d-byte SHA-256 of its token in %s", sha256.Size, agentproto.TokenSHA256Env)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("agent: listen on %s: %v: %w", addr, err, errdefs.ErrUnavailable)
	}
	t := &tokenListener{Listener: ln, log: log, ok: make(chan net.Conn), errs: make(chan error, 1), done: make(chan struct{}),
		conns: map[*admittedConn]struct{}{}}
	copy(t.sum[:], sum)
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
	got := make([]byte, prefaceLen)
	_ = c.SetReadDeadline(time.Now().Add(prefaceTimeout))
	_, err := io.ReadFull(c, got)
	_ = c.SetReadDeadline(time.Time{})
	if err != nil || !t.matches(got) {
		t.log.Warn("refused a connection without the agent's token", "peer", c.RemoteAddr().String())
		c.Close()
		return
	}
	ac := &admittedConn{Conn: c, l: t}
	t.mu.Lock()
	t.conns[ac] = struct{}{}
	t.mu.Unlock()
	select {
	case t.ok <- ac:
	case <-t.done:
		ac.Close()
	}
}

// matches reports whether preface is the preface line of the token whose
// SHA-256 the listener holds. The comparison takes the same time whatever
// the bytes.
func (t *tokenListener) matches(preface []byte) bool {
	token := make([]byte, agentproto.TokenBytes)
	_, herr := hex.Decode(token, preface[len(agentproto.TokenPreface):prefaceLen-1])
	sum := sha256.Sum256(token)
	t.mu.Lock()
	want := t.sum
	t.mu.Unlock()
	ok := subtle.ConstantTimeCompare(preface[:len(agentproto.TokenPreface)], []byte(agentproto.TokenPreface)) &
		subtle.ConstantTimeCompare(sum[:], want[:]) & subtle.ConstantTimeByteEq(preface[prefaceLen-1], '\n')
	return ok == 1 && herr == nil
}

// rekey makes sum the SHA-256 of the token new connections must present
// and closes every connection admitted so far but keep (the one that asked
// for it), so that nothing opened with the old token stays.
func (t *tokenListener) rekey(sum [sha256.Size]byte, keep net.Conn) int {
	t.mu.Lock()
	t.sum = sum
	var old []*admittedConn
	for c := range t.conns {
		if net.Conn(c) != keep {
			old = append(old, c)
		}
	}
	t.mu.Unlock()
	for _, c := range old {
		c.Close()
	}
	return len(old)
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

// admittedConn is a connection the listener admitted; it leaves the
// listener's set when it closes.
type admittedConn struct {
	net.Conn
	l    *tokenListener
	once sync.Once
}

func (c *admittedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// connKey carries the connection a request came on (http.Server's
// ConnContext).
type connKey struct{}

// handleToken serves POST /v1/token: a new token for a TCP agent.
func (s *Server) handleToken(w http.ResponseWriter, r *http.Request) {
	if s.tokens == nil {
		writeError(w, errdefs.WithCode("no_token", fmt.Errorf("this agent listens on a Unix socket and admits no token: %w", errdefs.ErrFailedPrecondition)))
		return
	}
	var req agentproto.TokenChange
	if err := s.decodeBody(w, r, &req, false); err != nil {
		writeError(w, err)
		return
	}
	sum, err := hex.DecodeString(req.SHA256)
	if err != nil || len(sum) != sha256.Size {
		writeError(w, errdefs.Invalid("sha256 must be %d bytes in hex", sha256.Size))
		return
	}
	keep, _ := r.Context().Value(connKey{}).(net.Conn)
	closed := s.tokens.rekey([sha256.Size]byte(sum), keep)
	s.log.Info("agent token replaced", "closed_connections", closed)
	w.WriteHeader(http.StatusNoContent)
}
