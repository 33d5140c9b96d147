package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// The files API: every operation runs inside the sandbox, through its
// agent, confined to the workspace (/workspace; relative paths are below
// it).

// ByteRange asks for part of a download: Length bytes from Offset
// (Length 0: to the end).
type ByteRange struct {
	Offset, Length int64
}

func (r ByteRange) header() string {
	if r.Length <= 0 {
		return fmt.Sprintf("bytes=%d-", r.Offset)
	}
	return fmt.Sprintf("bytes=%d-%d", r.Offset, r.Offset+r.Length-1)
}

// Download is a streamed file or artifact. The caller closes Body.
type Download struct {
	Body io.ReadCloser
	// Status is 200, or 206 for a range.
	Status int
	// Length is the length of Body (-1 when unknown); Size the whole
	// content's (from Content-Range on a 206).
	Length, Size int64
	ETag         string
	ContentType  string
	Header       http.Header
}

// download sends a GET that answers with raw content.
func (c *Client) download(ctx context.Context, path string, q url.Values, rng *ByteRange) (*Download, error) {
	h := http.Header{"Accept": {"*/*"}}
	if rng != nil {
		h.Set("Range", rng.header())
	}
	resp, err := c.send(ctx, request{method: http.MethodGet, path: path, query: q, header: h, auth: true})
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusPartialContent {
		defer drainClose(resp.Body)
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
		return nil, newAPIError(resp.StatusCode, resp.Header, body)
	}
	d := &Download{Body: resp.Body, Status: resp.StatusCode, Length: resp.ContentLength, Size: resp.ContentLength,
		ETag: resp.Header.Get("ETag"), ContentType: resp.Header.Get("Content-Type"), Header: resp.Header}
	if resp.StatusCode == http.StatusPartialContent {
		var first, last, size int64
		if _, err := fmt.Sscanf(resp.Header.Get("Content-Range"), "bytes %d-%d/%d", &first, &last, &size); err == nil {
			d.Size = size
		}
	}
	return d, nil
}

func filesPath(sandboxID, suffix string) (string, error) {
	p, err := idPath("/v1/sandboxes/", sandboxID)
	return p + "/files" + suffix, err
}

// WriteFileOptions tune an upload.
type WriteFileOptions struct {
	// Mode is the octal permission bits ("" for 0644).
	Mode string
	// NoOverwrite makes an existing file a 409 file_exists.
	NoOverwrite bool
	// Size is the body's length when known (sent as Content-Length, so an
	// over-limit upload is refused before it is sent); 0 or -1 when unknown.
	Size int64
}

// WriteFile uploads body as the file path of a sandbox (written to a
// temporary file and renamed into place; parents are created).
func (c *Client) WriteFile(ctx context.Context, sandboxID, path string, body io.Reader, opts WriteFileOptions) (*FileWritten, error) {
	p, err := filesPath(sandboxID, "")
	if err != nil {
		return nil, err
	}
	return c.upload(ctx, p, path, body, opts)
}

