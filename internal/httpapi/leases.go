package httpapi

import (
	"fmt"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/snapshots"
	"net/http"
	"strconv"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/sandbox"
)

func (s *Server) leaseRoutes() {
	s.handle("POST", "/v1/leases", true, s.acquireLease)
	s.handle("GET", "/v1/leases", true, s.listLeases)
	s.handle("GET", "/v1/leases/{id}", true, s.getLease)
	s.handle("POST", "/v1/leases/{id}/renew", true, s.renewLease)
	s.handle("DELETE", "/v1/leases/{id}", true, s.releaseLease)
	s.handle("GET", "/v1/pools", true, s.listPools)
	// Draining takes capacity away from every tenant: an operator action.
	s.handle("POST", "/v1/pools/{name}/drain", true, s.adminOnly(s.drainPool))
}

func leaseWire(l *sandbox.Lease) client.Lease {
	out := client.Lease{
		LeaseID: l.ID, SandboxID: l.SandboxID, State: string(l.State), Warm: l.Warm, Profile: l.Profile,
		Runtime: string(l.Runtime), Holder: l.Holder, Metadata: l.Metadata, TTLSeconds: l.TTLSeconds,
		ResourceVersion: strconv.FormatInt(l.ResourceVersion, 10),
		CreatedAt:       l.CreatedAt, RenewedAt: l.RenewedAt, ExpiresAt: l.ExpiresAt, EndedAt: l.EndedAt, EndReason: l.EndReason,
		Reserved: l.Reserved,
	}
	if out.Metadata == nil {
		out.Metadata = map[string]string{}
	}
	return out
}

func (s *Server) acquireLease(w http.ResponseWriter, r *http.Request) {
	var req client.AcquireLeaseRequest
	if err := s.decode(w, r, &req); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	in := control.AcquireLeaseInput{
		Tenant: tenantOf(r), Profile: req.Profile, RiskLevel: req.RiskLevel, Runtime: req.Runtime,
		TTLSeconds: req.TTLSeconds, Holder: req.Holder, WaitSeconds: req.WaitSeconds, Env: req.Env, Metadata: req.Metadata,
		Network: policyIn(req.Network),
	}
	if req.Resources != nil {
		in.Resources = sandbox.Resources{CPU: req.Resources.CPU, MemoryMB: req.Resources.MemoryMB, Pids: req.Resources.Pids, DiskMB: req.Resources.DiskMB}
	}
	mcpReqs, err := s.leaseMCPRequests(r, req.MCP)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	var out *control.LeaseOutput
	var made *snapshots.Made
	if req.SnapshotID != "" {
		if s.snaps == nil {
			s.writeProblem(w, r, errdefs.WithCode("not_supported", errdefs.Mark(fmt.Errorf("this service keeps no snapshots"), errdefs.ErrNotImplemented)))
			return
		}
		out, made, err = s.snaps.LeaseFrom(r.Context(), req.SnapshotID, in)
	} else {
		out, err = s.ctl.AcquireLease(r.Context(), in)
	}
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	l := leaseWire(out.Lease)
	sb := sandboxWire(out.Sandbox)
	if made != nil {
		sb = madeWire(made)
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
	writeJSON(w, http.StatusCreated, l)
}

func (s *Server) listLeases(w http.ResponseWriter, r *http.Request) {
	f := control.LeaseFilter{Tenant: tenantOf(r)}
	for _, st := range r.URL.Query()["state"] {
		f.States = append(f.States, sandbox.LeaseState(st))
	}
	list, err := s.ctl.ListLeases(r.Context(), f)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	out := client.LeaseList{Items: make([]client.Lease, len(list))}
	for i, l := range list {
		out.Items[i] = leaseWire(l)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getLease(w http.ResponseWriter, r *http.Request) {
	l, err := s.ctl.GetLease(r.Context(), tenantOf(r), r.PathValue("id"))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, leaseWire(l))
}

func (s *Server) renewLease(w http.ResponseWriter, r *http.Request) {
	var req client.RenewLeaseRequest
	if r.ContentLength != 0 {
		if err := s.decode(w, r, &req); err != nil {
			s.writeProblem(w, r, err)
			return
		}
	}
	l, err := s.ctl.RenewLease(r.Context(), tenantOf(r), r.PathValue("id"), req.TTLSeconds)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, leaseWire(l))
}

func (s *Server) releaseLease(w http.ResponseWriter, r *http.Request) {
	if err := s.ctl.ReleaseLease(r.Context(), tenantOf(r), r.PathValue("id")); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func poolsWire(views []control.PoolView, draining bool) client.PoolList {
	out := client.PoolList{Items: make([]client.Pool, len(views)), Draining: draining}
	for i, v := range views {
		p := client.Pool{
			Name: v.Name, Profile: v.Profile, Runtime: string(v.Runtime), SnapshotID: v.SnapshotID, State: v.State, MinIdle: v.MinIdle, MaxTotal: v.MaxTotal,
			Counts: map[string]int{}, Total: v.Total, Starting: v.Starting, Hits: v.Hits, Misses: v.Misses,
			Made: v.Made, Replaced: v.Replaced, Recycled: v.Recycled, ResetFailed: v.ResetFailed, RefillRate: v.RefillRate, Draining: v.Draining, LastError: v.LastError,
		}
		for st, n := range v.Counts {
			p.Counts[string(st)] = n
		}
		out.Items[i] = p
	}
	return out
}

func (s *Server) listPools(w http.ResponseWriter, r *http.Request) {
	views, err := s.ctl.Pools(r.Context())
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, poolsWire(views, s.ctl.Draining()))
}

func (s *Server) drainPool(w http.ResponseWriter, r *http.Request) {
	views, err := s.ctl.DrainPool(r.Context(), r.PathValue("name"))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, poolsWire(views, s.ctl.Draining()))
}
