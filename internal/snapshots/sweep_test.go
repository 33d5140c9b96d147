package snapshots

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store/sqlite"
)

// savedImages is a driver that only lists and removes snapshot images.
type savedImages struct {
	driver.Driver
	list    []driver.SavedImage
	removed []string
}

func (d *savedImages) CommitRootfs(context.Context, string, string, map[string]string) (int64, error) {
	return 0, nil
}
func (d *savedImages) SaveRootfsUpper(context.Context, string, string) error { return nil }
func (d *savedImages) SavedImages(context.Context, ...string) ([]driver.SavedImage, error) {
	return d.list, nil
}
func (d *savedImages) RemoveImage(_ context.Context, ref string) error {
	d.removed = append(d.removed, ref)
	return nil
}

// TestSweepKeepsAnImageBeingTagged: the daemon makes a committed image
// first and tags it a moment later, so the sweep can list a live
// snapshot's image with no reference at all. It must keep it (the label
// names its snapshot; removing it by id would take the tag given in
// between with it), and still remove an image whose label or reference
// names no snapshot.
func TestSweepKeepsAnImageBeingTagged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "state.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now().UTC()
	live := "snap_0123456789abcdef"
	if err := st.CreateSnapshot(ctx, &sandbox.Snapshot{ID: live, Tenant: "a", SandboxID: "sbx_0123456789abcdef",
		State: sandbox.SnapshotCreating, Profile: "p", Runtime: sandbox.RuntimeRunc, Image: "img",
		RiskLevel: sandbox.RiskLow, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	gone := "snap_fedcba9876543210"
	d := &savedImages{list: []driver.SavedImage{
		{ID: "sha256:being-tagged", Labels: map[string]string{driver.LabelSnapshot: live}},
		{ID: "sha256:tagged", Refs: []string{imageRef(live)}, Labels: map[string]string{driver.LabelSnapshot: live}},
		{ID: "sha256:orphan", Labels: map[string]string{driver.LabelSnapshot: gone}},
		{ID: "sha256:orphan-tagged", Refs: []string{imageRef(gone)}},
	}}
	m := &Manager{cfg: Config{Driver: d, Store: st, Instance: "gs-test"}, log: slog.New(slog.DiscardHandler)}
	m.sweepImages(ctx)
	for _, kept := range []string{"sha256:being-tagged", "sha256:tagged", imageRef(live)} {
		if slices.Contains(d.removed, kept) {
			t.Errorf("the sweep removed %s of a live snapshot (removed %v)", kept, d.removed)
		}
	}
	for _, want := range []string{"sha256:orphan", imageRef(gone)} {
		if !slices.Contains(d.removed, want) {
			t.Errorf("the sweep kept %s, which no snapshot names (removed %v)", want, d.removed)
		}
	}
}
