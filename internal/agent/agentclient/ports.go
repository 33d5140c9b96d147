package agentclient

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// portReadChunk is the most one read of a dialled port's answer holds.
const portReadChunk = 256 << 10

// DialPort connects to TCP 127.0.0.1:port inside the sandbox, over one
// stream of the agent connection, and returns it as a net.Conn. ctx bounds
// the connect only, as with net.Dialer.DialContext: once DialPort returned,
// the connection lives until Close.
//
// A port outside 1..65535 yields errdefs.ErrInvalidArgument; a port that
// refuses or does not answer yields errdefs.ErrBadGateway with the code
// agentproto.CodePortUnreachable (errdefs.Code), quickly.
//
// The connection supports CloseWrite() error (the service reads EOF while
// its answer still arrives) and read and write deadlines. It ends when the
// service closes its side: Read returns io.EOF and later writes fail.
func (c *Client) DialPort(ctx context.Context, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, errdefs.Invalid("agentclient: port %d is not a TCP port (1..65535)", port)
	}
	path := strings.Replace(agentproto.PathPortDial, "{port}", strconv.Itoa(port), 1)
	pc := &portConn{
		port:    port,
		wreq:    make(chan []byte),
		wres:    make(chan int),
		wclosed: make(chan struct{}),
		gone:    make(chan struct{}),
		closed:  make(chan struct{}),
		chunks:  make(chan portChunk),
		free:    make(chan struct{}),
	}
	pc.rdl.init()
	pc.wdl.init()
	// The stream must outlive ctx; ctx only bounds the wait for the answer.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	pc.cancel = cancel
	stop := context.AfterFunc(ctx, cancel)
	req, err := http.NewRequestWithContext(sctx, http.MethodPost, baseURL+path, portBody{pc})
	if err != nil {
		stop()
		cancel()
		return nil, fmt.Errorf("agentclient: POST %s: %v: %w", path, err, errdefs.ErrInternal)
	}
	req.ContentLength = -1
	req.Header.Set("Content-Type", agentproto.ContentTypeStream)
	resp, err := c.http.Do(req)
	if !stop() {
		// ctx ended while the answer was awaited (maybe just after it came).
		if err == nil {
			resp.Body.Close()
		}
		pc.shut()
		return nil, ctxError(http.MethodPost, path, ctx.Err())
	}
	if err != nil {
		pc.shut()
		return nil, fmt.Errorf("agentclient: POST %s via %s: %v: %w", path, c.name, err, errdefs.ErrUnavailable)
	}
	if resp.StatusCode != http.StatusOK {
		err := decodeCodedError(http.MethodPost, path, resp) // before the stream is reset
		resp.Body.Close()
		pc.shut()
		return nil, err
	}
	pc.body = resp.Body
	go pc.readLoop()
	return pc, nil
}

// portConn is a dialled port: writes go into the request body through a
// hand-off with the transport (no copy is kept, so a Write that times out
// leaves nothing behind), reads come from a goroutine reading the answer.
type portConn struct {
	port   int
	body   io.ReadCloser
	cancel context.CancelFunc

	// Write side: Write offers its buffer on wreq; the transport's read of
	// the request body copies from it and answers the count on wres.
	wmu       sync.Mutex
	wreq      chan []byte
	wres      chan int
	wclosed   chan struct{} // closed by CloseWrite: the request body ends
	wcloseOne sync.Once
	wdl       deadline
	gone      chan struct{} // closed when the transport stopped reading the body
	goneOnce  sync.Once

	// Read side: readLoop sends each chunk it read and waits for free
	// before reading the next into the same buffer.
	rmu     sync.Mutex
	chunks  chan portChunk
	free    chan struct{}
	pending []byte
	rerr    error
	rdl     deadline

	closed    chan struct{}
	closeOnce sync.Once
}

type portChunk struct {
	b   []byte
	err error
}

// portBody is the request body as the transport sees it.
type portBody struct{ c *portConn }

