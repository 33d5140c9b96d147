package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// testArtifacts checks artifact and collection records: round trip,
// tenant isolation, listing order, expiry and blob reference counting.
func testArtifacts(t *testing.T, st store.Store) {
	ctx := context.Background()
	now := base
	exp := now.Add(time.Hour)
	coll := &sandbox.ArtifactCollection{JobID: "job_1", Tenant: "a", SandboxID: "sbx_1",
		Spec: sandbox.ArtifactSpec{Paths: []string{"out/*.png"}, MaxFileBytes: 10}, State: sandbox.ArtifactsPending,
		CreatedAt: now, ExpiresAt: exp}
	if err := st.PutArtifactCollection(ctx, coll); err != nil {
		t.Fatal(err)
	}
	got, err := st.GetArtifactCollection(ctx, "a", "job_1")
	if err != nil || got.State != sandbox.ArtifactsPending || got.Spec.Paths[0] != "out/*.png" || !got.CreatedAt.Equal(now) {
		t.Fatalf("collection round trip: %+v %v", got, err)
	}
	if _, err := st.GetArtifactCollection(ctx, "b", "job_1"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("other tenant sees the collection: %v", err)
	}
	done := now.Add(time.Second)
	coll.State, coll.Collected, coll.FinishedAt = sandbox.ArtifactsDone, 2, &done
	coll.Skipped = []sandbox.SkippedArtifact{{Path: "out/big.png", Size: 99, Reason: sandbox.SkipFileTooLarge}}
	if err := st.PutArtifactCollection(ctx, coll); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.GetArtifactCollection(ctx, "", "job_1"); got.State != sandbox.ArtifactsDone || len(got.Skipped) != 1 || got.Collected != 2 {
		t.Fatalf("collection replace: %+v", got)
	}

	mk := func(id, job, tenant, sum string, expires time.Time) *sandbox.Artifact {
		return &sandbox.Artifact{ID: id, Tenant: tenant, JobID: job, SandboxID: "sbx_1", Path: "out/" + id + ".png",
			Name: id + ".png", Size: 3, SHA256: sum, MIME: "image/png", CreatedAt: now, ExpiresAt: expires}
	}
	arts := []*sandbox.Artifact{
		mk("art_2", "job_1", "a", "s1", exp), mk("art_1", "job_1", "a", "s1", exp),
		mk("art_3", "job_1", "a", "s2", now.Add(-time.Second)), mk("art_4", "job_2", "b", "s3", exp),
	}
	for _, a := range arts {
		if err := st.CreateArtifact(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.CreateArtifact(ctx, arts[0]); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("duplicate artifact: %v", err)
	}
	a, err := st.GetArtifact(ctx, "a", "art_1")
	if err != nil || a.SHA256 != "s1" || a.Size != 3 || a.MIME != "image/png" || !a.ExpiresAt.Equal(exp) || a.Name != "art_1.png" {
		t.Fatalf("artifact round trip: %+v %v", a, err)
	}
	if _, err := st.GetArtifact(ctx, "b", "art_1"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("other tenant sees the artifact: %v", err)
	}
	if _, err := st.GetArtifact(ctx, "", "art_nope"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("unknown artifact: %v", err)
	}
	list, err := st.ListArtifacts(ctx, "a", "job_1")
	if err != nil || len(list) != 3 || list[0].ID != "art_2" || list[1].ID != "art_1" || list[2].ID != "art_3" {
		t.Fatalf("list in insertion order: %v %v", ids(list), err)
	}
	if list, _ := st.ListArtifacts(ctx, "b", "job_1"); len(list) != 0 {
		t.Fatalf("other tenant lists artifacts: %v", ids(list))
	}
	if list, _ := st.ListArtifacts(ctx, "", "job_2"); len(list) != 1 {
		t.Fatalf("any tenant: %v", ids(list))
	}

	for sum, want := range map[string]bool{"s1": true, "s2": true, "s9": false} {
		if in, err := st.ArtifactBlobInUse(ctx, sum); err != nil || in != want {
			t.Fatalf("blob %s in use = %v (%v), want %v", sum, in, err, want)
		}
	}
	if _, err := st.DeleteExpiredArtifacts(ctx, now, 0); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("zero limit: %v", err)
	}
	gone, err := st.DeleteExpiredArtifacts(ctx, now, 100)
	if err != nil || len(gone) != 1 || gone[0].ID != "art_3" || gone[0].SHA256 != "s2" {
		t.Fatalf("expire: %v %v", ids(gone), err)
	}
	if in, _ := st.ArtifactBlobInUse(ctx, "s2"); in {
		t.Fatal("blob of an expired artifact still in use")
	}
	if _, err := st.GetArtifact(ctx, "", "art_3"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("expired artifact still there: %v", err)
	}
	if _, err := st.GetArtifactCollection(ctx, "", "job_1"); err != nil {
		t.Fatalf("unexpired collection removed: %v", err)
	}
	gone, err = st.DeleteExpiredArtifacts(ctx, exp, 2)
	if err != nil || len(gone) != 2 {
		t.Fatalf("limit 2: %v %v", ids(gone), err)
	}
	gone, _ = st.DeleteExpiredArtifacts(ctx, exp, 2)
	if len(gone) != 1 {
		t.Fatalf("the rest: %v", ids(gone))
	}
	if _, err := st.GetArtifactCollection(ctx, "", "job_1"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("expired collection kept: %v", err)
	}
}

func ids(as []*sandbox.Artifact) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.ID)
	}
	return out
}
