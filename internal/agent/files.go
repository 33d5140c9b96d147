package agent

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// maxFileRequestBytes bounds the JSON body of a file operation.
const maxFileRequestBytes = 64 << 10

// fileRoots returns the allowed roots: the agentproto.FileRootsEnv
// variable of the agent's environment, else the default workdir.
func (s *Server) fileRoots() ([]string, error) {
	prefix := agentproto.FileRootsEnv + "="
	for _, kv := range s.cfg.Environ {
		if v, ok := strings.CutPrefix(kv, prefix); ok && v != "" {
			return agentproto.ParseRoots(v)
		}
	}
	return agentproto.ParseRoots(s.cfg.DefaultWorkdir)
}

// resolve applies the path policy to p.
func (s *Server) resolve(p string) (root, rel string, err error) {
	roots, err := s.fileRoots()
	if err != nil {
		return "", "", err
	}
	return agentproto.ResolvePath(roots, p)
}

// serveFiles routes the file operations under agentproto.PathFiles.
func (s *Server) serveFiles(w http.ResponseWriter, r *http.Request) {
	want := func(methods ...string) bool {
		for _, m := range methods {
			if r.Method == m {
				return true
			}
		}
		writeError(w, fmt.Errorf("%s wants %s: %w", r.URL.Path, strings.Join(methods, " or "), errdefs.ErrInvalidArgument))
		return false
	}
	switch r.URL.Path {
	case agentproto.PathFiles:
		switch r.Method {
		case http.MethodPut:
			s.handleFileWrite(w, r)
		case http.MethodGet, http.MethodHead:
			s.handleFileRead(w, r)
		default:
			want(http.MethodGet, http.MethodHead, http.MethodPut)
		}
	case agentproto.PathFilesStat:
		if want(http.MethodGet) {
			s.handleFileStat(w, r)
		}
	case agentproto.PathFilesList:
		if want(http.MethodGet) {
			s.handleFileList(w, r)
		}
	case agentproto.PathFilesMkdir:
		if want(http.MethodPost) {
			s.handleMkdir(w, r)
		}
	case agentproto.PathFilesMove:
		if want(http.MethodPost) {
			s.handleMove(w, r)
		}
	case agentproto.PathFilesDelete:
		if want(http.MethodPost) {
			s.handleDelete(w, r)
		}
	case agentproto.PathFilesChmod:
		if want(http.MethodPost) {
			s.handleChmod(w, r)
		}
	case agentproto.PathFilesExtract:
		if want(http.MethodPost) {
			s.handleExtract(w, r)
		}
	case agentproto.PathFilesArchive:
		if want(http.MethodGet) {
			s.handleArchive(w, r)
		}
	case agentproto.PathFilesSearch:
		if want(http.MethodPost) {
			s.handleSearch(w, r)
		}
	case agentproto.PathFilesReplace:
		if want(http.MethodPost) {
			s.handleReplace(w, r)
		}
	default:
		writeError(w, fmt.Errorf("no route %s: %w", r.URL.Path, errdefs.ErrNotFound))
	}
}

// handleExtract extracts the tar (or tar.gz) body into the directory path.
func (s *Server) handleExtract(w http.ResponseWriter, r *http.Request) {
	display := r.URL.Query().Get(agentproto.QueryPath)
	root, rel, err := s.resolve(display)
	if err != nil {
		writeError(w, err)
		return
	}
	maxBytes, err := queryInt(r, agentproto.QueryMaxBytes, 1<<62, 0, 1<<62)
	if err != nil {
		writeError(w, err)
		return
	}
	maxEntries, err := queryInt(r, agentproto.QueryMaxEntries, agentproto.MaxArchiveEntries, 1, agentproto.MaxArchiveEntries)
	if err != nil {
		writeError(w, err)
		return
	}
	t, err := openTreeFor(root)
	if err != nil {
		writeError(w, err)
		return
	}
	defer t.close()
	res, err := extractTar(t, extractSpec{dest: rel, display: display, maxBytes: maxBytes, maxEntries: int(maxEntries)}, r.Body)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// handleArchive streams the directory path as a tar. A failure once the
// stream has begun cuts it short (a tar reader then reports a truncated
// archive).
func (s *Server) handleArchive(w http.ResponseWriter, r *http.Request) {
	display := r.URL.Query().Get(agentproto.QueryPath)
	root, rel, err := s.resolve(display)
	if err != nil {
		writeError(w, err)
		return
	}
	t, err := openTreeFor(root)
	if err != nil {
		writeError(w, err)
		return
	}
	defer t.close()
	l, err := t.resolve(rel, true, true, false) // refuse a missing or non-directory path before the 200
	if err != nil {
		writeError(w, fileErr("archive", display, err))
		return
	}
	l.close()
	w.Header().Set("Content-Type", "application/x-tar")
	bw := bufio.NewWriterSize(w, 1<<20)
	if err := writeTar(t, rel, display, bw); err != nil {
		s.log.Warn("archive cut short", "path", display, "err", err)
		panic(http.ErrAbortHandler) // the client must not take a cut tar for a whole one
	}
	bw.Flush()
}

// decodeFileRequest reads a small JSON body strictly.
func decodeFileRequest(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxFileRequestBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return fmt.Errorf("request body over %d bytes: %w", tooBig.Limit, errdefs.ErrTooLarge)
		}
		return fmt.Errorf("decode %s request: %v: %w", r.URL.Path, err, errdefs.ErrInvalidArgument)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("decode %s request: trailing data after the JSON object: %w", r.URL.Path, errdefs.ErrInvalidArgument)
	}
	return nil
}

