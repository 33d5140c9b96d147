package jobs_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/artifacts"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// TestArtifactRetentionGC checks that the reconciler removes artifacts past
// their retention and exactly the blobs no record uses any more, and that
// an expired artifact is not served even before GC runs.
func TestArtifactRetentionGC(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *config.Config) { c.Intervals.ArtifactRetention = time.Hour })
	ctx := context.Background()
	blobs, err := artifacts.OpenBlobs(filepath.Join(h.Dir, "artifacts"))
	if err != nil {
		t.Fatal(err)
	}
	put := func(s string) string {
		r, err := blobs.Put(strings.NewReader(s), 0)
		if err != nil {
			t.Fatal(err)
		}
		return r.SHA256
	}
	shared, alone, orphan := put("shared content"), put("content of one"), put("no record")
	now := h.Clock.Now().UTC()
	mk := func(sum string, expires time.Time) *sandbox.Artifact {
		a := &sandbox.Artifact{ID: sandbox.NewID("art"), Tenant: "a", JobID: sandbox.NewID("job"), SandboxID: sandbox.NewID("sbx"),
			Path: "out/x", Name: "x", Size: 1, SHA256: sum, MIME: "text/plain", CreatedAt: now, ExpiresAt: expires}
		if err := h.St.CreateArtifact(ctx, a); err != nil {
			t.Fatal(err)
		}
		return a
	}
	soon, later := now.Add(30*time.Minute), now.Add(2*time.Hour)
	old1, old2, keep := mk(shared, soon), mk(alone, soon), mk(shared, later)

	if _, err := h.Artifacts.Get(ctx, "a", old1.ID); err != nil {
		t.Fatalf("unexpired artifact: %v", err)
	}
	if _, err := h.Artifacts.Get(ctx, "b", old1.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("another tenant's artifact: %v", err)
	}
	if err := h.Svc.Reconcile(ctx, false); err != nil {
		t.Fatal(err)
	}
	for _, sum := range []string{shared, alone, orphan} {
		if !blobs.Has(sum) {
			t.Fatalf("blob %s removed before anything expired (a periodic pass does not sweep)", sum)
		}
	}

	h.Clock.Advance(45 * time.Minute)
	if _, err := h.Artifacts.Get(ctx, "a", old1.ID); !errors.Is(err, errdefs.ErrNotFound) || errdefs.Code(err) != "artifact_expired" {
		t.Fatalf("expired artifact served before GC: %v", err)
	}
	if err := h.Svc.Reconcile(ctx, false); err != nil {
		t.Fatal(err)
	}
	for _, a := range []*sandbox.Artifact{old1, old2} {
		if _, err := h.St.GetArtifact(ctx, "", a.ID); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("expired record %s kept: %v", a.ID, err)
		}
	}
	if _, err := h.St.GetArtifact(ctx, "", keep.ID); err != nil {
		t.Errorf("unexpired record removed: %v", err)
	}
	if !blobs.Has(shared) {
		t.Error("blob still used by an unexpired artifact was removed")
	}
	if blobs.Has(alone) {
		t.Error("blob of the expired artifact was kept")
	}
	if !blobs.Has(orphan) {
		t.Error("a periodic pass swept a blob it had no expired record for")
	}
	if _, f, err := h.Artifacts.Open(ctx, "a", keep.ID); err != nil {
		t.Errorf("open the kept artifact: %v", err)
	} else {
		f.Close()
	}

	// The startup pass sweeps every blob: the one never recorded goes.
	if err := h.Svc.Reconcile(ctx, true); err != nil {
		t.Fatal(err)
	}
	if blobs.Has(orphan) || !blobs.Has(shared) {
		t.Errorf("startup sweep: orphan kept=%v, shared kept=%v", blobs.Has(orphan), blobs.Has(shared))
	}
}

// TestArtifactRequestValidation checks that a bad artifact request is
// refused before anything is recorded or run, and that a good one is
// recorded and settled (never left pending) when its job ends.
func TestArtifactRequestValidation(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *config.Config) {
		c.Limits.Artifacts = config.ArtifactLimits{MaxFileBytes: 1000, MaxTotalBytes: 5000, MaxFiles: 10}
	})
	ctx := context.Background()
	sb := h.Create("a", control.CreateSandboxInput{})
	many := make([]string, 33)
	for i := range many {
		many[i] = "x"
	}
	for _, spec := range []sandbox.ArtifactSpec{
		{}, {Paths: []string{""}}, {Paths: []string{"../x"}}, {Paths: []string{"/etc/*"}}, {Paths: []string{"a/b**"}},
		{Paths: []string{"[x"}}, {Paths: many}, {Paths: []string{"x"}, MaxFileBytes: 1001},
		{Paths: []string{"x"}, MaxTotalBytes: 5001}, {Paths: []string{"x"}, MaxFileBytes: -1},
	} {
		_, err := h.Jobs.Exec(ctx, jobs.ExecInput{Tenant: "a", SandboxID: sb.ID, Command: []string{"true"}, Artifacts: &spec})
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("spec %+v: %v, want invalid argument", spec, err)
		}
		if _, err := h.Jobs.StartJob(ctx, jobs.ExecInput{Tenant: "a", SandboxID: sb.ID, Command: []string{"true"}, Artifacts: &spec}); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("background, spec %+v: %v, want invalid argument", spec, err)
		}
	}
	if jobs, err := h.St.ListJobs(ctx, store.JobFilter{}); err != nil || len(jobs) != 0 {
		t.Fatalf("refused requests recorded %d jobs (%v)", len(jobs), err)
	}

	out, err := h.Jobs.Exec(ctx, jobs.ExecInput{Tenant: "a", SandboxID: sb.ID, Command: []string{"true"},
		Artifacts: &sandbox.ArtifactSpec{Paths: []string{"out/*.png"}, MaxFileBytes: 10}})
	if err != nil {
		t.Fatal(err)
	}
	c := h.Artifacts.Summary(ctx, out.Job.ID)
	if c == nil || c.State == sandbox.ArtifactsPending || c.FinishedAt == nil || c.Spec.MaxFileBytes != 10 || c.Tenant != "a" {
		t.Fatalf("collection after the job: %+v", c)
	}
	if _, _, err := h.Artifacts.JobArtifacts(ctx, "b", out.Job.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another tenant lists the job's artifacts: %v", err)
	}
	plain, err := h.Jobs.Exec(ctx, jobs.ExecInput{Tenant: "a", SandboxID: sb.ID, Command: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	if c, list, err := h.Artifacts.JobArtifacts(ctx, "a", plain.Job.ID); err != nil || c != nil || len(list) != 0 {
		t.Errorf("a job without an artifact request: %+v %v %v", c, list, err)
	}
}
