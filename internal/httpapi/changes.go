package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/apiwire"
	"genesis.dev/sandbox/internal/changes"
	"genesis.dev/sandbox/internal/errdefs"
)

// Routes of a sandbox's changes (docs/diff-patch.md):
//
//	GET  /v1/sandboxes/{id}/diff?base=&format=   its workspace against a base: JSON, or text/x-patch
//	POST /v1/sandboxes/{id}/patch?dry_run=       a unified or git diff as the body: 200 {applied, files}
func (s *Server) changeRoutes() {
	if s.changes == nil {
		return
	}
	s.handle("GET", "/v1/sandboxes/{id}/diff", true, s.diffSandbox)
	s.handle("POST", "/v1/sandboxes/{id}/patch", true, s.applyPatch)
}

// wantsPatch reports whether a diff is asked for as text: format=patch,
// or an Accept naming text/x-patch (or text/x-diff) and not JSON.
func wantsPatch(r *http.Request) (bool, error) {
	switch f := r.URL.Query().Get("format"); f {
	case "patch":
		return true, nil
	case "json":
		return false, nil
	case "":
		a := r.Header.Get("Accept")
		return (strings.Contains(a, "text/x-patch") || strings.Contains(a, "text/x-diff")) && !strings.Contains(a, "application/json"), nil
	default:
		return false, errdefs.WithCode("invalid_format", errdefs.Mark(fmt.Errorf("format=%.40q: want json or patch", f), errdefs.ErrInvalidArgument))
	}
}

func (s *Server) diffSandbox(w http.ResponseWriter, r *http.Request) {
	asPatch, err := wantsPatch(r)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	res, err := s.changes.Diff(r.Context(), tenantOf(r), r.PathValue("id"), r.URL.Query().Get("base"))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	if !asPatch {
		writeJSON(w, http.StatusOK, apiwire.Diff(res))
		return
	}
	w.Header().Set("Content-Type", "text/x-patch; charset=utf-8")
	w.Header().Set("Genesis-Diff-Files", strconv.Itoa(res.Summary.Files))
	w.Header().Set("Genesis-Diff-Truncated", strconv.FormatBool(res.Truncated))
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, res.Patch())
}

func (s *Server) applyPatch(w http.ResponseWriter, r *http.Request) {
	dry, err := parseBool(r, "dry_run", false)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	ct := r.Header.Get("Content-Type")
	if strings.HasPrefix(ct, "multipart/") {
		s.writeProblem(w, r, errdefs.WithCode("unsupported_media_type", errdefs.Mark(fmt.Errorf(
			"the body is the patch itself (text/x-patch or text/plain) or a JSON object {\"patch\": …}, got Content-Type %q", ct), errdefs.ErrInvalidArgument)))
		return
	}
	max := s.changes.Limits().MaxPatchBytes
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 2*max)) // JSON escaping may double a patch
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			s.writeProblem(w, r, errdefs.WithCode(changes.CodePatchTooLarge, errdefs.Mark(fmt.Errorf(
				"the patch is over the %d-byte limit; nothing was changed", max), errdefs.ErrTooLarge)))
			return
		}
		s.writeProblem(w, r, errdefs.Mark(fmt.Errorf("reading the patch: %v", err), errdefs.ErrInvalidArgument))
		return
	}
	if strings.HasPrefix(ct, "application/json") {
		var req api.PatchRequest
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		err := dec.Decode(&req)
		if err == nil && dec.More() {
			err = errors.New("json: data after the JSON value")
		}
		if err != nil {
			s.writeProblem(w, r, errdefs.Mark(fmt.Errorf("a JSON body is {\"patch\": \"…\", \"dry_run\": false}: %v", apiwire.DecodeError(err, &req)), errdefs.ErrInvalidArgument))
			return
		}
		body, dry = []byte(req.Patch), dry || req.DryRun
	}
	res, err := s.changes.Patch(r.Context(), tenantOf(r), r.PathValue("id"), body, changes.PatchOptions{DryRun: dry})
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiwire.PatchResult(res))
}
