package store

import (
	"context"
	"time"

	"genesis.dev/sandbox/internal/sandbox"
)

// Snapshots keeps snapshot records.
type Snapshots interface {
	// CreateSnapshot inserts a record; a duplicate ID returns
	// errdefs.ErrAlreadyExists.
	CreateSnapshot(ctx context.Context, s *sandbox.Snapshot) error
	// GetSnapshot returns one snapshot; tenant "" matches any tenant.
	GetSnapshot(ctx context.Context, tenant, id string) (*sandbox.Snapshot, error)
	// UpdateSnapshot applies fn to the record and stores the result; the
	// identity fields (ID, Tenant, SandboxID, CreatedAt) cannot change, and
	// UpdatedAt is set to now.
	UpdateSnapshot(ctx context.Context, id string, now time.Time, fn func(*sandbox.Snapshot) error) (*sandbox.Snapshot, error)
	// ListSnapshots returns the snapshots matching f, newest first.
	ListSnapshots(ctx context.Context, f SnapshotFilter) ([]*sandbox.Snapshot, error)
	// DeleteSnapshot removes a record; a missing one is not an error.
	DeleteSnapshot(ctx context.Context, id string) error
	// SnapshotUsage is how many snapshots a tenant keeps (not internal,
	// not failed) and the bytes they take.
	SnapshotUsage(ctx context.Context, tenant string) (count int, bytes int64, err error)
}

// SnapshotFilter selects snapshots. Zero fields match everything.
type SnapshotFilter struct {
	Tenant    string
	SandboxID string
	States    []sandbox.SnapshotState
	// Internal keeps the service's own snapshots too.
	Internal bool
	// ExpiredAt, if set, keeps snapshots whose retention ended by then.
	ExpiredAt time.Time
	Limit     int
}

// NextSnapshot keeps the identity fields of cur in next and stamps now.
func NextSnapshot(cur, next *sandbox.Snapshot, now time.Time) {
	next.ID, next.Tenant, next.SandboxID, next.CreatedAt = cur.ID, cur.Tenant, cur.SandboxID, cur.CreatedAt
	next.UpdatedAt = now
}
