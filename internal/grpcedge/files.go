package grpcedge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"connectrpc.com/connect"

	sandboxv1 "genesis.dev/sandbox/gen/genesis/sandbox/v1"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/files"
)

// fileService serves genesis.sandbox.v1.FileService over files.Gateway,
// as httpapi's files.go serves the same routes.
type fileService struct{ edge *Edge }

func (s *fileService) gateway() (*files.Gateway, error) {
	if s.edge.wl.Files == nil {
		return nil, notSupported("file gateway")
	}
	return s.edge.wl.Files, nil
}

// uploadBody is the data of an Upload stream as one reader: a message is
// received only when the gateway asks for more, so the stream's flow
// control holds a fast client to the sandbox's pace and memory to one
// message. It fails when the stream does (a client that cancels), when a
// message names another file, and past limit bytes.
type uploadBody struct {
	stream    *connect.ClientStream[sandboxv1.UploadRequest]
	sandboxID string
	path      string
	buf       []byte
	n, limit  int64
	done      bool
}

func (b *uploadBody) Read(p []byte) (int, error) {
	for len(b.buf) == 0 {
		if b.done {
			return 0, io.EOF
		}
		if !b.stream.Receive() {
			if err := b.stream.Err(); err != nil {
				return 0, fmt.Errorf("the upload stream failed: %w", err)
			}
			b.done = true
			continue
		}
		m := b.stream.Msg()
		if (m.SandboxId != "" && m.SandboxId != b.sandboxID) || (m.Path != "" && m.Path != b.path) {
			return 0, invalidArg("a message of the upload names another file (sandbox_id %q, path %q)", m.SandboxId, m.Path)
		}
		b.buf = m.Data
	}
	k := copy(p, b.buf)
	b.buf = b.buf[k:]
	b.n += int64(k)
	if b.n > b.limit {
		return k, fmt.Errorf("upload is over the %d-byte limit: %w", b.limit, errdefs.ErrTooLarge)
	}
	return k, nil
}

