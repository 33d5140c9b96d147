package httpapi

import (
	"fmt"
	"net/http"
	"strconv"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/apiwire"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/mcp/servers"
	"genesis.dev/sandbox/internal/tenant"
)

// MCP server routes:
//
//	POST   /v1/mcp/servers                      start an instance {catalog | spec, tools, …}
//	GET    /v1/mcp/servers                      the tenant's instances
//	GET    /v1/mcp/servers/{id}                 one instance
//	DELETE /v1/mcp/servers/{id}                 stop it (and its own lease)
//	GET    /v1/mcp/servers/{id}/tools           its tools as clients see them
//	GET    /v1/mcp/servers/{id}/pins            its tool pins (and changes)
//	POST   /v1/mcp/servers/{id}/pins/{tool}/approve   approve a changed tool {hash}
//	GET    /v1/mcp/servers/{id}/calls           its call records (?cursor, ?limit)
//	GET    /v1/mcp/servers/{id}/approvals       its held calls (tools.approve)
//	POST   /v1/mcp/servers/{id}/approvals/{approval}  decide one {decision, args_digest, reason}
//	GET    /v1/mcp/catalog                      the catalog
//	POST|GET|DELETE /v1/mcp/servers/{id}/mcp    the Streamable HTTP endpoint (instance token)
func (s *Server) mcpRoutes() {
	if s.mcp == nil {
		return
	}
	s.handle("POST", "/v1/mcp/servers", true, s.createMCPServer)
	s.handle("GET", "/v1/mcp/servers", true, s.listMCPServers)
	s.handle("GET", "/v1/mcp/servers/{id}", true, s.getMCPServer)
	s.handle("DELETE", "/v1/mcp/servers/{id}", true, s.deleteMCPServer)
	s.handle("GET", "/v1/mcp/servers/{id}/tools", true, s.mcpServerTools)
	s.handle("GET", "/v1/mcp/servers/{id}/pins", true, s.mcpServerPins)
	s.handle("POST", "/v1/mcp/servers/{id}/pins/{tool}/approve", true, s.approveMCPPin)
	s.handle("GET", "/v1/mcp/servers/{id}/calls", true, s.mcpServerCalls)
	s.handle("GET", "/v1/mcp/servers/{id}/approvals", true, serveGet(s, http.StatusOK, s.mcpApprovals))
	s.handle("POST", "/v1/mcp/servers/{id}/approvals/{approval}", true, s.decideMCPApproval)
	s.handle("GET", "/v1/mcp/catalog", true, serveGet(s, http.StatusOK, s.mcpCatalog))
	s.handle("POST", "/v1/mcp/catalog", true, s.addMCPCatalogEntry)
	s.handle("GET", "/v1/mcp/catalog/{name}", true, s.getMCPCatalogEntry)
	s.handle("DELETE", "/v1/mcp/catalog/{name}", true, s.deleteMCPCatalogEntry)
	// The endpoint an MCP client connects to: authenticated by the
	// instance's own token (never a tenant key), its calls audited one by
	// one by the manager rather than as HTTP requests.
	for _, m := range []string{"POST", "GET", "DELETE"} {
		pattern := "/v1/mcp/servers/{id}/mcp"
		s.routes = append(s.routes, Route{Method: m, Pattern: pattern, Unaudited: true})
		s.unaudited[pattern] = true
		route := m + " " + pattern
		s.mux.Handle(route, s.metrics.instrument(route, http.HandlerFunc(s.serveMCP)))
	}
}

func (s *Server) createMCPServer(w http.ResponseWriter, r *http.Request) {
	var req api.MCPCreateRequest
	if err := s.decode(w, r, &req); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	in := apiwire.MCPCreateIn(req)
	in.CreatedBy = principalOf(r).KeyID
	inst, err := s.mcp.Create(r.Context(), tenantOf(r), in)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/mcp/servers/"+inst.ID)
	writeJSON(w, http.StatusCreated, apiwire.MCPServer(inst))
}

func (s *Server) listMCPServers(w http.ResponseWriter, r *http.Request) {
	items := s.mcp.List(tenantOf(r))
	out := api.MCPServerList{Items: make([]api.MCPServer, len(items))}
	for i := range items {
		out.Items[i] = apiwire.MCPServer(&items[i])
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getMCPServer(w http.ResponseWriter, r *http.Request) {
	inst, err := s.mcp.Get(tenantOf(r), r.PathValue("id"))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiwire.MCPServer(inst))
}

func (s *Server) deleteMCPServer(w http.ResponseWriter, r *http.Request) {
	if err := s.mcp.Delete(tenantOf(r), r.PathValue("id")); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) mcpServerTools(w http.ResponseWriter, r *http.Request) {
	tools, err := s.mcp.Tools(r.Context(), tenantOf(r), r.PathValue("id"))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	if tools == nil {
		writeJSON(w, http.StatusOK, map[string]any{"items": []any{}})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": tools})
}

func (s *Server) mcpServerPins(w http.ResponseWriter, r *http.Request) {
	pins, err := s.mcp.Pins(tenantOf(r), r.PathValue("id"))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.MCPPinList{Items: apiwire.MCPPins(pins)})
}

func (s *Server) approveMCPPin(w http.ResponseWriter, r *http.Request) {
	var req api.ApproveMCPPinRequest
	if err := s.decode(w, r, &req); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	if err := s.mayApprove(r); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	pin, err := s.mcp.ApprovePin(tenantOf(r), r.PathValue("id"), r.PathValue("tool"), req.Hash, principalOf(r).KeyID)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiwire.MCPPin(pin))
}

