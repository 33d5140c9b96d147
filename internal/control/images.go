package control

import (
	"context"

	"genesis.dev/sandbox/internal/imagebuild"
	"genesis.dev/sandbox/internal/imagestate"
)

// ImageBuilds is what control asks of the image builds the service runs
// in the background (imagestate.Builds).
type ImageBuilds = imagestate.Builds

// ImageView is one image the configured profiles run, with its state on
// this host (imagestate.View).
type ImageView = imagestate.View

// ImageBuildOf returns the progress of the image build that err (a 503
// image_building) reports.
func ImageBuildOf(err error) (imagebuild.Progress, bool) { return imagestate.BuildOf(err) }

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

// Images lists the images of the configured profiles in the order of the
// profiles (which is the order the service builds them in).
func (s *Service) Images(ctx context.Context) ([]ImageView, error) {
	return s.images.List(ctx, s.cfg.Profiles)
}
