package e2b

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"strconv"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "genesis.dev/sandbox/internal/compat/e2b/gen/filesystem"
	"genesis.dev/sandbox/internal/compat/e2b/gen/filesystem/filesystemconnect"
	"genesis.dev/sandbox/internal/compat/shared"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/files"
)

// entry is a written file as POST /files answers it.
type entry struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Path string `json:"path"`
}

// queryPath reads and translates ?path=.
func queryPath(r *http.Request) (string, error) {
	p := r.URL.Query().Get("path")
	if p == "" {
		return "", nil
	}
	return sandboxPath(p)
}

// readFile serves GET /files?path=: the file's bytes through the gateway
// (Range and conditional headers pass through).
func (a *Adapter) readFile(w http.ResponseWriter, r *http.Request) {
	p, err := queryPath(r)
	if err == nil && p == "" {
		err = errdefs.Invalid("path is required")
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	shared.ServeFile(w, r, a.files, tenantOf(r.Context()), sandboxOf(r.Context()), p, a.writeError)
}

// writeFiles serves POST /files?path=: a multipart body of "file" parts
// (each part's file name is its path when ?path= is absent), or one
// application/octet-stream body (gzip when Content-Encoding says so).
// Parent directories are made; existing files are overwritten.
func (a *Adapter) writeFiles(w http.ResponseWriter, r *http.Request) {
	p, err := queryPath(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	ct, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var out []entry
	if ct == "multipart/form-data" {
		mr := multipart.NewReader(r.Body, params["boundary"])
		for {
			part, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				a.writeError(w, r, fmt.Errorf("reading the multipart body: %v: %w", err, errdefs.ErrInvalidArgument))
				return
			}
			if part.FormName() != "file" {
				continue
			}
			target := p
			if target == "" {
				if target, err = sandboxPath(part.FileName()); err != nil || target == "" {
					a.writeError(w, r, errdefs.Invalid("a file part names no path and ?path= is absent"))
					return
				}
			}
			e, err := a.writeOne(ctx, target, part)
			if err != nil {
				a.writeError(w, r, err)
				return
			}
			out = append(out, e)
		}
	} else {
		if p == "" {
			a.writeError(w, r, errdefs.Invalid("path is required"))
			return
		}
		var body io.Reader = r.Body
		if strings.EqualFold(r.Header.Get("Content-Encoding"), "gzip") {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				a.writeError(w, r, fmt.Errorf("gzip body: %v: %w", err, errdefs.ErrInvalidArgument))
				return
			}
			body = zr
		}
		e, err := a.writeOne(ctx, p, body)
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		a.writeError(w, r, errdefs.Invalid("no file part in the body"))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *Adapter) writeOne(ctx context.Context, p string, body io.Reader) (entry, error) {
	tenant, id := tenantOf(ctx), sandboxOf(ctx)
	// The gateway's upload makes the parent directories.
	if _, err := a.files.WriteFile(ctx, files.WriteFileInput{Tenant: tenant, SandboxID: id, Path: p, Overwrite: true, Size: -1, Body: body}); err != nil {
		return entry{}, err
	}
	return entry{Name: path.Base(p), Type: "file", Path: sdkPath(p)}, nil
}

// filesystemService serves filesystem.Filesystem over the file gateway.
type filesystemService struct {
	filesystemconnect.UnimplementedFilesystemHandler
	a *Adapter
}

func entryInfo(fi files.FileInfo) *pb.EntryInfo {
	e := &pb.EntryInfo{Name: fi.Name, Path: sdkPath(fi.Path), Size: fi.Size, Owner: strconv.Itoa(fi.UID), Group: strconv.Itoa(fi.GID),
		ModifiedTime: timestamppb.New(fi.ModTime)}
	mode, _ := strconv.ParseUint(fi.Mode, 8, 32)
	e.Mode = uint32(mode)
	e.Permissions = permString(fi.Type, uint32(mode))
	switch fi.Type {
	case "file":
		e.Type = pb.FileType_FILE_TYPE_FILE
	case "dir":
		e.Type = pb.FileType_FILE_TYPE_DIRECTORY
	case "symlink":
		e.Type = pb.FileType_FILE_TYPE_SYMLINK
		t := fi.LinkTarget
		e.SymlinkTarget = &t
	}
	return e
}

// permString spells mode as ls -l does (e.g. -rw-r--r--).
func permString(typ string, mode uint32) string {
	b := []byte("----------")
	switch typ {
	case "dir":
		b[0] = 'd'
	case "symlink":
		b[0] = 'l'
	}
	const rwx = "rwxrwxrwx"
	for i := 0; i < 9; i++ {
		if mode&(1<<uint(8-i)) != 0 {
			b[i+1] = rwx[i]
		}
	}
	return string(b)
}

func (s *filesystemService) path(p string) (string, error) {
	if p == "" {
		return "", connect.NewError(connect.CodeInvalidArgument, errors.New("path is required"))
	}
	q, err := sandboxPath(p)
	if err != nil {
		return "", connectError(err)
	}
	return q, nil
}

// Stat describes one entry.
func (s *filesystemService) Stat(ctx context.Context, req *connect.Request[pb.StatRequest]) (*connect.Response[pb.StatResponse], error) {
	p, err := s.path(req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	fi, err := s.a.files.StatFile(ctx, tenantOf(ctx), sandboxOf(ctx), p)
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&pb.StatResponse{Entry: entryInfo(fi)}), nil
}

// ListDir lists a directory to a depth (default 1).
func (s *filesystemService) ListDir(ctx context.Context, req *connect.Request[pb.ListDirRequest]) (*connect.Response[pb.ListDirResponse], error) {
	p, err := s.path(req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	depth := max(1, int(req.Msg.GetDepth()))
	list, err := s.a.files.ListFiles(ctx, tenantOf(ctx), sandboxOf(ctx), p, depth, 0)
	if err != nil {
		return nil, connectError(err)
	}
	out := &pb.ListDirResponse{}
	for _, fi := range list.Entries {
		out.Entries = append(out.Entries, entryInfo(fi))
	}
	return connect.NewResponse(out), nil
}

// MakeDir makes a directory and its parents; an existing one is
// AlreadyExists (the SDK answers false).
func (s *filesystemService) MakeDir(ctx context.Context, req *connect.Request[pb.MakeDirRequest]) (*connect.Response[pb.MakeDirResponse], error) {
	p, err := s.path(req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	if _, err := s.a.files.StatFile(ctx, tenantOf(ctx), sandboxOf(ctx), p); err == nil {
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("%s exists", req.Msg.GetPath()))
	}
	fi, err := s.a.files.Mkdir(ctx, tenantOf(ctx), sandboxOf(ctx), files.MkdirRequest{Path: p})
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&pb.MakeDirResponse{Entry: entryInfo(fi)}), nil
}

// Move renames an entry (over an existing destination, as E2B does).
func (s *filesystemService) Move(ctx context.Context, req *connect.Request[pb.MoveRequest]) (*connect.Response[pb.MoveResponse], error) {
	from, err := s.path(req.Msg.GetSource())
	if err != nil {
		return nil, err
	}
	to, err := s.path(req.Msg.GetDestination())
	if err != nil {
		return nil, err
	}
	fi, err := s.a.files.MoveFile(ctx, tenantOf(ctx), sandboxOf(ctx), files.MoveRequest{From: from, To: to, Overwrite: true})
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&pb.MoveResponse{Entry: entryInfo(fi)}), nil
}

// Remove deletes a file or a whole directory tree.
func (s *filesystemService) Remove(ctx context.Context, req *connect.Request[pb.RemoveRequest]) (*connect.Response[pb.RemoveResponse], error) {
	p, err := s.path(req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	if err := s.a.files.DeleteFile(ctx, tenantOf(ctx), sandboxOf(ctx), files.DeleteRequest{Path: p, Recursive: true}); err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&pb.RemoveResponse{}), nil
}
