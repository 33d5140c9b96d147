package httpapi

import (
	"net/http"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/apiwire"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/slowlog"
	"genesis.dev/sandbox/internal/snapshots"
)

func (s *Server) leaseRoutes() {
	s.handle("POST", "/v1/leases", true, s.acquireLease)
	s.handle("GET", "/v1/leases", true, serveGet(s, http.StatusOK, func(r *http.Request) (api.LeaseList, error) {
		f := control.LeaseFilter{Tenant: tenantOf(r)}
		for _, st := range r.URL.Query()["state"] {
			f.States = append(f.States, sandbox.LeaseState(st))
		}
		return wired(apiwire.LeaseList)(s.ctl.ListLeases(r.Context(), f))
	}))
	s.handle("GET", "/v1/leases/{id}", true, serveGet(s, http.StatusOK, func(r *http.Request) (api.Lease, error) {
		return wired(apiwire.Lease)(s.ctl.GetLease(r.Context(), tenantOf(r), r.PathValue("id")))
	}))
	s.handle("POST", "/v1/leases/{id}/renew", true, serveOptionalBody(s, http.StatusOK, func(r *http.Request, req *api.RenewLeaseRequest) (api.Lease, error) {
		return wired(apiwire.Lease)(s.ctl.RenewLease(r.Context(), tenantOf(r), r.PathValue("id"), req.TTLSeconds))
	}))
	s.handle("DELETE", "/v1/leases/{id}", true, serveNoContent(s, func(r *http.Request) error {
		return s.ctl.ReleaseLeaseNoWait(r.Context(), tenantOf(r), r.PathValue("id"))
	}))
	s.handle("GET", "/v1/pools", true, serveGet(s, http.StatusOK, func(r *http.Request) (api.PoolList, error) {
		return s.pools(s.ctl.Pools(r.Context()))
	}))
	// Draining takes capacity away from every tenant: an operator action.
	s.handle("POST", "/v1/pools/{name}/drain", true, s.adminOnly(serveGet(s, http.StatusOK, func(r *http.Request) (api.PoolList, error) {
		return s.pools(s.ctl.DrainPool(r.Context(), r.PathValue("name")))
	})))
}

// pools answers the pools of views with the pools being drained.
func (s *Server) pools(views []control.PoolView, err error) (api.PoolList, error) {
	if err != nil {
		return api.PoolList{}, err
	}
	return apiwire.Pools(views, s.ctl.Draining()), nil
}

func (s *Server) acquireLease(w http.ResponseWriter, r *http.Request) {
	var req api.AcquireLeaseRequest
	if err := s.decode(w, r, &req); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	in := apiwire.AcquireLeaseInput(tenantOf(r), req)
	mcpReqs, err := s.leaseMCPRequests(r, req.MCP)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	if len(mcpReqs) == 0 && req.SnapshotID == "" {
		// Nothing after the claim can fail the request: its audit record
		// goes into the claim's transaction, one write fewer before the
		// answer (and still before it, so GET /v1/audit reads it).
		in.Audit = storedAudit(r, http.StatusCreated)
	}
	slowlog.AllowMS(r.Context(), req.WaitSeconds*1000, 0)
	ctx, timed := s.leaseTimings(r)
	out, made, err := snapshots.Lease(ctx, s.ctl, s.snaps, req.SnapshotID, in)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	slowlog.Of(r.Context()).SetSandbox(out.Sandbox.ID)
	l := apiwire.Lease(out.Lease)
	sb := apiwire.Sandbox(out.Sandbox)
	if made != nil {
		sb = apiwire.Made(made)
	}
	l.Sandbox = &sb
	if len(mcpReqs) > 0 {
		l.MCPServers, err = s.startLeaseMCP(r, out.Lease.ID, mcpReqs)
		if err != nil {
			s.writeProblem(w, r, err)
			return
		}
	}
	w.Header().Set("Location", "/v1/leases/"+l.LeaseID)
	timed(w.Header())
	writeJSON(w, http.StatusCreated, l)
}
