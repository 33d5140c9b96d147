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
	"net/url"
	"strconv"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// bulkThreshold is the size above which a transfer goes over a connection
// of its own speaking HTTP/1.1: under gVisor the agent's HTTP/2 server moves
// bulk data an order of magnitude slower (every DATA frame is a hand-off
// between goroutines and a socket write from a fresh one), measured at
// 3–60 MiB/s against 27–155 MiB/s for HTTP/1.1 on the same socket. Small
// transfers stay on the shared HTTP/2 connection (no dial).
const bulkThreshold = 256 << 10

// bulkClient returns an HTTP/1.1 client whose one connection to the agent
// is closed when the transfer ends.
func (c *Client) bulkClient() *http.Client {
	var protos http.Protocols
	protos.SetHTTP1(true)
	return &http.Client{Transport: &http.Transport{
		Protocols: &protos,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return c.dial(ctx)
		},
		DisableKeepAlives:  true,
		DisableCompression: true,
		WriteBufferSize:    256 << 10,
		ReadBufferSize:     256 << 10,
	}}
}

// WriteFileRequest says where and how WriteFile writes.
type WriteFileRequest struct {
	Path      string
	Mode      string // octal; "" for 0644
	Overwrite bool
	// MaxBytes is the most the agent accepts (it refuses a larger announced
	// Size before writing anything); < 0 for no limit.
	MaxBytes int64
	// Size is the body's length when known, else -1.
	Size int64
}

// abortGrace is how long an upload whose ctx has ended still waits for the
// agent's answer to its abort (see WriteFile).
const abortGrace = 10 * time.Second

// WriteFile streams body into a file in the sandbox: the agent writes a
// temporary file next to it and renames it into place, so the target is
// either untouched or whole. If body fails or ctx ends first, the upload
// is ended with agentproto.TrailerUploadAbort and WriteFile waits (up to
// abortGrace past ctx's end) for the agent's answer, which it gives after
// removing what it wrote: when WriteFile returns that error, nothing of the
// upload is left in the sandbox. The error wraps body's error.
func (c *Client) WriteFile(ctx context.Context, req WriteFileRequest, body io.Reader) (agentproto.FileWriteResult, error) {
	q := url.Values{agentproto.QueryPath: {req.Path}, agentproto.QueryOverwrite: {strconv.FormatBool(req.Overwrite)}}
	if req.Mode != "" {
		q.Set(agentproto.QueryMode, req.Mode)
	}
	if req.MaxBytes >= 0 {
		q.Set(agentproto.QueryMaxBytes, strconv.FormatInt(req.MaxBytes, 10))
	}
	target := agentproto.PathFiles + "?" + q.Encode()
	rctx, cancel := withGrace(ctx, abortGrace)
	defer cancel()
	ab := &abortableBody{ctx: ctx, r: body, trailer: http.Header{agentproto.TrailerUploadAbort: nil}, chunk: chunkSize(req.Size)}
	hreq, err := http.NewRequestWithContext(rctx, http.MethodPut, baseURL+target, ab)
	if err != nil {
		return agentproto.FileWriteResult{}, fmt.Errorf("agentclient: PUT %s: %v: %w", agentproto.PathFiles, err, errdefs.ErrInternal)
	}
	// A length of its own would keep the body from ending early with the
	// abort trailer: the size travels in a header.
	hreq.ContentLength, hreq.Trailer = -1, ab.trailer
	if req.Size >= 0 {
		hreq.Header.Set(agentproto.HeaderUploadSize, strconv.FormatInt(req.Size, 10))
	}
	if req.Size == 0 {
		hreq.Body, hreq.ContentLength, hreq.Trailer = http.NoBody, 0, nil
	}
	hreq.Header.Set("Content-Type", "application/octet-stream")
	hc := c.http
	if req.Size < 0 || req.Size > bulkThreshold {
		hc = c.bulkClient()
	}
	resp, err := c.fileRoundTrip(rctx, hc, hreq)
	if aerr := ab.failed(); aerr != nil {
		if resp != nil {
			resp.Body.Close()
		}
		if ctx.Err() != nil && errors.Is(aerr, ctx.Err()) {
			return agentproto.FileWriteResult{}, ctxError(http.MethodPut, agentproto.PathFiles, aerr)
		}
		return agentproto.FileWriteResult{}, fmt.Errorf("agentclient: PUT %s: the upload's body failed (agent: %v): %w", agentproto.PathFiles, err, aerr)
	}
	if err != nil {
		return agentproto.FileWriteResult{}, err
	}
	defer resp.Body.Close()
	var res agentproto.FileWriteResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return res, fmt.Errorf("agentclient: PUT %s: decode answer: %v: %w", agentproto.PathFiles, err, errdefs.ErrInternal)
	}
	return res, nil
}

