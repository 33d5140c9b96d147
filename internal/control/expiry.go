package control

import (
	"context"
	"fmt"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// ExpiryHook may keep a sandbox whose time ran out — its lease's, or for a
// sandbox without a lease its own TTL — instead of letting it end: E2B's
// auto-pause keeps such a sandbox hibernated. KeepExpired says whether to
// keep it; the first hook that keeps it has it: its lease (or, without
// one, the sandbox) is extended to the longest its profile allows from now
// (KeepLongest), and then ExpiryKept is told. Like every hook both must be
// quick: slow work (a hibernation) goes to a goroutine of the hook's own,
// which ends the sandbox itself when that work fails.
type ExpiryHook interface {
	Hook
	KeepExpired(ctx context.Context, sb *sandbox.Sandbox) bool
	ExpiryKept(ctx context.Context, sb *sandbox.Sandbox)
}

// keepExpired asks the ExpiryHooks about a sandbox whose time ran out at
// now (l its expired lease, nil for a sandbox without one) and extends
// the life of one a hook keeps. It says whether the sandbox was kept.
func (s *Service) keepExpired(ctx context.Context, sb *sandbox.Sandbox, l *sandbox.Lease, now time.Time) bool {
	for _, h := range s.hooks {
		eh, ok := h.(ExpiryHook)
		if !ok {
			continue
		}
		hctx, cancel := context.WithTimeout(ctx, hookTimeout)
		keep := eh.KeepExpired(hctx, sb)
		cancel()
		if !keep {
			continue
		}
		kept, err := s.extendLife(ctx, sb, l, now, true)
		if err != nil {
			s.log.Warn("keeping an expired sandbox", "sandbox", sb.ID, "hook", h.Name(), "err", err)
			return false
		}
		s.log.Info("an expired sandbox is kept", "sandbox", sb.ID, "hook", h.Name(), "until", kept.ExpiresAt)
		hctx, cancel = cleanupCtx(ctx, hookTimeout)
		eh.ExpiryKept(hctx, kept)
		cancel()
		return true
	}
	return false
}

// KeepLongest moves the end of a sandbox of tenant — its active lease's,
// or for a sandbox without one its own — to the longest its profile
// allows from now (lease.max_ttl_seconds, limits.max_ttl_seconds): for
// the compatibility adapters, whose SDKs keep a paused sandbox until it is
// resumed or killed. It answers the sandbox.
func (s *Service) KeepLongest(ctx context.Context, tenant, id string) (*sandbox.Sandbox, error) {
	sb, err := s.GetSandbox(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	ls, err := s.store.ListLeases(ctx, store.LeaseFilter{Tenant: tenant, SandboxID: id, States: []sandbox.LeaseState{sandbox.LeaseActive}})
	if err != nil {
		return nil, err
	}
	var l *sandbox.Lease
	if len(ls) > 0 {
		l = ls[0]
	}
	return s.extendLife(ctx, sb, l, s.now(), false)
}

// extendLife moves the end of sb (and of l, its active lease, when not
// nil) to the longest its profile allows from now. An expired lease is
// extended only when expired is set (the reaper's keep).
func (s *Service) extendLife(ctx context.Context, sb *sandbox.Sandbox, l *sandbox.Lease, now time.Time, expired bool) (*sandbox.Sandbox, error) {
	p, err := s.profile(sb.Profile)
	if err != nil {
		return nil, err
	}
	ttl := s.cfg.Limits.MaxTTLSeconds
	if l != nil {
		_, ttl = s.cfg.LeaseTTL(p)
	}
	exp := now.Add(time.Duration(ttl) * time.Second)
	if l != nil {
		if _, err := s.store.UpdateLease(ctx, l.ID, func(x *sandbox.Lease) error {
			if x.State != sandbox.LeaseActive || (!expired && x.Expired(now)) {
				return leaseEnded(x, now)
			}
			x.RenewedAt, x.ExpiresAt, x.TTLSeconds = now, exp, ttl
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return s.store.UpdateSandbox(ctx, sb.ID, 0, now, func(x *sandbox.Sandbox) error {
		if x.State.Final() || x.State == sandbox.StateDraining || x.State == sandbox.StateFailed {
			return errdefs.WithCode("invalid_state", errdefs.Mark(fmt.Errorf("sandbox %s is %s", sb.ID, x.State), errdefs.ErrFailedPrecondition))
		}
		x.ExpiresAt = &exp
		return nil
	})
}
