package httpapi

import (
	"fmt"
	"mime"
	"net/http"
	"strconv"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/apiwire"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/skills"
)

// Skill routes:
//
//	POST /v1/skills                             push an archive (tar, tar.gz or zip of a folder with SKILL.md)
//	GET  /v1/skills                             the tenant's skills (latest revision of each)
//	GET  /v1/skills/{name}                      the latest revision
//	GET  /v1/skills/{name}/revisions            every revision, newest first
//	GET  /v1/skills/{name}/revisions/{revision} one revision
//	GET  /v1/skills/{name}/files/{path...}      a file of a revision (?revision=N)
//	POST /v1/skills/{name}/runs                 run one of its scripts {revision, script, args, stdin, files, timeout_ms}
//	POST|GET|DELETE /v1/mcp/skills              the tenant's skills MCP server (the tenant's API key)
func (s *Server) skillRoutes() {
	if s.skills == nil {
		return
	}
	s.handle("POST", "/v1/skills", true, s.pushSkill)
	s.handle("GET", "/v1/skills", true, serveGet(s, http.StatusOK, func(r *http.Request) (api.SkillList, error) {
		list, err := s.skills.List(r.Context(), tenantOf(r))
		return api.SkillList{Items: apiwire.SkillRevisions(list)}, err
	}))
	s.handle("GET", "/v1/skills/{name}", true, serveGet(s, http.StatusOK, func(r *http.Request) (api.SkillRevision, error) {
		return wired(apiwire.SkillRevision)(s.skills.Get(r.Context(), tenantOf(r), r.PathValue("name"), 0))
	}))
	s.handle("GET", "/v1/skills/{name}/revisions", true, serveGet(s, http.StatusOK, func(r *http.Request) (api.SkillRevisionList, error) {
		list, err := s.skills.Revisions(r.Context(), tenantOf(r), r.PathValue("name"))
		return api.SkillRevisionList{Items: apiwire.SkillRevisions(list)}, err
	}))
	s.handle("GET", "/v1/skills/{name}/revisions/{revision}", true, serveGet(s, http.StatusOK, func(r *http.Request) (api.SkillRevision, error) {
		return wired(apiwire.SkillRevision)(s.skillRevision(r, r.PathValue("revision"))) // never "": the pattern needs a segment
	}))
	s.handle("GET", "/v1/skills/{name}/files/{path...}", true, s.getSkillFile)
	s.handle("POST", "/v1/skills/{name}/runs", true, serveBody(s, http.StatusOK, func(r *http.Request, req *api.SkillRunRequest) (api.SkillRun, error) {
		return wired(apiwire.SkillRun)(s.skills.Run(r.Context(), tenantOf(r), r.PathValue("name"), apiwire.SkillRunIn(*req)))
	}))
	h := s.skills.MCPHandler(tenantOf, "1")
	for _, m := range []string{"POST", "GET", "DELETE"} {
		s.handle(m, "/v1/mcp/skills", true, h.ServeHTTP)
	}
}

// skillArchiveTypes are the Content-Types a push accepts; the archive's
// own magic bytes decide how it is read.
var skillArchiveTypes = map[string]bool{
	"application/gzip": true, "application/x-gzip": true, "application/x-tar": true, "application/zip": true,
	"application/octet-stream": true, "application/x-compressed-tar": true,
}

func (s *Server) pushSkill(w http.ResponseWriter, r *http.Request) {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if !skillArchiveTypes[ct] {
		s.writeProblem(w, r, errdefs.WithCode("unsupported_media_type", fmt.Errorf(
			"Content-Type must be an archive (application/gzip, application/x-tar, application/zip or application/octet-stream), got %q: %w",
			r.Header.Get("Content-Type"), errdefs.ErrInvalidArgument)))
		return
	}
	rev, created, err := s.skills.Push(r.Context(), tenantOf(r), r.Body)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/skills/"+rev.Name+"/revisions/"+strconv.FormatInt(rev.Revision, 10))
	status := http.StatusCreated
	if !created {
		status = http.StatusOK // the latest revision already has this content
	}
	writeJSON(w, status, apiwire.SkillRevision(rev))
}

// revisionParam reads a revision number: "" is 0 (the latest).
func revisionParam(v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return 0, errdefs.WithCode("invalid_argument", errdefs.Invalid("revision must be a positive integer, got %q", v))
	}
	return n, nil
}

// skillRevision is the revision of the path's skill that revision (a
// number, "" or "latest") names.
func (s *Server) skillRevision(r *http.Request, revision string) (*skills.Revision, error) {
	n, err := revisionParam(revision)
	if err != nil {
		return nil, err
	}
	return s.skills.Get(r.Context(), tenantOf(r), r.PathValue("name"), n)
}

func (s *Server) getSkillFile(w http.ResponseWriter, r *http.Request) {
	rev, err := s.skillRevision(r, r.URL.Query().Get("revision"))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	p := r.PathValue("path")
	data, err := s.skills.ReadFile(r.Context(), rev, p)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.Header().Set("Content-Type", skills.FileContentType(p))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Skill-Revision", strconv.FormatInt(rev.Revision, 10))
	w.Header().Set("X-Skill-Digest", rev.Digest)
	_, _ = w.Write(data)
}
