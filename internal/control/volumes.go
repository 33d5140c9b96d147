package control

import (
	"context"
	"fmt"

	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// Volumes mounts a tenant's named volumes into its sandboxes
// (internal/volumes implements it; assemble wires it). Control asks it
// for a sandbox's mounts after the sandbox's record exists and before its
// container does, and releases them once the container is gone.
type Volumes interface {
	// Check refuses, before anything is made, a request to mount volumes
	// that are malformed, missing or busy (a later Acquire may still
	// lose a race).
	// roots, if not nil, narrow the mount paths (a profile's
	// volume_roots) below the service's own.
	Check(ctx context.Context, tenant string, reqs []sandbox.VolumeRequest, roots []string) error
	// Acquire takes the volumes for sandbox id and returns their bind
	// mounts, each volume's root given to uid:gid; a failure takes none.
	Acquire(ctx context.Context, tenant, id string, reqs []sandbox.VolumeRequest, roots []string, uid, gid int) ([]driver.Mount, error)
	// Release drops every hold of sandbox id; idempotent.
	Release(ctx context.Context, id string) error
	// Holds reports whether sandbox id holds any volume.
	Holds(ctx context.Context, tenant, id string) (bool, error)
}

// CodeVolumesUnsupported answers a request for volumes where the service
// has none (a sandboxer on other hosts that keeps none, or no volume
// manager).
const CodeVolumesUnsupported = "volumes_unsupported"

// checkVolumes refuses a request for volumes this service cannot mount.
func (s *Service) checkVolumes(ctx context.Context, tenant string, reqs []sandbox.VolumeRequest, roots []string) error {
	if len(reqs) == 0 {
		return nil
	}
	if s.volumes == nil {
		return errdefs.WithCode(CodeVolumesUnsupported, fmt.Errorf("this service's backend does not mount named volumes: %w", errdefs.ErrNotImplemented))
	}
	return s.volumes.Check(ctx, tenant, reqs, roots)
}

// acquireVolumes takes a new sandbox's volumes (nothing when it asks none).
func (s *Service) acquireVolumes(ctx context.Context, sb *sandbox.Sandbox, uid, gid int, reqs []sandbox.VolumeRequest, roots []string) ([]driver.Mount, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	if s.volumes == nil {
		return nil, errdefs.WithCode(CodeVolumesUnsupported, fmt.Errorf("this service's backend does not mount named volumes: %w", errdefs.ErrNotImplemented))
	}
	return s.volumes.Acquire(ctx, sb.Tenant, sb.ID, reqs, roots, uid, gid)
}

// releaseVolumes drops a sandbox's volume holds once its container is gone.
func (s *Service) releaseVolumes(ctx context.Context, id string) {
	if s.volumes == nil {
		return
	}
	if err := s.volumes.Release(ctx, id); err != nil {
		s.log.Warn("releasing the volumes of a sandbox (the next sweep retries)", "sandbox", id, "err", err)
	}
}

// CodeSandboxHasVolumes refuses a snapshot, fork or hibernation of a
// sandbox that mounts named volumes: a volume's data is not part of a
// sandbox's saved state, and a restored sandbox would hold no volume.
const CodeSandboxHasVolumes = "sandbox_has_volumes"

// RefuseIfVolumes answers 409 sandbox_has_volumes when sandbox id of
// tenant holds volumes (the snapshot operations ask it).
func (s *Service) RefuseIfVolumes(ctx context.Context, tenant, id string) error {
	if s.volumes == nil {
		return nil
	}
	held, err := s.volumes.Holds(ctx, tenant, id)
	if err != nil {
		return err
	}
	if held {
		return errdefs.WithCode(CodeSandboxHasVolumes, fmt.Errorf(
			"sandbox %s mounts named volumes, which a snapshot does not hold: snapshots, forks, hibernation and rollback are refused for it (pause and resume work): %w", id, errdefs.ErrConflict))
	}
	return nil
}
