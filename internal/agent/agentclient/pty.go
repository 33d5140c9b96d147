package agentclient

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

func terminalPath(id, action string) string {
	p := strings.Replace(agentproto.PathTerminal, "{id}", url.PathEscape(id), 1)
	if action != "" {
		p += "/" + action
	}
	return p
}

// StartTerminal starts a process on a new pseudo-terminal in the sandbox.
// The terminal runs until its process exits or DeleteTerminal; it does not
// depend on ctx or on any attachment. An existing id yields
// errdefs.ErrConflict; an invalid request or a command that cannot be run
// errdefs.ErrInvalidArgument.
func (c *Client) StartTerminal(ctx context.Context, req agentproto.TerminalStartRequest) (agentproto.TerminalInfo, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return agentproto.TerminalInfo{}, fmt.Errorf("agentclient: encode terminal request: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	var info agentproto.TerminalInfo
	err = c.do(ctx, http.MethodPost, agentproto.PathTerminals, body, &info)
	return info, err
}

// TerminalInfo describes a terminal; errdefs.ErrNotFound if the agent does
// not know it (never started, deleted or evicted after it ended).
func (c *Client) TerminalInfo(ctx context.Context, id string) (agentproto.TerminalInfo, error) {
	var info agentproto.TerminalInfo
	err := c.do(ctx, http.MethodGet, terminalPath(id, ""), nil, &info)
	return info, err
}

// ListTerminals returns every terminal the agent knows, oldest first.
func (c *Client) ListTerminals(ctx context.Context) ([]agentproto.TerminalInfo, error) {
	var infos []agentproto.TerminalInfo
	err := c.do(ctx, http.MethodGet, agentproto.PathTerminals, nil, &infos)
	return infos, err
}

// ResizeTerminal sets a terminal's window size.
func (c *Client) ResizeTerminal(ctx context.Context, id string, cols, rows int) (agentproto.TerminalInfo, error) {
	body, err := json.Marshal(agentproto.TerminalResize{Cols: cols, Rows: rows})
	if err != nil {
		return agentproto.TerminalInfo{}, fmt.Errorf("agentclient: encode resize: %v: %w", err, errdefs.ErrInternal)
	}
	var info agentproto.TerminalInfo
	err = c.do(ctx, http.MethodPost, terminalPath(id, "resize"), body, &info)
	return info, err
}

// DeleteTerminal kills a terminal's process group and forgets the terminal.
// It returns once the process is gone; errdefs.ErrNotFound if unknown.
func (c *Client) DeleteTerminal(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, terminalPath(id, ""), nil, nil)
}

// AttachOptions says where an attachment's output starts.
type AttachOptions struct {
	// Replay starts with the output the agent kept (the last
	// agentproto.TerminalBufferBytes); otherwise only live output is sent.
	Replay bool
	// Offset, if positive, resumes at that output offset (overrides Replay).
	Offset int64
}

// Attachment is a live, full-duplex connection to a terminal: Write sends
// input, Next returns output and finally the exit.
type Attachment struct {
	id     string
	in     *io.PipeWriter
	resp   *http.Response
	r      *bufio.Reader
	buf    []byte
	cancel context.CancelFunc
	ctx    context.Context
	done   bool
}

// AttachTerminal opens an attachment. It returns once the agent accepted it;
// errdefs.ErrNotFound for an unknown terminal. Canceling ctx or Close ends
// the attachment, never the terminal.
func (c *Client) AttachTerminal(ctx context.Context, id string, opts AttachOptions) (*Attachment, error) {
	path := terminalPath(id, "attach")
	switch {
	case opts.Offset > 0:
		path += "?" + agentproto.AttachOffsetQ + "=" + strconv.FormatInt(opts.Offset, 10)
	case opts.Replay:
		path += "?" + agentproto.AttachReplayQ + "=1"
	}
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+path, pr)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("agentclient: POST %s: %v: %w", path, err, errdefs.ErrInternal)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := c.http.Do(req)
	if err != nil {
		pw.Close()
		cancel()
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxError(http.MethodPost, path, ctxErr)
		}
		return nil, fmt.Errorf("agentclient: POST %s via %s: %v: %w", path, c.name, err, errdefs.ErrUnavailable)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		pw.Close()
		cancel()
		return nil, decodeError(http.MethodPost, path, resp)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != agentproto.ContentTypeRaw {
		resp.Body.Close()
		pw.Close()
		cancel()
		return nil, fmt.Errorf("agentclient: POST %s: answer of type %q, want %s: %w", path, mt, agentproto.ContentTypeRaw, errdefs.ErrInternal)
	}
	return &Attachment{id: id, in: pw, resp: resp, r: bufio.NewReaderSize(resp.Body, 64<<10), cancel: cancel, ctx: ctx}, nil
}

// Write sends input to the terminal. It blocks until the transport took
// the bytes; it fails once the attachment is closed.
func (a *Attachment) Write(p []byte) (int, error) {
	n, err := a.in.Write(p)
	if err != nil {
		return n, fmt.Errorf("agentclient: terminal %s input: %v: %w", a.id, err, errdefs.ErrUnavailable)
	}
	return n, nil
}

// Next returns the next frame: FrameStdout with output (Offset is its
// position in the terminal's output; a jump means the attachment fell
// behind and missed bytes), and last FrameExit with an ExitResult payload,
// after which Next returns io.EOF. A stream that ends without an exit
// frame yields an errdefs.ErrUnavailable error. The payload is valid until
// the next call.
func (a *Attachment) Next() (agentproto.Frame, error) {
	if a.done {
		return agentproto.Frame{}, io.EOF
	}
	fr, b, err := agentproto.ReadFrame(a.r, a.buf)
	a.buf = b
	if err != nil {
		if ctxErr := a.ctx.Err(); ctxErr != nil {
			return agentproto.Frame{}, ctxError(http.MethodPost, terminalPath(a.id, "attach"), ctxErr)
		}
		if errors.Is(err, agentproto.ErrBadFrame) {
			return agentproto.Frame{}, fmt.Errorf("agentclient: terminal %s: %w: %w", a.id, err, errdefs.ErrInternal)
		}
		if errors.Is(err, io.EOF) {
			err = errors.New("stream ended before the exit frame")
		}
		return agentproto.Frame{}, fmt.Errorf("agentclient: terminal %s: %v: %w", a.id, err, errdefs.ErrUnavailable)
	}
	if fr.Type == agentproto.FrameExit {
		a.done = true
	} else if fr.Type != agentproto.FrameStdout {
		return agentproto.Frame{}, fmt.Errorf("agentclient: terminal %s: unexpected frame type %d: %w", a.id, fr.Type, errdefs.ErrInternal)
	}
	return fr, nil
}

// Close ends the attachment (the terminal keeps running).
func (a *Attachment) Close() error {
	a.in.Close()
	a.cancel()
	return a.resp.Body.Close()
}

// DecodeExit decodes an exit frame's payload.
func DecodeExit(fr agentproto.Frame) (agentproto.ExitResult, error) {
	var x agentproto.ExitResult
	if err := json.Unmarshal(fr.Payload, &x); err != nil {
		return x, fmt.Errorf("agentclient: exit frame: %v: %w", err, errdefs.ErrInternal)
	}
	return x, nil
}
