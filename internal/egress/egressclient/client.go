package egressclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"genesis.dev/sandbox/internal/egress"
	"genesis.dev/sandbox/internal/errdefs"
)

// baseURL is the authority used on the wire; the socket decides the target.
const baseURL = "http://genesis-egress"

// maxBody bounds how much of an answer is read.
const maxBody = 16 << 20

// Client talks to one gateway over its control socket. It is safe for
// concurrent use.
type Client struct {
	socket    string
	transport *http.Transport
	http      *http.Client
}

// Dial returns a client for the gateway listening on socketPath. It does not
// connect: the first call does, and a broken connection is redialled.
func Dial(socketPath string) *Client {
	d := &net.Dialer{Timeout: 5 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", socketPath)
		},
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &Client{socket: socketPath, transport: tr, http: &http.Client{Transport: tr}}
}

// Close drops idle connections; the client stays usable.
func (c *Client) Close() { c.transport.CloseIdleConnections() }

// PutSandbox creates or replaces the configuration of sandbox id. The new
// policy applies to every lookup and connection that starts after it
// returns.
func (c *Client) PutSandbox(ctx context.Context, id string, cfg egress.SandboxConfig) (egress.SandboxStatus, error) {
	var st egress.SandboxStatus
	err := c.do(ctx, http.MethodPut, sandboxPath(id), cfg, &st)
	return st, err
}

// DeleteSandbox forgets sandbox id and closes its listeners; deleting an
// unknown sandbox succeeds.
func (c *Client) DeleteSandbox(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, sandboxPath(id), nil, nil)
}

// ListSandboxes returns every sandbox the gateway knows.
func (c *Client) ListSandboxes(ctx context.Context) ([]egress.SandboxStatus, error) {
	var l egress.SandboxList
	err := c.do(ctx, http.MethodGet, egress.PathSandboxes, nil, &l)
	return l.Sandboxes, err
}

// Events returns up to limit events with seq > after (limit <= 0: the
// gateway's default).
func (c *Client) Events(ctx context.Context, after uint64, limit int) (egress.EventsPage, error) {
	q := url.Values{"after": {strconv.FormatUint(after, 10)}}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var p egress.EventsPage
	err := c.do(ctx, http.MethodGet, egress.PathEvents+"?"+q.Encode(), nil, &p)
	return p, err
}

// Counters returns the gateway's running totals.
func (c *Client) Counters(ctx context.Context) (egress.Counters, error) {
	var k egress.Counters
	err := c.do(ctx, http.MethodGet, egress.PathCounters, nil, &k)
	return k, err
}

// Health asks the gateway whether it is alive.
func (c *Client) Health(ctx context.Context) (egress.Health, error) {
	var h egress.Health
	err := c.do(ctx, http.MethodGet, egress.PathHealth, nil, &h)
	return h, err
}

// WaitReady polls Health every poll interval until the gateway answers or
// ctx ends (ErrUnavailable, also matching ctx's error).
func (c *Client) WaitReady(ctx context.Context, poll time.Duration) (egress.Health, error) {
	if poll <= 0 {
		poll = 10 * time.Millisecond
	}
	t := time.NewTimer(0)
	defer t.Stop()
	var last error
	for {
		select {
		case <-ctx.Done():
			return egress.Health{}, fmt.Errorf("egressclient: gateway at %s not ready (last: %v): %w: %w", c.socket, last, ctx.Err(), errdefs.ErrUnavailable)
		case <-t.C:
		}
		h, err := c.Health(ctx)
		if err == nil {
			return h, nil
		}
		if ctx.Err() == nil && !errors.Is(err, errdefs.ErrUnavailable) {
			return egress.Health{}, err
		}
		last = err
		t.Reset(poll)
	}
}

func sandboxPath(id string) string { return egress.PathSandboxes + "/" + url.PathEscape(id) }

// do performs one JSON call; in nil sends no body, out nil discards the
// answer.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var rd io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("egressclient: %s %s: encode: %v: %w", method, path, err, errdefs.ErrInvalidArgument)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, baseURL+path, rd)
	if err != nil {
		return fmt.Errorf("egressclient: %s %s: %v: %w", method, path, err, errdefs.ErrInternal)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			class := errdefs.ErrUnavailable
			if errors.Is(ctxErr, context.DeadlineExceeded) {
				class = errdefs.ErrDeadlineExceeded
			}
			return fmt.Errorf("egressclient: %s %s: %w: %w", method, path, ctxErr, class)
		}
		return fmt.Errorf("egressclient: %s %s via %s: %v: %w", method, path, c.socket, err, errdefs.ErrUnavailable)
	}
	defer resp.Body.Close()
	body := io.LimitReader(resp.Body, maxBody)
	if resp.StatusCode/100 != 2 {
		return decodeError(method, path, resp.StatusCode, body)
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		io.Copy(io.Discard, body)
		return nil
	}
	if err := json.NewDecoder(body).Decode(out); err != nil {
		return fmt.Errorf("egressclient: %s %s: decode answer: %v: %w", method, path, err, errdefs.ErrInternal)
	}
	return nil
}

// statusClass maps the gateway's statuses back to error classes.
var statusClass = map[int]error{
	http.StatusBadRequest:            errdefs.ErrInvalidArgument,
	http.StatusNotFound:              errdefs.ErrNotFound,
	http.StatusConflict:              errdefs.ErrConflict,
	http.StatusRequestEntityTooLarge: errdefs.ErrTooLarge,
	http.StatusTooManyRequests:       errdefs.ErrResourceExhausted,
	http.StatusServiceUnavailable:    errdefs.ErrUnavailable,
	http.StatusGatewayTimeout:        errdefs.ErrDeadlineExceeded,
}

func decodeError(method, path string, status int, body io.Reader) error {
	b, _ := io.ReadAll(io.LimitReader(body, 64<<10))
	var e egress.Error
	msg := string(b)
	if json.Unmarshal(b, &e) == nil && e.Message != "" {
		msg = e.Message
	}
	class, ok := statusClass[status]
	if !ok {
		class = errdefs.ErrInternal
	}
	err := fmt.Errorf("egressclient: %s %s: gateway answered %d: %s: %w", method, path, status, msg, class)
	if e.Code != "" {
		err = errdefs.WithCode(e.Code, err)
	}
	return err
}
