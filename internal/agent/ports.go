package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// portDialTimeout bounds the connect to a port of the sandbox's loopback:
// a refused port answers at once, a filtered one must not hang the caller.
const portDialTimeout = 2 * time.Second

// portChunk is the most one copy step moves in either direction of a
// dialled port, so a stream holds at most this much per direction.
const portChunk = 32 << 10

// portDownChunk is the read size of the sandbox → service direction.
const portDownChunk = 256 << 10

// parsePort reads a TCP port number, 1..65535.
func parsePort(s string) (int, error) {
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 || strconv.Itoa(p) != s {
		return 0, errdefs.Invalid("port %.20q is not a TCP port (1..65535)", s)
	}
	return p, nil
}

// handlePortDial connects to 127.0.0.1:port and carries the connection
// over the request (see agentproto.PathPortDial): the request body goes to
// the socket, the socket's bytes come back as the response body. Nothing is
// buffered beyond one chunk per direction, so a slow reader on either side
// slows the writer on the other through the stream's flow control.
func (s *Server) handlePortDial(w http.ResponseWriter, r *http.Request, port int) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	ctx, cancel := context.WithTimeout(r.Context(), portDialTimeout)
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp4", addr)
	cancel()
	if err != nil {
		msg := fmt.Sprintf("port %d in the sandbox did not answer: %v", port, err)
		if errors.Is(err, syscall.ECONNREFUSED) {
			msg = fmt.Sprintf("nothing listens on port %d in the sandbox (on 127.0.0.1)", port)
		}
		writeError(w, errdefs.WithCode(agentproto.CodePortUnreachable, errdefs.Mark(errors.New(msg), errdefs.ErrBadGateway)))
		return
	}
	conn := c.(*net.TCPConn)
	defer conn.Close()
	if wantsRawPort(r) {
		s.splicePort(w, r, conn)
		return
	}
	// The caller going away (stream reset, connection lost) ends both
	// directions: a blocked socket read or write returns.
	stop := context.AfterFunc(r.Context(), func() { conn.Close() })
	defer stop()

	rc := http.NewResponseController(w)
	rc.EnableFullDuplex() // HTTP/1 only; HTTP/2 streams are full duplex anyway
	w.Header().Set("Content-Type", agentproto.ContentTypeStream)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return
	}

	upDone := make(chan struct{})
	go func() {
		defer close(upDone)
		b := s.getBuf()
		defer s.putBuf(b)
		for {
			n, err := r.Body.Read(b[:portChunk])
			if n > 0 {
				if _, werr := conn.Write(b[:n]); werr != nil {
					conn.Close()
					return
				}
			}
			if err != nil {
				if errors.Is(err, io.EOF) {
					conn.CloseWrite() // the caller is done sending: the service reads EOF
				} else {
					conn.Close()
				}
				return
			}
		}
	}()

	// The sandbox → service direction reads larger chunks: under gVisor
	// each socket write costs, and a flush per 32 KiB read capped a
	// download near 25 MiB/s.
	b := make([]byte, portDownChunk)
	for {
		n, err := conn.Read(b)
		if n > 0 {
			if _, werr := w.Write(b[:n]); werr != nil {
				break
			}
			if ferr := rc.Flush(); ferr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	// The service closed its side (or the exchange broke): the answer ends
	// with the handler, so the request body is of no more use.
	conn.Close()
	r.Body.Close()
	<-upDone
}

// splicePort answers an HTTP/1.1 dial that asked for the connection
// itself (agentproto.UpgradeRawPort): 101, then the bytes both ways with
// no framing, one goroutine a direction. It ends as the streamed dial
// does: the caller's end of sending shuts down conn's write side, conn's
// end (or any error) ends both. A shutdown of the server (a save's
// quiesce, the agent stopping) closes it, as it closes its other
// connections.
func (s *Server) splicePort(w http.ResponseWriter, r *http.Request, conn *net.TCPConn) {
	nc, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		writeError(w, errdefs.Invalid("the dial asked for the connection itself, which this server cannot give: %v", err))
		return
	}
	defer nc.Close()
	nc.SetDeadline(time.Time{}) // the header's read deadline is over
	if srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server); ok {
		// One hook per server, closing the splices live at its shutdown
		// (a hook per splice would pile up for the agent's whole life).
		s.splices.hookOnce(srv)
		defer s.splices.add(nc, conn)()
	}
	if _, err := brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + agentproto.UpgradeRawPort + "\r\n\r\n"); err != nil {
		return
	}
	if err := brw.Flush(); err != nil {
		return
	}
	upDone := make(chan struct{})
	go func() {
		defer close(upDone)
		// What the server read ahead of the request's end comes first.
		_, err := io.Copy(conn, brw.Reader)
		if err != nil {
			conn.Close()
			return
		}
		conn.CloseWrite() // the caller is done sending: the service reads EOF
	}()
	b := make([]byte, portDownChunk)
	for {
		n, err := conn.Read(b)
		if n > 0 {
			if _, werr := nc.Write(b[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	conn.Close()
	nc.Close()
	<-upDone
}

// wantsRawPort reports whether r asks for the connection itself
// (agentproto.UpgradeRawPort).
func wantsRawPort(r *http.Request) bool {
	if r.ProtoMajor != 1 || !strings.EqualFold(r.Header.Get("Upgrade"), agentproto.UpgradeRawPort) {
		return false
	}
	for _, v := range r.Header.Values("Connection") {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), "upgrade") {
				return true
			}
		}
	}
	return false
}

// splices are the raw port connections (splicePort) open now, closed
// when the server they came through shuts down.
type splices struct {
	mu     sync.Mutex
	hooked map[*http.Server]bool
	open   map[net.Conn]net.Conn
}

// hookOnce registers, once per server, the hook that closes every open
// splice at its shutdown.
func (sp *splices) hookOnce(srv *http.Server) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.hooked[srv] {
		return
	}
	if sp.hooked == nil {
		sp.hooked = map[*http.Server]bool{}
	}
	sp.hooked[srv] = true
	srv.RegisterOnShutdown(func() {
		sp.mu.Lock()
		defer sp.mu.Unlock()
		for a, b := range sp.open {
			a.Close()
			b.Close()
		}
	})
}

// add notes an open splice of a and b; the returned func forgets it.
func (sp *splices) add(a, b net.Conn) func() {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.open == nil {
		sp.open = map[net.Conn]net.Conn{}
	}
	sp.open[a] = b
	return func() {
		sp.mu.Lock()
		defer sp.mu.Unlock()
		delete(sp.open, a)
	}
}
