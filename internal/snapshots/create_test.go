package snapshots

import (
	"context"
	"testing"

	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
)

// TestFromSnapshotWithoutSnapshots: asking a service that keeps no
// snapshots (no manager) for a sandbox or a lease from one is
// not_supported, before anything is created.
func TestFromSnapshotWithoutSnapshots(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if _, _, err := Create(ctx, nil, nil, "snap_1", CreateOptions{Tenant: "a"}); errdefs.Code(err) != "not_supported" || !errdefs.Is(err, errdefs.ErrNotImplemented) {
		t.Errorf("create: %v, want not_supported", err)
	}
	if _, _, err := Lease(ctx, nil, nil, "snap_1", control.AcquireLeaseInput{Tenant: "a"}); errdefs.Code(err) != "not_supported" || !errdefs.Is(err, errdefs.ErrNotImplemented) {
		t.Errorf("lease: %v, want not_supported", err)
	}
}
