package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"genesis.dev/sandbox/internal/egress"
	"genesis.dev/sandbox/internal/errdefs"
)

const (
	maxControlBody   = 4 << 20
	defaultPageLimit = 1000
	maxPageLimit     = 10000
)

// controlHandler serves the control API (see egress/proto.go).
func (s *Server) controlHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("PUT "+egress.PathSandboxes+"/{id}", func(w http.ResponseWriter, r *http.Request) {
		var cfg egress.SandboxConfig
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxControlBody))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			writeError(w, errdefs.WithCode(egress.CodeInvalidPolicy, fmt.Errorf("gateway: sandbox config: %v: %w", err, errdefs.ErrInvalidArgument)))
			return
		}
		st, err := s.Put(r.Context(), r.PathValue("id"), cfg)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, st)
	})
	mux.HandleFunc("DELETE "+egress.PathSandboxes+"/{id}", func(w http.ResponseWriter, r *http.Request) {
		s.Delete(r.PathValue("id"))
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET "+egress.PathSandboxes, func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		l := egress.SandboxList{Sandboxes: []egress.SandboxStatus{}}
		for _, sb := range s.byID {
			l.Sandboxes = append(l.Sandboxes, s.status(sb))
		}
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, l)
	})
	mux.HandleFunc("GET "+egress.PathEvents, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		after, limit := uint64(0), defaultPageLimit
		var err error
		if v := q.Get("after"); v != "" {
			if after, err = strconv.ParseUint(v, 10, 64); err != nil {
				writeError(w, fmt.Errorf("gateway: after=%q: %w", v, errdefs.ErrInvalidArgument))
				return
			}
		}
		if v := q.Get("limit"); v != "" {
			if limit, err = strconv.Atoi(v); err != nil || limit < 1 {
				writeError(w, fmt.Errorf("gateway: limit=%q: %w", v, errdefs.ErrInvalidArgument))
				return
			}
		}
		writeJSON(w, http.StatusOK, s.events.since(after, min(limit, maxPageLimit)))
	})
	mux.HandleFunc("GET "+egress.PathCounters, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Counters())
	})
	mux.HandleFunc("GET "+egress.PathHealth, func(w http.ResponseWriter, r *http.Request) {
		// No lock: health must answer while a PUT waits for an address.
		writeJSON(w, http.StatusOK, egress.Health{Status: "ok", Version: s.cfg.Version, Started: s.started.UTC(),
			Sandboxes: int(s.nSandboxes.Load()), LastSeq: s.events.last()})
	})
	return mux
}

// Counters returns the running totals.
func (s *Server) Counters() egress.Counters {
	n := int(s.nSandboxes.Load())
	c := &s.counters
	return egress.Counters{DNSAllowed: c.dnsAllowed.Load(), DNSDenied: c.dnsDenied.Load(), ConnAllowed: c.connAllowed.Load(),
		ConnDenied: c.connDenied.Load(), ConnActive: c.connActive.Load(), BytesUp: c.bytesUp.Load(), BytesDown: c.bytesDown.Load(),
		EventsDropped: s.events.dropped.Load(), Sandboxes: n}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	status := errdefs.HTTPStatus(err)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		status = http.StatusRequestEntityTooLarge
	}
	writeJSON(w, status, egress.Error{Code: errdefs.Code(err), Message: err.Error()})
}
