package probe

import (
	"context"
	"fmt"
	"strings"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/imagebuild"
	"genesis.dev/sandbox/internal/imagestate"
	"genesis.dev/sandbox/internal/sandbox"
)

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
func (p *Prober) Profiles(ctx context.Context) ([]ProfileView, error) {
	healthy := p.Result(ctx).HealthyRuntimes()
	out := make([]ProfileView, 0, len(p.cfg.Profiles))
	for i := range p.cfg.Profiles {
		v, err := p.profileView(ctx, &p.cfg.Profiles[i], healthy)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (p *Prober) profileView(ctx context.Context, prof *config.Profile, healthy []sandbox.Runtime) (ProfileView, error) {
	ref, declared := p.images.Ref(prof)
	v := ProfileView{Profile: *prof, ImageRef: ref, ImageDeclared: declared, BuildCommand: imagestate.BuildCommand(prof, declared), WarmPools: p.cfg.WarmPools}
	v.LeaseDefaultTTL, v.LeaseMaxTTL = p.cfg.LeaseTTL(prof)
	if declared {
		if il, ok := p.driver.(imageLabeler); ok {
			labels, present, err := il.ImageLabels(ctx, ref)
			if err != nil {
				return ProfileView{}, fmt.Errorf("image status of %s: %w", prof.Name, err)
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
			present, err := p.driver.ImagePresent(ctx, ref)
			if err != nil {
				return ProfileView{}, fmt.Errorf("image status of %s: %w", prof.Name, err)
			}
			v.ImagePresent = present
		}
		if !v.ImagePresent {
			if b, ok := p.images.Build(prof); ok {
				v.ImageBuild = &b
			}
		}
	}
	for _, r := range prof.AllowedRuntimes {
		for _, h := range healthy {
			if r == h {
				v.UsableRuntimes = append(v.UsableRuntimes, r)
			}
		}
	}
	return v, nil
}

// Readiness adds to checks one entry per check of the driver, its
// runtimes and the profiles' images, and reports whether they let the
// service create sandboxes now.
func (p *Prober) Readiness(ctx context.Context, checks map[string]string) bool {
	ready := true
	res := p.Result(ctx)
	switch {
	case !res.Healthy:
		checks["driver"], ready = "unhealthy: "+res.Error, false
	default:
		checks["driver"] = "ok"
	}
	for _, r := range res.Runtimes {
		if r.Healthy {
			checks["runtime."+r.Name] = "ok"
		} else {
			checks["runtime."+r.Name] = "unhealthy: " + r.Error
		}
	}
	views, err := p.Profiles(ctx)
	if err != nil {
		checks["images"] = "error: " + err.Error()
		return false
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
	return ready
}
