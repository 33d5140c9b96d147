package httpapi

import (
	"net/http"
	"strconv"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/apiwire"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

func (s *Server) networkRoutes() {
	s.handle("GET", "/v1/sandboxes/{id}/network", true, serveHeaded(s, http.StatusOK, func(h http.Header, r *http.Request) (api.SandboxNetwork, error) {
		return networkOf(h)(s.ctl.GetNetwork(r.Context(), tenantOf(r), r.PathValue("id")))
	}))
	s.handle("PUT", "/v1/sandboxes/{id}/network", true, s.putNetwork)
	s.handle("GET", "/v1/sandboxes/{id}/network/events", true, serveGet(s, http.StatusOK, s.networkEvents))
}

// networkOf answers a sandbox's network with its ETag.
func networkOf(h http.Header) func(*sandbox.Network, error) (api.SandboxNetwork, error) {
	return func(n *sandbox.Network, err error) (api.SandboxNetwork, error) {
		if err != nil {
			return api.SandboxNetwork{}, err
		}
		h.Set("ETag", `"`+strconv.FormatInt(n.ResourceVersion, 10)+`"`)
		return apiwire.Network(n), nil
	}
}

// putNetwork serves PUT /v1/sandboxes/{id}/network; If-Match is checked
// before the body is read.
func (s *Server) putNetwork(w http.ResponseWriter, r *http.Request) {
	ifv, err := apiwire.ParseIfMatch(r.Header.Get("If-Match"))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	serveBodyHeaded(s, http.StatusOK, func(h http.Header, r *http.Request, req *api.NetworkPolicy) (api.SandboxNetwork, error) {
		return networkOf(h)(s.ctl.UpdateNetwork(r.Context(), tenantOf(r), r.PathValue("id"), ifv, *apiwire.PolicyIn(req)))
	})(w, r)
}

func (s *Server) networkEvents(r *http.Request) (api.NetworkEventList, error) {
	q := r.URL.Query()
	num := func(key string) (int64, error) {
		v := q.Get(key)
		if v == "" {
			return 0, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, errdefs.WithCode("invalid_cursor", errdefs.Invalid("%s %q is not a number", key, v))
		}
		return n, nil
	}
	cursor, err := num("cursor")
	if err != nil {
		return api.NetworkEventList{}, err
	}
	limit, err := num("limit")
	if err != nil {
		return api.NetworkEventList{}, err
	}
	return wired(apiwire.NetworkEvents)(s.ctl.ListNetworkEvents(r.Context(), tenantOf(r), r.PathValue("id"), cursor, int(limit)))
}
