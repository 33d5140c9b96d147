package httpapi

import (
	"context"
	"net/http"
	"strconv"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/apiwire"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/snapshots"
)

// Routes of a sandbox's saved state (docs/snapshots.md):
//
//	POST   /v1/sandboxes/{id}/pause       freeze: 200 sandbox
//	POST   /v1/sandboxes/{id}/resume      thaw or wake: 200 sandbox
//	POST   /v1/sandboxes/{id}/hibernate   state to disk, no container: 200 sandbox
//	POST   /v1/sandboxes/{id}/snapshots   {name?, memory?} → 201 snapshot
//	GET    /v1/sandboxes/{id}/snapshots   its snapshots, newest first
//	POST   /v1/sandboxes/{id}/fork        {count} → 201 {sandboxes, errors}
//	POST   /v1/sandboxes/{id}/rollback    {snapshot_id} → 200 sandbox
//	GET    /v1/snapshots                  the tenant's snapshots
//	GET    /v1/snapshots/{id}             one snapshot
//	DELETE /v1/snapshots/{id}             204
//
// A sandbox from a snapshot is POST /v1/sandboxes {snapshot_id}.
func (s *Server) snapshotRoutes() {
	if s.snaps == nil {
		return
	}
	s.handle("POST", "/v1/sandboxes/{id}/pause", true, s.sandboxStep(s.snaps.Pause))
	s.handle("POST", "/v1/sandboxes/{id}/resume", true, s.resumeSandbox)
	s.handle("POST", "/v1/sandboxes/{id}/hibernate", true, s.sandboxStep(s.snaps.Hibernate))
	s.handle("POST", "/v1/sandboxes/{id}/snapshots", true, s.createSnapshot)
	s.handle("GET", "/v1/sandboxes/{id}/snapshots", true, s.listSnapshots)
	s.handle("POST", "/v1/sandboxes/{id}/fork", true, s.forkSandbox)
	s.handle("POST", "/v1/sandboxes/{id}/rollback", true, s.rollbackSandbox)
	s.handle("GET", "/v1/snapshots", true, s.listSnapshots)
	s.handle("GET", "/v1/snapshots/{id}", true, s.getSnapshot)
	s.handle("DELETE", "/v1/snapshots/{id}", true, s.deleteSnapshot)
}

// sandboxStep serves a step that answers the sandbox.
func (s *Server) sandboxStep(step func(ctx context.Context, tenant, id string) (*sandbox.Sandbox, error)) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		sb, err := step(r.Context(), tenantOf(r), r.PathValue("id"))
		if err != nil {
			s.writeProblem(w, r, err)
			return
		}
		w.Header().Set("ETag", etag(sb))
		writeJSON(w, http.StatusOK, apiwire.Sandbox(sb))
	}
}

func (s *Server) createSnapshot(w http.ResponseWriter, r *http.Request) {
	var req api.CreateSnapshotRequest
	if err := s.decode(w, r, &req); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	sn, err := s.snaps.Snapshot(r.Context(), tenantOf(r), r.PathValue("id"), snapshots.SnapshotOptions{Name: req.Name, Memory: req.Memory})
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/snapshots/"+sn.ID)
	writeJSON(w, http.StatusCreated, apiwire.Snapshot(sn))
}

func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) {
	limit := 0
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			s.writeProblem(w, r, errdefs.WithCode("invalid_limit", invalidArg("limit must be 1 to 1000")))
			return
		}
		limit = n
	}
	id := r.PathValue("id")
	if id != "" {
		if _, err := s.ctl.GetSandbox(r.Context(), tenantOf(r), id); err != nil {
			s.writeProblem(w, r, err)
			return
		}
	}
	list, err := s.snaps.List(r.Context(), tenantOf(r), id, limit)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	out := api.SnapshotList{Items: make([]api.Snapshot, len(list))}
	for i, sn := range list {
		out.Items[i] = apiwire.Snapshot(sn)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getSnapshot(w http.ResponseWriter, r *http.Request) {
	sn, err := s.snaps.Get(r.Context(), tenantOf(r), r.PathValue("id"))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiwire.Snapshot(sn))
}

func (s *Server) deleteSnapshot(w http.ResponseWriter, r *http.Request) {
	if err := s.snaps.Delete(r.Context(), tenantOf(r), r.PathValue("id")); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) forkSandbox(w http.ResponseWriter, r *http.Request) {
	var req api.ForkRequest
	if err := s.decode(w, r, &req); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	res, err := s.snaps.Fork(r.Context(), tenantOf(r), r.PathValue("id"), req.Count, apiwire.ForkInput(req))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	out := api.ForkResult{Sandboxes: []api.Sandbox{}}
	for _, c := range res {
		if c.Err != nil {
			out.Errors = append(out.Errors, api.ForkError{Code: errdefs.Code(c.Err), Detail: errdefs.Detail(c.Err)})
			continue
		}
		out.Sandboxes = append(out.Sandboxes, apiwire.Made(c))
	}
	status := http.StatusCreated
	if len(out.Sandboxes) == 0 {
		status = http.StatusServiceUnavailable
		if len(res) > 0 {
			s.writeProblem(w, r, res[0].Err)
			return
		}
	}
	writeJSON(w, status, out)
}

func (s *Server) rollbackSandbox(w http.ResponseWriter, r *http.Request) {
	var req api.RollbackRequest
	if err := s.decode(w, r, &req); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	if req.SnapshotID == "" {
		s.writeProblem(w, r, errdefs.WithCode("invalid_snapshot", invalidArg("snapshot_id is required")))
		return
	}
	sb, memory, err := s.snaps.Rollback(r.Context(), tenantOf(r), r.PathValue("id"), req.SnapshotID)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	out := apiwire.Sandbox(sb)
	out.MemoryRestored = &memory
	w.Header().Set("ETag", etag(sb))
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) resumeSandbox(w http.ResponseWriter, r *http.Request) {
	sb, memory, err := s.snaps.Resume(r.Context(), tenantOf(r), r.PathValue("id"))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	out := apiwire.Sandbox(sb)
	out.MemoryRestored = memory
	w.Header().Set("ETag", etag(sb))
	writeJSON(w, http.StatusOK, out)
}
