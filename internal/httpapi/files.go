package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/apiwire"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/files"
)

// fileRoutes registers the file routes.
func (s *Server) fileRoutes() {
	s.handle("PUT", "/v1/sandboxes/{id}/files", true, s.putFile)
	s.handle("POST", "/v1/sandboxes/{id}/files", true, s.uploadFiles)
	s.handle("GET", "/v1/sandboxes/{id}/files", true, s.getFile)
	s.handle("GET", "/v1/sandboxes/{id}/files/stat", true, serveGet(s, http.StatusOK, func(r *http.Request) (api.FileInfo, error) {
		return wired(fileInfo)(s.files.StatFile(r.Context(), tenantOf(r), r.PathValue("id"), r.URL.Query().Get("path")))
	}))
	s.handle("GET", "/v1/sandboxes/{id}/files/list", true, serveGet(s, http.StatusOK, s.listFiles))
	s.handle("POST", "/v1/sandboxes/{id}/files/mkdir", true, serveBody(s, http.StatusOK, func(r *http.Request, b *api.MkdirRequest) (api.FileInfo, error) {
		return wired(fileInfo)(s.files.Mkdir(r.Context(), tenantOf(r), r.PathValue("id"), files.MkdirRequest(*b)))
	}))
	s.handle("POST", "/v1/sandboxes/{id}/files/move", true, serveBody(s, http.StatusOK, func(r *http.Request, b *api.MoveRequest) (api.FileInfo, error) {
		return wired(fileInfo)(s.files.MoveFile(r.Context(), tenantOf(r), r.PathValue("id"), files.MoveRequest(*b)))
	}))
	s.handle("POST", "/v1/sandboxes/{id}/files/delete", true, s.deleteFile)
	s.handle("POST", "/v1/sandboxes/{id}/files/chmod", true, serveBody(s, http.StatusOK, func(r *http.Request, b *api.ChmodRequest) (api.FileInfo, error) {
		return wired(fileInfo)(s.files.ChmodFile(r.Context(), tenantOf(r), r.PathValue("id"), files.ChmodRequest(*b)))
	}))
	s.handle("POST", "/v1/sandboxes/{id}/files/extract", true, s.extractArchive)
	s.handle("GET", "/v1/sandboxes/{id}/files/archive", true, s.readArchive)
	s.handle("POST", "/v1/sandboxes/{id}/files/search", true, serveBody(s, http.StatusOK, func(r *http.Request, b *api.SearchRequest) (api.SearchResult, error) {
		return wired(apiwire.Search)(s.files.SearchFiles(r.Context(), tenantOf(r), r.PathValue("id"), files.SearchRequest(*b)))
	}))
	s.handle("POST", "/v1/sandboxes/{id}/files/replace", true, serveBody(s, http.StatusOK, func(r *http.Request, b *api.ReplaceRequest) (api.ReplaceResult, error) {
		return wired(apiwire.Replace)(s.files.ReplaceInFiles(r.Context(), tenantOf(r), r.PathValue("id"), files.ReplaceRequest(*b)))
	}))
}

// fileInfo is a file's metadata on the wire (the same fields).
func fileInfo(fi files.FileInfo) api.FileInfo { return api.FileInfo(fi) }

func (s *Server) listFiles(r *http.Request) (api.FileList, error) {
	depth, err := positiveQuery(r, "depth")
	if err != nil {
		return api.FileList{}, err
	}
	limit, err := positiveQuery(r, "limit")
	if err != nil {
		return api.FileList{}, err
	}
	return wired(apiwire.FileList)(s.files.ListFiles(r.Context(), tenantOf(r), r.PathValue("id"), r.URL.Query().Get("path"), depth, limit))
}

// deleteFile serves POST /v1/sandboxes/{id}/files/delete {path, recursive}: 204.
func (s *Server) deleteFile(w http.ResponseWriter, r *http.Request) {
	var b api.DeleteFileRequest
	if err := s.decode(w, r, &b); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	serveNoContent(s, func(r *http.Request) error {
		return s.files.DeleteFile(r.Context(), tenantOf(r), r.PathValue("id"), files.DeleteRequest(b))
	})(w, r)
}

// extractArchive serves POST /v1/sandboxes/{id}/files/extract?path=: the
// raw body is a tar or tar.gz unpacked into the directory path.
func (s *Server) extractArchive(w http.ResponseWriter, r *http.Request) {
	limit := s.files.Limits().MaxUploadBytes
	if r.ContentLength > limit {
		s.writeProblem(w, r, errdefs.WithCode(files.CodeUploadTooLarge, fmt.Errorf(
			"archive of %d bytes is over the %d-byte limit: %w", r.ContentLength, limit, errdefs.ErrTooLarge)))
		return
	}
	res, err := s.files.ExtractArchive(r.Context(), tenantOf(r), r.PathValue("id"), r.URL.Query().Get("path"),
		r.ContentLength, http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.ExtractResult(res))
}

