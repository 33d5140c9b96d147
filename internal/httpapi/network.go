package httpapi

import (
	"fmt"
	"net/http"
	"strconv"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/egress"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

func (s *Server) networkRoutes() {
	s.handle("GET", "/v1/sandboxes/{id}/network", true, s.getNetwork)
	s.handle("PUT", "/v1/sandboxes/{id}/network", true, s.putNetwork)
	s.handle("GET", "/v1/sandboxes/{id}/network/events", true, s.networkEvents)
}

// policyIn converts a wire policy; nil stays nil.
func policyIn(p *api.NetworkPolicy) *egress.Policy {
	if p == nil {
		return nil
	}
	out := &egress.Policy{Mode: egress.Mode(p.Mode), Endpoints: p.Endpoints, Tools: p.Tools}
	for _, r := range p.Allow {
		out.Allow = append(out.Allow, egress.Rule{Host: r.Host, CIDR: r.CIDR, Ports: r.Ports})
	}
	return out
}

func policyOut(p egress.Policy) api.NetworkPolicy {
	out := api.NetworkPolicy{Mode: string(p.Mode), Endpoints: p.Endpoints, Tools: p.Tools}
	for _, r := range p.Allow {
		out.Allow = append(out.Allow, api.NetworkRule{Host: r.Host, CIDR: r.CIDR, Ports: r.Ports})
	}
	return out
}

func networkWire(n *sandbox.Network) api.SandboxNetwork {
	return api.SandboxNetwork{SandboxID: n.SandboxID, Policy: policyOut(n.Policy), Status: string(n.Status),
		StatusReason: n.StatusReason, GatewayIP: n.GatewayIP, ResourceVersion: strconv.FormatInt(n.ResourceVersion, 10),
		UpdatedAt: n.UpdatedAt}
}

func networkSummaryWire(n *sandbox.NetworkSummary) *api.NetworkSummary {
	if n == nil {
		return nil
	}
	return &api.NetworkSummary{Mode: string(n.Mode), Status: string(n.Status), StatusReason: n.StatusReason}
}

func networkCapabilitiesWire(c control.NetworkCapability) api.NetworkCapabilities {
	out := api.NetworkCapabilities{Modes: map[string]bool{}, Gateway: c.Gateway, Reason: c.Reason,
		Tools: append([]string{}, c.Tools...), Endpoints: append([]string{}, c.Endpoints...)}
	for m, ok := range c.Modes {
		out.Modes[string(m)] = ok
	}
	return out
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
	writeJSON(w, http.StatusOK, networkWire(n))
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
	n, err := s.ctl.UpdateNetwork(r.Context(), tenantOf(r), r.PathValue("id"), ifv, *policyIn(&req))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.Header().Set("ETag", networkETag(n))
	writeJSON(w, http.StatusOK, networkWire(n))
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
	out := api.NetworkEventList{Items: make([]api.NetworkEvent, len(page.Events)), NextCursor: strconv.FormatInt(page.Next, 10)}
	for i, e := range page.Events {
		out.Items[i] = api.NetworkEvent{Cursor: e.Cursor, Time: e.Time, DurationMS: e.DurationMS, Name: e.Name, Address: e.Address, Port: e.Port,
			Proto: e.Proto, Decision: e.Decision, Reason: e.Reason, BytesUp: e.BytesUp, BytesDown: e.BytesDown}
	}
	writeJSON(w, http.StatusOK, out)
}
