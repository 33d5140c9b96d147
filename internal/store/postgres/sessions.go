package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// CreateSession inserts a session record. A duplicate ID returns
// errdefs.ErrAlreadyExists; a session whose sandbox does not exist returns
// errdefs.ErrNotFound.
func (s *Store) CreateSession(ctx context.Context, se *sandbox.Session) error {
	if se == nil || se.ID == "" {
		return fmt.Errorf("create session: missing id: %w", errdefs.ErrInvalidArgument)
	}
	doc, err := json.Marshal(se)
	if err != nil {
		return fmt.Errorf("create session %s: %w: %w", se.ID, errdefs.ErrInvalidArgument, err)
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO sessions (id, tenant, sandbox_id, doc) VALUES ($1, $2, $3, $4)`,
		se.ID, se.Tenant, se.SandboxID, doc)
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

// getSession reads one session; tenant "" matches any tenant; lock is "" or
// a locking clause such as "FOR UPDATE".
func getSession(ctx context.Context, q querier, tenant, id, lock string) (*sandbox.Session, error) {
	var t string
	var doc []byte
	err := q.QueryRow(ctx, `SELECT tenant, doc FROM sessions WHERE id = $1 `+lock, id).Scan(&t, &doc)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && tenant != "" && t != tenant) {
		return nil, fmt.Errorf("session %s: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, dbError(ctx, "get session "+id, err)
	}
	var se sandbox.Session
	if err := json.Unmarshal(doc, &se); err != nil {
		return nil, fmt.Errorf("session %s: corrupt record: %w: %w", id, errdefs.ErrInternal, err)
	}
	return &se, nil
}

// GetSession returns one session; tenant "" matches any tenant, and a
// session of another tenant is reported as not found.
func (s *Store) GetSession(ctx context.Context, tenant, id string) (*sandbox.Session, error) {
	return getSession(ctx, s.pool, tenant, id, "")
}

// UpdateSession applies fn to the session and stores the result, in one
// transaction holding the row lock. ID, tenant, sandbox and creation time
// cannot change. An error from fn aborts the update and is returned
// unchanged.
func (s *Store) UpdateSession(ctx context.Context, id string, fn func(*sandbox.Session) error) (*sandbox.Session, error) {
	var next sandbox.Session
	err := s.inTx(ctx, "update session "+id, func(tx pgx.Tx) error {
		cur, err := getSession(ctx, tx, "", id, "FOR UPDATE")
		if err != nil {
			return err
		}
		next = *cur
		if err := fn(&next); err != nil {
			return err
		}
		next.ID, next.Tenant, next.SandboxID, next.CreatedAt = cur.ID, cur.Tenant, cur.SandboxID, cur.CreatedAt
		doc, err := json.Marshal(&next)
		if err != nil {
			return fmt.Errorf("update session %s: %w: %w", id, errdefs.ErrInvalidArgument, err)
		}
		if _, err := tx.Exec(ctx, `UPDATE sessions SET doc = $1 WHERE id = $2`, doc, id); err != nil {
			return dbError(ctx, "update session "+id, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &next, nil
}
