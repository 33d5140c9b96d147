package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/store"
)

const skillColumns = `tenant, name, revision, digest, created_at, doc`

func scanSkill(r scanner) (*store.SkillRevision, error) {
	var (
		rev store.SkillRevision
		at  dbTime
		doc string
	)
	if err := r.Scan(&rev.Tenant, &rev.Name, &rev.Revision, &rev.Digest, &at, &doc); err != nil {
		return nil, err
	}
	rev.CreatedAt, rev.Doc = at.t, []byte(doc)
	return &rev, nil
}

// CreateSkillRevision stores the next revision of a skill. Two pushes of
// one skill at once both read the same latest revision; the second insert
// then collides on the primary key and is tried again on top of the first.
// Each collision means another push committed, so of n concurrent pushes
// none collides more than n-1 times: the bound on attempts is only a stop
// for a store that keeps colliding for another reason.
func (s *Store) CreateSkillRevision(ctx context.Context, rev *store.SkillRevision, archive []byte) (*store.SkillRevision, bool, error) {
	if rev == nil || rev.Tenant == "" || rev.Name == "" || rev.Digest == "" || len(rev.Doc) == 0 {
		return nil, false, errdefs.Invalid("create skill revision: missing tenant, name, digest or doc")
	}
	at, err := s.encodeTime("created_at", rev.CreatedAt)
	if err != nil {
		return nil, false, err
	}
	for attempt := 0; ; attempt++ {
		var out *store.SkillRevision
		created := false
		err := s.inTx(ctx, "create skill revision "+rev.Name, func(tx *sql.Tx) error {
			latest, err := scanSkill(tx.QueryRowContext(ctx, s.q(`SELECT `+skillColumns+` FROM skill_revisions
				WHERE tenant = ? AND name = ? ORDER BY revision DESC LIMIT 1`), rev.Tenant, rev.Name))
			switch {
			case err == nil && latest.Digest == rev.Digest:
				out = latest
				return nil
			case err == nil:
			case errors.Is(err, sql.ErrNoRows):
				latest = &store.SkillRevision{}
			default:
				return s.dbError(ctx, "latest skill revision "+rev.Name, err)
			}
			if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO skill_archives (digest, size, data) VALUES (?, ?, ?)
				ON CONFLICT (digest) DO NOTHING`), rev.Digest, int64(len(archive)), archive); err != nil {
				return s.dbError(ctx, "keep skill archive "+rev.Digest, err)
			}
			next := *rev
			next.Revision = latest.Revision + 1
			if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO skill_revisions (`+skillColumns+`) VALUES (?, ?, ?, ?, ?, ?)`),
				next.Tenant, next.Name, next.Revision, next.Digest, at, string(next.Doc)); err != nil {
				if s.isUniqueViolation(err) {
					return fmt.Errorf("skill %s revision %d: %w", next.Name, next.Revision, errdefs.ErrAlreadyExists)
				}
				return s.dbError(ctx, "create skill revision "+next.Name, err)
			}
			out, created = &next, true
			return nil
		})
		if errors.Is(err, errdefs.ErrAlreadyExists) && attempt < maxSkillPushRetries && ctx.Err() == nil {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		return out, created, nil
	}
}

// GetSkillRevision returns one revision; revision 0 is the latest.
func (s *Store) GetSkillRevision(ctx context.Context, tenant, name string, revision int64) (*store.SkillRevision, error) {
	q, args := `SELECT `+skillColumns+` FROM skill_revisions WHERE tenant = ? AND name = ? AND revision = ?`, []any{tenant, name, revision}
	if revision == 0 {
		q, args = `SELECT `+skillColumns+` FROM skill_revisions WHERE tenant = ? AND name = ? ORDER BY revision DESC LIMIT 1`, args[:2]
	}
	rev, err := scanSkill(s.reader.QueryRowContext(ctx, s.q(q), args...))
	if errors.Is(err, sql.ErrNoRows) {
		if revision == 0 {
			return nil, fmt.Errorf("skill %s: %w", name, errdefs.ErrNotFound)
		}
		return nil, fmt.Errorf("skill %s revision %d: %w", name, revision, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, s.dbError(ctx, "get skill "+name, err)
	}
	return rev, nil
}

// ListSkills returns the latest revision of each of the tenant's skills.
func (s *Store) ListSkills(ctx context.Context, tenant string) ([]*store.SkillRevision, error) {
	return appendRows(ctx, s, s.reader, []*store.SkillRevision(nil), "list skills", scanSkill, `SELECT `+skillColumns+` FROM skill_revisions r WHERE tenant = ?
		AND revision = (SELECT MAX(revision) FROM skill_revisions l WHERE l.tenant = r.tenant AND l.name = r.name)
		ORDER BY name`, tenant)
}

// ListSkillRevisions returns every revision of a skill, newest first.
func (s *Store) ListSkillRevisions(ctx context.Context, tenant, name string) ([]*store.SkillRevision, error) {
	return appendRows(ctx, s, s.reader, []*store.SkillRevision(nil), "list skill revisions "+name, scanSkill, `SELECT `+skillColumns+` FROM skill_revisions
		WHERE tenant = ? AND name = ? ORDER BY revision DESC`, tenant, name)
}

// SkillArchive returns the archive kept under digest.
func (s *Store) SkillArchive(ctx context.Context, digest string) ([]byte, error) {
	var data []byte
	err := s.reader.QueryRowContext(ctx, s.q(`SELECT data FROM skill_archives WHERE digest = ?`), digest).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("skill archive %s: %w", digest, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, s.dbError(ctx, "skill archive "+digest, err)
	}
	return data, nil
}

// maxSkillPushRetries bounds the collisions of one push (see
// CreateSkillRevision): concurrent pushes of one skill beyond it fail
// with errdefs.ErrAlreadyExists.
const maxSkillPushRetries = 256
