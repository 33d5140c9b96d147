package sqlite

import (
	"context"
	"strings"
	"time"

	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/tenant"
)

const auditColumns = `seq, time, actor, tenant, action, target, status, code, request_id, remote`

// AppendAudit stores r and sets r.Seq. The single writer makes seq grow in
// commit order.
func (s *Store) AppendAudit(ctx context.Context, r *tenant.AuditRecord) error {
	at, err := encodeTime("time", r.Time)
	if err != nil {
		return err
	}
	err = s.writer.QueryRowContext(ctx, `INSERT INTO audit (time, actor, tenant, action, target, status, code, request_id, remote)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq`,
		at, r.Actor, r.Tenant, r.Action, r.Target, r.Status, r.Code, r.RequestID, r.Remote).Scan(&r.Seq)
	if err != nil {
		return dbError(ctx, "append audit record", err)
	}
	return nil
}

// ListAudit returns the records matching f in seq order.
func (s *Store) ListAudit(ctx context.Context, f store.AuditFilter) ([]*tenant.AuditRecord, error) {
	if err := store.CheckLimit("list audit", f.Limit); err != nil {
		return nil, err
	}
	where := []string{"seq > ?"}
	args := []any{f.AfterSeq}
	add := func(cond string, v any) {
		where = append(where, cond)
		args = append(args, v)
	}
	if f.Tenant != "" {
		add("tenant = ?", f.Tenant)
	}
	switch {
	case f.Action == "":
	case strings.Contains(f.Action, " "):
		add("action = ?", f.Action)
	default:
		add("action LIKE ? ESCAPE '\\'", likeEscape(f.Action)+" %")
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
		v, err := encodeTime("time filter", b.t)
		if err != nil {
			return nil, err
		}
		add(b.cond, v)
	}
	if f.Status != 0 {
		add("status = ?", f.Status)
	}
	if f.StatusClass != 0 {
		where = append(where, "status >= ? AND status < ?")
		args = append(args, f.StatusClass*100, f.StatusClass*100+100)
	}
	if f.Code != "" {
		add("code = ?", f.Code)
	}
	q := `SELECT ` + auditColumns + ` FROM audit WHERE ` + strings.Join(where, " AND ") + ` ORDER BY seq`
	if f.Limit > 0 {
		q += " LIMIT ?"
		args = append(args, f.Limit)
	}
	rows, err := s.reader.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, dbError(ctx, "list audit", err)
	}
	defer rows.Close()
	out := []*tenant.AuditRecord{}
	for rows.Next() {
		var r tenant.AuditRecord
		var at string
		if err := rows.Scan(&r.Seq, &at, &r.Actor, &r.Tenant, &r.Action, &r.Target, &r.Status, &r.Code, &r.RequestID, &r.Remote); err != nil {
			return nil, dbError(ctx, "list audit", err)
		}
		if r.Time, err = decodeTime("time", at); err != nil {
			return nil, err
		}
		out = append(out, &r)
	}
	if err := rows.Err(); err != nil {
		return nil, dbError(ctx, "list audit", err)
	}
	return out, nil
}

// likeEscape escapes the LIKE wildcards of s (with backslash).
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// PruneAudit deletes records older than before.
func (s *Store) PruneAudit(ctx context.Context, before time.Time) (int64, error) {
	v, err := encodeTime("before", before)
	if err != nil {
		return 0, err
	}
	res, err := s.writer.ExecContext(ctx, `DELETE FROM audit WHERE time < ?`, v)
	if err != nil {
		return 0, dbError(ctx, "prune audit", err)
	}
	return res.RowsAffected()
}
