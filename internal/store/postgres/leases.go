package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// ClaimSandbox takes a sandbox for a new lease in one transaction. A pool
// claim picks the oldest idle member with FOR UPDATE SKIP LOCKED, so
// concurrent claimers (in this process or another service instance on the
// same database) take different members instead of queueing on one; the
// update is conditional on the state read, and the partial unique index
// leases_one_active is the last word on one active lease per sandbox.
func (s *Store) ClaimSandbox(ctx context.Context, c store.Claim) (*sandbox.Lease, *sandbox.Sandbox, error) {
	if err := store.CheckClaim(c); err != nil {
		return nil, nil, err
	}
	var l *sandbox.Lease
	var next *sandbox.Sandbox
	err := s.inTx(ctx, "claim sandbox", func(tx pgx.Tx) error {
		id := c.SandboxID
		var cur *sandbox.Sandbox
		var err error
		if id == "" {
			cur, err = scanSandbox(tx.QueryRow(ctx, `SELECT `+sandboxColumns+` FROM sandboxes
				WHERE state = $1 AND tenant = '' AND profile = $2 AND runtime = $3 AND instance = $4
				ORDER BY created_at, seq LIMIT 1 FOR UPDATE SKIP LOCKED`,
				string(sandbox.StateIdle), c.Profile, string(c.Runtime), c.Instance))
			if errors.Is(err, pgx.ErrNoRows) {
				return errdefs.WithCode("pool_empty", fmt.Errorf("no idle sandbox in pool %s/%s: %w", c.Profile, c.Runtime, errdefs.ErrNotFound))
			}
			if err != nil {
				return dbError(ctx, "claim sandbox", err)
			}
			id = cur.ID
		} else if cur, err = getSandbox(ctx, tx, id, "FOR UPDATE"); err != nil {
			return err
		}
		next = store.CloneSandbox(cur)
		if err := store.ApplyClaim(next, c); err != nil {
			return err
		}
		r, err := encodeSandbox(next)
		if err != nil {
			return fmt.Errorf("claim sandbox %s: %w", id, err)
		}
		tag, err := tx.Exec(ctx, `UPDATE sandboxes SET tenant = $1, state = $2, risk_level = $3, env = $4, metadata = $5,
			resource_version = $6, updated_at = $7, expires_at = $8
			WHERE id = $9 AND resource_version = $10 AND state = $11`,
			r.tenant, r.state, r.riskLevel, r.env, r.metadata, r.resourceVersion, r.updatedAt, r.expiresAt,
			cur.ID, cur.ResourceVersion, string(cur.State))
		if err != nil {
			return dbError(ctx, "claim sandbox "+id, err)
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("claim sandbox %s: record changed during the claim: %w", id, errdefs.ErrConflict)
		}
		// A pool member's network record changes hands with it.
		if _, err := tx.Exec(ctx, `UPDATE sandbox_networks SET tenant = $1, doc = jsonb_set(doc, '{tenant}', to_jsonb($1::text))
			WHERE sandbox_id = $2`, next.Tenant, id); err != nil {
			return dbError(ctx, "claim network of sandbox "+id, err)
		}
		l = store.CloneLease(c.Lease)
		l.SandboxID, l.ResourceVersion = id, 1
		store.NormalizeLease(l)
		return insertLease(ctx, tx, l)
	})
	if err != nil {
		return nil, nil, err
	}
	return l, next, nil
}

func insertLease(ctx context.Context, tx pgx.Tx, l *sandbox.Lease) error {
	doc, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("lease %s: %w: %w", l.ID, errdefs.ErrInvalidArgument, err)
	}
	exp, err := encodeTime("expires_at", l.ExpiresAt)
	if err != nil {
		return err
	}
	created, err := encodeTime("created_at", l.CreatedAt)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO leases (id, tenant, sandbox_id, state, expires_at, created_at, doc)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, l.ID, l.Tenant, l.SandboxID, string(l.State), exp, created, doc)
	switch {
	case err == nil:
		return nil
	case isUniqueViolation(err):
		return fmt.Errorf("lease %s: sandbox %s is already in an active lease, or the lease id is taken: %w", l.ID, l.SandboxID, errdefs.ErrConflict)
	}
	return dbError(ctx, "insert lease "+l.ID, err)
}

