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
	s.handle("POST", "/v1/sandboxes/{id}/pause", true, serveHeaded(s, http.StatusOK, sandboxStep(s.snaps.Pause)))
	s.handle("POST", "/v1/sandboxes/{id}/resume", true, serveHeaded(s, http.StatusOK, func(h http.Header, r *http.Request) (api.Sandbox, error) {
		sb, memory, err := s.snaps.Resume(r.Context(), tenantOf(r), r.PathValue("id"))
		return restored(h, sb, memory, err)
	}))
	s.handle("POST", "/v1/sandboxes/{id}/hibernate", true, serveHeaded(s, http.StatusOK, sandboxStep(s.snaps.Hibernate)))
	s.handle("POST", "/v1/sandboxes/{id}/snapshots", true, serveBodyHeaded(s, http.StatusCreated, func(h http.Header, r *http.Request, req *api.CreateSnapshotRequest) (api.Snapshot, error) {
		sn, err := s.snaps.Snapshot(r.Context(), tenantOf(r), r.PathValue("id"), snapshots.SnapshotOptions{Name: req.Name, Memory: req.Memory})
		if err != nil {
			return api.Snapshot{}, err
		}
		h.Set("Location", "/v1/snapshots/"+sn.ID)
		return apiwire.Snapshot(sn), nil
	}))
	s.handle("GET", "/v1/sandboxes/{id}/snapshots", true, serveGet(s, http.StatusOK, s.listSnapshots))
	s.handle("POST", "/v1/sandboxes/{id}/fork", true, s.forkSandbox)
	s.handle("POST", "/v1/sandboxes/{id}/rollback", true, serveBodyHeaded(s, http.StatusOK, func(h http.Header, r *http.Request, req *api.RollbackRequest) (api.Sandbox, error) {
		if req.SnapshotID == "" {
			return api.Sandbox{}, errdefs.WithCode("invalid_snapshot", invalidArg("snapshot_id is required"))
		}
		sb, memory, err := s.snaps.Rollback(r.Context(), tenantOf(r), r.PathValue("id"), req.SnapshotID)
		return restored(h, sb, &memory, err)
	}))
	s.handle("GET", "/v1/snapshots", true, serveGet(s, http.StatusOK, s.listSnapshots))
	s.handle("GET", "/v1/snapshots/{id}", true, serveGet(s, http.StatusOK, func(r *http.Request) (api.Snapshot, error) {
		return wired(apiwire.Snapshot)(s.snaps.Get(r.Context(), tenantOf(r), r.PathValue("id")))
	}))
	s.handle("DELETE", "/v1/snapshots/{id}", true, serveNoContent(s, func(r *http.Request) error {
		return s.snaps.Delete(r.Context(), tenantOf(r), r.PathValue("id"))
	}))
}

// sandboxStep serves a step that answers the sandbox.
func sandboxStep(step func(ctx context.Context, tenant, id string) (*sandbox.Sandbox, error)) func(http.Header, *http.Request) (api.Sandbox, error) {
	return func(h http.Header, r *http.Request) (api.Sandbox, error) {
		sb, err := step(r.Context(), tenantOf(r), r.PathValue("id"))
		return restored(h, sb, nil, err)
	}
}

// restored answers a sandbox after a step, with its ETag and, if memory
// is set, whether its memory was restored.
func restored(h http.Header, sb *sandbox.Sandbox, memory *bool, err error) (api.Sandbox, error) {
	if err != nil {
		return api.Sandbox{}, err
	}
	h.Set("ETag", etag(sb))
	out := apiwire.Sandbox(sb)
	out.MemoryRestored = memory
	return out, nil
}

func (s *Server) listSnapshots(r *http.Request) (api.SnapshotList, error) {
	limit := 0
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return api.SnapshotList{}, errdefs.WithCode("invalid_limit", invalidArg("limit must be 1 to 1000"))
		}
		limit = n
	}
	return wired(apiwire.SnapshotList)(s.snaps.ListOfSandbox(r.Context(), tenantOf(r), r.PathValue("id"), limit))
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
	out := apiwire.ForkResult(res)
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
