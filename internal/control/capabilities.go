package control

import (
	"context"
	"fmt"
	"strings"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/probe"
)

// RefreshProbe runs the driver's capability probe now and caches the result.
func (s *Service) RefreshProbe(ctx context.Context) driver.ProbeResult {
	return s.capabilities.Refresh(ctx)
}

// Probe returns the cached probe result, probing first if there is none.
func (s *Service) Probe(ctx context.Context) driver.ProbeResult { return s.capabilities.Result(ctx) }

// ProfileView is a profile with its resolved image and status on this host.
type ProfileView = probe.ProfileView

// Profiles returns every configured profile with its image status.
func (s *Service) Profiles(ctx context.Context) ([]ProfileView, error) {
	return s.capabilities.Profiles(ctx)
}

// Readiness reports whether the service can create sandboxes now, with one
// entry per check.
func (s *Service) Readiness(ctx context.Context) (bool, map[string]string) {
	checks := map[string]string{}
	ready := true
	if s.draining.Load() {
		checks["drain"], ready = "draining: no new sandboxes or leases", false
	}
	if err := s.store.Ping(ctx); err != nil {
		checks["store"], ready = "error: "+err.Error(), false
	} else {
		checks["store"] = "ok"
	}
	return s.capabilities.Readiness(ctx, checks) && ready, checks
}

// profile looks up a profile by name.
func (s *Service) profile(name string) (*config.Profile, error) {
	if name == "" {
		return nil, errdefs.Invalid("profile is required")
	}
	p, ok := s.cfg.Profile(name)
	if !ok {
		known := make([]string, len(s.cfg.Profiles))
		for i, p := range s.cfg.Profiles {
			known[i] = p.Name
		}
		return nil, errdefs.WithCode("profile_not_found", errdefs.Mark(fmt.Errorf("unknown profile %q; the profiles are %s", name, strings.Join(known, ", ")), errdefs.ErrNotFound))
	}
	return p, nil
}
