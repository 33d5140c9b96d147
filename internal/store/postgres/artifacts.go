package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// PutArtifactCollection inserts or replaces the collection record of a job.
func (s *Store) PutArtifactCollection(ctx context.Context, c *sandbox.ArtifactCollection) error {
	if c == nil || c.JobID == "" {
		return fmt.Errorf("put artifact collection: missing job id: %w", errdefs.ErrInvalidArgument)
	}
	exp, err := encodeTime("expires_at", c.ExpiresAt)
	if err != nil {
		return err
	}
	doc, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("put artifact collection %s: %w: %w", c.JobID, errdefs.ErrInvalidArgument, err)
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO artifact_collections (job_id, tenant, expires_at, doc) VALUES ($1, $2, $3, $4)
		ON CONFLICT (job_id) DO UPDATE SET expires_at = excluded.expires_at, doc = excluded.doc`,
		c.JobID, c.Tenant, exp, doc)
	if err != nil {
		return dbError(ctx, "put artifact collection "+c.JobID, err)
	}
	return nil
}

// GetArtifactCollection returns the collection record of a job; tenant ""
// matches any tenant.
func (s *Store) GetArtifactCollection(ctx context.Context, tenant, jobID string) (*sandbox.ArtifactCollection, error) {
	var c sandbox.ArtifactCollection
	if err := s.getDoc(ctx, `SELECT tenant, doc FROM artifact_collections WHERE job_id = $1`, "artifact collection", tenant, jobID, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// CreateArtifact inserts one artifact record.
func (s *Store) CreateArtifact(ctx context.Context, a *sandbox.Artifact) error {
	if a == nil || a.ID == "" {
		return fmt.Errorf("create artifact: missing id: %w", errdefs.ErrInvalidArgument)
	}
	exp, err := encodeTime("expires_at", a.ExpiresAt)
	if err != nil {
		return err
	}
	doc, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("create artifact %s: %w: %w", a.ID, errdefs.ErrInvalidArgument, err)
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO artifacts (id, tenant, job_id, sha256, expires_at, doc) VALUES ($1, $2, $3, $4, $5, $6)`,
		a.ID, a.Tenant, a.JobID, a.SHA256, exp, doc)
	switch {
	case err == nil:
		return nil
	case isUniqueViolation(err):
		return fmt.Errorf("artifact %s: %w", a.ID, errdefs.ErrAlreadyExists)
	}
	return dbError(ctx, "create artifact "+a.ID, err)
}

// GetArtifact returns one artifact; tenant "" matches any tenant.
func (s *Store) GetArtifact(ctx context.Context, tenant, id string) (*sandbox.Artifact, error) {
	var a sandbox.Artifact
	if err := s.getDoc(ctx, `SELECT tenant, doc FROM artifacts WHERE id = $1`, "artifact", tenant, id, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// getDoc reads the (tenant, doc) row of a JSON-document record into v; a
// missing row or one of another tenant is ErrNotFound.
func (s *Store) getDoc(ctx context.Context, query, what, tenant, id string, v any) error {
	var t string
	var doc []byte
	err := s.pool.QueryRow(ctx, query, id).Scan(&t, &doc)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && tenant != "" && t != tenant) {
		return fmt.Errorf("%s %s: %w", what, id, errdefs.ErrNotFound)
	}
	if err != nil {
		return dbError(ctx, "get "+what+" "+id, err)
	}
	if err := json.Unmarshal(doc, v); err != nil {
		return fmt.Errorf("%s %s: corrupt record: %w: %w", what, id, errdefs.ErrInternal, err)
	}
	return nil
}

func collectArtifacts(ctx context.Context, op string, rows pgx.Rows, err error) ([]*sandbox.Artifact, error) {
	if err != nil {
		return nil, dbError(ctx, op, err)
	}
	defer rows.Close()
	var out []*sandbox.Artifact
	for rows.Next() {
		var doc []byte
		if err := rows.Scan(&doc); err != nil {
			return nil, dbError(ctx, op, err)
		}
		var a sandbox.Artifact
		if err := json.Unmarshal(doc, &a); err != nil {
			return nil, fmt.Errorf("%s: corrupt record: %w: %w", op, errdefs.ErrInternal, err)
		}
		out = append(out, &a)
	}
	if err := rows.Err(); err != nil {
		return nil, dbError(ctx, op, err)
	}
	return out, nil
}

// ListArtifacts returns the artifacts of a job in insertion order.
func (s *Store) ListArtifacts(ctx context.Context, tenant, jobID string) ([]*sandbox.Artifact, error) {
	rows, err := s.pool.Query(ctx, `SELECT doc FROM artifacts WHERE job_id = $1 AND ($2 = '' OR tenant = $2) ORDER BY seq`, jobID, tenant)
	return collectArtifacts(ctx, "list artifacts", rows, err)
}

// DeleteExpiredArtifacts removes up to limit expired artifacts and the
// expired collection records.
func (s *Store) DeleteExpiredArtifacts(ctx context.Context, now time.Time, limit int) ([]*sandbox.Artifact, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("delete expired artifacts: limit must be positive: %w", errdefs.ErrInvalidArgument)
	}
	cut, err := encodeTime("now", now)
	if err != nil {
		return nil, err
	}
	var gone []*sandbox.Artifact
	err = s.inTx(ctx, "delete expired artifacts", func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `DELETE FROM artifacts WHERE id IN
			(SELECT id FROM artifacts WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING doc`, cut, limit)
		if gone, err = collectArtifacts(ctx, "delete expired artifacts", rows, err); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM artifact_collections WHERE expires_at <= $1`, cut); err != nil {
			return dbError(ctx, "delete expired artifact collections", err)
		}
		return nil
	})
	return gone, err
}

// ArtifactBlobInUse reports whether any artifact has the content sha256.
func (s *Store) ArtifactBlobInUse(ctx context.Context, sha256 string) (bool, error) {
	var one int
	err := s.pool.QueryRow(ctx, `SELECT 1 FROM artifacts WHERE sha256 = $1 LIMIT 1`, sha256).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, dbError(ctx, "artifact blob in use", err)
	}
	return true, nil
}
