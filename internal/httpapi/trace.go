package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/apiwire"
	"genesis.dev/sandbox/internal/console"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/trace"
)

func (s *Server) traceRoutes() {
	if s.trace == nil {
		return
	}
	s.handle("GET", "/v1/sandboxes/{id}/trace", true, s.readTrace)
	s.handle("POST", "/v1/sandboxes/{id}/trace/events", true, serveBody(s, http.StatusCreated, s.postTraceEvent))
	s.handle("GET", "/v1/sandboxes/{id}/trace/export", true, s.exportTrace)
	s.handle("POST", "/v1/traces/{id}/replay", true, serveBody(s, http.StatusOK, s.replayTrace))
	for _, op := range []string{"pause", "resume", "step", "abort"} {
		s.handle("POST", "/v1/sandboxes/{id}/trace/"+op, true, serveOptionalBody(s, http.StatusOK, s.interruptTrace(op)))
	}
}

// replayTrace serves POST /v1/traces/{id}/replay (id: the sandbox whose
// trace): see replay.Replayer.Replay.
func (s *Server) replayTrace(r *http.Request, req *api.ReplayRequest) (*api.ReplayReport, error) {
	return s.replay.Replay(r.Context(), tenantOf(r), r.PathValue("id"), *req)
}

// interruptTrace serves POST /v1/sandboxes/{id}/trace/{pause,resume,step,abort}.
func (s *Server) interruptTrace(op string) func(*http.Request, *api.TraceInterruptRequest) (api.TraceInterruption, error) {
	return func(r *http.Request, in *api.TraceInterruptRequest) (api.TraceInterruption, error) {
		actor, err := trace.CallerInterruptActor(in.Actor)
		if err != nil {
			return api.TraceInterruption{}, err
		}
		id, ten := r.PathValue("id"), tenantOf(r)
		if _, err := s.ctl.GetSandbox(r.Context(), ten, id); err != nil {
			return api.TraceInterruption{}, err
		}
		st, err := s.trace.Interrupt(r.Context(), ten, id, op, actor)
		if err != nil {
			return api.TraceInterruption{}, err
		}
		var canceled []string
		if op == "abort" {
			if canceled, err = s.jobs.CancelAgentJobs(r.Context(), ten, id); err != nil {
				return api.TraceInterruption{}, err
			}
		}
		return apiwire.Interruption(st, canceled), nil
	}
}

// traceOf opens the trace of the request's sandbox: the sandbox must be
// the caller's while it lives (its trace is made then, empty); after it is
// gone its trace is still the caller's tenant's.
func (s *Server) traceOf(r *http.Request) (string, error) {
	id, ten := r.PathValue("id"), tenantOf(r)
	if _, err := s.trace.Last(ten, id); err == nil {
		return id, nil
	}
	if _, err := s.ctl.GetSandbox(r.Context(), ten, id); err != nil {
		return "", err
	}
	return id, s.trace.Ensure(ten, id)
}

// postTraceEvent serves POST /v1/sandboxes/{id}/trace/events.
func (s *Server) postTraceEvent(r *http.Request, in *api.TraceEventRequest) (api.TraceEvent, error) {
	e, err := trace.CallerEvent(trace.Event{Actor: in.Actor, Kind: trace.Kind(in.Kind), Data: in.Data})
	if err != nil {
		return api.TraceEvent{}, err
	}
	id, err := s.traceOf(r)
	if err != nil {
		return api.TraceEvent{}, err
	}
	return wired(apiwire.TraceEvent)(s.trace.AppendCaller(r.Context(), tenantOf(r), id, e))
}

// traceCursor reads the resume point as job logs do (Last-Event-ID or
// ?cursor=, see parseCursor), or ?after= of the JSON pages: a seq, 0 the
// start.
func traceCursor(r *http.Request) (int64, error) {
	if after := r.URL.Query().Get("after"); after != "" {
		q := r.URL.Query()
		q.Set("cursor", after)
		r2 := r.Clone(r.Context())
		r2.URL.RawQuery = q.Encode()
		return parseCursor(r2)
	}
	return parseCursor(r)
}

// readTrace serves GET /v1/sandboxes/{id}/trace: SSE by default (follow
// unless ?follow=false), JSON pages with ?format=json.
func (s *Server) readTrace(w http.ResponseWriter, r *http.Request) {
	cursor, err := traceCursor(r)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	follow, err := parseBool(r, "follow", true)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	limit := 100
	if v := r.URL.Query().Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 1000 {
			s.writeProblem(w, r, errdefs.Invalid("limit=%q: want 1..1000", v))
			return
		}
	}
	format := r.URL.Query().Get("format")
	if format != "" && format != "json" && format != "sse" {
		s.writeProblem(w, r, errdefs.Invalid("format=%q: want json or sse", format))
		return
	}
	id, err := s.traceOf(r)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	ten := tenantOf(r)
	evs, changed, err := s.trace.Read(ten, id, cursor, limit)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	if format == "json" {
		next := cursor
		if len(evs) > 0 {
			next = evs[len(evs)-1].Seq
		}
		writeJSON(w, http.StatusOK, api.TracePage{Events: apiwire.TraceEvents(evs), Next: next})
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	sw := &sseWriter{w: w, rc: http.NewResponseController(w)}
	keepalive := time.NewTicker(s.keepalive)
	defer keepalive.Stop()
	ctx := r.Context()
	for {
		for _, e := range evs {
			if sw.event(strconv.FormatInt(e.Seq, 10), "trace", apiwire.TraceEvent(e)) != nil {
				return
			}
			cursor = e.Seq
		}
		if sw.flush() != nil {
			return
		}
		if len(evs) == 0 {
			if !follow {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-changed:
			case <-keepalive.C:
				if sw.comment("keepalive") != nil {
					return
				}
			}
		}
		if evs, changed, err = s.trace.Read(ten, id, cursor, 1000); err != nil {
			_ = sw.event("", "error", map[string]string{"code": errdefs.Code(err), "detail": err.Error()})
			_ = sw.flush()
			return
		}
	}
}

// exportTrace serves GET /v1/sandboxes/{id}/trace/export: a tar.gz of
// events.jsonl, the artifacts the events name (artifacts/<id>) and
// manifest.json (last) with every file's size and sha256.
func (s *Server) exportTrace(w http.ResponseWriter, r *http.Request) {
	id, err := s.traceOf(r)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	x, err := s.trace.Export(tenantOf(r), id)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/gzip")
	w.Header().Set("Content-Disposition", `attachment; filename="trace-`+id+`.tar.gz"`)
	w.WriteHeader(http.StatusOK)
	if err := x.WriteTo(r.Context(), w, trace.ExportConfig{OpenArtifact: s.arts.OpenForExport, Player: console.PlayerHTML, Logger: s.log}); err != nil {
		// The status is sent: a truncated archive (no manifest) tells the
		// client; the log says why.
		s.log.Warn("trace export ended", "sandbox", id, "err", err)
	}
}
