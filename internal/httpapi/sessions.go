package httpapi

import (
	"net/http"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/apiwire"
	"genesis.dev/sandbox/internal/sandbox"
)

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) {
	se, err := s.jobs.CreateSession(r.Context(), tenantOf(r), r.PathValue("id"))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/sessions/"+se.ID)
	writeJSON(w, http.StatusCreated, apiwire.Session(se))
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) {
	se, err := s.jobs.GetSession(r.Context(), tenantOf(r), r.PathValue("id"))
	if err != nil || se.Kind != sandbox.SessionShell {
		if err == nil {
			err = notFound("session", r.PathValue("id"))
		}
		s.writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiwire.Session(se))
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) {
	s.closeSession(w, r, sandbox.SessionShell, "session")
}

func (s *Server) closeSession(w http.ResponseWriter, r *http.Request, kind sandbox.SessionKind, what string) {
	se, err := s.jobs.GetSession(r.Context(), tenantOf(r), r.PathValue("id"))
	if err == nil && se.Kind != kind {
		err = notFound(what, r.PathValue("id"))
	}
	if err == nil {
		err = s.jobs.CloseSession(r.Context(), tenantOf(r), se.ID)
	}
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) sessionExec(w http.ResponseWriter, r *http.Request) {
	var req api.ExecRequest
	if err := s.decode(w, r, &req); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	in, err := execInput(r, req)
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

func (s *Server) createContext(w http.ResponseWriter, r *http.Request) {
	var req api.CreateContextRequest
	if err := s.decode(w, r, &req); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	se, err := s.jobs.CreateContext(r.Context(), tenantOf(r), r.PathValue("id"), req.Language)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/contexts/"+se.ID)
	writeJSON(w, http.StatusCreated, apiwire.Session(se))
}

func (s *Server) getContext(w http.ResponseWriter, r *http.Request) {
	se, err := s.jobs.GetSession(r.Context(), tenantOf(r), r.PathValue("id"))
	if err == nil && se.Kind != sandbox.SessionPython {
		err = notFound("context", r.PathValue("id"))
	}
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiwire.Session(se))
}

func (s *Server) deleteContext(w http.ResponseWriter, r *http.Request) {
	s.closeSession(w, r, sandbox.SessionPython, "context")
}

func (s *Server) runCode(w http.ResponseWriter, r *http.Request) {
	var req api.RunCodeRequest
	if err := s.decode(w, r, &req); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	res, err := s.jobs.RunCode(r.Context(), tenantOf(r), r.PathValue("id"), req.Code, req.TimeoutMS)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	out := apiwire.RunCode(res)
	writeJSON(w, http.StatusOK, out)
}
