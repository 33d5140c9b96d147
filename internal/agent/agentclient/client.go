package agentclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/nofollow"
)

// baseURL is the authority used on the wire; the socket decides the target.
const baseURL = "http://genesis-agent"

// maxErrorBody bounds how much of a non-2xx answer is read.
const maxErrorBody = 64 << 10

// Dialer opens a connection to the agent: a Unix socket today, a vsock or
// a port-forward for other backends. ctx bounds the connect only.
type Dialer func(ctx context.Context) (net.Conn, error)

// Client talks to one agent. It is safe for concurrent use; all calls share
// one HTTP/2 connection, dialled lazily and redialled when it breaks.
type Client struct {
	dial  Dialer
	name  string // where the agent is, for errors
	conns *conns
	http  *http.Client
	dials atomic.Uint64 // connections opened (Dials)

	rootsMu sync.Mutex
	roots   []string // the agent's file roots, once known (FileRoots)
}

// Dial returns a client for the agent listening on the Unix socket
// socketPath: New with a dialer of that socket, which follows no symlink
// at its last component and dials only a socket (nofollow.DialUnix).
func Dial(socketPath string) *Client {
	d := &net.Dialer{Timeout: 5 * time.Second}
	c := New(func(ctx context.Context) (net.Conn, error) {
		return nofollow.DialUnix(ctx, d, socketPath)
	})
	c.name = socketPath
	return c
}

// NewNamed is New with where the agent is named in errors.
func NewNamed(d Dialer, where string) *Client {
	c := New(d)
	c.name = where
	return c
}

// New returns a client that reaches the agent through d. It does not
// connect: the first call does.
func New(d Dialer) *Client {
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	c := &Client{dial: d, name: "its dialer"}
	tr := &http.Transport{
		Protocols: &protos,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			conn, err := d(ctx)
			if err != nil {
				return nil, err
			}
			c.dials.Add(1)
			if uc, ok := conn.(*net.UnixConn); ok {
				// Best effort, as the agent's end (agentproto.ConnWriteBuffer).
				_ = uc.SetWriteBuffer(agentproto.ConnWriteBuffer)
			}
			return conn, nil
		},
		HTTP2: &http.HTTP2Config{
			// Detect a dead agent connection instead of hanging on it.
			SendPingTimeout: 15 * time.Second,
			PingTimeout:     10 * time.Second,
			// Large DATA frames: job output streams move hundreds of MiB,
			// and under gVisor every socket write is costly.
			MaxReadFrameSize: 1 << 20,
		},
		DisableCompression: true,
	}
	c.conns = &conns{tr: tr}
	c.http = &http.Client{Transport: c.conns}
	return c
}

// Dials returns how many connections the client has opened. Where the
// sandbox can put a socket of its own at the agent's address (a Unix
// socket in a directory it writes to), only a connection opened before
// its code ran is surely the agent's: a caller compares counts to know
// whether one was opened since.
func (c *Client) Dials() uint64 { return c.dials.Load() }

// Close drops the client's connections; calls still in flight on them fail.
// The client may still be used: the next call dials again.
func (c *Client) Close() {
	c.conns.close()
}

// Ping asks the agent who it is.
func (c *Client) Ping(ctx context.Context) (agentproto.Ping, error) {
	var p agentproto.Ping
	err := c.do(ctx, http.MethodGet, agentproto.PathPing, nil, &p)
	return p, err
}

// FileRoots returns the allowed roots the agent applies to file paths
// (agentproto.Ping.FileRoots): asked once, then remembered, since an
// agent's roots never change. An agent with no usable root answers an
// empty list, which is remembered too.
func (c *Client) FileRoots(ctx context.Context) ([]string, error) {
	c.rootsMu.Lock()
	defer c.rootsMu.Unlock()
	if c.roots != nil {
		return c.roots, nil
	}
	p, err := c.Ping(ctx)
	if err != nil {
		return nil, err
	}
	c.roots = append([]string{}, p.FileRoots...)
	return c.roots, nil
}

