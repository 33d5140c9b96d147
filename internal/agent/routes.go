package agent

import (
	"fmt"
	"net/http"
	"strconv"

	"genesis.dev/sandbox/internal/agent/agentproto"
)

// Handler returns the HTTP handler serving the agentproto routes. A path
// the agent does not serve answers 404, a method a path does not take 405
// (with Allow), both with an agentproto.Error body.
func (s *Server) Handler() http.Handler {
	mux := s.routes()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern == "" {
			mux.ServeHTTP(&problemWriter{ResponseWriter: w, path: r.URL.Path}, r)
			return
		}
		mux.ServeHTTP(w, r)
		if r.URL.Path != agentproto.PathPing {
			s.firstSpare.Do(s.firstSpareSoon)
		}
	})
}

// routes is the one table of the agent's routes.
func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	handle := func(method, path string, h http.HandlerFunc) { mux.HandleFunc(method+" "+path, h) }
	// Collections answer with and without a trailing slash, as before.
	handleColl := func(method, path string, h http.HandlerFunc) {
		handle(method, path, h)
		handle(method, path+"/{$}", h)
	}

	handle(http.MethodGet, agentproto.PathPing, func(w http.ResponseWriter, _ *http.Request) { s.handlePing(w) })
	handle(http.MethodPost, agentproto.PathReset, s.handleReset)
	handle(http.MethodPost, agentproto.PathCheckpointPrepare, s.handleCheckpointPrepare)
	handle(http.MethodPost, agentproto.PathToken, s.handleToken)
	handle(http.MethodPost, agentproto.PathExec, s.handleExec)

	handleColl(http.MethodPost, agentproto.PathJobs, s.handleJobStart)
	handleColl(http.MethodGet, agentproto.PathJobs, s.handleJobList)
	handle(http.MethodGet, agentproto.PathJob, s.withJob(func(w http.ResponseWriter, _ *http.Request, j *bgJob) {
		writeJSON(w, http.StatusOK, j.info())
	}))
	handle(http.MethodDelete, agentproto.PathJob, s.handleJobForget)
	handle(http.MethodGet, agentproto.PathJobStream, s.withJob(s.handleJobStream))
	handle(http.MethodPost, agentproto.PathJobCancel, s.withJob(s.handleJobCancel))
	handle(http.MethodPost, agentproto.PathJobRelease, s.withJob(s.handleJobRelease))
	handle(http.MethodPut, agentproto.PathJobStdin, s.withJob(s.handleJobStdin))
	handle(http.MethodPost, agentproto.PathJobStdinClose, s.withJob(func(w http.ResponseWriter, _ *http.Request, j *bgJob) {
		s.handleJobStdinClose(w, j)
	}))

	handleColl(http.MethodPost, agentproto.PathTerminals, s.handleTerminalStart)
	handleColl(http.MethodGet, agentproto.PathTerminals, s.handleTerminalList)
	handle(http.MethodGet, agentproto.PathTerminal, s.withTerminal(func(w http.ResponseWriter, _ *http.Request, t *terminal) {
		writeJSON(w, http.StatusOK, t.info())
	}))
	handle(http.MethodDelete, agentproto.PathTerminal, s.withTerminal(func(w http.ResponseWriter, _ *http.Request, t *terminal) {
		s.deleteTerminal(t)
		w.WriteHeader(http.StatusNoContent)
	}))
	handle(http.MethodPost, agentproto.PathTerminalResize, s.withTerminal(s.handleTerminalResize))
	handle(http.MethodPost, agentproto.PathTerminalAttach, s.withTerminal(s.handleTerminalAttach))

	handle(http.MethodPut, agentproto.PathFiles, s.handleFileWrite)
	handle(http.MethodGet, agentproto.PathFiles, s.handleFileRead) // and HEAD
	handle(http.MethodGet, agentproto.PathFilesStat, s.handleFileStat)
	handle(http.MethodGet, agentproto.PathFilesList, s.handleFileList)
	handle(http.MethodGet, agentproto.PathFilesArchive, s.handleArchive)
	handle(http.MethodPost, agentproto.PathFilesMkdir, s.handleMkdir)
	handle(http.MethodPost, agentproto.PathFilesMove, s.handleMove)
	handle(http.MethodPost, agentproto.PathFilesDelete, s.handleDelete)
	handle(http.MethodPost, agentproto.PathFilesChmod, s.handleChmod)
	handle(http.MethodPost, agentproto.PathFilesExtract, s.handleExtract)
	handle(http.MethodPost, agentproto.PathFilesSearch, s.handleSearch)
	handle(http.MethodPost, agentproto.PathFilesReplace, s.handleReplace)

	handle(http.MethodPost, agentproto.PathPortDial, func(w http.ResponseWriter, r *http.Request) {
		port, err := parsePort(r.PathValue("port"))
		if err != nil {
			writeError(w, err)
			return
		}
		s.handlePortDial(w, r, port)
	})
	return mux
}

// withJob resolves the {id} of a job route.
func (s *Server) withJob(h func(http.ResponseWriter, *http.Request, *bgJob)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		j, err := s.jobs.get(r.PathValue("id"))
		if err != nil {
			writeError(w, err)
			return
		}
		h(w, r, j)
	}
}

// withTerminal resolves the {id} of a terminal route.
func (s *Server) withTerminal(h func(http.ResponseWriter, *http.Request, *terminal)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		t, err := s.terms.get(r.PathValue("id"))
		if err != nil {
			writeError(w, err)
			return
		}
		h(w, r, t)
	}
}

// problemWriter turns the mux's plain-text 404 and 405 answers into
// agentproto.Error bodies; the status and the Allow header stay.
type problemWriter struct {
	http.ResponseWriter
	path  string
	wrote bool
}

func (p *problemWriter) WriteHeader(status int) {
	if p.wrote {
		return
	}
	p.wrote = true
	e := agentproto.Error{Code: "not_found", Message: fmt.Sprintf("no route %s: not found", p.path)}
	if status == http.StatusMethodNotAllowed {
		e = agentproto.Error{Code: "method_not_allowed", Message: fmt.Sprintf("%s wants %s", p.path, p.Header().Get("Allow"))}
	}
	h := p.Header()
	h.Del("X-Content-Type-Options")
	b := marshalError(e)
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	p.ResponseWriter.WriteHeader(status)
	p.ResponseWriter.Write(b)
}

func (p *problemWriter) Write(b []byte) (int, error) {
	if !p.wrote {
		p.WriteHeader(http.StatusOK)
	}
	return len(b), nil // the mux's text is replaced
}