func (s *fileService) Upload(ctx context.Context, stream *connect.ClientStream[sandboxv1.UploadRequest]) (*connect.Response[sandboxv1.FileWritten], error) {
	g, err := s.gateway()
	if err != nil {
		return nil, err
	}
	if !stream.Receive() {
		if err := stream.Err(); err != nil {
			return nil, err
		}
		return nil, invalidArg("the stream sent no message: the first names the file (sandbox_id, path)")
	}
	first := stream.Msg()
	if first.SandboxId == "" {
		return nil, invalidArg("sandbox_id is required on the first message")
	}
	size := int64(-1)
	if first.Size != nil {
		if size = *first.Size; size < 0 {
			return nil, invalidArg("size %d is negative", size)
		}
	}
	body := &uploadBody{stream: stream, sandboxID: first.SandboxId, path: first.Path, buf: first.Data, limit: g.Limits().MaxUploadBytes}
	res, err := g.WriteFile(ctx, files.WriteFileInput{
		Tenant: tenantOf(ctx), SandboxID: first.SandboxId, Path: first.Path, Mode: first.Mode,
		Overwrite: first.Overwrite == nil || *first.Overwrite, Size: size, Body: body,
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&sandboxv1.FileWritten{Path: res.Path, Size: res.Size, Sha256: res.SHA256, Mode: res.Mode}), nil
}

func (s *fileService) Download(ctx context.Context, req *connect.Request[sandboxv1.DownloadRequest], stream *connect.ServerStream[sandboxv1.DownloadResponse]) error {
	g, err := s.gateway()
	if err != nil {
		return err
	}
	m := req.Msg
	if err := byteRange(m.Offset, m.Length); err != nil {
		return err
	}
	cond := http.Header{}
	if m.Offset > 0 || m.Length > 0 {
		end := ""
		if m.Length > 0 {
			end = strconv.FormatInt(m.Offset+m.Length-1, 10)
		}
		cond.Set("Range", fmt.Sprintf("bytes=%d-%s", m.Offset, end))
	}
	fr, cancel, err := g.ReadFile(ctx, tenantOf(ctx), m.SandboxId, http.MethodGet, m.Path, cond)
	if err != nil {
		return err
	}
	defer cancel()
	defer fr.Body.Close()
	size := int64(-1)
	if v, err := strconv.ParseInt(fr.Header.Get(files.HeaderFileSize), 10, 64); err == nil {
		size = v
	}
	offset := int64(0)
	switch fr.Status {
	case http.StatusOK:
	case http.StatusPartialContent:
		offset = m.Offset
	case http.StatusRequestedRangeNotSatisfiable:
		return rangeNotSatisfiable(ctx, "a file", m.Offset, size)
	default:
		return fmt.Errorf("the sandbox answered a download with status %d: %w", fr.Status, errdefs.ErrInternal)
	}
	want := int64(-1)
	if v, err := strconv.ParseInt(fr.Header.Get("Content-Length"), 10, 64); err == nil {
		want = v
	}
	mode := fr.Header.Get(files.HeaderFileMode)
	err = sendChunks(fr.Body, offset, want, func(first bool, off int64, data []byte) error {
		msg := &sandboxv1.DownloadResponse{Offset: off, Data: data}
		if first {
			msg.FileSize, msg.Mode = size, mode
		}
		return stream.Send(msg)
	})
	if err != nil && ctx.Err() == nil {
		var ce *connect.Error
		if errors.As(err, &ce) {
			return err
		}
		return fmt.Errorf("downloading %s: %w", m.Path, err)
	}
	return ctx.Err()
}

func (s *fileService) Stat(ctx context.Context, req *connect.Request[sandboxv1.StatRequest]) (*connect.Response[sandboxv1.FileInfo], error) {
	g, err := s.gateway()
	if err != nil {
		return nil, err
	}
	info, err := g.StatFile(ctx, tenantOf(ctx), req.Msg.SandboxId, req.Msg.Path)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(fileInfoPB(info)), nil
}

func (s *fileService) List(ctx context.Context, req *connect.Request[sandboxv1.ListRequest]) (*connect.Response[sandboxv1.ListResponse], error) {
	g, err := s.gateway()
	if err != nil {
		return nil, err
	}
	m := req.Msg
	if m.Depth < 0 || m.Limit < 0 {
		return nil, invalidArg("depth and limit must not be negative")
	}
	list, err := g.ListFiles(ctx, tenantOf(ctx), m.SandboxId, m.Path, int(m.Depth), int(m.Limit))
	if err != nil {
		return nil, err
	}
	out := &sandboxv1.ListResponse{Path: list.Path, Truncated: list.Truncated, Entries: make([]*sandboxv1.FileInfo, len(list.Entries))}
	for i, e := range list.Entries {
		out.Entries[i] = fileInfoPB(e)
	}
	return connect.NewResponse(out), nil
}

func (s *fileService) Search(ctx context.Context, req *connect.Request[sandboxv1.SearchRequest]) (*connect.Response[sandboxv1.SearchResponse], error) {
	g, err := s.gateway()
	if err != nil {
		return nil, err
	}
	m := req.Msg
	res, err := g.SearchFiles(ctx, tenantOf(ctx), m.SandboxId, files.SearchRequest{
		Path: m.Path, Glob: m.Glob, Content: m.Content, Regex: m.Regex, IgnoreCase: m.IgnoreCase,
		MaxDepth: int(m.MaxDepth), MaxResults: int(m.MaxResults), TimeoutMS: m.TimeoutMs,
	})
	if err != nil {
		return nil, err
	}
	out := &sandboxv1.SearchResponse{Truncated: res.Truncated, TimedOut: res.TimedOut,
		FilesScanned: int32(res.FilesScanned), FilesSkipped: int32(res.FilesSkipped)}
	for _, x := range res.Matches {
		out.Matches = append(out.Matches, &sandboxv1.SearchMatch{Path: x.Path, Line: int32(x.Line), Text: x.Text})
	}
	return connect.NewResponse(out), nil
}

func (s *fileService) BatchReplace(ctx context.Context, req *connect.Request[sandboxv1.BatchReplaceRequest]) (*connect.Response[sandboxv1.BatchReplaceResponse], error) {
	g, err := s.gateway()
	if err != nil {
		return nil, err
	}
	m := req.Msg
	res, err := g.ReplaceInFiles(ctx, tenantOf(ctx), m.SandboxId, files.ReplaceRequest{
		Paths: m.Paths, Path: m.Path, Glob: m.Glob, Find: m.Find, Replace: m.Replace, Regex: m.Regex,
		IgnoreCase: m.IgnoreCase, DryRun: m.DryRun, MaxFiles: int(m.MaxFiles),
	})
	if err != nil {
		return nil, err
	}
	out := &sandboxv1.BatchReplaceResponse{Replacements: int32(res.Replacements), FilesChanged: int32(res.FilesChanged),
		Failed: int32(res.Failed), Truncated: res.Truncated, DryRun: res.DryRun}
	for _, f := range res.Files {
		out.Files = append(out.Files, &sandboxv1.ReplacedFile{Path: f.Path, Replacements: int32(f.Replacements), Error: f.Error, Code: f.Code})
	}
	return connect.NewResponse(out), nil
}

func fileInfoPB(f files.FileInfo) *sandboxv1.FileInfo {
	return &sandboxv1.FileInfo{Path: f.Path, Name: f.Name, Type: f.Type, Size: f.Size, Mode: f.Mode, ModifyTime: ts(f.ModTime),
		Uid: int32(f.UID), Gid: int32(f.GID), LinkTarget: f.LinkTarget, NameInvalidUtf8: f.NameInvalidUTF8}
}
