package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// ClaimSandbox takes a sandbox for a new lease in one write transaction (the
// single writer serializes claims of this process; BEGIN IMMEDIATE those of
// other processes on the same file), and the partial unique index
// leases_one_active is the last word on one active lease per sandbox.
func (s *Store) ClaimSandbox(ctx context.Context, c store.Claim) (_ *sandbox.Lease, _ *sandbox.Sandbox, err error) {
	if err := store.CheckClaim(c); err != nil {
		return nil, nil, err
	}
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return nil, nil, dbError(ctx, "claim sandbox", err)
	}
	defer func() { _ = tx.Rollback() }()
	id := c.SandboxID
	if id == "" {
		err := tx.QueryRowContext(ctx, `SELECT id FROM sandboxes
			WHERE state = ? AND tenant = '' AND profile = ? AND runtime = ? AND instance = ?
			ORDER BY created_at, rowid LIMIT 1`,
			string(sandbox.StateIdle), c.Profile, string(c.Runtime), c.Instance).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil, errdefs.WithCode("pool_empty", fmt.Errorf("no idle sandbox in pool %s/%s: %w", c.Profile, c.Runtime, errdefs.ErrNotFound))
		}
		if err != nil {
			return nil, nil, dbError(ctx, "claim sandbox", err)
		}
	}
	cur, err := getSandbox(ctx, tx, id)
	if err != nil {
		return nil, nil, err
	}
	next := store.CloneSandbox(cur)
	if err := store.ApplyClaim(next, c); err != nil {
		return nil, nil, err
	}
	r, err := encodeSandbox(next)
	if err != nil {
		return nil, nil, fmt.Errorf("claim sandbox %s: %w", id, err)
	}
	res, err := tx.ExecContext(ctx, `UPDATE sandboxes SET tenant = ?, state = ?, risk_level = ?, env = ?, metadata = ?,
		resource_version = ?, updated_at = ?, expires_at = ?
		WHERE id = ? AND resource_version = ? AND state = ?`,
		r.tenant, r.state, r.riskLevel, r.env, r.metadata, r.resourceVersion, r.updatedAt, r.expiresAt,
		cur.ID, cur.ResourceVersion, string(cur.State))
	if err != nil {
		return nil, nil, dbError(ctx, "claim sandbox "+id, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return nil, nil, fmt.Errorf("claim sandbox %s: record changed during the claim: %w", id, errdefs.ErrConflict)
	}
	// A pool member's network record changes hands with it.
	if _, err := tx.ExecContext(ctx, `UPDATE sandbox_networks SET tenant = ?, doc = json_set(doc, '$.tenant', ?)
		WHERE sandbox_id = ?`, next.Tenant, next.Tenant, id); err != nil {
		return nil, nil, dbError(ctx, "claim network of sandbox "+id, err)
	}
	l := store.CloneLease(c.Lease)
	l.SandboxID, l.ResourceVersion = id, 1
	store.NormalizeLease(l)
	if err := insertLease(ctx, tx, l); err != nil {
		return nil, nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, nil, dbError(ctx, "commit claim of "+id, err)
	}
	return l, next, nil
}

func insertLease(ctx context.Context, tx *sql.Tx, l *sandbox.Lease) error {
	doc, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("lease %s: %v: %w", l.ID, err, errdefs.ErrInvalidArgument)
	}
	exp, err := encodeTime("expires_at", l.ExpiresAt)
	if err != nil {
		return err
	}
	created, err := encodeTime("created_at", l.CreatedAt)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO leases (id, tenant, sandbox_id, state, expires_at, created_at, doc)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, l.ID, l.Tenant, l.SandboxID, string(l.State), exp, created, string(doc))
	switch {
	case err == nil:
		return nil
	case isUniqueViolation(err):
		return fmt.Errorf("lease %s: sandbox %s is already in an active lease, or the lease id is taken: %w", l.ID, l.SandboxID, errdefs.ErrConflict)
	}
	return dbError(ctx, "insert lease "+l.ID, err)
}