func (s *Server) mcpServerCalls(w http.ResponseWriter, r *http.Request) {
	var cursor int64
	if c := r.URL.Query().Get("cursor"); c != "" {
		n, err := strconv.ParseInt(c, 10, 64)
		if err != nil || n < 0 {
			s.writeProblem(w, r, errdefs.WithCode("invalid_cursor", errdefs.Invalid("cursor must be a cursor from a previous page, got %q", c)))
			return
		}
		cursor = n
	}
	limit := 100
	if l := r.URL.Query().Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 1000 {
			s.writeProblem(w, r, errdefs.Invalid("limit must be between 1 and 1000, got %q", l))
			return
		}
		limit = n
	}
	recs, next, err := s.mcp.Calls(r.Context(), tenantOf(r), r.PathValue("id"), cursor, limit)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	if recs == nil {
		recs = []servers.CallEntry{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": recs, "next_cursor": next})
}

func (s *Server) mcpApprovals(r *http.Request) (api.MCPApprovalList, error) {
	items, err := s.mcp.Approvals(tenantOf(r), r.PathValue("id"))
	out := api.MCPApprovalList{Items: make([]api.MCPApproval, len(items))}
	for i := range items {
		out.Items[i] = apiwire.MCPApproval(&items[i])
	}
	return out, err
}

func (s *Server) decideMCPApproval(w http.ResponseWriter, r *http.Request) {
	var req api.MCPApprovalDecision
	if err := s.decode(w, r, &req); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	p := principalOf(r)
	if err := s.mayApprove(r); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	by := p.Tenant
	if p.KeyID != "" {
		by += "/" + p.KeyID
	}
	ap, err := s.mcp.Decide(p.Tenant, r.PathValue("id"), r.PathValue("approval"),
		servers.ApprovalDecision{Decision: req.Decision, ArgsDigest: req.ArgsDigest, Reason: req.Reason, KeyID: p.KeyID, By: by})
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiwire.MCPApproval(ap))
}

// mayApprove lets a key with the scope approve, or an admin's, decide
// the held calls and approve the changed tools of the request's instance:
// not a plain key of the tenant, which an agent holds. (The manager
// refuses the key that started the instance, whatever its scopes.) An
// instance that is not the tenant's is not found first, as on every route.
func (s *Server) mayApprove(r *http.Request) error {
	p := principalOf(r)
	if _, err := s.mcp.Get(p.Tenant, r.PathValue("id")); err != nil {
		return err
	}
	if p.Admin || p.Has(tenant.ScopeApprove) {
		return nil
	}
	return errdefs.WithCode("approve_scope_required", fmt.Errorf(
		"deciding an MCP approval needs a key with the scope %q (POST /v1/tenants/{name}/keys {\"scopes\": [\"approve\"]}, or tenants.<name>.approver_keys) or an admin key; key %s has none: %w",
		tenant.ScopeApprove, p.KeyID, errdefs.ErrPermissionDenied))
}

func (s *Server) mcpCatalog(r *http.Request) (api.MCPCatalog, error) {
	items, err := s.mcp.CatalogFor(r.Context(), tenantOf(r))
	out := api.MCPCatalog{Items: make([]api.MCPCatalogEntry, len(items))}
	for i := range items {
		out.Items[i] = apiwire.MCPCatalogEntry(&items[i])
	}
	return out, err
}

func (s *Server) addMCPCatalogEntry(w http.ResponseWriter, r *http.Request) {
	var e servers.Entry // owner and created_at are the manager's to set
	if err := s.decode(w, r, &e); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	out, err := s.mcp.AddCatalogEntry(r.Context(), tenantOf(r), e)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/mcp/catalog/"+out.Name)
	writeJSON(w, http.StatusCreated, apiwire.MCPCatalogEntry(out))
}

func (s *Server) getMCPCatalogEntry(w http.ResponseWriter, r *http.Request) {
	e, err := s.mcp.CatalogEntry(r.Context(), tenantOf(r), r.PathValue("name"))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiwire.MCPCatalogEntry(e))
}

func (s *Server) deleteMCPCatalogEntry(w http.ResponseWriter, r *http.Request) {
	if err := s.mcp.DeleteCatalogEntry(r.Context(), tenantOf(r), r.PathValue("name")); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request) {
	s.mcp.ServeMCP(w, r, r.PathValue("id"), s.writeProblem)
}

// leaseMCPRequests checks the mcp option of a lease request before the
// lease is made: the same body as POST /v1/mcp/servers, without lease_id
// (servers.Manager.CheckLeaseServers).
func (s *Server) leaseMCPRequests(r *http.Request, reqs []api.MCPCreateRequest) ([]servers.CreateRequest, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	if s.mcp == nil {
		return nil, errdefs.WithCode("mcp_not_configured", fmt.Errorf("this service runs no MCP servers: %w", errdefs.ErrNotImplemented))
	}
	out := make([]servers.CreateRequest, len(reqs))
	for i, req := range reqs {
		out[i] = apiwire.MCPCreateIn(req)
	}
	if err := s.mcp.CheckLeaseServers(r.Context(), tenantOf(r), out); err != nil {
		return nil, err
	}
	return out, nil
}

// startLeaseMCP starts a new lease's MCP servers, all or none (then the
// lease is released: servers.Manager.StartOnLease).
func (s *Server) startLeaseMCP(r *http.Request, leaseID string, reqs []servers.CreateRequest) ([]api.MCPServer, error) {
	made, err := s.mcp.StartOnLease(r.Context(), tenantOf(r), leaseID, principalOf(r).KeyID, reqs)
	if err != nil {
		return nil, err
	}
	out := make([]api.MCPServer, len(made))
	for i, inst := range made {
		out[i] = apiwire.MCPServer(inst)
	}
	return out, nil
}
