package httpapi

import (
	"fmt"
	"mime"
	"net/http"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/apiwire"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/sandbox"
)

// artifactRoutes registers the artifact routes.
func (s *Server) artifactRoutes() {
	s.handle("GET", "/v1/jobs/{id}/artifacts", true, serveGet(s, http.StatusOK, s.listArtifacts))
	s.handle("GET", "/v1/artifacts/{id}", true, s.downloadArtifact)
	s.handle("GET", "/v1/artifacts/{id}/meta", true, serveHeaded(s, http.StatusOK, func(h http.Header, r *http.Request) (api.Artifact, error) {
		a, err := s.arts.Get(r.Context(), tenantOf(r), r.PathValue("id"))
		if err != nil {
			return api.Artifact{}, err
		}
		h.Set("ETag", `"`+a.SHA256+`"`)
		return apiwire.Artifact(a), nil
	}))
}

// execResult is the answer of a synchronous exec, with the outcome of its
// artifact request when it made one.
func (s *Server) execResult(r *http.Request, req api.ExecRequest, out *jobs.ExecOutput) api.ExecResult {
	res := apiwire.ExecResult(out)
	if req.Artifacts != nil {
		res.Artifacts = apiwire.ArtifactSummary(s.arts.Summary(r.Context(), out.Job.ID))
	}
	return res
}

// jobWithArtifacts is a job record with the outcome of its artifact
// request, if it made one.
func (s *Server) jobWithArtifacts(r *http.Request, j *sandbox.Job) api.Job {
	w := apiwire.Job(j)
	w.Artifacts = apiwire.ArtifactSummary(s.arts.Summary(r.Context(), j.ID))
	return w
}

// listArtifacts serves GET /v1/jobs/{id}/artifacts.
func (s *Server) listArtifacts(r *http.Request) (api.ArtifactList, error) {
	jobID := r.PathValue("id")
	c, list, err := s.arts.JobArtifacts(r.Context(), tenantOf(r), jobID)
	return apiwire.ArtifactList(jobID, c, list), err
}

// downloadArtifact serves GET /v1/artifacts/{id}: the content, with Range
// (206, 416), If-None-Match and If-Range against the SHA-256 ETag.
func (s *Server) downloadArtifact(w http.ResponseWriter, r *http.Request) {
	a, f, err := s.arts.Open(r.Context(), tenantOf(r), r.PathValue("id"))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	defer f.Close()
	h := w.Header()
	h.Set("ETag", `"`+a.SHA256+`"`)
	h.Set("Content-Type", a.MIME)
	cd := mime.FormatMediaType("attachment", map[string]string{"filename": a.Name})
	if cd == "" {
		cd = "attachment"
	}
	h.Set("Content-Disposition", cd)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "private, max-age=0")
	http.ServeContent(&rangeProblemWriter{ResponseWriter: w, s: s, r: r, size: a.Size}, r, "", a.CreatedAt, f)
}

// rangeProblemWriter turns the plain-text 416 of http.ServeContent into
// the API's problem+json answer (Content-Range: bytes */size is kept).
type rangeProblemWriter struct {
	http.ResponseWriter
	s          *Server
	r          *http.Request
	size       int64
	suppressed bool
}

func (w *rangeProblemWriter) WriteHeader(code int) {
	if code != http.StatusRequestedRangeNotSatisfiable {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.suppressed = true
	w.s.writeStatusProblem(w.ResponseWriter, w.r, code, "range_not_satisfiable",
		fmt.Sprintf("range %q is not satisfiable for an artifact of %d bytes", w.r.Header.Get("Range"), w.size))
}

func (w *rangeProblemWriter) Write(b []byte) (int, error) {
	if w.suppressed {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}
