package imagestate

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"genesis.dev/sandbox/images"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/imagebuild"
)

type present map[string]bool

func (p present) ImagePresent(_ context.Context, ref string) (bool, error) { return p[ref], nil }

type builds map[string]imagebuild.Progress

func (b builds) Status(recipe string) (imagebuild.Progress, bool) {
	p, ok := b[recipe]
	return p, ok
}

func (b builds) Await(ctx context.Context, recipe string) (imagebuild.Progress, bool) {
	<-ctx.Done()
	return b.Status(recipe)
}

// TestImages: a profile's reference (its recipe's under the repository,
// or the configured image), and what a create is told about an image that
// is not present: image_not_built (409) when nothing builds it, and
// image_building (503, with the build's progress) while it is built.
func TestImages(t *testing.T) {
	t.Parallel()
	r, ok := images.Lookup("tool-basic")
	if !ok {
		t.Fatal("no tool-basic recipe")
	}
	ref := r.RefIn("repo/")
	tool := &config.Profile{Name: "tool", Recipe: "tool-basic"}
	named := &config.Profile{Name: "named", Image: "example/img:1"}
	none := &config.Profile{Name: "none", Recipe: "no-such-recipe"}
	im := New("repo/", present{"example/img:1": true}, builds{"tool-basic": {State: imagebuild.StateBuilding, Percent: 40}})

	if got, ok := im.Ref(tool); got != ref || !ok {
		t.Errorf("Ref(tool) = %s, %v; want %s, true", got, ok, ref)
	}
	if got, ok := im.Ref(named); got != "example/img:1" || !ok {
		t.Errorf("Ref(named) = %s, %v", got, ok)
	}
	if _, ok := im.Ref(none); ok {
		t.Error("Ref of a recipe this version lacks says it is declared")
	}

	ctx := context.Background()
	if err := im.Await(ctx, named, "example/img:1", 0, false); err != nil {
		t.Errorf("Await of a present image: %v", err)
	}
	err := im.Await(ctx, tool, ref, 0, true)
	if errdefs.HTTPStatus(err) != http.StatusServiceUnavailable || errdefs.Code(err) != "image_building" {
		t.Fatalf("Await while building: %v, want 503 image_building", err)
	}
	if p, ok := BuildOf(err); !ok || p.Percent != 40 {
		t.Errorf("BuildOf: %+v, %v; want the build at 40%%", p, ok)
	}
	err = New("repo/", present{}, nil).Await(ctx, tool, ref, 0, true)
	if errdefs.Code(err) != "image_not_built" || !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("Await without builds: %v, want image_not_built", err)
	}
	if _, ok := BuildOf(err); ok {
		t.Error("BuildOf of image_not_built reports a build")
	}
}
