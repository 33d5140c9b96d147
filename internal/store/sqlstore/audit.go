package sqlstore

import (
	"context"
	"database/sql"
	"strings"
	"time"
	"unicode/utf8"

	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/tenant"
)

const auditColumns = `seq, time, actor, tenant, action, target, status, code, request_id, remote`

// AppendAudit stores r and sets r.Seq. Where the dialect has an audit order
// lock, the insert holds it until it commits, so a record with a smaller seq
// is always visible before one with a greater seq: paging by seq never skips
// a record that commits late. SQLite's single writer gives that order
// without a lock.
func (s *Store) AppendAudit(ctx context.Context, r *tenant.AuditRecord) error {
	at, err := s.encodeTime("time", r.Time)
	if err != nil {
		return err
	}
	insert := func(q queryer) error {
		err := q.QueryRowContext(ctx, s.q(`INSERT INTO audit (time, actor, tenant, action, target, status, code, request_id, remote)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq`),
			at, r.Actor, r.Tenant, r.Action, r.Target, r.Status, r.Code, r.RequestID, r.Remote).Scan(&r.Seq)
		if err != nil {
			return s.dbError(ctx, "append audit record", err)
		}
		return nil
	}
	lock := s.d.AuditOrderLock()
	if lock == "" {
		return insert(s.writer)
	}
	return s.inTx(ctx, "append audit record", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, lock); err != nil {
			return s.dbError(ctx, "append audit record", err)
		}
		return insert(tx)
	})
}

// ListAudit returns the records matching f in seq order.
func (s *Store) ListAudit(ctx context.Context, f store.AuditFilter) ([]*tenant.AuditRecord, error) {
	if err := store.CheckLimit("list audit", f.Limit); err != nil {
		return nil, err
	}
	where := []string{"seq > ?"}
	args := []any{f.AfterSeq}
	add := func(cond string, v ...any) {
		where = append(where, cond)
		args = append(args, v...)
	}
	if f.Tenant != "" {
		add("tenant = ?", f.Tenant)
	}
	switch {
	case f.Action == "":
	case strings.Contains(f.Action, " "):
		add("action = ?", f.Action)
	default:
		prefix := f.Action + " "
		add("substr(action, 1, ?) = ?", utf8.RuneCountInString(prefix), prefix)
	}
	if f.Target != "" {
		add("target = ?", f.Target)
	}
	for _, b := range []struct {
		cond string
		t    time.Time
	}{{"time >= ?", f.Since}, {"time < ?", f.Until}} {
		if b.t.IsZero() {
			continue
		}
		v, err := s.encodeTime("time filter", b.t)
		if err != nil {
			return nil, err
		}
		add(b.cond, v)
	}
	if f.Status != 0 {
		add("status = ?", f.Status)
	}
	if f.StatusClass != 0 {
		add("status >= ? AND status < ?", f.StatusClass*100, f.StatusClass*100+100)
	}
	if f.Code != "" {
		add("code = ?", f.Code)
	}
	q := `SELECT ` + auditColumns + ` FROM audit WHERE ` + strings.Join(where, " AND ") + ` ORDER BY seq`
	if f.Limit > 0 {
		q += " LIMIT ?"
		args = append(args, f.Limit)
	}
	return appendRows(ctx, s, s.reader, []*tenant.AuditRecord{}, "list audit", func(row scanner) (*tenant.AuditRecord, error) {
		var r tenant.AuditRecord
		var at dbTime
		if err := row.Scan(&r.Seq, &at, &r.Actor, &r.Tenant, &r.Action, &r.Target, &r.Status, &r.Code, &r.RequestID, &r.Remote); err != nil {
			return nil, err
		}
		r.Time = at.t
		return &r, nil
	}, q, args...)
}

// PruneAudit deletes records older than before.
func (s *Store) PruneAudit(ctx context.Context, before time.Time) (int64, error) {
	v, err := s.encodeTime("before", before)
	if err != nil {
		return 0, err
	}
	res, err := s.writer.ExecContext(ctx, s.q(`DELETE FROM audit WHERE time < ?`), v)
	if err != nil {
		return 0, s.dbError(ctx, "prune audit", err)
	}
	return res.RowsAffected()
}
