package files

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/agent/agentclient"
	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
)

// sandboxes is what the gateway needs of the control layer.
type sandboxes interface {
	Attach(ctx context.Context, tenant, id string, o control.AttachOptions) (*control.Attachment, error)
}

// Config wires a Gateway.
type Config struct {
	// Sandboxes attaches to running sandboxes (a *control.Service).
	Sandboxes sandboxes
	// Limits are limits.files of the configuration.
	Limits config.FileLimits
	Logger *slog.Logger
}

// Gateway is the file API of running sandboxes: it applies the path policy
// and the limits on the service side and calls the sandbox's agent, which
// applies the path policy again inside the sandbox.
type Gateway struct {
	sbx sandboxes
	lim config.FileLimits
	log *slog.Logger
}

// New validates cfg and returns a Gateway.
func New(cfg Config) (*Gateway, error) {
	switch {
	case cfg.Sandboxes == nil:
		return nil, fmt.Errorf("files: nil sandboxes: %w", errdefs.ErrInvalidArgument)
	case cfg.Limits.MaxUploadBytes <= 0 || cfg.Limits.MaxPathBytes <= 0 || cfg.Limits.MaxFilesPerCall <= 0 ||
		cfg.Limits.CallTimeout <= 0 || cfg.Limits.TransferTimeout <= 0:
		return nil, errdefs.Invalid("files: limits %+v must be positive", cfg.Limits)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Gateway{sbx: cfg.Sandboxes, lim: cfg.Limits, log: cfg.Logger}, nil
}

// Limits returns the limits of the file operations.
func (g *Gateway) Limits() config.FileLimits { return g.lim }

func invalid(format string, args ...any) error {
	return errdefs.Invalid(format, args...)
}

// fileRoots are the allowed roots of a sandbox's file operations: its
// profile's file roots (the agent in the sandbox was given the same), or,
// when they name the sandbox user's home (agentproto.HomeRoot), which only
// the agent can resolve, the roots the agent itself applies. An agent that
// reports none (one started before agents reported them) is checked
// against the profile's other roots; it applies its own anyway. Never
// empty.
func fileRoots(ctx context.Context, a *control.Attachment) ([]string, error) {
	roots := []string{config.DefaultFileRoot}
	if a.Profile != nil {
		roots = a.Profile.Roots()
	}
	if slices.Contains(roots, agentproto.HomeRoot) {
		reported, err := a.Agent.FileRoots(ctx)
		if err != nil {
			return nil, err
		}
		if len(reported) > 0 {
			roots = reported
		} else {
			roots = slices.DeleteFunc(slices.Clone(roots), func(r string) bool { return r == agentproto.HomeRoot })
		}
	}
	if len(roots) == 0 {
		return nil, errdefs.WithCode(agentproto.CodePathOutsideRoot, fmt.Errorf(
			"sandbox %s has no usable file root: %w", a.Sandbox.ID, errdefs.ErrInvalidArgument))
	}
	return roots, nil
}

// filePath applies the path policy on the service side too, so a bad path
// is refused before a body is streamed; the agent applies it again (and
// resolves symlinks) inside the sandbox. It returns the canonical absolute
// path.
func (g *Gateway) filePath(roots []string, p string) (string, error) {
	return resolveFilePath(roots, g.lim.MaxPathBytes, p)
}

// resolveFilePath is the service's path policy: at most max bytes, then
// agentproto.ResolvePath.
func resolveFilePath(roots []string, max int, p string) (string, error) {
	if err := checkPathLen(max, p); err != nil {
		return "", err
	}
	root, rel, err := agentproto.ResolvePath(roots, p)
	if err != nil {
		return "", err
	}
	return agentproto.JoinRoot(root, rel), nil
}

// checkPathLen refuses a path longer than limits.files.max_path_bytes.
func checkPathLen(max int, p string) error {
	if len(p) > max {
		return errdefs.WithCode(agentproto.CodePathTooLong, fmt.Errorf(
			"path is %d bytes, over the %d-byte limit: %w", len(p), max, errdefs.ErrInvalidArgument))
	}
	return nil
}

// fileSandbox attaches to the running sandbox of tenant whose files are
// asked for, and applies its path policy to each of paths in place.
func (g *Gateway) fileSandbox(ctx context.Context, tenant, id string, paths ...*string) (*control.Attachment, error) {
	att, err := g.sbx.Attach(ctx, tenant, id, control.AttachOptions{})
	if err != nil {
		return nil, err
	}
	att.Release() // file calls hold no busy accounting
	roots, err := fileRoots(ctx, att)
	if err != nil {
		return nil, err
	}
	for _, p := range paths {
		if *p, err = g.filePath(roots, *p); err != nil {
			return nil, err
		}
	}
	return att, nil
}

// WriteFileInput is one upload.
type WriteFileInput struct {
	Tenant    string
	SandboxID string
	Path      string
	Mode      string // octal; "" for 0644
	Overwrite bool
	// Size is the body's announced length, -1 when unknown.
	Size int64
	Body io.Reader
}

// bodyReader remembers the error its reader failed with, so a failed
// upload can tell the caller's fault (too large, gone) from the agent'g.
type bodyReader struct {
	r   io.Reader
	mu  sync.Mutex
	err error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		b.mu.Lock()
		b.err = err
		b.mu.Unlock()
	}
	return n, err
}

