package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

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
		return fmt.Errorf("put artifact collection %s: %v: %w", c.JobID, err, errdefs.ErrInvalidArgument)
	}
	_, err = s.writer.ExecContext(ctx, `INSERT INTO artifact_collections (job_id, tenant, expires_at, doc) VALUES (?, ?, ?, ?)
		ON CONFLICT (job_id) DO UPDATE SET expires_at = excluded.expires_at, doc = excluded.doc`,
		c.JobID, c.Tenant, exp, string(doc))
	if err != nil {
		return dbError(ctx, "put artifact collection "+c.JobID, err)
	}
	return nil
}

// GetArtifactCollection returns the collection record of a job; tenant ""
// matches any tenant.
func (s *Store) GetArtifactCollection(ctx context.Context, tenant, jobID string) (*sandbox.ArtifactCollection, error) {
	var c sandbox.ArtifactCollection
	if err := getDoc(ctx, s.reader, `SELECT tenant, doc FROM artifact_collections WHERE job_id = ?`, "artifact collection", tenant, jobID, &c); err != nil {
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
		return fmt.Errorf("create artifact %s: %v: %w", a.ID, err, errdefs.ErrInvalidArgument)
	}
	_, err = s.writer.ExecContext(ctx, `INSERT INTO artifacts (id, tenant, job_id, sha256, expires_at, doc) VALUES (?, ?, ?, ?, ?, ?)`,
		a.ID, a.Tenant, a.JobID, a.SHA256, exp, string(doc))
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
	if err := getDoc(ctx, s.reader, `SELECT tenant, doc FROM artifacts WHERE id = ?`, "artifact", tenant, id, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// getDoc reads the (tenant, doc) row of a JSON-document record into v; a
// missing row or one of another tenant is ErrNotFound.
func getDoc(ctx context.Context, q queryer, query, what, tenant, id string, v any) error {
	var t, doc string
	err := q.QueryRowContext(ctx, query, id).Scan(&t, &doc)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && tenant != "" && t != tenant) {
		return fmt.Errorf("%s %s: %w", what, id, errdefs.ErrNotFound)
	}
	if err != nil {
		return dbError(ctx, "get "+what+" "+id, err)
	}
	if err := json.Unmarshal([]byte(doc), v); err != nil {
		return fmt.Errorf("%s %s: corrupt record: %v: %w", what, id, err, errdefs.ErrInternal)
	}
	return nil
}

// rowsQueryer is a *sql.DB or *sql.Tx.
type rowsQueryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func (s *Store) queryArtifacts(ctx context.Context, q rowsQueryer, op, query string, args ...any) ([]*sandbox.Artifact, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, dbError(ctx, op, err)
	}
	defer rows.Close()
	var out []*sandbox.Artifact
	for rows.Next() {
		var doc string
		if err := rows.Scan(&doc); err != nil {
			return nil, dbError(ctx, op, err)
		}
		var a sandbox.Artifact
		if err := json.Unmarshal([]byte(doc), &a); err != nil {
			return nil, fmt.Errorf("%s: corrupt record: %v: %w", op, err, errdefs.ErrInternal)
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
	q := `SELECT doc FROM artifacts WHERE job_id = ?`
	args := []any{jobID}
	if tenant != "" {
		q += ` AND tenant = ?`
		args = append(args, tenant)
	}
	return s.queryArtifacts(ctx, s.reader, "list artifacts", q+` ORDER BY rowid`, args...)
}

// DeleteExpiredArtifacts removes up to limit expired artifacts and the
// expired collection records.
func (s *Store) DeleteExpiredArtifacts(ctx context.Context, now time.Time, limit int) (_ []*sandbox.Artifact, err error) {
	if limit <= 0 {
		return nil, fmt.Errorf("delete expired artifacts: limit must be positive: %w", errdefs.ErrInvalidArgument)
	}
	cut, err := encodeTime("now", now)
	if err != nil {
		return nil, err
	}
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return nil, dbError(ctx, "delete expired artifacts", err)
	}
	defer func() { _ = tx.Rollback() }()
	gone, err := s.queryArtifacts(ctx, tx, "delete expired artifacts",
		`DELETE FROM artifacts WHERE id IN (SELECT id FROM artifacts WHERE expires_at <= ? ORDER BY expires_at LIMIT ?) RETURNING doc`, cut, limit)
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM artifact_collections WHERE expires_at <= ?`, cut); err != nil {
		return nil, dbError(ctx, "delete expired artifact collections", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, dbError(ctx, "commit expired artifacts", err)
	}
	return gone, nil
}

// ArtifactBlobInUse reports whether any artifact has the content sha256.
func (s *Store) ArtifactBlobInUse(ctx context.Context, sha256 string) (bool, error) {
	var one int
	err := s.reader.QueryRowContext(ctx, `SELECT 1 FROM artifacts WHERE sha256 = ? LIMIT 1`, sha256).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, dbError(ctx, "artifact blob in use", err)
	}
	return true, nil
}
