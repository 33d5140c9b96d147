package grpcedge

import (
	"context"
	"fmt"
	"io"

	"connectrpc.com/connect"

	sandboxv1 "genesis.dev/sandbox/gen/genesis/sandbox/v1"
	"genesis.dev/sandbox/internal/artifacts"
	"genesis.dev/sandbox/internal/sandbox"
)

// artifactService serves genesis.sandbox.v1.ArtifactService over the
// artifact keeper, as httpapi's artifacts.go serves the same routes.
type artifactService struct{ edge *Edge }

func (s *artifactService) keeper() (*artifacts.Keeper, error) {
	if s.edge.wl.Artifacts == nil {
		return nil, notSupported("artifact store")
	}
	return s.edge.wl.Artifacts, nil
}

func (s *artifactService) ListArtifacts(ctx context.Context, req *connect.Request[sandboxv1.ListArtifactsRequest]) (*connect.Response[sandboxv1.ListArtifactsResponse], error) {
	k, err := s.keeper()
	if err != nil {
		return nil, err
	}
	jobID := req.Msg.JobId
	c, list, err := k.JobArtifacts(ctx, tenantOf(ctx), jobID)
	if err != nil {
		return nil, err
	}
	out := &sandboxv1.ListArtifactsResponse{JobId: jobID, State: "none"}
	if c != nil {
		out.State, out.Requested, out.Error = string(c.State), c.Spec.Paths, c.Error
		for _, sk := range c.Skipped {
			out.Skipped = append(out.Skipped, &sandboxv1.SkippedArtifact{Path: sk.Path, Size: sk.Size, Reason: sk.Reason, Detail: sk.Detail})
		}
	}
	for _, a := range list {
		out.Artifacts = append(out.Artifacts, artifactPB(a))
	}
	return connect.NewResponse(out), nil
}

func (s *artifactService) GetArtifact(ctx context.Context, req *connect.Request[sandboxv1.GetArtifactRequest]) (*connect.Response[sandboxv1.Artifact], error) {
	k, err := s.keeper()
	if err != nil {
		return nil, err
	}
	a, err := k.Get(ctx, tenantOf(ctx), req.Msg.ArtifactId)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(artifactPB(a)), nil
}

func (s *artifactService) DownloadArtifact(ctx context.Context, req *connect.Request[sandboxv1.DownloadArtifactRequest], stream *connect.ServerStream[sandboxv1.DownloadArtifactResponse]) error {
	k, err := s.keeper()
	if err != nil {
		return err
	}
	m := req.Msg
	if err := byteRange(m.Offset, m.Length); err != nil {
		return err
	}
	a, f, err := k.Open(ctx, tenantOf(ctx), m.ArtifactId)
	if err != nil {
		return err
	}
	defer f.Close()
	if (m.Offset > 0 || m.Length > 0) && m.Offset >= a.Size {
		return rangeNotSatisfiable(ctx, "an artifact", m.Offset, a.Size)
	}
	end := a.Size
	if m.Length > 0 && m.Offset+m.Length < end {
		end = m.Offset + m.Length
	}
	err = sendChunks(io.NewSectionReader(f, m.Offset, end-m.Offset), m.Offset, end-m.Offset, func(first bool, off int64, data []byte) error {
		msg := &sandboxv1.DownloadArtifactResponse{Offset: off, Data: data}
		if first {
			msg.Size, msg.Sha256, msg.Mime = a.Size, a.SHA256, a.MIME
		}
		return stream.Send(msg)
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("sending artifact %s: %w", a.ID, err)
	}
	return ctx.Err()
}

func artifactPB(a *sandbox.Artifact) *sandboxv1.Artifact {
	return &sandboxv1.Artifact{Id: a.ID, JobId: a.JobID, SandboxId: a.SandboxID, Path: a.Path, Name: a.Name, Size: a.Size,
		Sha256: a.SHA256, Mime: a.MIME, CreateTime: ts(a.CreatedAt), ExpireTime: ts(a.ExpiresAt)}
}
