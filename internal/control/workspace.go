package control

import (
	"context"
	"errors"
	"fmt"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/probe"
)

// CodeDiskQuotaUnavailable is the problem code of a create that asks for a
// disk quota on a host that cannot enforce one.
const CodeDiskQuotaUnavailable = "disk_quota_unavailable"

// DiskQuotaStatus says whether per-sandbox workspace quotas are enforced.
type DiskQuotaStatus = probe.DiskQuotaStatus

// DiskQuota reports whether this host enforces workspace quotas: it needs
// loop-mounted ext4 on the service's host and a driver that bind-mounts
// host directories (the probe says so).
func (s *Service) DiskQuota(ctx context.Context) DiskQuotaStatus {
	return s.capabilities.DiskQuota(ctx)
}

// resolveDisk settles the workspace quota of a create: requested (0: the
// profile default) must lie in [config.MinDiskMB, limits.max_disk_mb]. A
// quota asked for explicitly on a host that cannot enforce it is refused; a
// profile default there is dropped with a warning (capabilities say why).
func (s *Service) resolveDisk(ctx context.Context, p *config.Profile, requested int64) (int64, error) {
	mb := p.Resources.DiskMB
	if requested != 0 {
		mb = requested
	}
	if mb == 0 {
		return 0, nil
	}
	if mb < config.MinDiskMB || mb > s.cfg.Limits.MaxDiskMB {
		return 0, invalid("resources.disk_mb must be between %d and %d, got %d", config.MinDiskMB, s.cfg.Limits.MaxDiskMB, mb)
	}
	if st := s.DiskQuota(ctx); !st.Enforced {
		if requested == 0 {
			s.log.Warn("profile disk quota not enforced on this host", "profile", p.Name, "disk_mb", mb, "reason", st.Reason)
			return 0, nil
		}
		return 0, errdefs.WithCode(CodeDiskQuotaUnavailable, fmt.Errorf(
			"resources.disk_mb asks for a workspace quota, but this host cannot enforce one (%s): %w", st.Reason, errdefs.ErrFailedPrecondition))
	}
	return mb, nil
}

// recoverWorkspaces unmounts, at start-up, the workspaces below this
// instance's data dir whose sandbox is not live any more (the service died
// before it could tear them down). Their directories go with the stale
// directory sweep.
func (s *Service) recoverWorkspaces(ctx context.Context) {
	h, ok := s.boxes.(driver.HostDirs)
	if !ok {
		return
	}
	n, err := h.Recover(func(id string) bool {
		sb, err := s.store.GetSandbox(ctx, "", id)
		if errors.Is(err, errdefs.ErrNotFound) {
			return false
		}
		return err != nil || !sb.State.Final() // keep when unsure
	})
	if err != nil {
		s.log.Error("recovering workspace mounts", "err", err)
	}
	if n > 0 {
		s.log.Info("unmounted stale workspaces", "count", n)
	}
}
