package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// CreateSession inserts a session record. A duplicate ID returns
// errdefs.ErrAlreadyExists; a session whose sandbox does not exist returns
// errdefs.ErrNotFound.
func (s *Store) CreateSession(ctx context.Context, se *sandbox.Session) error {
	if se == nil || se.ID == "" {
		return errdefs.Invalid("create session: missing id")
	}
	doc, err := marshalDoc("create session "+se.ID, se)
	if err != nil {
		return err
	}
	_, err = s.writer.ExecContext(ctx, s.q(`INSERT INTO sessions (id, tenant, sandbox_id, doc) VALUES (?, ?, ?, ?)`),
		se.ID, se.Tenant, se.SandboxID, doc)
	switch {
	case err == nil:
		return nil
	case s.isUniqueViolation(err):
		return fmt.Errorf("session %s: %w", se.ID, errdefs.ErrAlreadyExists)
	case s.isForeignKeyViolation(err):
		return fmt.Errorf("session %s: sandbox %s: %w", se.ID, se.SandboxID, errdefs.ErrNotFound)
	}
	return s.dbError(ctx, "create session "+se.ID, err)
}

// getRow reads the one row that query selects by id with scan; no row is
// errdefs.ErrNotFound. what names the record ("sandbox").
func getRow[T any](ctx context.Context, s *Store, q queryer, what, id string, scan func(scanner) (T, error), query string) (T, error) {
	v, err := scan(s.hot(q).QueryRowContext(ctx, s.q(query), id))
	if errors.Is(err, sql.ErrNoRows) {
		var zero T
		return zero, fmt.Errorf("%s %s: %w", what, id, errdefs.ErrNotFound)
	}
	if err != nil {
		var zero T
		return zero, s.dbError(ctx, "get "+what+" "+id, err)
	}
	return v, nil
}

// getDoc reads a record kept as a JSON document: the (tenant, doc) row that
// query selects by id. A missing row, or one of another tenant when tenant
// is not "", is errdefs.ErrNotFound. what names the record ("session").
func getDoc[T any](ctx context.Context, s *Store, q queryer, query, what, tenant, id string) (*T, error) {
	var t, doc string
	err := s.hot(q).QueryRowContext(ctx, s.q(query), id).Scan(&t, &doc)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && tenant != "" && t != tenant) {
		return nil, fmt.Errorf("%s %s: %w", what, id, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, s.dbError(ctx, "get "+what+" "+id, err)
	}
	var v T
	if err := unmarshalDoc(what+" "+id, doc, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

func (s *Store) getSession(ctx context.Context, q queryer, tenant, id, lock string) (*sandbox.Session, error) {
	return getDoc[sandbox.Session](ctx, s, q, `SELECT tenant, doc FROM sessions WHERE id = ? `+lock, "session", tenant, id)
}

// GetSession returns one session; tenant "" matches any tenant, and a
// session of another tenant is reported as not found.
func (s *Store) GetSession(ctx context.Context, tenant, id string) (*sandbox.Session, error) {
	return s.getSession(ctx, s.reader, tenant, id, "")
}

// UpdateSession applies fn to the session and stores the result as
// store.NextSession makes it, in one write transaction holding the row. An
// error from fn aborts the update and is returned unchanged.
func (s *Store) UpdateSession(ctx context.Context, id string, fn func(*sandbox.Session) error) (*sandbox.Session, error) {
	get := func(tx *sql.Tx) (*sandbox.Session, error) { return s.getSession(ctx, tx, "", id, s.d.RowLock()) }
	return update(ctx, s, "session "+id, get, func(tx *sql.Tx, cur *sandbox.Session) (*sandbox.Session, error) {
		next := *cur
		if err := fn(&next); err != nil {
			return nil, err
		}
		store.NextSession(cur, &next)
		doc, err := marshalDoc("update session "+id, &next)
		if err != nil {
			return nil, err
		}
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE sessions SET doc = ? WHERE id = ?`), doc, id); err != nil {
			return nil, s.dbError(ctx, "update session "+id, err)
		}
		return &next, nil
	})
}

// ListSandboxSessions returns every session of a sandbox, oldest first.
func (s *Store) ListSandboxSessions(ctx context.Context, sandboxID string) ([]*sandbox.Session, error) {
	out, err := appendRows(ctx, s, s.reader, []*sandbox.Session{}, "list sessions of "+sandboxID, func(r scanner) (*sandbox.Session, error) {
		var doc string
		if err := r.Scan(&doc); err != nil {
			return nil, err
		}
		var se sandbox.Session
		return &se, unmarshalDoc("session of "+sandboxID, doc, &se)
	}, `SELECT doc FROM sessions WHERE sandbox_id = ?`, sandboxID)
	if err != nil {
		return nil, err
	}
	store.SortSessions(out)
	return out, nil
}
