package agent

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/agent/fsops"
	"genesis.dev/sandbox/internal/errdefs"
)

// maxFileRequestBytes bounds the JSON body of a file operation.
const maxFileRequestBytes = 64 << 10

// fileRoots returns the allowed roots, worked out on first use
// (loadRoots).
func (s *Server) fileRoots() ([]string, error) { return s.roots() }

// loadRoots reads the allowed roots from the agentproto.FileRootsEnv
// variable of the agent's environment (else the default workdir) and
// makes them effective: agentproto.HomeRoot becomes the user's home, and
// a root agentproto.CheckRoot refuses (/, /proc, the agent's own
// directories, …) is dropped with a warning.
func (s *Server) loadRoots() ([]string, error) {
	v := s.cfg.DefaultWorkdir
	prefix := agentproto.FileRootsEnv + "="
	for _, kv := range s.cfg.Environ {
		if r, ok := strings.CutPrefix(kv, prefix); ok && r != "" {
			v = r
			break
		}
	}
	roots, err := agentproto.ParseRoots(v)
	if err != nil {
		return nil, err
	}
	return effectiveRoots(roots, userHome(), s.ownPlaces(), s.log), nil
}

// effectiveRoots resolves agentproto.HomeRoot in roots to home ("" when the
// user has none) and keeps, once each and in order, the roots
// agentproto.CheckRoot accepts given own, the agent's own directories; the
// others are dropped with a warning.
func effectiveRoots(roots []string, home string, own []string, log *slog.Logger) []string {
	out := make([]string, 0, len(roots))
	for _, r := range roots {
		if r == agentproto.HomeRoot {
			if home == "" {
				log.Info("file root ~ dropped: the sandbox user has no home directory")
				continue
			}
			r = home
		}
		if err := agentproto.CheckRoot(r, own...); err != nil {
			log.Warn("file root dropped", "root", r, "err", err)
			continue
		}
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// userHome is the home directory of the user the agent runs as, from the
// user database (/etc/passwd of the image, which the sandbox user cannot
// change); "" when there is none. The environment's HOME is not used: a
// sandbox's creator sets it.
func userHome() string {
	u, err := user.LookupId(strconv.Itoa(os.Getuid()))
	if err != nil {
		return ""
	}
	return u.HomeDir
}

// ownPlaces are the agent's own directories, which no file root may
// reach: its socket's, its binary's and the default binary's.
func (s *Server) ownPlaces() []string {
	own := []string{filepath.Dir(defaultShimPath)}
	for _, p := range []string{s.cfg.SocketPath, s.cfg.ShimPath} {
		if p == "" {
			continue
		}
		if abs, err := filepath.Abs(p); err == nil {
			own = append(own, filepath.Dir(abs))
		}
	}
	if exe, err := os.Executable(); err == nil {
		own = append(own, filepath.Dir(exe))
	}
	return own
}

// resolve applies the path policy to p.
func (s *Server) resolve(p string) (root, rel string, err error) {
	roots, err := s.fileRoots()
	if err != nil {
		return "", "", err
	}
	return agentproto.ResolvePath(roots, p)
}

// handleExtract extracts the tar (or tar.gz) body into the directory path.
func (s *Server) handleExtract(w http.ResponseWriter, r *http.Request) {
	display := r.URL.Query().Get(agentproto.QueryPath)
	var maxBytes, maxEntries int64
	limits := func(_, _ string) (err error) {
		if maxBytes, err = queryInt(r, agentproto.QueryMaxBytes, 1<<62, 0, 1<<62); err != nil {
			return err
		}
		maxEntries, err = queryInt(r, agentproto.QueryMaxEntries, agentproto.MaxArchiveEntries, 1, agentproto.MaxArchiveEntries)
		return err
	}
	res, err := inTree(s, display, limits, func(t *fsops.Tree, _, rel string) (agentproto.ExtractResult, error) {
		return fsops.ExtractTar(t, fsops.ExtractSpec{Dest: rel, Display: display, MaxBytes: maxBytes, MaxEntries: int(maxEntries)}, r.Body)
	})
	answer(w, http.StatusOK, res, err)
}

// handleArchive streams the directory path as a tar. A failure once the
// stream has begun cuts it short (a tar reader then reports a truncated
// archive).
func (s *Server) handleArchive(w http.ResponseWriter, r *http.Request) {
	display := r.URL.Query().Get(agentproto.QueryPath)
	_, err := inTree(s, display, nil, func(t *fsops.Tree, _, rel string) (struct{}, error) {
		if err := t.CheckDir(rel); err != nil { // refuse a missing or non-directory path before the 200
			return struct{}{}, fsops.FileErr("archive", display, err)
		}
		w.Header().Set("Content-Type", "application/x-tar")
		bw := bufio.NewWriterSize(w, 1<<20)
		if err := fsops.WriteTar(t, rel, display, bw); err != nil {
			s.log.Warn("archive cut short", "path", display, "err", err)
			panic(http.ErrAbortHandler) // the client must not take a cut tar for a whole one
		}
		bw.Flush()
		return struct{}{}, nil
	})
	if err != nil {
		writeError(w, err)
	}
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

// handleJSON serves a file operation with a JSON body: it decodes the body
// strictly into a Req, calls op and answers its result with status.
func handleJSON[Req, Resp any](w http.ResponseWriter, r *http.Request, status int, op func(Req) (Resp, error)) {
	var req Req
	if err := decodeFileRequest(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	res, err := op(req)
	answer(w, status, res, err)
}

// answer writes err as an agentproto.Error, else res as JSON with status
// (a 204 without a body).
func answer(w http.ResponseWriter, status int, res any, err error) {
	switch {
	case err != nil:
		writeError(w, err)
	case status == http.StatusNoContent:
		w.WriteHeader(status)
	default:
		writeJSON(w, status, res)
	}
}

// inTree applies the path policy to display, then runs check with the
// result (the operation's other argument checks, which come after the
// path's; nil for none), opens the allowed root and calls op with it and the path relative
// to it. The root is closed when op returns.
func inTree[T any](s *Server, display string, check func(root, rel string) error, op func(t *fsops.Tree, root, rel string) (T, error)) (T, error) {
	var zero T
	root, rel, err := s.resolve(display)
	if err != nil {
		return zero, err
	}
	if check != nil {
		if err := check(root, rel); err != nil {
			return zero, err
		}
	}
	t, err := fsops.OpenTree(root)
	if err != nil {
		return zero, err
	}
	defer t.Close()
	return op(t, root, rel)
}

func queryInt(r *http.Request, name string, def, min, max int64) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < min || n > max {
		return 0, errdefs.Invalid("%s=%q must be an integer between %d and %d", name, v, min, max)
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
			writeError(w, errdefs.Invalid("overwrite=%q is not a boolean", v))
			return
		}
	}
	maxBytes, err := queryInt(r, agentproto.QueryMaxBytes, -1, 0, 1<<62)
	if err != nil {
		writeError(w, err)
		return
	}
	size := r.ContentLength
	if v := r.Header.Get(agentproto.HeaderUploadSize); v != "" && size < 0 {
		if size, err = strconv.ParseInt(v, 10, 64); err != nil || size < 0 {
			writeError(w, errdefs.Invalid("%s=%q is not a size", agentproto.HeaderUploadSize, v))
			return
		}
	}
	// Refused before anything is written when the size is announced.
	if maxBytes >= 0 && size > maxBytes {
		writeError(w, fsops.ErrTooLarge(display, maxBytes))
		return
	}
	res, err := fsops.WriteFile(fsops.WriteSpec{Root: root, Rel: rel, Display: display, Mode: mode, Overwrite: overwrite, MaxBytes: maxBytes},
		&uploadBody{r: r, size: size}, fsops.TransferBuffer(size))
	if err != nil {
		var be *fsops.BodyError
		if errors.As(err, &be) {
			err = fmt.Errorf("write %q: %v: %w", display, be, errdefs.ErrInvalidArgument)
		}
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, res)
}

// uploadBody is the body of an upload: it fails, instead of ending, when
// the sender ended it with agentproto.TrailerUploadAbort or it is not of
// the announced size (size < 0: not announced).
type uploadBody struct {
	r    *http.Request
	size int64
	n    int64
}

func (b *uploadBody) Read(p []byte) (int, error) {
	n, err := b.r.Body.Read(p)
	b.n += int64(n)
	if err != io.EOF {
		return n, err
	}
	if why := b.r.Trailer.Get(agentproto.TrailerUploadAbort); why != "" {
		return n, fmt.Errorf("the sender aborted the upload: %s", why)
	}
	if b.size >= 0 && b.n != b.size {
		return n, fmt.Errorf("the body has %d bytes, %d were announced", b.n, b.size)
	}
	return n, io.EOF
}

// handleFileRead streams a regular file. http.ServeContent answers Range
// (206, 416), If-None-Match / If-Modified-Since (304) and If-Range against
// the ETag and modification time of the opened descriptor.
func (s *Server) handleFileRead(w http.ResponseWriter, r *http.Request) {
	display := r.URL.Query().Get(agentproto.QueryPath)
	_, err := inTree(s, display, nil, func(t *fsops.Tree, _, rel string) (struct{}, error) {
		f, fi, err := fsops.OpenRegular(t, rel, display)
		if err != nil {
			return struct{}{}, err
		}
		defer f.Close()
		h := w.Header()
		h.Set("ETag", fsops.FileETag(fi))
		h.Set("Content-Type", "application/octet-stream")
		h.Set(agentproto.HeaderFileSize, strconv.FormatInt(fi.Size(), 10))
		h.Set(agentproto.HeaderFileMode, agentproto.FormatMode(fi.Mode()))
		http.ServeContent(fsops.NewBulkWriter(w, fsops.TransferBuffer(fi.Size())), r, "", fi.ModTime(), f)
		return struct{}{}, nil
	})
	if err != nil {
		writeError(w, err)
	}
}

func (s *Server) handleFileStat(w http.ResponseWriter, r *http.Request) {
	display := r.URL.Query().Get(agentproto.QueryPath)
	info, err := inTree(s, display, nil, func(t *fsops.Tree, _, rel string) (agentproto.FileInfo, error) {
		return fsops.StatPath(t, rel, display)
	})
	answer(w, http.StatusOK, info, err)
}

func (s *Server) handleFileList(w http.ResponseWriter, r *http.Request) {
	display := r.URL.Query().Get(agentproto.QueryPath)
	var depth, limit int64
	bounds := func(_, _ string) (err error) {
		if depth, err = queryInt(r, agentproto.QueryDepth, agentproto.DefaultListDepth, 1, agentproto.MaxListDepth); err != nil {
			return err
		}
		limit, err = queryInt(r, agentproto.QueryLimit, agentproto.DefaultListLimit, 1, agentproto.MaxListLimit)
		return err
	}
	list, err := inTree(s, display, bounds, func(t *fsops.Tree, _, rel string) (agentproto.FileList, error) {
		return fsops.ListDir(t, rel, display, int(depth), int(limit))
	})
	answer(w, http.StatusOK, list, err)
}

func (s *Server) handleMkdir(w http.ResponseWriter, r *http.Request) {
	handleJSON(w, r, http.StatusOK, func(req agentproto.MkdirRequest) (agentproto.FileInfo, error) {
		var mode fs.FileMode
		parseMode := func(_, _ string) (err error) {
			mode, err = agentproto.ParseMode(req.Mode, 0o755)
			return err
		}
		return inTree(s, req.Path, parseMode, func(t *fsops.Tree, _, rel string) (agentproto.FileInfo, error) {
			return fsops.MkdirPath(t, rel, req.Path, mode, req.Parents == nil || *req.Parents, req.Mode != "")
		})
	})
}

func (s *Server) handleMove(w http.ResponseWriter, r *http.Request) {
	handleJSON(w, r, http.StatusOK, func(req agentproto.MoveRequest) (agentproto.FileInfo, error) {
		var to string
		paths := func(root, from string) error {
			toRoot, toRel, err := s.resolve(req.To)
			if err != nil {
				return err
			}
			switch {
			case from == ".":
				return fsops.RootItself("move", req.From)
			case toRel == ".":
				return fsops.RootItself("move onto", req.To)
			case toRoot != root:
				return errdefs.WithCode(agentproto.CodeCrossRoot, fmt.Errorf(
					"move %q to %q: the two paths are in different allowed roots: %w", req.From, req.To, errdefs.ErrInvalidArgument))
			}
			to = toRel
			return nil
		}
		return inTree(s, req.From, paths, func(t *fsops.Tree, _, from string) (agentproto.FileInfo, error) {
			return fsops.MovePath(t, from, to, req.From, req.To, req.Overwrite)
		})
	})
}

func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) {
	handleJSON(w, r, http.StatusNoContent, func(req agentproto.DeleteRequest) (struct{}, error) {
		return inTree(s, req.Path, nil, func(t *fsops.Tree, _, rel string) (struct{}, error) {
			return struct{}{}, fsops.DeletePath(t, rel, req.Path, req.Recursive)
		})
	})
}

func (s *Server) handleChmod(w http.ResponseWriter, r *http.Request) {
	handleJSON(w, r, http.StatusOK, func(req agentproto.ChmodRequest) (agentproto.FileInfo, error) {
		var mode fs.FileMode
		parseMode := func(_, _ string) (err error) {
			if req.Mode == "" {
				return errdefs.WithCode(agentproto.CodeInvalidMode, errdefs.Invalid("chmod: mode is required"))
			}
			mode, err = agentproto.ParseMode(req.Mode, 0)
			return err
		}
		return inTree(s, req.Path, parseMode, func(t *fsops.Tree, root, rel string) (agentproto.FileInfo, error) {
			fi, err := t.Chmod(rel, mode)
			if err != nil {
				return agentproto.FileInfo{}, fsops.FileErr("chmod", req.Path, err)
			}
			return fsops.FileInfo(root, rel, fi, ""), nil
		})
	})
}

func (s *Server) handleSearch(w http.ResponseWriter, r *http.Request) {
	handleJSON(w, r, http.StatusOK, func(req agentproto.SearchRequest) (agentproto.SearchResult, error) {
		return inTree(s, cmp.Or(req.Path, "."), nil, func(t *fsops.Tree, _, rel string) (agentproto.SearchResult, error) {
			return fsops.SearchFiles(t, rel, req.Path, req, time.Now)
		})
	})
}

func (s *Server) handleReplace(w http.ResponseWriter, r *http.Request) {
	handleJSON(w, r, http.StatusOK, func(req agentproto.ReplaceRequest) (agentproto.ReplaceResult, error) {
		first := req.Path
		if len(req.Paths) > 0 {
			first = req.Paths[0]
		}
		return inTree(s, cmp.Or(first, "."), nil, func(t *fsops.Tree, _, _ string) (agentproto.ReplaceResult, error) {
			return fsops.ReplaceFiles(t, req, s.resolve)
		})
	})
}
