package control

import (
	"context"
	"fmt"
	"strings"
	"time"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/imagebuild"
	"genesis.dev/sandbox/internal/imagestate"
	"genesis.dev/sandbox/internal/sandbox"
)

// RefreshProbe runs the driver's capability probe now and caches the result.
func (s *Service) RefreshProbe(ctx context.Context) driver.ProbeResult {
	s.probeMu.Lock()
	defer s.probeMu.Unlock()
	res, err := s.driver.Probe(ctx)
	if err != nil {
		res = driver.ProbeResult{Driver: s.driver.Name(), Healthy: false, Error: err.Error(), CheckedAt: s.now()}
	}
	s.capsMu.Lock()
	if s.probeOK {
		s.probeFails = keepThroughBlips(&res, s.probe, s.probeFails)
	}
	s.probe, s.probeOK = res, true
	s.capsMu.Unlock()
	attrs := []any{"healthy", res.Healthy, "daemon", res.DaemonVersion, "cgroup", res.CgroupVersion}
	for _, r := range res.Runtimes {
		attrs = append(attrs, r.Name, fmt.Sprintf("healthy=%v %s %s", r.Healthy, r.Version, r.Error))
	}
	s.log.Info("capability probe", attrs...)
	return res
}

// probeBlips is how many probes in a row a runtime that passed before may
// fail before it is reported unhealthy. A smoke run that misses its deadline
// on a heavily loaded host says little about the runtime; refusing every
// create because of one would turn load into an outage.
const probeBlips = 2

// keepThroughBlips reports a runtime that was healthy in prev and whose
// smoke run in res only missed its deadline as still healthy while its run
// of such failed probes (counted in fails, which it
// returns updated) is at most probeBlips long. The failure stays visible in
// the runtime's error.
func keepThroughBlips(res *driver.ProbeResult, prev driver.ProbeResult, fails map[string]int) map[string]int {
	was := map[string]bool{}
	for _, r := range prev.Runtimes {
		was[r.Name] = r.Healthy
	}
	next := map[string]int{}
	for i := range res.Runtimes {
		r := &res.Runtimes[i]
		if r.Healthy || !r.TimedOut || !was[r.Name] {
			continue
		}
		n := fails[r.Name] + 1
		if n > probeBlips {
			continue
		}
		next[r.Name] = n
		r.Healthy = true
		r.Error = fmt.Sprintf("last probe failed (%d of %d tolerated): %s", n, probeBlips, r.Error)
		res.Healthy = true
		res.Error = ""
	}
	return next
}

// probeLoop re-runs the probe every interval, and every few seconds while
// some runtime is unhealthy, so a host that was busy at start-up becomes
// ready soon after it calms down.
func (s *Service) probeLoop(ctx context.Context, interval time.Duration) {
	const retry = 10 * time.Second
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTimer(s.nextProbe(interval, retry))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				s.RefreshProbe(ctx)
				t.Reset(s.nextProbe(interval, retry))
			}
		}
	}()
}

// nextProbe is the time to the next probe: interval while everything is
// healthy; after a probe that found something unhealthy, retry, doubled
// for each such probe in a row, up to interval. A runtime that stays
// broken (gVisor on a node that cannot run it, where every probe makes
// a smoke Pod) is so looked at less and less often, and one that breaks
// now is looked at again soon.
func (s *Service) nextProbe(interval, retry time.Duration) time.Duration {
	s.capsMu.Lock()
	defer s.capsMu.Unlock()
	res := s.probe
	unhealthy := !res.Healthy
	for _, r := range res.Runtimes {
		if !r.Healthy || strings.HasPrefix(r.Error, "last probe failed") {
			unhealthy = true
		}
	}
	if !unhealthy {
		s.probeRetries = 0
		return interval
	}
	d := retry << min(s.probeRetries, 16)
	s.probeRetries++
	return min(interval, d)
}

// Probe returns the cached probe result, probing first if there is none.
func (s *Service) Probe(ctx context.Context) driver.ProbeResult {
	s.capsMu.RLock()
	res, ok := s.probe, s.probeOK
	s.capsMu.RUnlock()
	if ok {
		return res
	}
	return s.RefreshProbe(ctx)
}