// withGrace returns a context that ends grace after ctx ends (with its
// values), and its cancel.
func withGrace(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	gctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		select {
		case <-ctx.Done():
		case <-gctx.Done():
			return
		}
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-gctx.Done():
		}
	}()
	return gctx, cancel
}

// abortableBody is an upload's body as sent: when its source fails or ctx
// ends, it ends (io.EOF) with the reason in its trailer instead, so the
// agent hears of the failure and answers.
type abortableBody struct {
	ctx     context.Context
	r       io.Reader
	trailer http.Header

	chunk int // bytes per write (WriteTo)

	mu  sync.Mutex
	err error // why it was aborted
}

func (b *abortableBody) Read(p []byte) (int, error) {
	if err := b.failed(); err != nil {
		return 0, io.EOF
	}
	if err := b.ctx.Err(); err != nil {
		return 0, b.abort(err)
	}
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		return n, b.abort(err)
	}
	return n, err
}

// WriteTo sends the body in writes of up to b.chunk bytes. The transport
// sends each write as one chunk and flushes it, and every chunk costs the
// agent a read: under gVisor, 32 KiB chunks (io.Copy's) halve the upload
// rate.
func (b *abortableBody) WriteTo(w io.Writer) (int64, error) {
	buf := make([]byte, b.chunk)
	var n int64
	for {
		m := 0
		var err error
		for m < len(buf) && err == nil {
			var k int
			k, err = b.Read(buf[m:])
			m += k
		}
		if m > 0 {
			if _, werr := w.Write(buf[:m]); werr != nil {
				return n, werr
			}
			n += int64(m)
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// chunkSize is the chunk size of an upload of size bytes (< 0: unknown).
func chunkSize(size int64) int {
	const max = 1 << 20
	if size < 0 || size > max {
		return max
	}
	return int(size) + 1 // the last read sees the end
}

// abort records why the body ended early, sets the trailer and returns
// io.EOF. The transport reads the trailer after the body's io.EOF, in the
// goroutine that read the body.
func (b *abortableBody) abort(err error) error {
	b.mu.Lock()
	b.err = err
	b.mu.Unlock()
	why := "the sender's source failed"
	if b.ctx.Err() != nil {
		why = "the sender's context ended"
	}
	b.trailer.Set(agentproto.TrailerUploadAbort, why)
	return io.EOF
}

func (b *abortableBody) failed() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// FileResponse is a file read in flight: Status is 200, 206, 304, 412 or
// 416 (the agent's http.ServeContent decided); the caller closes Body.
type FileResponse struct {
	Status int
	Header http.Header
	Body   io.ReadCloser
}

// ReadFile opens a file of the sandbox for reading with method GET or HEAD.
// cond carries the caller's Range, If-Range, If-None-Match,
// If-Modified-Since, If-Match and If-Unmodified-Since headers; the agent
// answers them against the file it opened.
func (c *Client) ReadFile(ctx context.Context, method, path string, cond http.Header) (*FileResponse, error) {
	resp, err := c.readFile(ctx, c.http, method, path, cond)
	if err != nil {
		return nil, err
	}
	if method == http.MethodGet && resp.ContentLength > bulkThreshold {
		// Big: ask again over a connection of its own (see bulkThreshold).
		resp.Body.Close()
		if resp, err = c.readFile(ctx, c.bulkClient(), method, path, cond); err != nil {
			return nil, err
		}
	}
	return &FileResponse{Status: resp.StatusCode, Header: resp.Header, Body: resp.Body}, nil
}

func (c *Client) readFile(ctx context.Context, hc *http.Client, method, path string, cond http.Header) (*http.Response, error) {
	target := agentproto.PathFiles + "?" + url.Values{agentproto.QueryPath: {path}}.Encode()
	hreq, err := http.NewRequestWithContext(ctx, method, baseURL+target, nil)
	if err != nil {
		return nil, fmt.Errorf("agentclient: %s %s: %v: %w", method, agentproto.PathFiles, err, errdefs.ErrInvalidArgument)
	}
	for _, k := range []string{"Range", "If-Range", "If-None-Match", "If-Modified-Since", "If-Match", "If-Unmodified-Since"} {
		if v, ok := cond[k]; ok {
			hreq.Header[k] = v
		}
	}
	resp, err := hc.Do(hreq)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxError(method, agentproto.PathFiles, ctxErr)
		}
		return nil, fmt.Errorf("agentclient: %s %s via %s: %v: %w", method, agentproto.PathFiles, c.name, err, errdefs.ErrUnavailable)
	}
	switch resp.StatusCode {
	case http.StatusOK, http.StatusPartialContent, http.StatusNotModified,
		http.StatusPreconditionFailed, http.StatusRequestedRangeNotSatisfiable:
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, decodeCodedError(method, agentproto.PathFiles, resp)
}

// StatFile describes a file without following a final symlink.
func (c *Client) StatFile(ctx context.Context, path string) (agentproto.FileInfo, error) {
	var info agentproto.FileInfo
	err := c.fileCall(ctx, http.MethodGet, agentproto.PathFilesStat+"?"+url.Values{agentproto.QueryPath: {path}}.Encode(), nil, &info)
	return info, err
}

// ListFiles lists a directory down to depth levels, at most limit entries
// (0 for the agent's defaults).
func (c *Client) ListFiles(ctx context.Context, path string, depth, limit int) (agentproto.FileList, error) {
	q := url.Values{agentproto.QueryPath: {path}}
	if depth > 0 {
		q.Set(agentproto.QueryDepth, strconv.Itoa(depth))
	}
	if limit > 0 {
		q.Set(agentproto.QueryLimit, strconv.Itoa(limit))
	}
	var list agentproto.FileList
	err := c.fileCall(ctx, http.MethodGet, agentproto.PathFilesList+"?"+q.Encode(), nil, &list)
	return list, err
}

// Mkdir creates a directory (by default with its parents).
func (c *Client) Mkdir(ctx context.Context, req agentproto.MkdirRequest) (agentproto.FileInfo, error) {
	var info agentproto.FileInfo
	err := c.fileCall(ctx, http.MethodPost, agentproto.PathFilesMkdir, req, &info)
	return info, err
}

// Move renames a file or directory within one allowed root.
func (c *Client) Move(ctx context.Context, req agentproto.MoveRequest) (agentproto.FileInfo, error) {
	var info agentproto.FileInfo
	err := c.fileCall(ctx, http.MethodPost, agentproto.PathFilesMove, req, &info)
	return info, err
}

// DeleteFile removes a file, symlink or directory (a tree with Recursive).
func (c *Client) DeleteFile(ctx context.Context, req agentproto.DeleteRequest) error {
	return c.fileCall(ctx, http.MethodPost, agentproto.PathFilesDelete, req, nil)
}

// Chmod sets a file's permission bits.
func (c *Client) Chmod(ctx context.Context, req agentproto.ChmodRequest) (agentproto.FileInfo, error) {
	var info agentproto.FileInfo
	err := c.fileCall(ctx, http.MethodPost, agentproto.PathFilesChmod, req, &info)
	return info, err
}

// fileCall performs one JSON file operation; target is path and query.
func (c *Client) fileCall(ctx context.Context, method, target string, in, out any) error {
	var rd io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("agentclient: encode %s request: %v: %w", target, err, errdefs.ErrInvalidArgument)
		}
		rd = bytes.NewReader(b)
	}
	hreq, err := http.NewRequestWithContext(ctx, method, baseURL+target, rd)
	if err != nil {
		return fmt.Errorf("agentclient: %s %s: %v: %w", method, target, err, errdefs.ErrInvalidArgument)
	}
	if in != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.fileRoundTrip(ctx, c.http, hreq)
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
			return ctxError(method, hreq.URL.Path, ctx.Err())
		}
		return fmt.Errorf("agentclient: %s %s: decode answer: %v: %w", method, hreq.URL.Path, err, errdefs.ErrInternal)
	}
	return nil
}