func queryInt(r *http.Request, name string, def, min, max int64) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < min || n > max {
		return 0, fmt.Errorf("%s=%q must be an integer between %d and %d: %w", name, v, min, max, errdefs.ErrInvalidArgument)
	}
	return n, nil
}

func (s *Server) handleFileWrite(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	display := q.Get(agentproto.QueryPath)
	root, rel, err := s.resolve(display)
	if err != nil {
		writeError(w, err)
		return
	}
	mode, err := agentproto.ParseMode(q.Get(agentproto.QueryMode), 0o644)
	if err != nil {
		writeError(w, err)
		return
	}
	overwrite := true
	if v := q.Get(agentproto.QueryOverwrite); v != "" {
		if overwrite, err = strconv.ParseBool(v); err != nil {
			writeError(w, fmt.Errorf("overwrite=%q is not a boolean: %w", v, errdefs.ErrInvalidArgument))
			return
		}
	}
	maxBytes, err := queryInt(r, agentproto.QueryMaxBytes, -1, 0, 1<<62)
	if err != nil {
		writeError(w, err)
		return
	}
	// Refused before anything is written when the size is announced.
	if maxBytes >= 0 && r.ContentLength > maxBytes {
		writeError(w, errTooLarge(display, maxBytes))
		return
	}
	res, err := writeFile(writeSpec{root: root, rel: rel, display: display, mode: mode, overwrite: overwrite, maxBytes: maxBytes},
		r.Body, transferBuffer(r.ContentLength))
	if err != nil {
		var be *bodyError
		if errors.As(err, &be) {
			err = fmt.Errorf("write %q: %v: %w", display, be, errdefs.ErrInvalidArgument)
		}
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, res)
}

// handleFileRead streams a regular file. http.ServeContent answers Range
// (206, 416), If-None-Match / If-Modified-Since (304) and If-Range against
// the ETag and modification time of the opened descriptor.
func (s *Server) handleFileRead(w http.ResponseWriter, r *http.Request) {
	display := r.URL.Query().Get(agentproto.QueryPath)
	root, rel, err := s.resolve(display)
	if err != nil {
		writeError(w, err)
		return
	}
	rt, err := openTreeFor(root)
	if err != nil {
		writeError(w, err)
		return
	}
	defer rt.close()
	f, fi, err := openRegular(rt, rel, display)
	if err != nil {
		writeError(w, err)
		return
	}
	defer f.Close()
	h := w.Header()
	h.Set("ETag", fileETag(fi))
	h.Set("Content-Type", "application/octet-stream")
	h.Set(agentproto.HeaderFileSize, strconv.FormatInt(fi.Size(), 10))
	h.Set(agentproto.HeaderFileMode, agentproto.FormatMode(fi.Mode()))
	http.ServeContent(&bulkWriter{ResponseWriter: w, buf: transferBuffer(fi.Size())}, r, "", fi.ModTime(), f)
}