func (b *bodyReader) failed() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// WriteFile streams an upload into a file of the sandbox through its agent
// (temp file + rename inside the sandbox). A body announced or found larger
// than MaxUploadBytes is refused with ErrTooLarge; an announced one before
// anything is sent.
func (g *Gateway) WriteFile(ctx context.Context, in WriteFileInput) (agentproto.FileWriteResult, error) {
	lim := g.Limits()
	if _, err := agentproto.ParseMode(in.Mode, 0o644); err != nil {
		return agentproto.FileWriteResult{}, err
	}
	if in.Size > lim.MaxUploadBytes {
		return agentproto.FileWriteResult{}, errdefs.WithCode(agentproto.CodeUploadTooLarge, fmt.Errorf(
			"upload of %d bytes is over the %d-byte limit: %w", in.Size, lim.MaxUploadBytes, errdefs.ErrTooLarge))
	}
	p := in.Path
	att, err := g.fileSandbox(ctx, in.Tenant, in.SandboxID, &p)
	if err != nil {
		return agentproto.FileWriteResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, lim.TransferTimeout)
	defer cancel()
	return g.writeFile(ctx, att.Agent, agentclient.WriteFileRequest{
		Path: p, Mode: in.Mode, Overwrite: in.Overwrite, MaxBytes: lim.MaxUploadBytes, Size: in.Size,
	}, in.Body)
}

// writeFile streams body into a file of a running sandbox, telling the
// caller's faults (too large, cut short) from the agent'g.
func (g *Gateway) writeFile(ctx context.Context, ag *agentclient.Client, req agentclient.WriteFileRequest, r io.Reader) (agentproto.FileWriteResult, error) {
	body := &bodyReader{r: r}
	res, err := ag.WriteFile(ctx, req, body)
	if err != nil {
		if berr := body.failed(); berr != nil {
			var mbe *http.MaxBytesError
			if errors.As(berr, &mbe) || errdefs.Is(berr, errdefs.ErrTooLarge) {
				return res, errdefs.WithCode(agentproto.CodeUploadTooLarge, fmt.Errorf(
					"upload is over its limit; nothing was written: %w", errdefs.ErrTooLarge))
			}
			return res, fmt.Errorf("reading the upload: %v; nothing was written: %w", berr, errdefs.ErrInvalidArgument)
		}
		return res, err
	}
	return res, nil
}

// ReadFile opens a file of the sandbox for a download. method is GET or
// HEAD; cond carries the caller's Range and conditional headers, which the
// agent answers against the file it opened. The caller closes the body.
// The returned cancel ends the transfer's deadline; call it when done.
func (g *Gateway) ReadFile(ctx context.Context, tenant, id, method, path string, cond http.Header) (*agentclient.FileResponse, context.CancelFunc, error) {
	att, err := g.fileSandbox(ctx, tenant, id, &path)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, g.Limits().TransferTimeout)
	fr, err := att.Agent.ReadFile(ctx, method, path, cond)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	return fr, cancel, nil
}

// fileCall runs one metadata call against the agent of a running sandbox.
func (g *Gateway) fileCall(ctx context.Context, tenant, id string, paths []*string, call func(context.Context, *agentclient.Client) error) error {
	att, err := g.fileSandbox(ctx, tenant, id, paths...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, g.Limits().CallTimeout)
	defer cancel()
	return call(ctx, att.Agent)
}

// StatFile describes a file (a final symlink is described, not followed).
func (g *Gateway) StatFile(ctx context.Context, tenant, id, path string) (agentproto.FileInfo, error) {
	var info agentproto.FileInfo
	err := g.fileCall(ctx, tenant, id, []*string{&path}, func(ctx context.Context, c *agentclient.Client) (err error) {
		info, err = c.StatFile(ctx, path)
		return err
	})
	return info, err
}

