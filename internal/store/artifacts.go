package store

import (
	"context"
	"time"

	"genesis.dev/sandbox/internal/sandbox"
)

// Artifacts keeps artifact records and the artifact request of each job.
// Records do not reference sandboxes or jobs by foreign key: they outlive
// both until they expire.
type Artifacts interface {
	// PutArtifactCollection inserts or replaces the artifact collection
	// record of c.JobID.
	PutArtifactCollection(ctx context.Context, c *sandbox.ArtifactCollection) error
	// GetArtifactCollection returns the collection record of a job; tenant
	// "" matches any tenant.
	GetArtifactCollection(ctx context.Context, tenant, jobID string) (*sandbox.ArtifactCollection, error)
	// CreateArtifact inserts one artifact record. A duplicate ID returns
	// errdefs.ErrAlreadyExists.
	CreateArtifact(ctx context.Context, a *sandbox.Artifact) error
	// GetArtifact returns one artifact; tenant "" matches any tenant.
	GetArtifact(ctx context.Context, tenant, id string) (*sandbox.Artifact, error)
	// ListArtifacts returns the artifacts of a job, oldest first; tenant ""
	// matches any tenant.
	ListArtifacts(ctx context.Context, tenant, jobID string) ([]*sandbox.Artifact, error)
	// DeleteExpiredArtifacts removes at most limit artifact records, and
	// collection records, whose ExpiresAt is not after now, and returns the
	// artifacts removed.
	DeleteExpiredArtifacts(ctx context.Context, now time.Time, limit int) ([]*sandbox.Artifact, error)
	// ArtifactBlobInUse reports whether any artifact record has the content
	// sha256.
	ArtifactBlobInUse(ctx context.Context, sha256 string) (bool, error)
}
