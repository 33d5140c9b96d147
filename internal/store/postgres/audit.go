package postgres

import (
	"context"
	"strings"

	"time"

	"github.com/jackc/pgx/v5"

	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/tenant"
)

// auditLockKey is the advisory lock that orders audit inserts.
const auditLockKey = 0x67656e6175646974 // "genaudit"

const auditColumns = `seq, time, actor, tenant, action, target, status, code, request_id, remote`

// AppendAudit stores r and sets r.Seq. Inserts hold a transaction-scoped
// advisory lock until they commit, so a record with a smaller seq is
// always visible before one with a greater seq: paging by seq never skips
// a record that commits late.
func (s *Store) AppendAudit(ctx context.Context, r *tenant.AuditRecord) error {
	at, err := encodeTime("time", r.Time)
	if err != nil {
		return err
	}
	return s.inTx(ctx, "append audit record", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(auditLockKey)); err != nil {
			return dbError(ctx, "append audit record", err)
		}
		err := tx.QueryRow(ctx, `INSERT INTO audit (time, actor, tenant, action, target, status, code, request_id, remote)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING seq`,
			at, r.Actor, r.Tenant, r.Action, r.Target, r.Status, r.Code, r.RequestID, r.Remote).Scan(&r.Seq)
		if err != nil {
			return dbError(ctx, "append audit record", err)
		}
		return nil
	})
}

// ListAudit returns the records matching f in seq order.
func (s *Store) ListAudit(ctx context.Context, f store.AuditFilter) ([]*tenant.AuditRecord, error) {
	if err := store.CheckLimit("list audit", f.Limit); err != nil {
		return nil, err
	}
	var a args
	where := []string{"seq > " + a.add(f.AfterSeq)}
	if f.Tenant != "" {
		where = append(where, "tenant = "+a.add(f.Tenant))
	}
	switch {
	case f.Action == "":
	case strings.Contains(f.Action, " "):
		where = append(where, "action = "+a.add(f.Action))
	default:
		where = append(where, "starts_with(action, "+a.add(f.Action+" ")+")")
	}
	if f.Target != "" {
		where = append(where, "target = "+a.add(f.Target))
	}
	for _, b := range []struct {
		op string
		t  time.Time
	}{{">=", f.Since}, {"<", f.Until}} {
		if b.t.IsZero() {
			continue
		}
		v, err := encodeTime("time filter", b.t)
		if err != nil {
			return nil, err
		}
		where = append(where, "time "+b.op+" "+a.add(v))
	}
	if f.Status != 0 {
		where = append(where, "status = "+a.add(f.Status))
	}
	if f.StatusClass != 0 {
		where = append(where, "status / 100 = "+a.add(f.StatusClass))
	}
	if f.Code != "" {
		where = append(where, "code = "+a.add(f.Code))
	}
	q := `SELECT ` + auditColumns + ` FROM audit WHERE ` + strings.Join(where, " AND ") + ` ORDER BY seq`
	if f.Limit > 0 {
		q += " LIMIT " + a.add(f.Limit)
	}
	rows, err := s.pool.Query(ctx, q, a...)
	if err != nil {
		return nil, dbError(ctx, "list audit", err)
	}
	defer rows.Close()
	out := []*tenant.AuditRecord{}
	for rows.Next() {
		var r tenant.AuditRecord
		var at int64
		if err := rows.Scan(&r.Seq, &at, &r.Actor, &r.Tenant, &r.Action, &r.Target, &r.Status, &r.Code, &r.RequestID, &r.Remote); err != nil {
			return nil, dbError(ctx, "list audit", err)
		}
		r.Time = decodeTime(at)
		out = append(out, &r)
	}
	if err := rows.Err(); err != nil {
		return nil, dbError(ctx, "list audit", err)
	}
	return out, nil
}

// PruneAudit deletes records older than before.
func (s *Store) PruneAudit(ctx context.Context, before time.Time) (int64, error) {
	v, err := encodeTime("before", before)
	if err != nil {
		return 0, err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM audit WHERE time < $1`, v)
	if err != nil {
		return 0, dbError(ctx, "prune audit", err)
	}
	return tag.RowsAffected(), nil
}