// readArchive serves GET /v1/sandboxes/{id}/files/archive?path=: the
// directory as a tar stream. If the stream breaks after it began, the
// connection is cut, so a client never takes a partial tar for a whole one.
func (s *Server) readArchive(w http.ResponseWriter, r *http.Request) {
	rc, cancel, err := s.files.ReadArchive(r.Context(), tenantOf(r), r.PathValue("id"), r.URL.Query().Get("path"))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	defer cancel()
	defer rc.Close()
	w.Header().Set("Content-Type", "application/x-tar")
	w.WriteHeader(http.StatusOK)
	if _, err := io.CopyBuffer(w, rc, make([]byte, 256<<10)); err != nil {
		if r.Context().Err() == nil {
			s.log.Warn("archive download cut short", "request_id", requestID(r), "sandbox", r.PathValue("id"), "err", err)
		}
		panic(http.ErrAbortHandler)
	}
}

// putFile serves PUT /v1/sandboxes/{id}/files?path=&mode=&overwrite=: the
// raw body becomes the file. A body announced larger than the upload limit
// is refused before anything is read or written; one that turns out larger
// (or ends short) is cut off and nothing is written: the agent has removed
// its temporary file before the error is answered.
func (s *Server) putFile(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	overwrite, err := putQuery(r, "; send multipart uploads with POST")
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	limit := s.files.Limits().MaxUploadBytes
	if r.ContentLength > limit {
		s.writeProblem(w, r, errdefs.WithCode(files.CodeUploadTooLarge, fmt.Errorf(
			"upload of %d bytes is over the %d-byte limit: %w", r.ContentLength, limit, errdefs.ErrTooLarge)))
		return
	}
	res, err := s.files.WriteFile(r.Context(), files.WriteFileInput{
		Tenant: tenantOf(r), SandboxID: r.PathValue("id"),
		Path: q.Get("path"), Mode: q.Get("mode"), Overwrite: overwrite,
		Size: r.ContentLength, Body: http.MaxBytesReader(w, r.Body, limit),
	})
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/sandboxes/"+url.PathEscape(r.PathValue("id"))+"/files?"+url.Values{"path": {res.Path}}.Encode())
	writeJSON(w, http.StatusCreated, api.FileWritten(res))
}

// getFile serves GET (and HEAD) /v1/sandboxes/{id}/files?path=, streamed
// from the agent. Range (one or several ranges), If-Range, If-None-Match
// and If-Modified-Since are answered by the agent against the file it
// opened: 206, 416, 304.
func (s *Server) getFile(w http.ResponseWriter, r *http.Request) {
	fr, cancel, err := s.files.ReadFile(r.Context(), tenantOf(r), r.PathValue("id"), r.Method, r.URL.Query().Get("path"), r.Header)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	defer cancel()
	defer fr.Body.Close()
	switch fr.Status {
	case http.StatusRequestedRangeNotSatisfiable:
		w.Header().Set("Content-Range", fr.Header.Get("Content-Range"))
		s.writeStatusProblem(w, r, fr.Status, "range_not_satisfiable",
			fmt.Sprintf("range %q is not satisfiable for a file of %s bytes", r.Header.Get("Range"), fr.Header.Get(files.HeaderFileSize)))
		return
	case http.StatusPreconditionFailed:
		s.writeProblem(w, r, errdefs.WithCode("precondition_failed", fmt.Errorf("a precondition of the request does not hold for the file: %w", errdefs.ErrPreconditionFailed)))
		return
	}
	h := w.Header()
	for _, k := range []string{"Content-Length", "Content-Range", "Content-Type", "ETag", "Last-Modified",
		"Accept-Ranges", files.HeaderFileSize, files.HeaderFileMode} {
		if v := fr.Header.Values(k); len(v) > 0 {
			h[k] = v
		}
	}
	w.WriteHeader(fr.Status)
	if r.Method == http.MethodHead || fr.Status == http.StatusNotModified {
		return
	}
	buf := make([]byte, 256<<10)
	if _, err := io.CopyBuffer(w, fr.Body, buf); err != nil && r.Context().Err() == nil {
		// The status is sent; the short body tells the client.
		s.log.Warn("file download cut short", "request_id", requestID(r), "sandbox", r.PathValue("id"), "err", err)
	}
}

// writeStatusProblem writes a problem whose status is not an error class
// of the one table (416 belongs to Range, not to a class).
func (s *Server) writeStatusProblem(w http.ResponseWriter, r *http.Request, status int, code, detail string) {
	w.Header().Set("Content-Type", api.ProblemMediaType)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(api.Problem{
		Type: problemType + code, Title: http.StatusText(status), Status: status, Detail: detail,
		Code: code, Instance: r.URL.Path, RequestID: requestID(r),
	})
}

func positiveQuery(r *http.Request, name string) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, errdefs.Invalid("%s=%q is not a positive integer", name, v)
	}
	return n, nil
}

// putQuery is the overwrite parameter of a PUT of a file's raw content,
// or why the request is refused (a multipart body: hint says where those
// go).
func putQuery(r *http.Request, hint string) (overwrite bool, err error) {
	if ct := r.Header.Get("Content-Type"); strings.HasPrefix(ct, "multipart/") {
		return false, errdefs.WithCode("unsupported_media_type", fmt.Errorf(
			"the body of a PUT is the file's content%s (got %q): %w", hint, ct, errdefs.ErrInvalidArgument))
	}
	return parseBool(r, "overwrite", true)
}