// ProfileView is a profile with its resolved image and status on this host.
type ProfileView struct {
	config.Profile
	ImageRef       string
	ImagePresent   bool
	ImageDeclared  bool // a recipe or explicit image exists
	BuildCommand   string
	UsableRuntimes []sandbox.Runtime
	// LeaseDefaultTTL and LeaseMaxTTL are the profile's lease lengths in
	// seconds after the service limits are applied.
	LeaseDefaultTTL, LeaseMaxTTL int64
	// WarmPools says whether the profile's pools run (warm_pools).
	WarmPools bool
	// Versions are the component versions the built image reports
	// (chromium, playwright, ...), from its labels.
	Versions map[string]string
	// ImageBuild is the background build's progress while the image is
	// not present and the service builds it.
	ImageBuild *imagebuild.Progress
}

// imageLabeler is the driver's optional look at an image's labels.
type imageLabeler interface {
	ImageLabels(ctx context.Context, ref string) (map[string]string, bool, error)
}

// Profiles returns every configured profile with its image status.
func (s *Service) Profiles(ctx context.Context) ([]ProfileView, error) {
	healthy := s.Probe(ctx).HealthyRuntimes()
	out := make([]ProfileView, 0, len(s.cfg.Profiles))
	for i := range s.cfg.Profiles {
		p := &s.cfg.Profiles[i]
		v, err := s.profileView(ctx, p, healthy)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (s *Service) profileView(ctx context.Context, p *config.Profile, healthy []sandbox.Runtime) (ProfileView, error) {
	ref, declared := s.images.Ref(p)
	v := ProfileView{Profile: *p, ImageRef: ref, ImageDeclared: declared, BuildCommand: imagestate.BuildCommand(p, declared), WarmPools: s.cfg.WarmPools}
	v.LeaseDefaultTTL, v.LeaseMaxTTL = s.cfg.LeaseTTL(p)
	if declared {
		if il, ok := s.driver.(imageLabeler); ok {
			labels, present, err := il.ImageLabels(ctx, ref)
			if err != nil {
				return ProfileView{}, fmt.Errorf("image status of %s: %w", p.Name, err)
			}
			v.ImagePresent = present
			for k, val := range labels {
				if name, ok := strings.CutPrefix(k, driver.LabelVersionPrefix); ok {
					if v.Versions == nil {
						v.Versions = map[string]string{}
					}
					v.Versions[name] = val
				}
			}
		} else {
			present, err := s.driver.ImagePresent(ctx, ref)
			if err != nil {
				return ProfileView{}, fmt.Errorf("image status of %s: %w", p.Name, err)
			}
			v.ImagePresent = present
		}
		if !v.ImagePresent {
			if b, ok := s.images.Build(p); ok {
				v.ImageBuild = &b
			}
		}
	}
	for _, r := range p.AllowedRuntimes {
		for _, h := range healthy {
			if r == h {
				v.UsableRuntimes = append(v.UsableRuntimes, r)
			}
		}
	}
	return v, nil
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
	p := s.Probe(ctx)
	switch {
	case !p.Healthy:
		checks["driver"], ready = "unhealthy: "+p.Error, false
	default:
		checks["driver"] = "ok"
	}
	for _, r := range p.Runtimes {
		if r.Healthy {
			checks["runtime."+r.Name] = "ok"
		} else {
			checks["runtime."+r.Name] = "unhealthy: " + r.Error
		}
	}
	views, err := s.Profiles(ctx)
	if err != nil {
		checks["images"], ready = "error: "+err.Error(), false
		return ready, checks
	}
	present, inBuild := 0, 0
	for _, v := range views {
		switch {
		case v.ImagePresent:
			present++
			checks["image."+v.Name] = "ok"
		case v.ImageBuild != nil:
			checks["image."+v.Name] = v.ImageBuild.Summary()
			if imagestate.Building(*v.ImageBuild) {
				inBuild++
			}
		case v.ImageDeclared:
			checks["image."+v.Name] = "not built: " + v.BuildCommand
		default:
			checks["image."+v.Name] = "not available in this version"
		}
	}
	switch {
	case present == 0 && inBuild > 0:
		ready = false
		checks["images"] = fmt.Sprintf("no profile image is built yet; the images of %d profiles are being built in the background", inBuild)
	case present == 0:
		ready = false
		checks["images"] = "no profile image is built; run: make images"
	case inBuild > 0:
		checks["images"] = fmt.Sprintf("%d of %d profiles ready; the images of %d are being built in the background", present, len(views), inBuild)
	}
	return ready, checks
}

// profile looks up a profile by name.
func (s *Service) profile(name string) (*config.Profile, error) {
	if name == "" {
		return nil, fmt.Errorf("profile is required: %w", errdefs.ErrInvalidArgument)
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
