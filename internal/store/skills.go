package store

import (
	"context"
	"time"
)

// SkillRevision is one immutable revision of a tenant's skill. The store
// keeps Doc, a JSON document the skills package owns (manifest, files,
// report), as JSON (its formatting may change), and the revision's archive
// once per digest.
type SkillRevision struct {
	Tenant    string
	Name      string
	Revision  int64
	Digest    string
	CreatedAt time.Time
	Doc       []byte
}

// Skills keeps skill revisions and their archives.
type Skills interface {
	// CreateSkillRevision stores rev as the next revision of its skill
	// (rev.Revision is set: one more than the latest, 1 for a new skill)
	// and keeps archive under rev.Digest. When the latest revision has the
	// same digest, nothing is stored and it is returned with created
	// false: pushing the same content twice is idempotent.
	CreateSkillRevision(ctx context.Context, rev *SkillRevision, archive []byte) (out *SkillRevision, created bool, err error)
	// GetSkillRevision returns one revision; revision 0 is the latest.
	GetSkillRevision(ctx context.Context, tenant, name string, revision int64) (*SkillRevision, error)
	// ListSkills returns the latest revision of each of the tenant's
	// skills, by name.
	ListSkills(ctx context.Context, tenant string) ([]*SkillRevision, error)
	// ListSkillRevisions returns every revision of a skill, newest first.
	ListSkillRevisions(ctx context.Context, tenant, name string) ([]*SkillRevision, error)
	// SkillArchive returns the archive kept under digest.
	SkillArchive(ctx context.Context, digest string) ([]byte, error)
}
