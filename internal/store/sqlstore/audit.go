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
	if s.d.AuditOrderLock() == "" {
		seq, err := s.insertAudit(ctx, s.writer, r)
		if err == nil {
			r.Seq = seq
		}
		return err
	}
	var seq int64
	err := s.inTx(ctx, "append audit record", func(tx *sql.Tx) (err error) {
		seq, err = s.appendAuditTx(ctx, tx, r)
		return err
	})
	if err == nil {
		r.Seq = seq
	}
	return err
}

// appendAuditTx inserts r in tx, taking the dialect's audit order lock
// first (held until tx ends, so take it last), and returns its seq, which
// is r's only once tx commits.
func (s *Store) appendAuditTx(ctx context.Context, tx *sql.Tx, r *tenant.AuditRecord) (int64, error) {
	if lock := s.d.AuditOrderLock(); lock != "" {
		if _, err := tx.ExecContext(ctx, lock); err != nil {
			return 0, s.dbError(ctx, "append audit record", err)
		}
	}
	return s.insertAudit(ctx, tx, r)
}

// insertAudit is the audit record's INSERT; it returns the record's seq.
func (s *Store) insertAudit(ctx context.Context, q queryer, r *tenant.AuditRecord) (int64, error) {
	at, err := s.encodeTime("time", r.Time)
	if err != nil {
		return 0, err
	}
	var seq int64
	err = s.hot(q).QueryRowContext(ctx, s.q(`INSERT INTO audit (time, actor, tenant, action, target, status, code, request_id, remote)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq`),
		at, r.Actor, r.Tenant, r.Action, r.Target, r.Status, r.Code, r.RequestID, r.Remote).Scan(&seq)
	if err != nil {
		return 0, s.dbError(ctx, "append audit record", err)
	}
	return seq, nil
}

// ListAudit returns the records matching f in seq order.
func (s *Store) ListAudit(ctx context.Context, f store.AuditFilter) ([]*tenant.AuditRecord, error) {
	if err := store.CheckLimit("list audit", f.Limit); err != nil {
		return nil, err
	}
	var c conds
	c.add("seq > ?", f.AfterSeq)
	if f.BeforeSeq > 0 {
		c.add("seq < ?", f.BeforeSeq)
	}
	c.eq("tenant", f.Tenant)
	switch {
	case f.Action == "":
	case strings.Contains(f.Action, " "):
		c.add("action = ?", f.Action)
	default:
		prefix := f.Action + " "
		c.add("substr(action, 1, ?) = ?", utf8.RuneCountInString(prefix), prefix)
	}
	c.eq("target", f.Target)
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
		c.add(b.cond, v)
	}
	if f.Status != 0 {
		c.add("status = ?", f.Status)
	}
	if f.StatusClass != 0 {
		c.add("status >= ? AND status < ?", f.StatusClass*100, f.StatusClass*100+100)
	}
	c.eq("code", f.Code)
	q := c.sql(`SELECT `+auditColumns+` FROM audit`) + ` ORDER BY seq`
	if f.Newest {
		q += " DESC"
	}
	if f.Limit > 0 {
		q += " LIMIT ?"
		c.args = append(c.args, f.Limit)
	}
	return appendRows(ctx, s, s.reader, []*tenant.AuditRecord{}, "list audit", func(row scanner) (*tenant.AuditRecord, error) {
		var r tenant.AuditRecord
		var at dbTime
		if err := row.Scan(&r.Seq, &at, &r.Actor, &r.Tenant, &r.Action, &r.Target, &r.Status, &r.Code, &r.RequestID, &r.Remote); err != nil {
			return nil, err
		}
		r.Time = at.t
		return &r, nil
	}, q, c.args...)
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
