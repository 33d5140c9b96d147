package grpcedge

import (
	"context"

	"connectrpc.com/connect"

	sandboxv1 "genesis.dev/sandbox/gen/genesis/sandbox/v1"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/snapshots"
)

// snapshotService serves genesis.sandbox.v1.SnapshotService over the
// snapshot manager, as httpapi's snapshots.go serves the same routes.
type snapshotService struct{ edge *Edge }

func (s *snapshotService) manager() (*snapshots.Manager, error) { return s.edge.snapshots() }

// snapshots is the snapshot manager, or UNIMPLEMENTED (not_supported)
// when the service keeps no snapshots.
func (e *Edge) snapshots() (*snapshots.Manager, error) {
	if e.wl.Snapshots == nil {
		return nil, notSupported("snapshots")
	}
	return e.wl.Snapshots, nil
}

func (s *snapshotService) PauseSandbox(ctx context.Context, req *connect.Request[sandboxv1.PauseSandboxRequest]) (*connect.Response[sandboxv1.Sandbox], error) {
	m, err := s.manager()
	if err != nil {
		return nil, err
	}
	sb, err := m.Pause(ctx, tenantOf(ctx), req.Msg.SandboxId)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(sandboxPB(sb)), nil
}

func (s *snapshotService) ResumeSandbox(ctx context.Context, req *connect.Request[sandboxv1.ResumeSandboxRequest]) (*connect.Response[sandboxv1.ResumeSandboxResponse], error) {
	m, err := s.manager()
	if err != nil {
		return nil, err
	}
	sb, memory, err := m.Resume(ctx, tenantOf(ctx), req.Msg.SandboxId)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&sandboxv1.ResumeSandboxResponse{Sandbox: sandboxPB(sb), MemoryRestored: memory}), nil
}

func (s *snapshotService) HibernateSandbox(ctx context.Context, req *connect.Request[sandboxv1.HibernateSandboxRequest]) (*connect.Response[sandboxv1.Sandbox], error) {
	m, err := s.manager()
	if err != nil {
		return nil, err
	}
	sb, err := m.Hibernate(ctx, tenantOf(ctx), req.Msg.SandboxId)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(sandboxPB(sb)), nil
}

func (s *snapshotService) CreateSnapshot(ctx context.Context, req *connect.Request[sandboxv1.CreateSnapshotRequest]) (*connect.Response[sandboxv1.Snapshot], error) {
	m, err := s.manager()
	if err != nil {
		return nil, err
	}
	sn, err := m.Snapshot(ctx, tenantOf(ctx), req.Msg.SandboxId, snapshots.SnapshotOptions{Name: req.Msg.Name, Memory: req.Msg.Memory})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(snapshotPB(sn)), nil
}

func (s *snapshotService) ListSnapshots(ctx context.Context, req *connect.Request[sandboxv1.ListSnapshotsRequest]) (*connect.Response[sandboxv1.ListSnapshotsResponse], error) {
	m, err := s.manager()
	if err != nil {
		return nil, err
	}
	size := req.Msg.PageSize
	if size < 0 || size > 1000 {
		return nil, errdefs.WithCode("invalid_limit", invalidArg("page_size must be 0 to 1000"))
	}
	// Another tenant's (or no) sandbox is NOT_FOUND, not an empty list.
	list, err := m.ListOfSandbox(ctx, tenantOf(ctx), req.Msg.SandboxId, int(size))
	if err != nil {
		return nil, err
	}
	out := &sandboxv1.ListSnapshotsResponse{Snapshots: make([]*sandboxv1.Snapshot, len(list))}
	for i, sn := range list {
		out.Snapshots[i] = snapshotPB(sn)
	}
	return connect.NewResponse(out), nil
}

func (s *snapshotService) GetSnapshot(ctx context.Context, req *connect.Request[sandboxv1.GetSnapshotRequest]) (*connect.Response[sandboxv1.Snapshot], error) {
	m, err := s.manager()
	if err != nil {
		return nil, err
	}
	sn, err := m.Get(ctx, tenantOf(ctx), req.Msg.SnapshotId)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(snapshotPB(sn)), nil
}

func (s *snapshotService) DeleteSnapshot(ctx context.Context, req *connect.Request[sandboxv1.DeleteSnapshotRequest]) (*connect.Response[sandboxv1.DeleteSnapshotResponse], error) {
	m, err := s.manager()
	if err != nil {
		return nil, err
	}
	if err := m.Delete(ctx, tenantOf(ctx), req.Msg.SnapshotId); err != nil {
		return nil, err
	}
	return connect.NewResponse(&sandboxv1.DeleteSnapshotResponse{}), nil
}

func (s *snapshotService) ForkSandbox(ctx context.Context, req *connect.Request[sandboxv1.ForkSandboxRequest]) (*connect.Response[sandboxv1.ForkSandboxResponse], error) {
	m, err := s.manager()
	if err != nil {
		return nil, err
	}
	in := control.CreateSandboxInput{TTLSeconds: req.Msg.TtlSeconds, Metadata: req.Msg.Metadata}
	res, err := m.Fork(ctx, tenantOf(ctx), req.Msg.SandboxId, int(req.Msg.Count), in)
	if err != nil {
		return nil, err
	}
	out := &sandboxv1.ForkSandboxResponse{}
	for _, c := range res {
		if c.Err != nil {
			out.Errors = append(out.Errors, &sandboxv1.ForkError{Code: errdefs.Code(c.Err), Detail: errdefs.Detail(c.Err)})
			continue
		}
		out.Sandboxes = append(out.Sandboxes, &sandboxv1.ForkedSandbox{Sandbox: sandboxPB(c.Sandbox), MemoryRestored: c.Memory, Sessions: c.Sessions})
	}
	if len(out.Sandboxes) == 0 && len(res) > 0 {
		// No copy was made: the first copy's error is the call's (HTTP
		// answers it as the problem).
		return nil, res[0].Err
	}
	return connect.NewResponse(out), nil
}

func (s *snapshotService) RollbackSandbox(ctx context.Context, req *connect.Request[sandboxv1.RollbackSandboxRequest]) (*connect.Response[sandboxv1.RollbackSandboxResponse], error) {
	m, err := s.manager()
	if err != nil {
		return nil, err
	}
	if req.Msg.SnapshotId == "" {
		return nil, errdefs.WithCode("invalid_snapshot", invalidArg("snapshot_id is required"))
	}
	sb, memory, err := m.Rollback(ctx, tenantOf(ctx), req.Msg.SandboxId, req.Msg.SnapshotId)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&sandboxv1.RollbackSandboxResponse{Sandbox: sandboxPB(sb), MemoryRestored: memory}), nil
}

func snapshotPB(sn *sandbox.Snapshot) *sandboxv1.Snapshot {
	return &sandboxv1.Snapshot{Id: sn.ID, Name: sn.Name, SandboxId: sn.SandboxID, Parent: sn.Parent, State: string(sn.State),
		Profile: sn.Profile, Runtime: string(sn.Runtime), RiskLevel: string(sn.RiskLevel), Resources: resourcesPB(sn.Resources),
		Memory: sn.Memory, SizeBytes: sn.SizeBytes, Error: sn.Error, CreateTime: ts(sn.CreatedAt), ExpireTime: tsp(sn.ExpiresAt)}
}
