package httpapi_test

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/imagebuild"
)

// stillBuilding stands for background builds that are at one point and
// stay there: tool-basic building, code-python-basic queued.
type stillBuilding map[string]imagebuild.Progress

func (b stillBuilding) Status(name string) (imagebuild.Progress, bool) {
	p, ok := b[name]
	return p, ok
}

func (b stillBuilding) Await(ctx context.Context, name string) (imagebuild.Progress, bool) {
	<-ctx.Done()
	return b.Status(name)
}

// TestImagesWhileBuilding: GET /v1/images and /v1/profiles show the
// background builds; a create for a profile whose image is being built is
// 503 image_building with Retry-After and the progress in the problem;
// /readyz names each image's state.
func TestImagesWhileBuilding(t *testing.T) {
	t.Parallel()
	builds := stillBuilding{
		"tool-basic": {Name: "tool-basic", State: imagebuild.StateBuilding, Step: imagebuild.StepPackages, StepNumber: 2, Steps: 4,
			Done: 30, Total: 60, Unit: "packages", Percent: 60, Detail: "Unpacking less (590-2.1~deb12u2) ..."},
		"code-python-basic": {Name: "code-python-basic", State: imagebuild.StateQueued},
	}
	a := newAPIWith(t, nil, func(c *control.Config) { c.ImageBuilds = builds })

	resp, b := a.do(req{method: "GET", path: "/v1/images", key: keyA})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/images: %d %s", resp.StatusCode, b)
	}
	list := decodeJSON[client.ImageList](t, b)
	byName := map[string]client.Image{}
	var order []string
	for _, im := range list.Items {
		byName[im.Name], order = im, append(order, im.Name)
	}
	if len(order) < 3 || order[0] != "tool-basic" || order[1] != "code-python-basic" {
		t.Errorf("images in order %v, want the profiles' order (tool-basic, code-python-basic, ...)", order)
	}
	tb := byName["tool-basic"]
	if tb.Status != "building" || tb.Build == nil || tb.Build.Percent != 60 || tb.Build.Step != "packages" ||
		tb.Build.Summary != "building 60%: packages (2/4) 30/60 packages" || tb.Build.Detail == "" ||
		!slices.Equal(tb.Profiles, []string{"tool-basic"}) || tb.BuildCommand == "" {
		t.Errorf("tool-basic = %+v (build %+v)", tb, tb.Build)
	}
	if cp := byName["code-python-basic"]; cp.Status != "queued" || cp.Build == nil || cp.Build.State != "queued" {
		t.Errorf("code-python-basic = %+v", cp)
	}
	if tn := byName["tool-node"]; tn.Status != "not_built" || tn.Build != nil || tn.BuildCommand == "" {
		t.Errorf("tool-node (not built by the service) = %+v", tn)
	}
	if im := byName["genesis-test/fake:1"]; im.Status != "present" || im.Build != nil || im.BuildCommand != "" {
		t.Errorf("the harness's own image = %+v", im)
	}

	resp, b = a.do(req{method: "POST", path: "/v1/sandboxes", key: keyA, body: `{"profile":"tool-basic","runtime":"runc","wait_seconds":1}`})
	p := checkProblem(t, resp, b, http.StatusServiceUnavailable, "image_building")
	if resp.Header.Get("Retry-After") != "15" || p.ImageBuild == nil || p.ImageBuild.Percent != 60 || p.ImageBuild.State != "building" {
		t.Errorf("Retry-After %q, problem %s", resp.Header.Get("Retry-After"), b)
	}

	_, b = a.do(req{method: "GET", path: "/v1/profiles", key: keyA})
	for _, pr := range decodeJSON[client.ProfileList](t, b).Items {
		if pr.Name == "tool-basic" && (pr.ImageStatus != "building" || pr.ImageBuild == nil || pr.ImageBuild.Percent != 60) {
			t.Errorf("profile tool-basic: %s %+v", pr.ImageStatus, pr.ImageBuild)
		}
	}
	resp, b = a.do(req{method: "GET", path: "/readyz"})
	h := decodeJSON[client.Health](t, b)
	if h.Checks["image.tool-basic"] != "building 60%: packages (2/4) 30/60 packages" || h.Checks["image.code-python-basic"] != "queued" {
		t.Errorf("readyz %d: %+v", resp.StatusCode, h.Checks)
	}
}