// upload PUTs body as file path at route p (a sandbox's or a volume's
// files): the query carries the path and opts, the body is streamed.
func (c *Client) upload(ctx context.Context, p, path string, body io.Reader, opts WriteFileOptions) (*FileWritten, error) {
	q := url.Values{"path": {path}}
	if opts.Mode != "" {
		q.Set("mode", opts.Mode)
	}
	if opts.NoOverwrite {
		q.Set("overwrite", "false")
	}
	size := opts.Size
	if size <= 0 {
		size = -1
	}
	var v FileWritten
	if err := c.do(ctx, request{method: http.MethodPut, path: p, query: q, raw: body, rawLen: size, auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// ReadFile streams the file path of a sandbox, or the part rng names.
func (c *Client) ReadFile(ctx context.Context, sandboxID, path string, rng *ByteRange) (*Download, error) {
	p, err := filesPath(sandboxID, "")
	if err != nil {
		return nil, err
	}
	return c.download(ctx, p, url.Values{"path": {path}}, rng)
}

// StatFile describes a file (a final symlink is described, not followed).
func (c *Client) StatFile(ctx context.Context, sandboxID, path string) (*FileInfo, error) {
	p, err := filesPath(sandboxID, "/stat")
	if err != nil {
		return nil, err
	}
	var v FileInfo
	if err := c.do(ctx, request{method: http.MethodGet, path: p, query: url.Values{"path": {path}}, auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// ListFiles lists a directory down to depth levels (0: the service
// default of 1), at most limit entries (0: the default).
func (c *Client) ListFiles(ctx context.Context, sandboxID, path string, depth, limit int) (*FileList, error) {
	p, err := filesPath(sandboxID, "/list")
	if err != nil {
		return nil, err
	}
	q := url.Values{"path": {path}}
	if depth > 0 {
		q.Set("depth", strconv.Itoa(depth))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var v FileList
	if err := c.do(ctx, request{method: http.MethodGet, path: p, query: q, auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// fileOp posts a JSON body to a files route and decodes the answer.
func fileOp[T any](ctx context.Context, c *Client, sandboxID, suffix string, body any) (*T, error) {
	p, err := filesPath(sandboxID, suffix)
	if err != nil {
		return nil, err
	}
	var v T
	var out any = &v
	if _, none := any(v).(struct{}); none {
		out = nil
	}
	if err := c.do(ctx, request{method: http.MethodPost, path: p, body: body, auth: true}, out); err != nil {
		return nil, err
	}
	return &v, nil
}

// Mkdir creates a directory.
func (c *Client) Mkdir(ctx context.Context, sandboxID string, req MkdirRequest) (*FileInfo, error) {
	return fileOp[FileInfo](ctx, c, sandboxID, "/mkdir", req)
}

// MoveFile renames a file or directory inside the workspace.
func (c *Client) MoveFile(ctx context.Context, sandboxID string, req MoveRequest) (*FileInfo, error) {
	return fileOp[FileInfo](ctx, c, sandboxID, "/move", req)
}

// DeleteFile deletes a file, a symlink (not its target) or, with
// Recursive, a tree.
func (c *Client) DeleteFile(ctx context.Context, sandboxID string, req DeleteFileRequest) error {
	_, err := fileOp[struct{}](ctx, c, sandboxID, "/delete", req)
	return err
}

// ChmodFile sets a file's permission bits.
func (c *Client) ChmodFile(ctx context.Context, sandboxID string, req ChmodRequest) (*FileInfo, error) {
	return fileOp[FileInfo](ctx, c, sandboxID, "/chmod", req)
}

// SearchFiles finds files by name and/or content.
func (c *Client) SearchFiles(ctx context.Context, sandboxID string, req SearchRequest) (*SearchResult, error) {
	return fileOp[SearchResult](ctx, c, sandboxID, "/search", req)
}

// ReplaceInFiles applies a batch replace.
func (c *Client) ReplaceInFiles(ctx context.Context, sandboxID string, req ReplaceRequest) (*ReplaceResult, error) {
	return fileOp[ReplaceResult](ctx, c, sandboxID, "/replace", req)
}

// ExtractArchive unpacks a tar or tar.gz stream into the directory dir of
// a sandbox (made if missing). size is the archive's length, or -1.
func (c *Client) ExtractArchive(ctx context.Context, sandboxID, dir string, archive io.Reader, size int64) (*ExtractResult, error) {
	p, err := filesPath(sandboxID, "/extract")
	if err != nil {
		return nil, err
	}
	var v ExtractResult
	if err := c.do(ctx, request{method: http.MethodPost, path: p, query: url.Values{"path": {dir}},
		raw: archive, rawLen: size, auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// ReadArchive streams the directory dir of a sandbox as a tar. A stream
// that ends in an error is a tar cut short. The caller closes it.
func (c *Client) ReadArchive(ctx context.Context, sandboxID, dir string) (io.ReadCloser, error) {
	p, err := filesPath(sandboxID, "/archive")
	if err != nil {
		return nil, err
	}
	d, err := c.download(ctx, p, url.Values{"path": {dir}}, nil)
	if err != nil {
		return nil, err
	}
	return d.Body, nil
}
