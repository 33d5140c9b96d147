package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// CreateSession inserts a session record.
func (s *Store) CreateSession(ctx context.Context, se *sandbox.Session) error {
	if se == nil || se.ID == "" {
		return fmt.Errorf("create session: missing id: %w", errdefs.ErrInvalidArgument)
	}
	doc, err := json.Marshal(se)
	if err != nil {
		return fmt.Errorf("create session %s: %v: %w", se.ID, err, errdefs.ErrInvalidArgument)
	}
	_, err = s.writer.ExecContext(ctx, `INSERT INTO sessions (id, tenant, sandbox_id, doc) VALUES (?, ?, ?, ?)`,
		se.ID, se.Tenant, se.SandboxID, string(doc))
	switch {
	case err == nil:
		return nil
	case isUniqueViolation(err):
		return fmt.Errorf("session %s: %w", se.ID, errdefs.ErrAlreadyExists)
	case isForeignKeyViolation(err):
		return fmt.Errorf("session %s: sandbox %s: %w", se.ID, se.SandboxID, errdefs.ErrNotFound)
	}
	return dbError(ctx, "create session "+se.ID, err)
}

func getSession(ctx context.Context, q queryer, tenant, id string) (*sandbox.Session, error) {
	var t, doc string
	err := q.QueryRowContext(ctx, `SELECT tenant, doc FROM sessions WHERE id = ?`, id).Scan(&t, &doc)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && tenant != "" && t != tenant) {
		return nil, fmt.Errorf("session %s: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, dbError(ctx, "get session "+id, err)
	}
	var se sandbox.Session
	if err := json.Unmarshal([]byte(doc), &se); err != nil {
		return nil, fmt.Errorf("session %s: corrupt record: %v: %w", id, err, errdefs.ErrInternal)
	}
	return &se, nil
}

// GetSession returns one session; tenant "" matches any tenant.
func (s *Store) GetSession(ctx context.Context, tenant, id string) (*sandbox.Session, error) {
	return getSession(ctx, s.reader, tenant, id)
}

// UpdateSession applies fn to the session and stores the result. ID, tenant,
// sandbox and creation time cannot change.
func (s *Store) UpdateSession(ctx context.Context, id string, fn func(*sandbox.Session) error) (*sandbox.Session, error) {
	get := func(tx queryer) (*sandbox.Session, error) { return getSession(ctx, tx, "", id) }
	return updateRow(ctx, s, "session "+id, get, func(tx *sql.Tx, cur *sandbox.Session) (*sandbox.Session, error) {
		next := *cur
		if err := fn(&next); err != nil {
			return nil, err
		}
		next.ID, next.Tenant, next.SandboxID, next.CreatedAt = cur.ID, cur.Tenant, cur.SandboxID, cur.CreatedAt
		doc, err := json.Marshal(&next)
		if err != nil {
			return nil, fmt.Errorf("update session %s: %v: %w", id, err, errdefs.ErrInvalidArgument)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE sessions SET doc = ? WHERE id = ?`, string(doc), id); err != nil {
			return nil, dbError(ctx, "update session "+id, err)
		}
		return &next, nil
	})
}
