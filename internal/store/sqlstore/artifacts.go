package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// PutArtifactCollection inserts or replaces (an upsert) the collection
// record of a job.
func (s *Store) PutArtifactCollection(ctx context.Context, c *sandbox.ArtifactCollection) error {
	if c == nil || c.JobID == "" {
		return errdefs.Invalid("put artifact collection: missing job id")
	}
	exp, err := s.encodeTime("expires_at", c.ExpiresAt)
	if err != nil {
		return err
	}
	doc, err := marshalDoc("put artifact collection "+c.JobID, c)
	if err != nil {
		return err
	}
	_, err = s.writer.ExecContext(ctx, s.q(`INSERT INTO artifact_collections (job_id, tenant, expires_at, doc) VALUES (?, ?, ?, ?)
		ON CONFLICT (job_id) DO UPDATE SET expires_at = excluded.expires_at, doc = excluded.doc`),
		c.JobID, c.Tenant, exp, doc)
	if err != nil {
		return s.dbError(ctx, "put artifact collection "+c.JobID, err)
	}
	return nil
}

// GetArtifactCollection returns the collection record of a job; tenant ""
// matches any tenant.
func (s *Store) GetArtifactCollection(ctx context.Context, tenant, jobID string) (*sandbox.ArtifactCollection, error) {
	return getDoc[sandbox.ArtifactCollection](ctx, s, s.reader, `SELECT tenant, doc FROM artifact_collections WHERE job_id = ?`, "artifact collection", tenant, jobID)
}

// CreateArtifact inserts one artifact record.
func (s *Store) CreateArtifact(ctx context.Context, a *sandbox.Artifact) error {
	if a == nil || a.ID == "" {
		return errdefs.Invalid("create artifact: missing id")
	}
	exp, err := s.encodeTime("expires_at", a.ExpiresAt)
	if err != nil {
		return err
	}
	doc, err := marshalDoc("create artifact "+a.ID, a)
	if err != nil {
		return err
	}
	_, err = s.writer.ExecContext(ctx, s.q(`INSERT INTO artifacts (id, tenant, job_id, sha256, expires_at, doc) VALUES (?, ?, ?, ?, ?, ?)`),
		a.ID, a.Tenant, a.JobID, a.SHA256, exp, doc)
	switch {
	case err == nil:
		return nil
	case s.isUniqueViolation(err):
		return fmt.Errorf("artifact %s: %w", a.ID, errdefs.ErrAlreadyExists)
	}
	return s.dbError(ctx, "create artifact "+a.ID, err)
}

// GetArtifact returns one artifact; tenant "" matches any tenant.
func (s *Store) GetArtifact(ctx context.Context, tenant, id string) (*sandbox.Artifact, error) {
	return getDoc[sandbox.Artifact](ctx, s, s.reader, `SELECT tenant, doc FROM artifacts WHERE id = ?`, "artifact", tenant, id)
}

func scanArtifact(r scanner) (*sandbox.Artifact, error) {
	var doc string
	if err := r.Scan(&doc); err != nil {
		return nil, err
	}
	var a sandbox.Artifact
	return &a, unmarshalDoc("artifact", doc, &a)
}

// ListArtifacts returns the artifacts of a job in insertion order.
func (s *Store) ListArtifacts(ctx context.Context, tenant, jobID string) ([]*sandbox.Artifact, error) {
	q := `SELECT doc FROM artifacts WHERE job_id = ?`
	args := []any{jobID}
	if tenant != "" {
		q += ` AND tenant = ?`
		args = append(args, tenant)
	}
	return appendRows(ctx, s, s.reader, nil, "list artifacts", scanArtifact, q+` ORDER BY `+s.d.InsertOrder(), args...)
}

// DeleteExpiredArtifacts removes up to limit expired artifacts and the
// expired collection records. Rows another deleter holds are skipped where
// the dialect can.
func (s *Store) DeleteExpiredArtifacts(ctx context.Context, now time.Time, limit int) ([]*sandbox.Artifact, error) {
	if limit <= 0 {
		return nil, errdefs.Invalid("delete expired artifacts: limit must be positive")
	}
	cut, err := s.encodeTime("now", now)
	if err != nil {
		return nil, err
	}
	var gone []*sandbox.Artifact
	err = s.inTx(ctx, "delete expired artifacts", func(tx *sql.Tx) error {
		var err error
		gone, err = appendRows(ctx, s, tx, nil, "delete expired artifacts", scanArtifact, `DELETE FROM artifacts WHERE id IN
			(SELECT id FROM artifacts WHERE expires_at <= ? ORDER BY expires_at LIMIT ? `+s.d.SkipLockedRowLock()+`) RETURNING doc`, cut, limit)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM artifact_collections WHERE expires_at <= ?`), cut); err != nil {
			return s.dbError(ctx, "delete expired artifact collections", err)
		}
		return nil
	})
	return gone, err
}

// ArtifactBlobInUse reports whether any artifact has the content sha256.
func (s *Store) ArtifactBlobInUse(ctx context.Context, sha256 string) (bool, error) {
	var one int
	err := s.reader.QueryRowContext(ctx, s.q(`SELECT 1 FROM artifacts WHERE sha256 = ? LIMIT 1`), sha256).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, s.dbError(ctx, "artifact blob in use", err)
	}
	return true, nil
}