// ListFiles lists a directory down to depth levels, at most limit entries
// (0: the defaults, 1 level and agentproto.DefaultListLimit entries).
func (g *Gateway) ListFiles(ctx context.Context, tenant, id, path string, depth, limit int) (agentproto.FileList, error) {
	switch {
	case depth < 0 || depth > agentproto.MaxListDepth:
		return agentproto.FileList{}, invalid("depth must be between 1 and %d, got %d", agentproto.MaxListDepth, depth)
	case limit < 0 || limit > agentproto.MaxListLimit:
		return agentproto.FileList{}, invalid("limit must be between 1 and %d, got %d", agentproto.MaxListLimit, limit)
	}
	var list agentproto.FileList
	err := g.fileCall(ctx, tenant, id, []*string{&path}, func(ctx context.Context, c *agentclient.Client) (err error) {
		list, err = c.ListFiles(ctx, path, depth, limit)
		return err
	})
	return list, err
}

// Mkdir creates a directory, by default with its parents.
func (g *Gateway) Mkdir(ctx context.Context, tenant, id string, req agentproto.MkdirRequest) (agentproto.FileInfo, error) {
	if _, err := agentproto.ParseMode(req.Mode, 0o755); err != nil {
		return agentproto.FileInfo{}, err
	}
	var info agentproto.FileInfo
	err := g.fileCall(ctx, tenant, id, []*string{&req.Path}, func(ctx context.Context, c *agentclient.Client) (err error) {
		info, err = c.Mkdir(ctx, req)
		return err
	})
	return info, err
}

// MoveFile renames a file or directory inside the workspace.
func (g *Gateway) MoveFile(ctx context.Context, tenant, id string, req agentproto.MoveRequest) (agentproto.FileInfo, error) {
	var info agentproto.FileInfo
	err := g.fileCall(ctx, tenant, id, []*string{&req.From, &req.To}, func(ctx context.Context, c *agentclient.Client) (err error) {
		info, err = c.Move(ctx, req)
		return err
	})
	return info, err
}

// DeleteFile removes a file, symlink or empty directory, or with Recursive
// a whole tree (symlinks are removed, never followed).
func (g *Gateway) DeleteFile(ctx context.Context, tenant, id string, req agentproto.DeleteRequest) error {
	return g.fileCall(ctx, tenant, id, []*string{&req.Path}, func(ctx context.Context, c *agentclient.Client) error {
		return c.DeleteFile(ctx, req)
	})
}

// ChmodFile sets a file's permission bits.
func (g *Gateway) ChmodFile(ctx context.Context, tenant, id string, req agentproto.ChmodRequest) (agentproto.FileInfo, error) {
	if req.Mode == "" {
		return agentproto.FileInfo{}, errdefs.WithCode(agentproto.CodeInvalidMode, invalid("mode is required"))
	}
	if _, err := agentproto.ParseMode(req.Mode, 0); err != nil {
		return agentproto.FileInfo{}, err
	}
	var info agentproto.FileInfo
	err := g.fileCall(ctx, tenant, id, []*string{&req.Path}, func(ctx context.Context, c *agentclient.Client) (err error) {
		info, err = c.Chmod(ctx, req)
		return err
	})
	return info, err
}

// ExtractArchive streams a tar or tar.gz upload into the directory dir of
// the sandbox (made if missing). The agent refuses entries that would land
// or point outside the workspace and stops at the first. The upload and the
// content it unpacks to are each bounded by MaxUploadBytes.
func (g *Gateway) ExtractArchive(ctx context.Context, tenant, id, dir string, size int64, body io.Reader) (agentproto.ExtractResult, error) {
	lim := g.Limits()
	if size > lim.MaxUploadBytes {
		return agentproto.ExtractResult{}, errdefs.WithCode(agentproto.CodeUploadTooLarge, fmt.Errorf(
			"archive of %d bytes is over the %d-byte limit: %w", size, lim.MaxUploadBytes, errdefs.ErrTooLarge))
	}
	att, err := g.fileSandbox(ctx, tenant, id, &dir)
	if err != nil {
		return agentproto.ExtractResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, lim.TransferTimeout)
	defer cancel()
	br := &bodyReader{r: body}
	res, err := att.Agent.ExtractArchive(ctx, dir, lim.MaxUploadBytes, min(lim.MaxArchiveEntries, agentproto.MaxArchiveEntries), size, br)
	if err != nil {
		if berr := br.failed(); berr != nil {
			var mbe *http.MaxBytesError
			if errors.As(berr, &mbe) {
				return res, errdefs.WithCode(agentproto.CodeUploadTooLarge, fmt.Errorf(
					"archive is over the %d-byte limit: %w", lim.MaxUploadBytes, errdefs.ErrTooLarge))
			}
			return res, fmt.Errorf("reading the archive: %v: %w", berr, errdefs.ErrInvalidArgument)
		}
		return res, err
	}
	return res, nil
}

