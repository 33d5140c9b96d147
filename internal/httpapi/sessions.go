package httpapi

import (
	"net/http"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/apiwire"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/slowlog"
)

// sessionRoutes serves the shell sessions and the code contexts (sessions
// of kind python): each kind's routes answer 404 for the other's ids.
func (s *Server) sessionRoutes() {
	s.handle("POST", "/v1/sandboxes/{id}/sessions", true, serveHeaded(s, http.StatusCreated, func(h http.Header, r *http.Request) (api.Session, error) {
		se, err := s.jobs.CreateSession(r.Context(), tenantOf(r), r.PathValue("id"))
		return created(h, "/v1/sessions/", se, err)
	}))
	s.handle("GET", "/v1/sessions/{id}", true, serveGet(s, http.StatusOK, s.getSessionOf(sandbox.SessionShell)))
	s.handle("POST", "/v1/sessions/{id}/exec", true, s.sessionExec)
	s.handle("DELETE", "/v1/sessions/{id}", true, serveNoContent(s, s.closeSession(sandbox.SessionShell)))
	s.handle("POST", "/v1/sandboxes/{id}/contexts", true, serveBodyHeaded(s, http.StatusCreated, func(h http.Header, r *http.Request, req *api.CreateContextRequest) (api.Session, error) {
		se, err := s.jobs.CreateContext(r.Context(), tenantOf(r), r.PathValue("id"), req.Language)
		return created(h, "/v1/contexts/", se, err)
	}))
	s.handle("GET", "/v1/contexts/{id}", true, serveGet(s, http.StatusOK, s.getSessionOf(sandbox.SessionPython)))
	s.handle("POST", "/v1/contexts/{id}/run", true, serveBody(s, http.StatusOK, func(r *http.Request, req *api.RunCodeRequest) (api.RunCodeResult, error) {
		slowlog.AllowMS(r.Context(), req.TimeoutMS, s.execTimeout)
		return wired(apiwire.RunCode)(s.jobs.RunCode(r.Context(), tenantOf(r), r.PathValue("id"), req.Code, req.TimeoutMS))
	}))
	s.handle("DELETE", "/v1/contexts/{id}", true, serveNoContent(s, s.closeSession(sandbox.SessionPython)))
}

// created answers a created session and its Location (prefix + id).
func created(h http.Header, prefix string, se *sandbox.Session, err error) (api.Session, error) {
	if err != nil {
		return api.Session{}, err
	}
	h.Set("Location", prefix+se.ID)
	return apiwire.Session(se), nil
}

// getSessionOf answers the request's session if it is of kind (a shell
// session's routes do not serve a code context, nor the reverse).
func (s *Server) getSessionOf(kind sandbox.SessionKind) func(*http.Request) (api.Session, error) {
	return func(r *http.Request) (api.Session, error) {
		return wired(apiwire.Session)(s.jobs.GetSessionOf(r.Context(), tenantOf(r), r.PathValue("id"), kind))
	}
}

// closeSession closes the request's session if it is of kind.
func (s *Server) closeSession(kind sandbox.SessionKind) func(*http.Request) error {
	return func(r *http.Request) error {
		return s.jobs.CloseSessionOf(r.Context(), tenantOf(r), r.PathValue("id"), kind)
	}
}

func (s *Server) sessionExec(w http.ResponseWriter, r *http.Request) {
	req, in, err := s.execIn(w, r)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	if req.Background || wantsEventStream(r) {
		s.writeProblem(w, r, invalidArg("background and streamed execution are not available in sessions yet; use the sandbox exec"))
		return
	}
	out, err := s.jobs.SessionExec(r.Context(), r.PathValue("id"), in)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.execResult(r, req, out))
}
