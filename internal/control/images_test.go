package control_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/images"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/imagebuild"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/testenv"
)

// fakeBuilds stands for the service's background image builds.
type fakeBuilds struct {
	mu     sync.Mutex
	status map[string]imagebuild.Progress
	done   map[string]chan struct{}
}

func newFakeBuilds(names ...string) *fakeBuilds {
	f := &fakeBuilds{status: map[string]imagebuild.Progress{}, done: map[string]chan struct{}{}}
	for _, n := range names {
		f.status[n] = imagebuild.Progress{Name: n, State: imagebuild.StateQueued}
		f.done[n] = make(chan struct{})
	}
	return f
}

func (f *fakeBuilds) Status(name string) (imagebuild.Progress, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.status[name]
	return p, ok
}

func (f *fakeBuilds) Await(ctx context.Context, name string) (imagebuild.Progress, bool) {
	f.mu.Lock()
	done, ok := f.done[name]
	f.mu.Unlock()
	if !ok {
		return imagebuild.Progress{}, false
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
	return f.Status(name)
}

func (f *fakeBuilds) set(name string, p imagebuild.Progress) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p.Name = name
	f.status[name] = p
	if p.State == imagebuild.StateBuilt || p.State == imagebuild.StateFailed {
		close(f.done[name])
	}
}

func recipeRef(t *testing.T, name string) string {
	t.Helper()
	r, ok := images.Lookup(name)
	if !ok {
		t.Fatalf("no recipe %s", name)
	}
	return r.Ref()
}

// TestImageBuildingRequests: a request for a profile whose image the
// service is still building is 503 image_building with Retry-After and
// the progress, and makes nothing; with wait_seconds it waits for the
// build and succeeds; a failed build is 409 image_not_built saying why;
// readiness, profiles and images say where each build stands; a build
// that ends wakes the profile's warm pool.
func TestImageBuildingRequests(t *testing.T) {
	t.Parallel()
	builds := newFakeBuilds("tool-basic", "code-python-basic")
	h := newHarnessWith(t, func(c *config.Config) {
		c.WarmPools = true
		c.Intervals.PoolCheck = time.Hour // only a wake fills a pool in time
		for i := range c.Profiles {
			switch c.Profiles[i].Name {
			case "tool-basic":
				c.Profiles[i].Pools = []config.PoolSpec{{Runtime: sandbox.RuntimeRunc, MinIdle: 1, MaxTotal: 2}}
			default:
				c.Profiles[i].Pools = nil
			}
		}
	}, func(c *control.Config) { c.ImageBuilds = builds })
	ctx := context.Background()
	building := imagebuild.Progress{State: imagebuild.StateBuilding, Step: imagebuild.StepBootstrap, StepNumber: 1, Steps: 3,
		Done: 40, Unit: "packages", Percent: 12}
	builds.set("tool-basic", building)

	_, err := h.Svc.CreateSandbox(ctx, control.CreateSandboxInput{Tenant: "a", Profile: "tool-basic", Runtime: "runc"})
	wantProblem(t, "create while building", err, http.StatusServiceUnavailable, "image_building")
	if after, ok := errdefs.RetryAfter(err); !ok || after < time.Second {
		t.Errorf("Retry-After = %v %v", after, ok)
	}
	if p, ok := control.ImageBuildOf(err); !ok || p.Percent != 12 || p.Step != imagebuild.StepBootstrap {
		t.Errorf("progress in the error = %+v %v", p, ok)
	}
	if !strings.Contains(err.Error(), "building 12%: bootstrap (1/3) 40 packages") || !strings.Contains(err.Error(), "wait_seconds") {
		t.Errorf("message: %v", err)
	}
	h.AssertNothingCreated()

	// The harness's own profile has its image: the service is ready.
	ok, checks := h.Svc.Readiness(ctx)
	if !ok || checks["image.tool-basic"] != "building 12%: bootstrap (1/3) 40 packages" || checks["image.code-python-basic"] != "queued" ||
		!strings.Contains(checks["images"], "being built in the background") {
		t.Errorf("readiness = %v %v", ok, checks)
	}
	views, err := h.Svc.Images(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(views) == 0 || views[0].Name != "tool-basic" || views[0].Present || views[0].Build == nil || views[0].Build.Percent != 12 ||
		views[0].Ref != recipeRef(t, "tool-basic") || strings.Join(views[0].Profiles, ",") != "tool-basic" {
		t.Errorf("first image = %+v", views[0])
	}

	// A create that may wait gets its sandbox once the build ends; the
	// pool fills as soon as it is told.
	got := make(chan error, 1)
	go func() {
		sb, err := h.Svc.CreateSandbox(ctx, control.CreateSandboxInput{Tenant: "a", Profile: "tool-basic", Runtime: "runc", WaitSeconds: 30})
		if err == nil && sb.State != sandbox.StateReady {
			err = errors.New("sandbox " + string(sb.State))
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("create with wait_seconds returned while the image was building: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	h.Drv.AddImage(recipeRef(t, "tool-basic"))
	builds.set("tool-basic", imagebuild.Progress{State: imagebuild.StateBuilt, Percent: 100})
	h.Svc.ImageBuilt("tool-basic")
	if err := <-got; err != nil {
		t.Fatalf("create that waited for the build: %v", err)
	}
	testenv.Eventually(t, 30*time.Second, 10*time.Millisecond, "a warm tool-basic member", func() (bool, string) {
		views, err := h.Svc.Pools(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, v := range views {
			if v.Profile == "tool-basic" && v.Counts[sandbox.StateIdle] == 1 {
				return true, ""
			}
		}
		return false, "no idle member"
	})

	// A failed build: image_not_built, with the reason and the command.
	builds.set("code-python-basic", imagebuild.Progress{State: imagebuild.StateFailed, Error: "debootstrap: exit status 1\nlong log"})
	_, err = h.Svc.CreateSandbox(ctx, control.CreateSandboxInput{Tenant: "a", Profile: "code-python-basic", WaitSeconds: 5})
	wantProblem(t, "create after a failed build", err, http.StatusConflict, "image_not_built")
	if err == nil || !strings.Contains(err.Error(), "its build failed (failed: debootstrap: exit status 1)") ||
		!strings.Contains(err.Error(), "images build --profile code-python-basic") {
		t.Errorf("message: %v", err)
	}
	// A profile whose image the service does not build: as before.
	_, err = h.Svc.CreateSandbox(ctx, control.CreateSandboxInput{Tenant: "a", Profile: "tool-node", Runtime: "runc", WaitSeconds: 5})
	wantProblem(t, "create of an image not built", err, http.StatusConflict, "image_not_built")

	ok, checks = h.Svc.Readiness(ctx)
	if !ok || checks["image.tool-basic"] != "ok" || !strings.HasPrefix(checks["image.code-python-basic"], "failed: debootstrap") {
		t.Errorf("readiness after the builds = %v %v", ok, checks)
	}
	profiles, err := h.Svc.Profiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range profiles {
		switch p.Name {
		case "tool-basic":
			if !p.ImagePresent || p.ImageBuild != nil {
				t.Errorf("tool-basic view: present %v build %+v", p.ImagePresent, p.ImageBuild)
			}
		case "code-python-basic":
			if p.ImagePresent || p.ImageBuild == nil || p.ImageBuild.State != imagebuild.StateFailed {
				t.Errorf("code-python-basic view: present %v build %+v", p.ImagePresent, p.ImageBuild)
			}
		}
	}
}
