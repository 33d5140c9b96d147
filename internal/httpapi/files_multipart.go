package httpapi

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/files"
)

// uploadFiles serves POST /v1/sandboxes/{id}/files?path=DIR&mode=&overwrite=
// with a multipart/form-data body: each part's filename is its target path
// relative to DIR. The parts are streamed to the sandbox one after the
// other, never buffered whole; the upload is all or nothing (see
// files.Gateway.UploadFiles). A body announced larger than the per-call limit is
// refused before anything is read.
func (s *Server) uploadFiles(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	overwrite, err := parseBool(r, "overwrite", true)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		s.writeProblem(w, r, errdefs.WithCode("unsupported_media_type", fmt.Errorf(
			"POST files wants a multipart/form-data body with a boundary (got %q); PUT takes a raw body: %w",
			r.Header.Get("Content-Type"), errdefs.ErrInvalidArgument)))
		return
	}
	lim := s.files.Limits()
	if r.ContentLength > lim.MaxMultipartBytes {
		s.writeProblem(w, r, errdefs.WithCode(files.CodeUploadTooLarge, fmt.Errorf(
			"multipart upload of %d bytes is over the %d-byte limit: %w", r.ContentLength, lim.MaxMultipartBytes, errdefs.ErrTooLarge)))
		return
	}
	mr := multipart.NewReader(http.MaxBytesReader(w, r.Body, lim.MaxMultipartBytes), params["boundary"])
	next := func() (string, io.Reader, error) {
		part, err := mr.NextRawPart() // NextPart would decode a quoted-printable body
		if errors.Is(err, io.EOF) {
			return "", nil, io.EOF
		}
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return "", nil, errdefs.WithCode(files.CodeUploadTooLarge, fmt.Errorf(
					"multipart upload is over the %d-byte limit; nothing was written: %w", lim.MaxMultipartBytes, errdefs.ErrTooLarge))
			}
			return "", nil, fmt.Errorf("reading the multipart body: %v: %w", err, errdefs.ErrInvalidArgument)
		}
		return partFilename(part), part, nil
	}
	res, err := s.files.UploadFiles(r.Context(), files.UploadFilesInput{
		Tenant: tenantOf(r), SandboxID: r.PathValue("id"), Dir: q.Get("path"),
		Mode: q.Get("mode"), Overwrite: overwrite, Next: next,
	})
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	out := api.UploadFilesResult{Files: make([]api.UploadedFile, len(res))}
	for i, f := range res {
		out.Files[i] = api.UploadedFile(f)
	}
	writeJSON(w, http.StatusCreated, out)
}

// partFilename is the filename parameter of a part's Content-Disposition
// as sent (RFC 2231 filename* decoded), unlike multipart.Part.FileName,
// which keeps only the base name: here the name is a relative path.
func partFilename(p *multipart.Part) string {
	_, params, err := mime.ParseMediaType(p.Header.Get("Content-Disposition"))
	if err != nil {
		return ""
	}
	return params["filename"]
}
