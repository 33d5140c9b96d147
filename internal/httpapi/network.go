package httpapi

import (
	"fmt"
	"net/http"
	"strconv"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/apiwire"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

func (s *Server) networkRoutes() {
	s.handle("GET", "/v1/sandboxes/{id}/network", true, s.getNetwork)
	s.handle("PUT", "/v1/sandboxes/{id}/network", true, s.putNetwork)
	s.handle("GET", "/v1/sandboxes/{id}/network/events", true, s.networkEvents)
}

func networkETag(n *sandbox.Network) string {
	return `"` + strconv.FormatInt(n.ResourceVersion, 10) + `"`
}

func (s *Server) getNetwork(w http.ResponseWriter, r *http.Request) {
	n, err := s.ctl.GetNetwork(r.Context(), tenantOf(r), r.PathValue("id"))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.Header().Set("ETag", networkETag(n))
	writeJSON(w, http.StatusOK, apiwire.Network(n))
}

func (s *Server) putNetwork(w http.ResponseWriter, r *http.Request) {
	ifv, err := parseIfMatch(r.Header.Get("If-Match"))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	var req api.NetworkPolicy
	if err := s.decode(w, r, &req); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	n, err := s.ctl.UpdateNetwork(r.Context(), tenantOf(r), r.PathValue("id"), ifv, *apiwire.PolicyIn(&req))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.Header().Set("ETag", networkETag(n))
	writeJSON(w, http.StatusOK, apiwire.Network(n))
}

func (s *Server) networkEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	num := func(key string) (int64, error) {
		v := q.Get(key)
		if v == "" {
			return 0, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, errdefs.WithCode("invalid_cursor", fmt.Errorf("%s %q is not a number: %w", key, v, errdefs.ErrInvalidArgument))
		}
		return n, nil
	}
	cursor, err := num("cursor")
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	limit, err := num("limit")
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	page, err := s.ctl.ListNetworkEvents(r.Context(), tenantOf(r), r.PathValue("id"), cursor, int(limit))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiwire.NetworkEvents(page))
}
