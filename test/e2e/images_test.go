package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/images"
)

// buildTimeout bounds the test's wait for a background build of
// tool-basic from nothing (about two minutes on an idle 2-vCPU host; a
// loaded one takes longer).
const buildTimeout = 15 * time.Minute

// buildSeen is one look at tool-basic's row of GET /v1/images.
type buildSeen struct {
	status, step string
	done         int64
	percent      int
}

// TestImagesBuildInBackground runs the service with --build-images on a
// Docker that lacks tool-basic's image (the test's own image_repository),
// as on a bare machine: it serves at once; a create that does not wait is
// 503 image_building with Retry-After and the build's progress; GET
// /v1/images, `genesis images --follow`, the log and the console's System
// view (in Chromium) follow the build through its steps with moving
// counters and a rising percentage; a create that waits gets its sandbox
// when the build ends, and the image runs under runc and runsc.
func TestImagesBuildInBackground(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "tool-basic")
	browserClientDir(t) // installed: the console's run below cannot stop the test
	r, _ := images.Lookup("tool-basic")
	repo := "genesis-e2e-" + randomHex(t, 4) + "/"
	ref := r.RefIn(repo)
	e.config = filepath.Join(e.dataDir, "e2e-config.yaml")
	if err := os.WriteFile(e.config, []byte(fmt.Sprintf(`warm_pools: false
image_repository: %s
profiles:
  - name: tool-basic
    recipe: tool-basic
    allowed_runtimes: [runc, runsc]
    default_risk_level: low
    resources: {cpu: 0.5, memory_mb: 256, pids: 128}
    network: none
    user: "1000:1000"
  # Its image is present: the service is ready while tool-basic's builds.
  - name: ready
    image: %s
    allowed_runtimes: [runc]
    default_risk_level: low
    resources: {cpu: 0.5, memory_mb: 256, pids: 128}
    network: none
    user: "1000:1000"
`, repo, r.Ref())), 0o600); err != nil {
		t.Fatal(err)
	}
	e.serveArgs = []string{"--build-images"}
	t.Cleanup(func() { dockerCmd(t, "image", "rm", "-f", ref) }) // after the service stopped
	start := time.Now()
	svc := e.start(t)
	t.Logf("ready after %v", time.Since(start).Round(time.Millisecond))

	// Not waiting: 503 image_building, Retry-After, the progress.
	resp, body := rawCall(t, svc, "POST", "/v1/sandboxes", strings.NewReader(`{"profile":"tool-basic","runtime":"runc"}`))
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
		!strings.Contains(body, `"code":"image_building"`) || !strings.Contains(body, `"image_build":{"state":`) {
		t.Fatalf("create while building: %d (Retry-After %q) %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	// genesis images --follow, until the build ends.
	var follow cliResult
	wg.Go(func() { follow = runCLI(t, svc, buildTimeout, "images", "--follow") })
	// The console's System view, in Chromium.
	var con consoleRun
	artifacts := consoleArtifacts(t, "images")
	wg.Go(func() {
		var err error
		if con, err = runConsoleFor(t, buildTimeout+time.Minute, "images", svc.url(), e.apiKey, "", "", artifacts, "tool-basic", ""); err != nil {
			t.Error(err)
		}
	})
	// A create that waits for the build (again, should the build outlast
	// a wait_seconds), issued while it runs.
	var waited *client.Sandbox
	var waitErr error
	wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
		defer cancel()
		for {
			sb, err := svc.client().CreateSandbox(ctx, client.CreateSandboxRequest{Profile: "tool-basic", Runtime: "runc", WaitSeconds: 300}, "")
			var ae *client.APIError
			if errors.As(err, &ae) && ae.Problem.Code == "image_building" && ctx.Err() == nil {
				continue
			}
			waited, waitErr = sb, err
			return
		}
	})

	// GET /v1/images while it builds.
	var seen []buildSeen
	deadline := time.Now().Add(buildTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		list, err := svc.client().Images(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(list.Items, func(im client.Image) bool { return im.Name == "tool-basic" })
		if i < 0 || list.Items[i].Ref != ref {
			t.Fatalf("GET /v1/images: no tool-basic of %s: %+v", ref, list.Items)
		}
		im := list.Items[i]
		s := buildSeen{status: im.Status}
		if b := im.Build; b != nil {
			s.step, s.done, s.percent = b.Step, b.Done, b.Percent
		}
		if len(seen) == 0 || seen[len(seen)-1] != s {
			seen = append(seen, s)
		}
		if im.Status == "present" {
			break
		}
		if im.Status == "failed" || time.Now().After(deadline) {
			t.Fatalf("tool-basic's build: %+v (seen %v)", im.Build, seen)
		}
		time.Sleep(500 * time.Millisecond)
	}
	wg.Wait()
	t.Logf("built in about %v; %d distinct looks at GET /v1/images", time.Since(start).Round(time.Second), len(seen))

	// Every step with packages moved its counter, and the percentage rose.
	steps, percents := map[string]int64{}, []int{}
	for _, s := range seen {
		if s.status == "building" {
			steps[s.step] = max(steps[s.step], s.done)
			if len(percents) == 0 || percents[len(percents)-1] != s.percent {
				percents = append(percents, s.percent)
			}
		}
	}
	if steps["bootstrap"] < 10 || steps["packages"] < 3 {
		t.Errorf("counters seen per step: %v, want bootstrap and packages moving (seen %v)", steps, seen)
	}
	if len(percents) < 4 || !slices.IsSorted(percents) {
		t.Errorf("percentages seen: %v, want at least 4, rising", percents)
	}
	if follow.code != 0 || !strings.Contains(follow.stdout, " tool-basic: building ") || !strings.Contains(follow.stdout, " tool-basic: present\n") {
		t.Errorf("genesis images --follow: %v", follow)
	}
	if con.ImageStatus != "present" || len(con.ImageValues) < 2 || !slices.IsSorted(con.ImageValues) {
		t.Errorf("console: values %v, status %q, texts %q", con.ImageValues, con.ImageStatus, con.ImageTexts)
	}
	log := svc.log.String()
	for _, want := range []string{`msg="image build step" component=imagebuild profile=tool-basic ref=` + ref + ` step=packages of=2/4`,
		`msg="image build progress" component=imagebuild profile=tool-basic`, `msg="background image builds done"`} {
		if !strings.Contains(log, want) {
			t.Errorf("service log lacks %q", want)
		}
	}

	if waitErr != nil {
		t.Fatalf("create that waited for the build: %v", waitErr)
	}
	e.deleteOnCleanup(t, waited.ID)
	for _, rt := range e.runtimes(t) {
		sb := waited
		if rt != "runc" {
			sb = e.createSandbox(t, client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt})
		}
		res, err := svc.client().Exec(callCtx(t), sb.ID, client.ExecRequest{Command: []string{"sh", "-c", "echo ran; git --version"}})
		if err != nil || res.ExitCode != 0 || !strings.HasPrefix(res.Stdout, "ran\ngit version ") {
			t.Errorf("%s: exec in the built image: %+v %v", rt, res, err)
		}
	}
}

// runCLI is svc.cli with a time limit of its own, safe to call from
// another goroutine (it reports instead of stopping the test).
func runCLI(t *testing.T, svc *service, limit time.Duration, args ...string) cliResult {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "genesis"), args...)
	cmd.Env = append(os.Environ(), client.EnvURL+"="+svc.url(), client.EnvAPIKey+"="+svc.e.apiKey)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := cliResult{args: args, stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ctx.Err() == nil:
		r.code = ee.ExitCode()
	default:
		r.code = -1
		t.Errorf("genesis %s: %v (stderr %q)", strings.Join(args, " "), err, r.stderr)
	}
	return r
}