// Exec runs one process in the sandbox and waits for its result. Canceling
// ctx makes the agent kill the job.
func (c *Client) Exec(ctx context.Context, req agentproto.ExecRequest) (agentproto.ExecResult, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return agentproto.ExecResult{}, fmt.Errorf("agentclient: encode exec request: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	var res agentproto.ExecResult
	err = c.do(ctx, http.MethodPost, agentproto.PathExec, body, &res)
	return res, err
}

// WaitReady pings the agent every poll interval until it answers or ctx
// ends; the socket appears a few milliseconds after the container starts.
func (c *Client) WaitReady(ctx context.Context, poll time.Duration) (agentproto.Ping, error) {
	return c.WaitReadyWake(ctx, poll, nil)
}

// WaitReadyWake is WaitReady that also pings at once whenever wake
// receives (the agent may have begun to listen: driver.AgentWatcher); nil
// wake only polls.
func (c *Client) WaitReadyWake(ctx context.Context, poll time.Duration, wake <-chan struct{}) (agentproto.Ping, error) {
	if poll <= 0 {
		poll = 5 * time.Millisecond
	}
	t := time.NewTimer(0)
	defer t.Stop()
	var last error
	quick := 0 // pings left at a short interval after a wake
	for {
		select {
		case <-ctx.Done():
			return agentproto.Ping{}, c.notReady(ctx, last)
		case <-t.C:
		case <-wake:
			t.Stop() // Reset below; no stale value (Go 1.23 timers)
			// The socket's name appears at its bind, a moment before
			// the listen: a refusal then is retried soon.
			quick = 4
		}
		p, err := c.Ping(ctx)
		if err == nil {
			return p, nil
		}
		if ctx.Err() != nil {
			return agentproto.Ping{}, c.notReady(ctx, last)
		}
		if !errors.Is(err, errdefs.ErrUnavailable) {
			return agentproto.Ping{}, err
		}
		last = err
		if quick > 0 {
			quick--
			t.Reset(poll / 8)
		} else {
			t.Reset(poll)
		}
	}
}

// notReady is WaitReady's error once ctx ended: ErrUnavailable, also
// matching ctx's error, with the last connection failure for context.
func (c *Client) notReady(ctx context.Context, last error) error {
	if last == nil {
		return fmt.Errorf("agentclient: agent via %s not ready: %w: %w", c.name, ctx.Err(), errdefs.ErrUnavailable)
	}
	return fmt.Errorf("agentclient: agent via %s not ready (%v): %w: %w", c.name, last, ctx.Err(), errdefs.ErrUnavailable)
}

// send performs one request and returns a 2xx response; other statuses
// become class errors. The caller closes the body.
func (c *Client) send(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, baseURL+path, rd)
	if err != nil {
		return nil, fmt.Errorf("agentclient: %s %s: %v: %w", method, path, err, errdefs.ErrInternal)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxError(method, path, ctxErr)
		}
		return nil, fmt.Errorf("agentclient: %s %s via %s: %v: %w", method, path, c.name, err, errdefs.ErrUnavailable)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, decodeError(method, path, resp)
	}
	return resp, nil
}

// ctxError is the error of a call that ended because ctx did: it matches
// ctx's error and the class ErrDeadlineExceeded or ErrUnavailable.
func ctxError(method, path string, ctxErr error) error {
	class := errdefs.ErrUnavailable
	if errors.Is(ctxErr, context.DeadlineExceeded) {
		class = errdefs.ErrDeadlineExceeded
	}
	return fmt.Errorf("agentclient: %s %s: %w: %w", method, path, ctxErr, class)
}

// do performs one JSON call; out nil discards the answer's body.
func (c *Client) do(ctx context.Context, method, path string, body []byte, out any) error {
	resp, err := c.send(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("agentclient: %s %s: %w: %w", method, path, ctx.Err(), errdefs.ErrUnavailable)
		}
		return fmt.Errorf("agentclient: %s %s: decode answer: %v: %w", method, path, err, errdefs.ErrInternal)
	}
	return nil
}

// decodeError maps a non-2xx agent answer to an error class.
func decodeError(method, path string, resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var e agentproto.Error
	msg := string(b)
	if json.Unmarshal(b, &e) == nil && e.Message != "" {
		msg = e.Message
	}
	class := errdefs.ErrInternal
	switch resp.StatusCode {
	case http.StatusBadRequest, http.StatusMethodNotAllowed:
		class = errdefs.ErrInvalidArgument
	case http.StatusNotFound:
		class = errdefs.ErrNotFound
	case http.StatusConflict:
		class = errdefs.ErrConflict
		if e.Code == errdefs.Code(errdefs.ErrFailedPrecondition) {
			class = errdefs.ErrFailedPrecondition
		}
	case http.StatusTooManyRequests:
		class = errdefs.ErrResourceExhausted
	case http.StatusServiceUnavailable:
		class = errdefs.ErrUnavailable
	case http.StatusBadGateway:
		class = errdefs.ErrBadGateway
	case http.StatusRequestEntityTooLarge:
		class = errdefs.ErrTooLarge
	case http.StatusNotImplemented:
		// What the agent cannot do here, with its reason's code.
		err := fmt.Errorf("agentclient: %s %s: agent answered %d: %s: %w", method, path, resp.StatusCode, msg, errdefs.ErrNotImplemented)
		if e.Code != "" {
			return errdefs.WithCode(e.Code, err)
		}
		return err
	}
	return newAgentError(method, path, resp.StatusCode, msg, class)
}

// agentError is a problem the agent answered: its message is the agent's
// own sentence ("write \"/workspace/x\": no space left on device"), for
// the person who asked; the class (and code, when the agent gave one) is
// for programs. An internal error keeps the call in its text, for the
// service log (a person is shown no internal error's text).
type agentError struct {
	method, path string
	status       int
	msg          string
	class        error
}

func newAgentError(method, path string, status int, msg string, class error) error {
	return &agentError{method: method, path: path, status: status, msg: msg, class: class}
}

func (e *agentError) Error() string {
	switch {
	case e.class == errdefs.ErrInternal:
		return fmt.Sprintf("agentclient: %s %s: agent answered %d: %s", e.method, e.path, e.status, e.msg)
	case e.msg == "":
		return fmt.Sprintf("the sandbox's agent answered %d", e.status)
	}
	return e.msg
}

// Unwrap returns the class of the error.
func (e *agentError) Unwrap() error { return e.class }
