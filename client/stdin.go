package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"genesis.dev/sandbox/api"
	"github.com/coder/websocket"
)

// WriteStdin streams r into the stdin of a job started with StdinStream,
// in one request, as r produces it; it returns how many bytes the job's
// stdin took. It does not close stdin (CloseStdin does), so several calls
// append. A job without streamed stdin fails with code stdin_not_streamed,
// an ended one with job_not_running (409); a concurrent writer with
// stdin_busy (409).
func (c *Client) WriteStdin(ctx context.Context, jobID string, r io.Reader) (int64, error) {
	var out StdinWritten
	err := c.do(ctx, request{
		method: http.MethodPut, path: "/v1/jobs/" + url.PathEscape(jobID) + "/stdin", auth: true,
		raw: r, rawLen: -1,
	}, &out)
	return out.Bytes, err
}

// CloseStdin closes a job's streamed stdin: the process reads end of file.
func (c *Client) CloseStdin(ctx context.Context, jobID string) error {
	return c.do(ctx, request{method: http.MethodPost, path: "/v1/jobs/" + url.PathEscape(jobID) + "/stdin/close", auth: true}, nil)
}

// JobAttachment is a WebSocket attached to a job (GET /v1/jobs/{id}/attach):
// Write sends stdin, CloseStdin ends it, Pump copies the output until the
// job's exit. Write and CloseStdin may be called while Pump runs.
type JobAttachment struct {
	ws       *websocket.Conn
	ctx      context.Context
	cancel   context.CancelFunc
	wmu      sync.Mutex
	HasStdin bool // the job was started with StdinStream
	// StdinErr is the last stdin failure the service reported.
	StdinErr error
}

// AttachJob attaches to a job: its output from the start (or from cursor,
// an event id of its SSE log) and, for a job started with StdinStream, its
// stdin. The attachment outlives ctx, which bounds only the dial.
func (c *Client) AttachJob(ctx context.Context, jobID string, cursor int64) (*JobAttachment, error) {
	if err := ValidateBaseURL(c.baseURL); err != nil {
		return nil, err
	}
	u := c.baseURL + "/v1/jobs/" + url.PathEscape(jobID) + "/attach"
	if cursor > 0 {
		u += "?cursor=" + strconv.FormatInt(cursor, 10)
	}
	u = "ws" + strings.TrimPrefix(u, "http")
	h := http.Header{}
	h.Set("Authorization", "Bearer "+c.apiKey)
	ws, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: c.http, HTTPHeader: h, CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
			return nil, newAPIError(resp.StatusCode, resp.Header, body)
		}
		return nil, fmt.Errorf("attach to job %s: %w", jobID, err)
	}
	ws.SetReadLimit(64 << 20)
	actx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a := &JobAttachment{ws: ws, ctx: actx, cancel: cancel}
	typ, b, err := ws.Read(ctx)
	var hello api.AttachMessage
	if err != nil || typ != websocket.MessageText || json.Unmarshal(b, &hello) != nil || hello.Type != "hello" {
		a.Close()
		return nil, fmt.Errorf("attach to job %s: no hello message: %v", jobID, err)
	}
	a.HasStdin = hello.Stdin != nil && *hello.Stdin
	return a, nil
}

// Write sends p to the job's stdin.
func (a *JobAttachment) Write(p []byte) (int, error) {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	if err := a.ws.Write(a.ctx, websocket.MessageBinary, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// CloseStdin closes the job's stdin after what was written.
func (a *JobAttachment) CloseStdin() error {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	return a.ws.Write(a.ctx, websocket.MessageText, []byte(`{"type":"close_stdin"}`))
}

// Pump copies the job's stdout and stderr into the writers until the job
// exits, and returns how it ended.
func (a *JobAttachment) Pump(stdout, stderr io.Writer) (*JobExit, error) {
	for {
		typ, b, err := a.ws.Read(a.ctx)
		if err != nil {
			var ce websocket.CloseError
			if errors.As(err, &ce) && ce.Code != websocket.StatusNormalClosure {
				return nil, fmt.Errorf("attach closed: %d %s", ce.Code, ce.Reason)
			}
			return nil, fmt.Errorf("attach ended before the job's exit: %w", err)
		}
		switch typ {
		case websocket.MessageBinary:
			if len(b) == 0 {
				continue
			}
			w := stdout
			if b[0] == api.AttachStderr {
				w = stderr
			}
			if _, err := w.Write(b[1:]); err != nil {
				return nil, err
			}
		case websocket.MessageText:
			var m api.AttachMessage
			if err := json.Unmarshal(b, &m); err != nil {
				return nil, fmt.Errorf("attach: bad message %q", b)
			}
			switch m.Type {
			case "exit":
				x := &JobExit{ExitReason: m.ExitReason, Signal: m.Signal}
				if m.ExitCode != nil {
					x.ExitCode = *m.ExitCode
				}
				return x, nil
			case "error":
				// A stdin write or close the job refused (it ended, say);
				// the output goes on to the exit.
				a.wmu.Lock()
				a.StdinErr = errors.New(m.Error)
				a.wmu.Unlock()
			}
		}
	}
}

// Close ends the attachment (the job goes on).
func (a *JobAttachment) Close() error {
	a.cancel()
	return a.ws.CloseNow()
}