func (b portBody) Read(p []byte) (int, error) {
	c := b.c
	select {
	case q := <-c.wreq:
		n := copy(p, q)
		c.wres <- n
		return n, nil
	case <-c.wclosed:
		return 0, io.EOF
	case <-c.closed:
		return 0, net.ErrClosed
	case <-c.gone:
		return 0, net.ErrClosed
	}
}

// Close is the transport saying it reads no more of the body (the stream
// ended or broke): writes fail from now on.
func (b portBody) Close() error {
	b.c.goneOnce.Do(func() { close(b.c.gone) })
	return nil
}

func (c *portConn) readLoop() {
	buf := make([]byte, portReadChunk)
	for {
		n, err := c.body.Read(buf)
		if n == 0 && err == nil {
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			select {
			case <-c.closed:
				err = net.ErrClosed
			default:
				err = fmt.Errorf("agentclient: port %d: %v: %w", c.port, err, errdefs.ErrUnavailable)
			}
		}
		select {
		case c.chunks <- portChunk{buf[:n], err}:
		case <-c.closed:
			return
		}
		if err != nil {
			return
		}
		select {
		case <-c.free:
		case <-c.closed:
			return
		}
	}
}

// Read reads what the service sent; io.EOF once it closed its side.
func (c *portConn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if len(p) == 0 {
		return 0, nil
	}
	for len(c.pending) == 0 && c.rerr == nil {
		select {
		case <-c.closed:
			return 0, net.ErrClosed
		default:
		}
		select {
		case ch := <-c.chunks:
			c.pending, c.rerr = ch.b, ch.err
		case <-c.rdl.wait():
			return 0, os.ErrDeadlineExceeded
		case <-c.closed:
			return 0, net.ErrClosed
		}
	}
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		if len(c.pending) == 0 && c.rerr == nil {
			select {
			case c.free <- struct{}{}:
			case <-c.closed:
			}
		}
		return n, nil
	}
	return 0, c.rerr
}

// Write sends p to the service. It returns once the transport took all of
// it, or with os.ErrDeadlineExceeded (and the count taken) at the write
// deadline.
func (c *portConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	written := 0
	for len(p) > 0 {
		select {
		case <-c.closed:
			return written, net.ErrClosed
		case <-c.wclosed:
			return written, fmt.Errorf("agentclient: port %d: write after CloseWrite: %w", c.port, net.ErrClosed)
		default:
		}
		select {
		case c.wreq <- p:
			n := <-c.wres
			p = p[n:]
			written += n
		case <-c.wdl.wait():
			return written, os.ErrDeadlineExceeded
		case <-c.gone:
			return written, fmt.Errorf("agentclient: port %d: the connection has ended: %w", c.port, net.ErrClosed)
		case <-c.closed:
			return written, net.ErrClosed
		case <-c.wclosed:
			return written, fmt.Errorf("agentclient: port %d: write after CloseWrite: %w", c.port, net.ErrClosed)
		}
	}
	return written, nil
}

// CloseWrite ends what is sent: the service reads EOF, its answer keeps
// coming. Idempotent.
func (c *portConn) CloseWrite() error {
	c.wcloseOne.Do(func() { close(c.wclosed) })
	return nil
}

// Close ends both directions and the stream.
func (c *portConn) Close() error {
	c.shut()
	if c.body != nil {
		c.body.Close()
	}
	return nil
}

// shut marks the connection closed and resets its stream.
func (c *portConn) shut() {
	c.closeOnce.Do(func() {
		close(c.closed)
		c.cancel()
		c.rdl.stop()
		c.wdl.stop()
	})
}

func (c *portConn) LocalAddr() net.Addr  { return portAddr("agent") }
func (c *portConn) RemoteAddr() net.Addr { return portAddr("127.0.0.1:" + strconv.Itoa(c.port)) }

func (c *portConn) SetDeadline(t time.Time) error {
	c.rdl.set(t)
	c.wdl.set(t)
	return nil
}

