package control

import (
	"context"
	"errors"
	"fmt"
	"time"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/imagebuild"
)

// ImageBuilds is what control asks of the image builds the service runs
// in the background (an *imagebuild.Queue), about images that are not
// present: where the build of a recipe's image stands, and a wait for its
// end. ok is false for a recipe the builds do not make.
type ImageBuilds interface {
	Status(recipe string) (p imagebuild.Progress, ok bool)
	Await(ctx context.Context, recipe string) (p imagebuild.Progress, ok bool)
}

// imageBuildingRetry is the Retry-After of a 503 image_building.
const imageBuildingRetry = 15 * time.Second

// imageBuildingError is the error of a request for a profile whose image
// is still being built; it carries the build's progress, which the API
// shows in the problem document.
type imageBuildingError struct {
	progress imagebuild.Progress
	err      error
}

func (e *imageBuildingError) Error() string { return e.err.Error() }
func (e *imageBuildingError) Unwrap() error { return e.err }

// ImageBuildOf returns the progress of the image build that err (a 503
// image_building) reports.
func ImageBuildOf(err error) (imagebuild.Progress, bool) {
	var e *imageBuildingError
	if errors.As(err, &e) {
		return e.progress, true
	}
	return imagebuild.Progress{}, false
}

// imageBuild returns where the background build of p's image stands;
// false when the service does not build it (no builds, or an image the
// configuration names).
func (s *Service) imageBuild(p *config.Profile) (imagebuild.Progress, bool) {
	if s.builds == nil || p.Image != "" {
		return imagebuild.Progress{}, false
	}
	return s.builds.Status(p.Recipe)
}

// building reports whether a build is under way (not ended).
func building(b imagebuild.Progress) bool {
	return b.State == imagebuild.StateQueued || b.State == imagebuild.StateWaiting || b.State == imagebuild.StateBuilding
}

// awaitImage makes sure the image ref of p is present: at once, or, while
// the service builds it in the background (recipe: ref is the image of
// p's recipe, not a snapshot's), after waiting up to wait for the build.
// A missing image the service does not build is image_not_built (409)
// naming the command that builds it, one whose build failed is
// image_not_built with the failure, and one still being built is
// image_building (503) with Retry-After and the progress.
func (s *Service) awaitImage(ctx context.Context, p *config.Profile, ref string, wait time.Duration, recipe bool) error {
	present, err := s.driver.ImagePresent(ctx, ref)
	if err != nil || present {
		return err
	}
	b, tracked := s.imageBuild(p)
	tracked = tracked && recipe
	if !tracked {
		return errdefs.WithCode("image_not_built", fmt.Errorf(
			"image %s of profile %s is not built on this host; build it with: %s: %w", ref, p.Name, buildCommand(p, true), errdefs.ErrFailedPrecondition))
	}
	if wait > 0 && building(b) {
		wctx, cancel := context.WithTimeout(ctx, wait)
		b, _ = s.builds.Await(wctx, p.Recipe)
		cancel()
		if err := ctx.Err(); err != nil {
			return err
		}
		if present, err = s.driver.ImagePresent(ctx, ref); err != nil || present {
			return err
		}
	}
	if building(b) {
		return errdefs.WithRetryAfter(imageBuildingRetry, errdefs.WithCode("image_building", &imageBuildingError{progress: b, err: fmt.Errorf(
			"image %s of profile %s is being built in the background (%s); retry when it is done, or wait for it with wait_seconds: %w",
			ref, p.Name, b.Summary(), errdefs.ErrUnavailable)}))
	}
	reason := "it is not built on this host"
	if b.State == imagebuild.StateFailed {
		reason = "its build failed (" + b.Summary() + ")"
	}
	return errdefs.WithCode("image_not_built", fmt.Errorf(
		"image %s of profile %s is not available: %s; build it with: %s: %w", ref, p.Name, reason, buildCommand(p, true), errdefs.ErrFailedPrecondition))
}

// ImageBuilt wakes the warm pools of the profiles that run recipe's
// image, which has just been built: they fill now rather than at their
// next check.
func (s *Service) ImageBuilt(recipe string) {
	for _, pl := range s.poolList {
		if p, ok := s.cfg.Profile(pl.key.profile); ok && p.Image == "" && p.Recipe == recipe {
			pl.wake()
		}
	}
}

// ImageView is one image the configured profiles run, with its state on
// this host.
type ImageView struct {
	// Name is the recipe, or the reference for an image the configuration
	// names.
	Name string
	Ref  string
	// Profiles are the profiles that run it, in the configuration's order.
	Profiles []string
	Present  bool
	// Declared is false for a recipe this version does not have.
	Declared     bool
	BuildCommand string
	// Build is the background build's progress when the image is not
	// present and the service builds it.
	Build *imagebuild.Progress
}

// Images lists the images of the configured profiles in the order of the
// profiles (which is the order the service builds them in).
func (s *Service) Images(ctx context.Context) ([]ImageView, error) {
	var out []ImageView
	index := map[string]int{}
	for i := range s.cfg.Profiles {
		p := &s.cfg.Profiles[i]
		ref, declared := s.imageRef(p)
		if j, ok := index[ref]; ok {
			out[j].Profiles = append(out[j].Profiles, p.Name)
			continue
		}
		v := ImageView{Name: p.Recipe, Ref: ref, Profiles: []string{p.Name}, Declared: declared, BuildCommand: buildCommand(p, declared)}
		if p.Image != "" {
			v.Name = p.Image
		}
		if declared {
			present, err := s.driver.ImagePresent(ctx, ref)
			if err != nil {
				return nil, fmt.Errorf("image status of %s: %w", ref, err)
			}
			v.Present = present
			if !present {
				if b, ok := s.imageBuild(p); ok {
					v.Build = &b
				}
			}
		}
		index[ref] = len(out)
		out = append(out, v)
	}
	return out, nil
}
