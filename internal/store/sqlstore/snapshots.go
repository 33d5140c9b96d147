package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// CreateSnapshot inserts a snapshot record.
func (s *Store) CreateSnapshot(ctx context.Context, sn *sandbox.Snapshot) error {
	if sn == nil || sn.ID == "" || sn.Tenant == "" {
		return errdefs.Invalid("create snapshot: missing id or tenant")
	}
	args, err := s.snapshotRow(sn)
	if err != nil {
		return err
	}
	_, err = s.writer.ExecContext(ctx, s.q(`INSERT INTO snapshots (id, tenant, sandbox_id, state, internal, size_bytes, created_at, expires_at, doc)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`), append([]any{sn.ID}, args...)...)
	switch {
	case err == nil:
		return nil
	case s.isUniqueViolation(err):
		return fmt.Errorf("snapshot %s: %w", sn.ID, errdefs.ErrAlreadyExists)
	}
	return s.dbError(ctx, "create snapshot "+sn.ID, err)
}

// snapshotRow is a record's columns after its id.
func (s *Store) snapshotRow(sn *sandbox.Snapshot) ([]any, error) {
	created, err := s.encodeTime("created_at", sn.CreatedAt)
	if err != nil {
		return nil, err
	}
	exp, err := s.encodeOptTime("expires_at", sn.ExpiresAt)
	if err != nil {
		return nil, err
	}
	doc, err := marshalDoc("snapshot "+sn.ID, sn)
	if err != nil {
		return nil, err
	}
	return []any{sn.Tenant, sn.SandboxID, string(sn.State), sn.Internal, sn.SizeBytes, created, exp, doc}, nil
}

// GetSnapshot returns one snapshot; tenant "" matches any tenant.
func (s *Store) GetSnapshot(ctx context.Context, tenant, id string) (*sandbox.Snapshot, error) {
	return getDoc[sandbox.Snapshot](ctx, s, s.reader, `SELECT tenant, doc FROM snapshots WHERE id = ?`, "snapshot", tenant, id)
}

// UpdateSnapshot applies fn to a snapshot in one write transaction holding
// its row.
func (s *Store) UpdateSnapshot(ctx context.Context, id string, now time.Time, fn func(*sandbox.Snapshot) error) (*sandbox.Snapshot, error) {
	get := func(tx *sql.Tx) (*sandbox.Snapshot, error) {
		return getDoc[sandbox.Snapshot](ctx, s, tx, `SELECT tenant, doc FROM snapshots WHERE id = ? `+s.d.RowLock(), "snapshot", "", id)
	}
	return update(ctx, s, "snapshot "+id, get, func(tx *sql.Tx, cur *sandbox.Snapshot) (*sandbox.Snapshot, error) {
		next := *cur
		if err := fn(&next); err != nil {
			return nil, err
		}
		store.NextSnapshot(cur, &next, now)
		args, err := s.snapshotRow(&next)
		if err != nil {
			return nil, err
		}
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE snapshots SET tenant = ?, sandbox_id = ?, state = ?, internal = ?, size_bytes = ?,
			created_at = ?, expires_at = ?, doc = ? WHERE id = ?`), append(args, id)...); err != nil {
			return nil, s.dbError(ctx, "update snapshot "+id, err)
		}
		return &next, nil
	})
}

// ListSnapshots returns the snapshots matching f, newest first.
func (s *Store) ListSnapshots(ctx context.Context, f store.SnapshotFilter) ([]*sandbox.Snapshot, error) {
	var where []string
	var args []any
	if f.Tenant != "" {
		where, args = append(where, "tenant = ?"), append(args, f.Tenant)
	}
	if f.SandboxID != "" {
		where, args = append(where, "sandbox_id = ?"), append(args, f.SandboxID)
	}
	if !f.Internal {
		where, args = append(where, "internal = ?"), append(args, false)
	}
	if len(f.States) > 0 {
		marks := make([]string, len(f.States))
		for i, st := range f.States {
			marks[i] = "?"
			args = append(args, string(st))
		}
		where = append(where, "state IN ("+strings.Join(marks, ", ")+")")
	}
	if !f.ExpiredAt.IsZero() {
		cut, err := s.encodeTime("expired_at", f.ExpiredAt)
		if err != nil {
			return nil, err
		}
		where, args = append(where, "expires_at IS NOT NULL AND expires_at <= ?"), append(args, cut)
	}
	q := `SELECT doc FROM snapshots`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY created_at DESC, id DESC`
	if f.Limit > 0 {
		q += fmt.Sprintf(` LIMIT %d`, f.Limit)
	}
	return appendRows(ctx, s, s.reader, []*sandbox.Snapshot{}, "list snapshots", func(r scanner) (*sandbox.Snapshot, error) {
		var doc string
		if err := r.Scan(&doc); err != nil {
			return nil, err
		}
		var sn sandbox.Snapshot
		return &sn, unmarshalDoc("snapshot", doc, &sn)
	}, q, args...)
}

// DeleteSnapshot removes a record; a missing one is not an error.
func (s *Store) DeleteSnapshot(ctx context.Context, id string) error {
	if _, err := s.writer.ExecContext(ctx, s.q(`DELETE FROM snapshots WHERE id = ?`), id); err != nil {
		return s.dbError(ctx, "delete snapshot "+id, err)
	}
	return nil
}

// SnapshotUsage counts a tenant's kept snapshots and their bytes.
func (s *Store) SnapshotUsage(ctx context.Context, tenant string) (int, int64, error) {
	var n int
	var bytes sql.NullInt64
	err := s.reader.QueryRowContext(ctx, s.q(`SELECT COUNT(*), SUM(size_bytes) FROM snapshots WHERE tenant = ? AND internal = ? AND state <> ?`),
		tenant, false, string(sandbox.SnapshotFailed)).Scan(&n, &bytes)
	if err != nil {
		return 0, 0, s.dbError(ctx, "snapshot usage of "+tenant, err)
	}
	return n, bytes.Int64, nil
}