func (c *portConn) SetReadDeadline(t time.Time) error  { c.rdl.set(t); return nil }
func (c *portConn) SetWriteDeadline(t time.Time) error { c.wdl.set(t); return nil }

// portAddr names an end of a dialled port.
type portAddr string

func (a portAddr) Network() string { return "agent-port" }
func (a portAddr) String() string  { return string(a) }

// deadline is a settable point in time whose channel is closed once it
// has passed. Setting another re-arms it; operations already waiting see
// the change, as net.Conn wants.
type deadline struct {
	mu    sync.Mutex
	gen   uint64 // bumped by every set, so a stale timer does nothing
	timer *time.Timer
	ch    chan struct{} // closed when the deadline passed
}

func (d *deadline) init() { d.ch = make(chan struct{}) }

// set arms the deadline at t; the zero time disarms it.
func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gen++
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	select {
	case <-d.ch:
		d.ch = make(chan struct{}) // it had passed: a fresh one
	default:
	}
	if t.IsZero() {
		return
	}
	dur := time.Until(t)
	if dur <= 0 {
		close(d.ch)
		return
	}
	gen := d.gen
	d.timer = time.AfterFunc(dur, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.gen == gen {
			close(d.ch)
		}
	})
}

// wait returns the channel closed when the deadline passes.
func (d *deadline) wait() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ch
}

func (d *deadline) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gen++
	if d.timer != nil {
		d.timer.Stop()
	}
}

// DialPortRaw is DialPort over a connection of its own to the agent
// (agentproto.UpgradeRawPort): the bytes go both ways with no framing, so
// a small exchange (a DevTools command and its answer) costs less than on
// a stream of the shared connection, most of all under gVisor. The
// connection is not one of the client's (Dials does not count it): use it
// for a port whose answers are the sandbox's anyway, never to reach the
// agent itself. Its errors are DialPort's; an agent without the upgrade
// answers errdefs.ErrNotImplemented, and the caller may then use DialPort.
func (c *Client) DialPortRaw(ctx context.Context, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, errdefs.Invalid("agentclient: port %d is not a TCP port (1..65535)", port)
	}
	path := strings.Replace(agentproto.PathPortDial, "{port}", strconv.Itoa(port), 1)
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("agentclient: POST %s via %s: %v: %w", path, c.name, err, errdefs.ErrUnavailable)
	}
	// ctx bounds the exchange up to the 101; the connection outlives it.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (net.Conn, error) {
		stop()
		conn.Close()
		if ctx.Err() != nil {
			return nil, ctxError(http.MethodPost, path, ctx.Err())
		}
		return nil, err
	}
	req, err := http.NewRequest(http.MethodPost, baseURL+path, nil)
	if err != nil {
		return fail(fmt.Errorf("agentclient: POST %s: %v: %w", path, err, errdefs.ErrInternal))
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", agentproto.UpgradeRawPort)
	if err := req.Write(conn); err != nil {
		return fail(fmt.Errorf("agentclient: POST %s via %s: %v: %w", path, c.name, err, errdefs.ErrUnavailable))
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return fail(fmt.Errorf("agentclient: POST %s via %s: %v: %w", path, c.name, err, errdefs.ErrUnavailable))
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		if resp.StatusCode == http.StatusOK { // an agent that streams instead
			resp.Body.Close()
			return fail(fmt.Errorf("agentclient: POST %s via %s: the agent does not give the connection itself: %w", path, c.name, errdefs.ErrNotImplemented))
		}
		err := decodeCodedError(http.MethodPost, path, resp)
		resp.Body.Close()
		return fail(err)
	}
	if !stop() {
		return fail(ctx.Err())
	}
	conn.SetDeadline(time.Time{})
	if br.Buffered() == 0 {
		return conn, nil
	}
	return &rawConn{Conn: conn, r: br}, nil
}

// rawConn is a raw dialled port whose first bytes were read ahead with
// the 101.
type rawConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *rawConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// CloseWrite ends what is sent, as DialPort's connection's does.
func (c *rawConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