func (s *Server) handleFileStat(w http.ResponseWriter, r *http.Request) {
	display := r.URL.Query().Get(agentproto.QueryPath)
	root, rel, err := s.resolve(display)
	if err != nil {
		writeError(w, err)
		return
	}
	rt, err := openTreeFor(root)
	if err != nil {
		writeError(w, err)
		return
	}
	defer rt.close()
	info, err := statPath(rt, rel, display)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

func (s *Server) handleFileList(w http.ResponseWriter, r *http.Request) {
	display := r.URL.Query().Get(agentproto.QueryPath)
	root, rel, err := s.resolve(display)
	if err != nil {
		writeError(w, err)
		return
	}
	depth, err := queryInt(r, agentproto.QueryDepth, agentproto.DefaultListDepth, 1, agentproto.MaxListDepth)
	if err != nil {
		writeError(w, err)
		return
	}
	limit, err := queryInt(r, agentproto.QueryLimit, agentproto.DefaultListLimit, 1, agentproto.MaxListLimit)
	if err != nil {
		writeError(w, err)
		return
	}
	rt, err := openTreeFor(root)
	if err != nil {
		writeError(w, err)
		return
	}
	defer rt.close()
	list, err := listDir(rt, rel, display, int(depth), int(limit))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) handleMkdir(w http.ResponseWriter, r *http.Request) {
	var req agentproto.MkdirRequest
	if err := decodeFileRequest(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	root, rel, err := s.resolve(req.Path)
	if err != nil {
		writeError(w, err)
		return
	}
	mode, err := agentproto.ParseMode(req.Mode, 0o755)
	if err != nil {
		writeError(w, err)
		return
	}
	rt, err := openTreeFor(root)
	if err != nil {
		writeError(w, err)
		return
	}
	defer rt.close()
	info, err := mkdirPath(rt, rel, req.Path, mode, req.Parents == nil || *req.Parents, req.Mode != "")
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

func (s *Server) handleMove(w http.ResponseWriter, r *http.Request) {
	var req agentproto.MoveRequest
	if err := decodeFileRequest(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	root, from, err := s.resolve(req.From)
	if err != nil {
		writeError(w, err)
		return
	}
	toRoot, to, err := s.resolve(req.To)
	if err != nil {
		writeError(w, err)
		return
	}
	switch {
	case from == ".":
		writeError(w, rootItself("move", req.From))
		return
	case to == ".":
		writeError(w, rootItself("move onto", req.To))
		return
	case toRoot != root:
		writeError(w, errdefs.WithCode(agentproto.CodeCrossRoot, fmt.Errorf(
			"move %q to %q: the two paths are in different allowed roots: %w", req.From, req.To, errdefs.ErrInvalidArgument)))
		return
	}
	rt, err := openTreeFor(root)
	if err != nil {
		writeError(w, err)
		return
	}
	defer rt.close()
	info, err := movePath(rt, from, to, req.From, req.To, req.Overwrite)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) {
	var req agentproto.DeleteRequest
	if err := decodeFileRequest(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	root, rel, err := s.resolve(req.Path)
	if err != nil {
		writeError(w, err)
		return
	}
	rt, err := openTreeFor(root)
	if err != nil {
		writeError(w, err)
		return
	}
	defer rt.close()
	if err := deletePath(rt, rel, req.Path, req.Recursive); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleChmod(w http.ResponseWriter, r *http.Request) {
	var req agentproto.ChmodRequest
	if err := decodeFileRequest(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	root, rel, err := s.resolve(req.Path)
	if err != nil {
		writeError(w, err)
		return
	}
	if req.Mode == "" {
		writeError(w, errdefs.WithCode(agentproto.CodeInvalidMode, fmt.Errorf("chmod: mode is required: %w", errdefs.ErrInvalidArgument)))
		return
	}
	mode, err := agentproto.ParseMode(req.Mode, 0)
	if err != nil {
		writeError(w, err)
		return
	}
	rt, err := openTreeFor(root)
	if err != nil {
		writeError(w, err)
		return
	}
	defer rt.close()
	fi, err := rt.chmod(rel, mode)
	if err != nil {
		writeError(w, fileErr("chmod", req.Path, err))
		return
	}
	writeJSON(w, http.StatusOK, fileInfo(root, rel, fi, ""))
}

func (s *Server) handleSearch(w http.ResponseWriter, r *http.Request) {
	var req agentproto.SearchRequest
	if err := decodeFileRequest(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	root, rel, err := s.resolve(cmpOr(req.Path, "."))
	if err != nil {
		writeError(w, err)
		return
	}
	t, err := openTreeFor(root)
	if err != nil {
		writeError(w, err)
		return
	}
	defer t.close()
	res, err := searchFiles(t, rel, req.Path, req, time.Now)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) handleReplace(w http.ResponseWriter, r *http.Request) {
	var req agentproto.ReplaceRequest
	if err := decodeFileRequest(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	first := req.Path
	if len(req.Paths) > 0 {
		first = req.Paths[0]
	}
	root, _, err := s.resolve(cmpOr(first, "."))
	if err != nil {
		writeError(w, err)
		return
	}
	t, err := openTreeFor(root)
	if err != nil {
		writeError(w, err)
		return
	}
	defer t.close()
	res, err := replaceFiles(t, req, s.resolve)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