func getLease(ctx context.Context, q queryer, tenant, id string) (*sandbox.Lease, error) {
	var doc string
	err := q.QueryRowContext(ctx, `SELECT doc FROM leases WHERE id = ?`, id).Scan(&doc)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("lease %s: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, dbError(ctx, "get lease "+id, err)
	}
	l, err := decodeLease(id, doc)
	if err != nil {
		return nil, err
	}
	if tenant != "" && l.Tenant != tenant {
		return nil, fmt.Errorf("lease %s: %w", id, errdefs.ErrNotFound)
	}
	return l, nil
}

func decodeLease(id, doc string) (*sandbox.Lease, error) {
	var l sandbox.Lease
	if err := json.Unmarshal([]byte(doc), &l); err != nil {
		return nil, fmt.Errorf("lease %s: corrupt record: %v: %w", id, err, errdefs.ErrInternal)
	}
	return &l, nil
}

// GetLease returns one lease; tenant "" matches any tenant.
func (s *Store) GetLease(ctx context.Context, tenant, id string) (*sandbox.Lease, error) {
	return getLease(ctx, s.reader, tenant, id)
}

// ListLeases returns the leases matching f, oldest first.
func (s *Store) ListLeases(ctx context.Context, f store.LeaseFilter) ([]*sandbox.Lease, error) {
	if err := store.CheckLimit("list leases", f.Limit); err != nil {
		return nil, err
	}
	var where []string
	var args []any
	if f.Tenant != "" {
		where, args = append(where, "tenant = ?"), append(args, f.Tenant)
	}
	if f.SandboxID != "" {
		where, args = append(where, "sandbox_id = ?"), append(args, f.SandboxID)
	}
	if len(f.States) > 0 {
		where = append(where, "state IN ("+placeholders(len(f.States))+")")
		for _, st := range f.States {
			args = append(args, string(st))
		}
	}
	if !f.ExpiresBefore.IsZero() {
		t, err := encodeTime("expires_before", f.ExpiresBefore)
		if err != nil {
			return nil, err
		}
		where, args = append(where, "expires_at < ?"), append(args, t)
	}
	q, args := oldestFirst(`SELECT id, doc FROM leases`, where, args, f.Limit)
	rows, err := s.reader.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, dbError(ctx, "list leases", err)
	}
	defer rows.Close()
	var out []*sandbox.Lease
	for rows.Next() {
		var id, doc string
		if err := rows.Scan(&id, &doc); err != nil {
			return nil, dbError(ctx, "list leases", err)
		}
		l, err := decodeLease(id, doc)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, dbError(ctx, "list leases", err)
	}
	return out, nil
}

// UpdateLease applies fn to the current lease inside one write transaction.
func (s *Store) UpdateLease(ctx context.Context, id string, fn func(*sandbox.Lease) error) (*sandbox.Lease, error) {
	get := func(tx queryer) (*sandbox.Lease, error) { return getLease(ctx, tx, "", id) }
	return updateRow(ctx, s, "lease "+id, get, func(tx *sql.Tx, cur *sandbox.Lease) (*sandbox.Lease, error) {
		next := store.CloneLease(cur)
		if err := fn(next); err != nil {
			return nil, err
		}
		next.ID, next.Tenant, next.SandboxID, next.CreatedAt = cur.ID, cur.Tenant, cur.SandboxID, cur.CreatedAt
		next.ResourceVersion = cur.ResourceVersion + 1
		store.NormalizeLease(next)
		doc, err := json.Marshal(next)
		if err != nil {
			return nil, fmt.Errorf("update lease %s: %v: %w", id, err, errdefs.ErrInvalidArgument)
		}
		exp, err := encodeTime("expires_at", next.ExpiresAt)
		if err != nil {
			return nil, err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE leases SET state = ?, expires_at = ?, doc = ? WHERE id = ?`,
			string(next.State), exp, string(doc), id); err != nil {
			if isUniqueViolation(err) {
				return nil, fmt.Errorf("lease %s: sandbox %s is already in another active lease: %w", id, next.SandboxID, errdefs.ErrConflict)
			}
			return nil, dbError(ctx, "update lease "+id, err)
		}
		return next, nil
	})
}
