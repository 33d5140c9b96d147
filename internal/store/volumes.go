package store

import (
	"context"
	"time"

	"genesis.dev/sandbox/internal/sandbox"
)

// Volumes keeps the records of named volumes.
type Volumes interface {
	// CreateVolume inserts a record; a duplicate ID or a name its tenant
	// already uses returns errdefs.ErrAlreadyExists.
	CreateVolume(ctx context.Context, v *sandbox.Volume) error
	// GetVolume returns tenant's volume called name.
	GetVolume(ctx context.Context, tenant, name string) (*sandbox.Volume, error)
	// UpdateVolume applies fn to volume id's record in one write
	// transaction holding its row and stores the result (NextVolume keeps
	// its identity); an error from fn aborts the update and is returned.
	UpdateVolume(ctx context.Context, id string, now time.Time, fn func(*sandbox.Volume) error) (*sandbox.Volume, error)
	// ListVolumes returns the volumes matching f, by tenant and name.
	ListVolumes(ctx context.Context, f VolumeFilter) ([]*sandbox.Volume, error)
	// DeleteVolume removes a record; a missing one is not an error.
	DeleteVolume(ctx context.Context, id string) error
	// VolumeUsage is how many volumes a tenant has and their summed size.
	VolumeUsage(ctx context.Context, tenant string) (count int, sizeMB int64, err error)
}

// VolumeFilter selects volumes. Zero fields match everything.
type VolumeFilter struct {
	Tenant string
	// Mounted keeps the volumes some sandbox holds.
	Mounted bool
}

// NextVolume keeps the identity fields of cur in next and stamps now.
func NextVolume(cur, next *sandbox.Volume, now time.Time) {
	next.ID, next.Tenant, next.Name, next.SizeMB, next.CreatedAt = cur.ID, cur.Tenant, cur.Name, cur.SizeMB, cur.CreatedAt
	next.UpdatedAt = now
}
