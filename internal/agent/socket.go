package agent

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// The agent's socket directory (/run/genesis) is a host directory the
// service dials the agent in, and the workload, running as the agent's
// user, can write to it: it could put its own listening socket at the
// agent's name, to answer in the agent's place on the service's next dial.
// The service refuses anything but a socket there (internal/nofollow), and
// a reset, once no process of the holder is left, empties the directory
// but for the identity file and listens on a new socket at the name: the
// next holder's dials reach this agent, whatever the previous one did.

// socketState is the Unix listener being served, so that a reset can
// replace it.
type socketState struct {
	mu       sync.Mutex
	srv      *http.Server
	ln       *net.UnixListener // nil while a save is prepared (not serving)
	errs     chan<- error
	retiredL map[net.Listener]bool // listeners replaced by a reset: their end is no error
}

func (st *socketState) serving(srv *http.Server, ln *net.UnixListener, errs chan<- error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.srv, st.ln, st.errs = srv, ln, errs
}

// stopped records that the server is being closed (for a save) and closes
// its listener at once, before the caller removes the socket's name: a
// caller that sees the name gone (or its dial refused) takes the agent for
// closed and saves the sandbox, and gVisor refuses to save one with a
// bound host socket in it. Its connections close after, in the server's
// own grace.
func (st *socketState) stopped() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.ln != nil {
		if st.retiredL == nil {
			st.retiredL = map[net.Listener]bool{}
		}
		st.retiredL[st.ln] = true // its end is no serving error
		st.ln.Close()
	}
	st.srv, st.ln, st.errs = nil, nil, nil
}

// retired reports (and forgets) whether ln was replaced by a reset.
func (st *socketState) retired(ln net.Listener) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	r := st.retiredL[ln]
	delete(st.retiredL, ln)
	return r
}

// serveOn serves srv on ln until either is closed; an error that is not
// the server's or a reset's closing goes to errs.
func (s *Server) serveOn(srv *http.Server, ln net.Listener, errs chan<- error) {
	served := ln
	if ul, ok := ln.(*net.UnixListener); ok {
		served = bufferedListener{ul}
	}
	err := srv.Serve(served)
	if retired := s.sock.retired(ln); !errors.Is(err, http.ErrServerClosed) && !retired {
		errs <- err
	}
}

// bufferedListener hands out its connections with their reads buffered.
// The HTTP/2 server reads each frame with two reads on the bare
// connection, its 9-byte header and then its payload; an exec's request is
// two frames, so four system calls (each one a trap into the sentry and a
// call on the host socket under gVisor) where one read takes them all.
type bufferedListener struct{ *net.UnixListener }

func (l bufferedListener) Accept() (net.Conn, error) {
	c, err := l.UnixListener.AcceptUnix()
	if err != nil {
		return nil, err
	}
	// Best effort: the kernel caps it at net.core.wmem_max.
	_ = c.SetWriteBuffer(agentproto.ConnWriteBuffer)
	return &bufferedConn{Conn: c, r: bufio.NewReaderSize(c, connReadBuffer)}, nil
}

// connReadBuffer is the read buffer of a connection to the agent: a frame
// header and a small request with room to spare; larger payloads (file
// writes, stdin) are read through it in pieces of this size or straight
// into the caller's buffer when that is bigger.
const connReadBuffer = 4 << 10

// bufferedConn is a connection whose reads go through r; everything else
// is the connection's own.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// makeUndumpable makes the process non-dumpable: a process of the same
// user (the workload) can no longer ptrace it, nor read its /proc/PID/mem,
// environ, fd or maps. An execve resets the flag, so jobs are unaffected.
func makeUndumpable() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("agent: prctl(PR_SET_DUMPABLE, 0): %v: %w", err, errdefs.ErrInternal)
	}
	return nil
}

// resetSocketDir empties the socket directory of everything the holder
// could have left (a socket, a symlink, a file at the agent's name; any
// other entry) but the identity file, which it writes again, and listens
// on a new socket at the agent's name. It runs once no process of the
// holder is left, so nothing can put anything back. Outside a container
// (asInit false: tests) the directory is not the agent's own and only the
// socket is replaced.
func (s *Server) resetSocketDir(w *wiper, asInit bool) {
	if s.cfg.SocketPath == "" {
		return
	}
	if asInit {
		s.emptySocketDir(w)
	}
	s.sock.mu.Lock()
	defer s.sock.mu.Unlock()
	if s.sock.ln == nil {
		return // not serving (a save is being prepared): Run listens anew
	}
	ln, err := listenUnix(s.cfg.SocketPath, s.cfg.SocketMode)
	if err != nil {
		w.fail(s.cfg.SocketPath, err)
		return
	}
	old := s.sock.ln
	s.sock.ln = ln
	if s.sock.retiredL == nil {
		s.sock.retiredL = map[net.Listener]bool{}
	}
	s.sock.retiredL[old] = true
	go s.serveOn(s.sock.srv, ln, s.sock.errs)
	old.Close()
}

// emptySocketDir removes every entry of the socket directory but the
// agent's socket (replaced next) and the identity file (written again).
func (s *Server) emptySocketDir(w *wiper) {
	dir, name := filepath.Split(s.cfg.SocketPath)
	dir = filepath.Clean(dir)
	idName := ""
	if s.cfg.IdentityFile != "" && filepath.Dir(s.cfg.IdentityFile) == dir {
		idName = filepath.Base(s.cfg.IdentityFile)
	}
	w.own(dir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		w.fail(dir, err)
		return
	}
	for _, e := range ents {
		switch {
		case e.Name() == name && e.Type() == os.ModeSocket:
			// Replaced next, atomically.
		case e.Name() == idName && e.Type().IsRegular():
			// Written again next.
		default:
			w.remove(filepath.Join(dir, e.Name()))
		}
	}
	s.rewriteIdentity(w)
}

// rewriteIdentity writes the identity file again as the agent last wrote
// it (the holder may have changed it).
func (s *Server) rewriteIdentity(w *wiper) {
	s.idMu.Lock()
	b := s.identity
	s.idMu.Unlock()
	if b == nil || s.cfg.IdentityFile == "" {
		return
	}
	if err := writeIdentity(s.cfg.IdentityFile, b); err != nil {
		w.fail(s.cfg.IdentityFile, err)
	}
}

// writeIdentity replaces path with a file holding b, through a temporary
// file renamed over it (a rename replaces a symlink, never follows it).
func writeIdentity(path string, b []byte) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.Write(b)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		os.Remove(tmp)
	}
	return werr
}