// getLease reads one lease; lock is "" or a locking clause.
func getLease(ctx context.Context, q querier, tenant, id, lock string) (*sandbox.Lease, error) {
	var doc []byte
	err := q.QueryRow(ctx, `SELECT doc FROM leases WHERE id = $1 `+lock, id).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
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

func decodeLease(id string, doc []byte) (*sandbox.Lease, error) {
	var l sandbox.Lease
	if err := json.Unmarshal(doc, &l); err != nil {
		return nil, fmt.Errorf("lease %s: corrupt record: %w: %w", id, errdefs.ErrInternal, err)
	}
	return &l, nil
}

// GetLease returns one lease; tenant "" matches any tenant.
func (s *Store) GetLease(ctx context.Context, tenant, id string) (*sandbox.Lease, error) {
	return getLease(ctx, s.pool, tenant, id, "")
}

// ListLeases returns the leases matching f, oldest first.
func (s *Store) ListLeases(ctx context.Context, f store.LeaseFilter) ([]*sandbox.Lease, error) {
	if err := store.CheckLimit("list leases", f.Limit); err != nil {
		return nil, err
	}
	var where []string
	var a args
	if f.Tenant != "" {
		where = append(where, "tenant = "+a.add(f.Tenant))
	}
	if f.SandboxID != "" {
		where = append(where, "sandbox_id = "+a.add(f.SandboxID))
	}
	if len(f.States) > 0 {
		where = append(where, "state = ANY("+a.add(stateStrings(f.States))+")")
	}
	if !f.ExpiresBefore.IsZero() {
		t, err := encodeTime("expires_before", f.ExpiresBefore)
		if err != nil {
			return nil, err
		}
		where = append(where, "expires_at < "+a.add(t))
	}
	q := oldestFirst(`SELECT id, doc FROM leases`, where, &a, f.Limit)
	rows, err := s.pool.Query(ctx, q, a...)
	if err != nil {
		return nil, dbError(ctx, "list leases", err)
	}
	defer rows.Close()
	var out []*sandbox.Lease
	for rows.Next() {
		var id string
		var doc []byte
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

// UpdateLease applies fn to the lease in one transaction holding its row lock.
func (s *Store) UpdateLease(ctx context.Context, id string, fn func(*sandbox.Lease) error) (*sandbox.Lease, error) {
	var next *sandbox.Lease
	err := s.inTx(ctx, "update lease "+id, func(tx pgx.Tx) error {
		cur, err := getLease(ctx, tx, "", id, "FOR UPDATE")
		if err != nil {
			return err
		}
		next = store.CloneLease(cur)
		if err := fn(next); err != nil {
			return err
		}
		next.ID, next.Tenant, next.SandboxID, next.CreatedAt = cur.ID, cur.Tenant, cur.SandboxID, cur.CreatedAt
		next.ResourceVersion = cur.ResourceVersion + 1
		store.NormalizeLease(next)
		doc, err := json.Marshal(next)
		if err != nil {
			return fmt.Errorf("update lease %s: %w: %w", id, errdefs.ErrInvalidArgument, err)
		}
		exp, err := encodeTime("expires_at", next.ExpiresAt)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE leases SET state = $1, expires_at = $2, doc = $3 WHERE id = $4`,
			string(next.State), exp, doc, id); err != nil {
			if isUniqueViolation(err) {
				return fmt.Errorf("lease %s: sandbox %s is already in another active lease: %w", id, next.SandboxID, errdefs.ErrConflict)
			}
			return dbError(ctx, "update lease "+id, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return next, nil
}