// fileRoundTrip sends hreq and returns a 2xx answer; other statuses become
// class errors that keep the agent's problem code.
func (c *Client) fileRoundTrip(ctx context.Context, hc *http.Client, hreq *http.Request) (*http.Response, error) {
	method, path := hreq.Method, hreq.URL.Path
	resp, err := hc.Do(hreq)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxError(method, path, ctxErr)
		}
		return nil, fmt.Errorf("agentclient: %s %s via %s: %w: %w", method, path, c.name, err, errdefs.ErrUnavailable)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, decodeCodedError(method, path, resp)
	}
	return resp, nil
}

// decodeCodedError maps a non-2xx answer to its class and keeps the
// agent's problem code (path_outside_root, port_unreachable…).
func decodeCodedError(method, path string, resp *http.Response) error {
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
	case http.StatusForbidden:
		class = errdefs.ErrPermissionDenied
	case http.StatusNotFound:
		class = errdefs.ErrNotFound
	case http.StatusConflict:
		class = classOfCode(e.Code, errdefs.ErrConflict)
	case http.StatusRequestEntityTooLarge:
		class = errdefs.ErrTooLarge
	case http.StatusTooManyRequests:
		class = errdefs.ErrResourceExhausted
	case http.StatusServiceUnavailable:
		class = errdefs.ErrUnavailable
	case http.StatusBadGateway:
		class = errdefs.ErrBadGateway
	}
	err := newAgentError(method, path, resp.StatusCode, msg, class)
	if e.Code != "" && e.Code != "internal" {
		err = errdefs.WithCode(e.Code, err)
	}
	return err
}

