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

	"github.com/coder/websocket"

	"genesis.dev/sandbox/api"
)

// TerminalOptions says which terminal OpenTerminal connects to.
type TerminalOptions struct {
	// Terminal, when set, reconnects to that terminal (its recent screen
	// is replayed) instead of starting a new shell.
	Terminal string
	// Takeover makes this connection the writer even if another one is.
	Takeover bool
	// Cols and Rows, when both are positive, are the window size.
	Cols, Rows int
}

// Terminal is one connection to a sandbox's terminal (GET
// /v1/sandboxes/{id}/terminal): Write sends input, Resize and Takeover
// control messages, Next reads the output and the service's messages until
// the exit. Write, Resize and Takeover may be called while Next runs;
// Next is called by one goroutine at a time.
type Terminal struct {
	ws     *websocket.Conn
	exited bool
	// ID is the terminal's id: OpenTerminal with it reconnects.
	ID string
	// Writer is whether this connection's input reaches the terminal (only
	// one connection writes; the others watch). Next updates it: read it
	// where Next is called.
	Writer bool
}

// TerminalEvent is what Terminal.Next reads: the terminal's output or, when
// Message is set, a control message of the service ("writer" when this
// connection's role changes, "exit" last).
type TerminalEvent struct {
	Output  []byte
	Message *TerminalMessage
}

// TerminalClosed is the error Terminal.Next returns when the connection
// ends before the terminal's exit. The terminal may still run: OpenTerminal
// with its id reconnects.
type TerminalClosed struct {
	// Status is the WebSocket close status the service gave (1011: its
	// connection to the sandbox was lost), -1 when the connection dropped
	// without one.
	Status int
	Reason string
	Err    error
}

func (e *TerminalClosed) Error() string {
	if e.Status == -1 {
		return fmt.Sprintf("terminal connection lost: %v", e.Err)
	}
	return fmt.Sprintf("terminal connection closed by the service (%d %s)", e.Status, e.Reason)
}

func (e *TerminalClosed) Unwrap() error { return e.Err }

// OpenTerminal connects to a terminal of a sandbox: a new shell on a
// pseudo-terminal, or the one opts names. It returns once the service's
// hello arrived; ctx bounds only that, the connection outlives it. A
// refused upgrade is an *APIError.
func (c *Client) OpenTerminal(ctx context.Context, sandboxID string, opts TerminalOptions) (*Terminal, error) {
	if err := ValidateBaseURL(c.baseURL); err != nil {
		return nil, err
	}
	p, err := idPath("/v1/sandboxes/", sandboxID)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	if opts.Terminal != "" {
		q.Set("terminal", opts.Terminal)
	}
	if opts.Takeover {
		q.Set("takeover", "1")
	}
	if opts.Cols > 0 && opts.Rows > 0 {
		q.Set("cols", strconv.Itoa(opts.Cols))
		q.Set("rows", strconv.Itoa(opts.Rows))
	}
	u := "ws" + strings.TrimPrefix(c.baseURL, "http") + p + "/terminal"
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	h := http.Header{}
	if c.apiKey != "" {
		h.Set("Authorization", "Bearer "+c.apiKey)
	}
	if c.userAgent != "" {
		h.Set("User-Agent", c.userAgent)
	}
	if c.actAs != "" {
		h.Set(api.HeaderActAs, c.actAs)
	}
	ws, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: c.http, HTTPHeader: h, CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			var body []byte
			if resp.Body != nil {
				body, _ = io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
			}
			return nil, newAPIError(resp.StatusCode, resp.Header, body)
		}
		return nil, fmt.Errorf("terminal of sandbox %s: %w", sandboxID, err)
	}
	ws.SetReadLimit(1 << 20)
	typ, b, err := ws.Read(ctx)
	var hello TerminalMessage
	if err != nil || typ != websocket.MessageText || json.Unmarshal(b, &hello) != nil || hello.Type != "hello" {
		ws.CloseNow()
		if err == nil {
			err = errors.New("the first message is not its hello")
		}
		return nil, fmt.Errorf("terminal of sandbox %s: %w", sandboxID, err)
	}
	return &Terminal{ws: ws, ID: hello.Terminal, Writer: hello.Writer == nil || *hello.Writer}, nil
}

// Write sends p to the terminal as typed input (ignored while this
// connection is not the writer).
func (t *Terminal) Write(ctx context.Context, p []byte) error {
	return t.ws.Write(ctx, websocket.MessageBinary, p)
}

// Resize sets the terminal's window size (the writer only).
func (t *Terminal) Resize(ctx context.Context, cols, rows int) error {
	return t.control(ctx, TerminalMessage{Type: "resize", Cols: cols, Rows: rows})
}

// Takeover makes this connection the writer.
func (t *Terminal) Takeover(ctx context.Context) error {
	return t.control(ctx, TerminalMessage{Type: "takeover"})
}

func (t *Terminal) control(ctx context.Context, m TerminalMessage) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return t.ws.Write(ctx, websocket.MessageText, b)
}

// Next reads the terminal's next output or control message. After the
// "exit" message (Code is the exit status) the connection is closed and
// Next returns io.EOF; a connection that ends before it, even with a
// normal closure, is a *TerminalClosed. A "writer" message also updates
// t.Writer.
func (t *Terminal) Next(ctx context.Context) (TerminalEvent, error) {
	for !t.exited {
		typ, data, err := t.ws.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return TerminalEvent{}, ctx.Err()
			}
			tc := &TerminalClosed{Status: int(websocket.CloseStatus(err)), Err: err}
			if ce := (websocket.CloseError{}); errors.As(err, &ce) {
				tc.Reason = ce.Reason
			}
			return TerminalEvent{}, tc
		}
		if typ == websocket.MessageBinary {
			return TerminalEvent{Output: data}, nil
		}
		var m TerminalMessage
		if json.Unmarshal(data, &m) != nil {
			continue // not ours to understand: a newer service's
		}
		switch m.Type {
		case "writer":
			t.Writer = m.Writer != nil && *m.Writer
		case "exit":
			t.exited = true
			t.ws.Close(websocket.StatusNormalClosure, "")
		}
		return TerminalEvent{Message: &m}, nil
	}
	return TerminalEvent{}, io.EOF
}

// Close ends the connection; the terminal keeps running (OpenTerminal with
// t.ID reconnects) unless it exited.
func (t *Terminal) Close() error { return t.ws.CloseNow() }
