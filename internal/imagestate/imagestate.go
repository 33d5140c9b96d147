package imagestate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"genesis.dev/sandbox/images"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/imagebuild"
)

// Builds is what the image builds the service runs in the background
// (an *imagebuild.Queue) are asked about images that are not present:
// where the build of a recipe's image stands, and a wait for its end. ok
// is false for a recipe the builds do not make.
type Builds interface {
	Status(recipe string) (p imagebuild.Progress, ok bool)
	Await(ctx context.Context, recipe string) (p imagebuild.Progress, ok bool)
}

// presence is the driver's look at the local images.
type presence interface {
	ImagePresent(ctx context.Context, ref string) (bool, error)
}

// Images answers for the images of the profiles on this host.
type Images struct {
	repo   string
	driver presence
	builds Builds
	// seen holds the references Await found present: a create does not
	// ask the daemon again (one call of every cold create). One removed
	// since fails the container's create with image_not_built, and
	// Forget makes the next Await ask again.
	seen sync.Map
}

// New returns the images of repository (config's image_repository) as
// driver sees them, built in the background by builds (nil: none are).
func New(repository string, driver presence, builds Builds) *Images {
	return &Images{repo: repository, driver: driver, builds: builds}
}

// Ref resolves the image a profile runs (a recipe's under the configured
// image repository). ok is false when the profile is declared but no
// recipe for its image exists in this version.
func (im *Images) Ref(p *config.Profile) (ref string, ok bool) {
	if p.Image != "" {
		return p.Image, true
	}
	r, ok := images.Lookup(p.Recipe)
	if !ok {
		return im.repo + p.Recipe + ":not-built", false
	}
	return r.RefIn(im.repo), true
}

// BuildCommand says how to get p's image onto this host.
func BuildCommand(p *config.Profile, declared bool) string {
	if p.Image != "" {
		return fmt.Sprintf("load image %s into Docker (it is configured explicitly)", p.Image)
	}
	if !declared {
		return "no image recipe for " + p.Recipe + " in this version yet"
	}
	return "make images (or: sandbox-service images build --profile " + p.Name + ")"
}

// buildingRetry is the Retry-After of a 503 image_building.
const buildingRetry = 15 * time.Second

// buildingError is the error of a request for a profile whose image is
// still being built; it carries the build's progress, which the API shows
// in the problem document.
type buildingError struct {
	progress imagebuild.Progress
	err      error
}

func (e *buildingError) Error() string { return e.err.Error() }
func (e *buildingError) Unwrap() error { return e.err }

// BuildOf returns the progress of the image build that err (a 503
// image_building) reports.
func BuildOf(err error) (imagebuild.Progress, bool) {
	var e *buildingError
	if errors.As(err, &e) {
		return e.progress, true
	}
	return imagebuild.Progress{}, false
}

// Build returns where the background build of p's image stands; false
// when the service does not build it (no builds, or an image the
// configuration names).
func (im *Images) Build(p *config.Profile) (imagebuild.Progress, bool) {
	if im.builds == nil || p.Image != "" {
		return imagebuild.Progress{}, false
	}
	return im.builds.Status(p.Recipe)
}

// Building reports whether a build is under way (not ended).
func Building(b imagebuild.Progress) bool {
	return b.State == imagebuild.StateQueued || b.State == imagebuild.StateWaiting || b.State == imagebuild.StateBuilding
}

// Await makes sure the image ref of p is present: at once, or, while the
// service builds it in the background (recipe: ref is the image of p's
// recipe, not a snapshot's), after waiting up to wait for the build. A
// missing image the service does not build is image_not_built (409)
// naming the command that builds it, one whose build failed is
// image_not_built with the failure, and one still being built is
// image_building (503) with Retry-After and the progress.
func (im *Images) Await(ctx context.Context, p *config.Profile, ref string, wait time.Duration, recipe bool) error {
	if _, ok := im.seen.Load(ref); ok {
		return nil
	}
	present, err := im.driver.ImagePresent(ctx, ref)
	if present {
		im.seen.Store(ref, true)
	}
	if err != nil || present {
		return err
	}
	b, tracked := im.Build(p)
	tracked = tracked && recipe
	if !tracked {
		return errdefs.WithCode("image_not_built", fmt.Errorf(
			"image %s of profile %s is not built on this host; build it with: %s: %w", ref, p.Name, BuildCommand(p, true), errdefs.ErrFailedPrecondition))
	}
	if wait > 0 && Building(b) {
		wctx, cancel := context.WithTimeout(ctx, wait)
		b, _ = im.builds.Await(wctx, p.Recipe)
		cancel()
		if err := ctx.Err(); err != nil {
			return err
		}
		if present, err = im.driver.ImagePresent(ctx, ref); err != nil || present {
			return err
		}
	}
	if Building(b) {
		return errdefs.WithRetryAfter(buildingRetry, errdefs.WithCode("image_building", &buildingError{progress: b, err: fmt.Errorf(
			"image %s of profile %s is being built in the background (%s); retry when it is done, or wait for it with wait_seconds: %w",
			ref, p.Name, b.Summary(), errdefs.ErrUnavailable)}))
	}
	reason := "it is not built on this host"
	if b.State == imagebuild.StateFailed {
		reason = "its build failed (" + b.Summary() + ")"
	}
	return errdefs.WithCode("image_not_built", fmt.Errorf(
		"image %s of profile %s is not available: %s; build it with: %s: %w", ref, p.Name, reason, BuildCommand(p, true), errdefs.ErrFailedPrecondition))
}

// Forget drops what Await remembers of ref: a create that found it
// missing after all (the daemon's image_not_built) calls it.
func (im *Images) Forget(ref string) { im.seen.Delete(ref) }

// View is one image the configured profiles run, with its state on this
// host.
type View struct {
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

// List lists the images of profiles in their order (which is the order
// the service builds them in).
func (im *Images) List(ctx context.Context, profiles []config.Profile) ([]View, error) {
	var out []View
	index := map[string]int{}
	for i := range profiles {
		p := &profiles[i]
		ref, declared := im.Ref(p)
		if j, ok := index[ref]; ok {
			out[j].Profiles = append(out[j].Profiles, p.Name)
			continue
		}
		v := View{Name: p.Recipe, Ref: ref, Profiles: []string{p.Name}, Declared: declared, BuildCommand: BuildCommand(p, declared)}
		if p.Image != "" {
			v.Name = p.Image
		}
		if declared {
			present, err := im.driver.ImagePresent(ctx, ref)
			if err != nil {
				return nil, fmt.Errorf("image status of %s: %w", ref, err)
			}
			v.Present = present
			if !present {
				if b, ok := im.Build(p); ok {
					v.Build = &b
				}
			}
		}
		index[ref] = len(out)
		out = append(out, v)
	}
	return out, nil
}

// Status is the status of a profile's image as both API edges name
// it: present, queued, building (waiting for another build included),
// failed or not_built.
func Status(present bool, b *imagebuild.Progress) string {
	switch {
	case present:
		return "present"
	case b == nil:
		return "not_built"
	case b.State == imagebuild.StateQueued:
		return "queued"
	case b.State == imagebuild.StateWaiting || b.State == imagebuild.StateBuilding:
		return "building"
	case b.State == imagebuild.StateFailed:
		return "failed"
	default:
		return "not_built"
	}
}