// classOfCode is the class of an agent problem code that a status alone
// does not tell (409 is conflict or failed precondition), else def.
func classOfCode(code string, def error) error {
	switch code {
	case errdefs.Code(errdefs.ErrFailedPrecondition), agentproto.CodeStdinNotStreamed, agentproto.CodeJobNotRunning, agentproto.CodeStdinClosed:
		return errdefs.ErrFailedPrecondition
	case agentproto.CodeStdinBusy:
		return errdefs.ErrConflict
	}
	return def
}

// ExtractArchive streams a tar or tar.gz into the directory dir of the
// sandbox, over a connection of its own. The agent refuses entries that
// would land or point outside the allowed root and stops at the first; at
// most maxBytes of file content are written (< 0: no limit).
func (c *Client) ExtractArchive(ctx context.Context, dir string, maxBytes int64, maxEntries int, size int64, body io.Reader) (agentproto.ExtractResult, error) {
	q := url.Values{agentproto.QueryPath: {dir}}
	if maxBytes >= 0 {
		q.Set(agentproto.QueryMaxBytes, strconv.FormatInt(maxBytes, 10))
	}
	if maxEntries > 0 {
		q.Set(agentproto.QueryMaxEntries, strconv.Itoa(maxEntries))
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+agentproto.PathFilesExtract+"?"+q.Encode(), body)
	if err != nil {
		return agentproto.ExtractResult{}, fmt.Errorf("agentclient: POST %s: %v: %w", agentproto.PathFilesExtract, err, errdefs.ErrInternal)
	}
	hreq.ContentLength = size
	hreq.Header.Set("Content-Type", "application/x-tar")
	resp, err := c.fileRoundTrip(ctx, c.bulkClient(), hreq)
	if err != nil {
		return agentproto.ExtractResult{}, err
	}
	defer resp.Body.Close()
	var res agentproto.ExtractResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return res, fmt.Errorf("agentclient: POST %s: decode answer: %v: %w", agentproto.PathFilesExtract, err, errdefs.ErrInternal)
	}
	return res, nil
}

// ReadArchive streams the directory dir of the sandbox as a tar, over a
// connection of its own. The caller closes the body; a body that ends in
// an error (not io.EOF) is a tar cut short.
func (c *Client) ReadArchive(ctx context.Context, dir string) (io.ReadCloser, error) {
	target := agentproto.PathFilesArchive + "?" + url.Values{agentproto.QueryPath: {dir}}.Encode()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+target, nil)
	if err != nil {
		return nil, fmt.Errorf("agentclient: GET %s: %v: %w", agentproto.PathFilesArchive, err, errdefs.ErrInternal)
	}
	resp, err := c.fileRoundTrip(ctx, c.bulkClient(), hreq)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// SearchFiles finds files by name and/or lines by content.
func (c *Client) SearchFiles(ctx context.Context, req agentproto.SearchRequest) (agentproto.SearchResult, error) {
	var res agentproto.SearchResult
	err := c.fileCall(ctx, http.MethodPost, agentproto.PathFilesSearch, req, &res)
	return res, err
}

// ReplaceInFiles applies a batch replace.
func (c *Client) ReplaceInFiles(ctx context.Context, req agentproto.ReplaceRequest) (agentproto.ReplaceResult, error) {
	var res agentproto.ReplaceResult
	err := c.fileCall(ctx, http.MethodPost, agentproto.PathFilesReplace, req, &res)
	return res, err
}