// ReadArchive streams the directory dir of the sandbox as a tar. The
// caller closes the body and calls cancel when done; a body that ends in an
// error is a tar cut short.
func (g *Gateway) ReadArchive(ctx context.Context, tenant, id, dir string) (io.ReadCloser, context.CancelFunc, error) {
	att, err := g.fileSandbox(ctx, tenant, id, &dir)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, g.Limits().TransferTimeout)
	rc, err := att.Agent.ReadArchive(ctx, dir)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	return rc, cancel, nil
}

// searchBackstop bounds a search or replace call beyond its own time limit.
const searchBackstop = 5 * time.Minute

// SearchFiles finds files by name and/or content below req.Path (default:
// the first file root), within the configured result and time caps.
func (g *Gateway) SearchFiles(ctx context.Context, tenant, id string, req agentproto.SearchRequest) (agentproto.SearchResult, error) {
	lim := g.Limits()
	maxResults := min(lim.MaxSearchResults, agentproto.MaxSearchResults)
	maxTimeoutMS := min(lim.MaxSearchTimeout.Milliseconds(), agentproto.MaxSearchTimeoutMS)
	switch {
	case req.Glob == "" && req.Content == "":
		return agentproto.SearchResult{}, invalid("one of glob and content is required")
	case req.MaxResults < 0 || req.MaxResults > maxResults:
		return agentproto.SearchResult{}, invalid("max_results must be between 1 and %d, got %d", maxResults, req.MaxResults)
	case req.TimeoutMS < 0 || req.TimeoutMS > maxTimeoutMS:
		return agentproto.SearchResult{}, invalid("timeout_ms must be between 1 and %d, got %d", maxTimeoutMS, req.TimeoutMS)
	case req.MaxResults == 0:
		req.MaxResults = min(agentproto.DefaultSearchResults, maxResults)
	}
	if req.TimeoutMS == 0 {
		req.TimeoutMS = min(agentproto.DefaultSearchTimeoutMS, maxTimeoutMS)
	}
	att, err := g.fileSandbox(ctx, tenant, id)
	if err != nil {
		return agentproto.SearchResult{}, err
	}
	roots, err := fileRoots(ctx, att)
	if err != nil {
		return agentproto.SearchResult{}, err
	}
	if req.Path, err = g.filePath(roots, cmp.Or(req.Path, roots[0])); err != nil {
		return agentproto.SearchResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, searchBackstop)
	defer cancel()
	return att.Agent.SearchFiles(ctx, req)
}

// ReplaceInFiles applies a batch replace to req.Paths, or to the files
// below req.Path (default: the first file root) matching req.Glob, at most
// limits.files.max_files_per_call of them.
func (g *Gateway) ReplaceInFiles(ctx context.Context, tenant, id string, req agentproto.ReplaceRequest) (agentproto.ReplaceResult, error) {
	maxFiles := min(g.Limits().MaxFilesPerCall, agentproto.MaxReplaceFiles)
	switch {
	case req.Find == "":
		return agentproto.ReplaceResult{}, invalid("find is required")
	case len(req.Paths) > maxFiles:
		return agentproto.ReplaceResult{}, invalid("at most %d paths, got %d", maxFiles, len(req.Paths))
	case req.MaxFiles < 0 || req.MaxFiles > maxFiles:
		return agentproto.ReplaceResult{}, invalid("max_files must be between 1 and %d, got %d", maxFiles, req.MaxFiles)
	case len(req.Paths) > 0 && req.Path != "":
		return agentproto.ReplaceResult{}, invalid("paths and path are mutually exclusive")
	case req.MaxFiles == 0:
		req.MaxFiles = min(agentproto.DefaultReplaceFiles, maxFiles)
	}
	att, err := g.fileSandbox(ctx, tenant, id)
	if err != nil {
		return agentproto.ReplaceResult{}, err
	}
	roots, err := fileRoots(ctx, att)
	if err != nil {
		return agentproto.ReplaceResult{}, err
	}
	for i, p := range req.Paths {
		if req.Paths[i], err = g.filePath(roots, p); err != nil {
			return agentproto.ReplaceResult{}, err
		}
	}
	if len(req.Paths) == 0 {
		if req.Path, err = g.filePath(roots, cmp.Or(req.Path, roots[0])); err != nil {
			return agentproto.ReplaceResult{}, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, searchBackstop)
	defer cancel()
	return att.Agent.ReplaceInFiles(ctx, req)
}
