package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// ClaimSandbox takes a sandbox for a new lease in one write transaction. A
// pool claim picks the oldest idle member with the dialect's skip-locked
// row lock, so concurrent claimers on PostgreSQL (in this process or
// another service instance on the same database) take different members
// instead of queueing on one, and SQLite's single writer serializes them;
// the update is conditional on the state read, and the partial unique
// index leases_one_active is the last word on one active lease per sandbox.
func (s *Store) ClaimSandbox(ctx context.Context, c store.Claim) (*sandbox.Lease, *sandbox.Sandbox, error) {
	if err := store.CheckClaim(c); err != nil {
		return nil, nil, err
	}
	var l *sandbox.Lease
	var next *sandbox.Sandbox
	var auditSeq int64
	err := s.inTx(ctx, "claim sandbox", func(tx *sql.Tx) error {
		id := c.SandboxID
		var cur *sandbox.Sandbox
		var err error
		if id == "" {
			// Instance "" takes a member of any instance (shared pools).
			cur, err = scanSandbox(tx.QueryRowContext(ctx, s.q(`SELECT `+sandboxColumns+` FROM sandboxes
				WHERE state = ? AND tenant = '' AND profile = ? AND runtime = ? AND pool = ? AND (instance = ? OR ? = '')
				ORDER BY created_at, `+s.d.InsertOrder()+` LIMIT 1 `+s.d.SkipLockedRowLock()),
				string(sandbox.StateIdle), c.Profile, string(c.Runtime), c.Pool, c.Instance, c.Instance))
			if errors.Is(err, sql.ErrNoRows) {
				return errdefs.WithCode("pool_empty", fmt.Errorf("no idle sandbox in pool %s/%s: %w", c.Profile, c.Runtime, errdefs.ErrNotFound))
			}
			if err != nil {
				return s.dbError(ctx, "claim sandbox", err)
			}
			id = cur.ID
		} else if cur, err = s.getSandbox(ctx, tx, id, s.d.RowLock()); err != nil {
			return err
		}
		next = store.CloneSandbox(cur)
		if err := store.ApplyClaim(next, c); err != nil {
			return err
		}
		r, err := s.encodeSandbox(next)
		if err != nil {
			return fmt.Errorf("claim sandbox %s: %w", id, err)
		}
		res, err := tx.ExecContext(ctx, s.q(`UPDATE sandboxes SET tenant = ?, state = ?, risk_level = ?, env = ?, metadata = ?,
			resource_version = ?, updated_at = ?, expires_at = ?, reserved = ?
			WHERE id = ? AND resource_version = ? AND state = ?`),
			r.tenant, r.state, r.riskLevel, r.env, r.metadata, r.resourceVersion, r.updatedAt, r.expiresAt, r.reserved,
			cur.ID, cur.ResourceVersion, string(cur.State))
		if err != nil {
			return s.dbError(ctx, "claim sandbox "+id, err)
		}
		if err := oneRow(res, "claim sandbox "+id); err != nil {
			return err
		}
		// A pool member's network record changes hands with it.
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE sandbox_networks SET tenant = ?, doc = `+s.d.SetJSONString("doc", "tenant")+`
			WHERE sandbox_id = ?`), next.Tenant, next.Tenant, id); err != nil {
			return s.dbError(ctx, "claim network of sandbox "+id, err)
		}
		if c.HoldID != "" {
			if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM lease_holds WHERE id = ?`), c.HoldID); err != nil {
				return s.dbError(ctx, "drop lease hold "+c.HoldID, err)
			}
		}
		l = store.CloneLease(c.Lease)
		l.SandboxID, l.ResourceVersion = id, 1
		store.NormalizeLease(l)
		if err := s.insertLease(ctx, tx, l); err != nil {
			return err
		}
		if c.Audit != nil {
			// Last: the audit order lock is held until the commit.
			auditSeq, err = s.appendAuditTx(ctx, tx, c.Audit)
		}
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	if c.Audit != nil {
		c.Audit.Seq = auditSeq
	}
	return l, next, nil
}

func (s *Store) insertLease(ctx context.Context, tx *sql.Tx, l *sandbox.Lease) error {
	doc, err := marshalDoc("lease "+l.ID, l)
	if err != nil {
		return err
	}
	exp, err := s.encodeTime("expires_at", l.ExpiresAt)
	if err != nil {
		return err
	}
	created, err := s.encodeTime("created_at", l.CreatedAt)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, s.q(`INSERT INTO leases (id, tenant, sandbox_id, state, expires_at, created_at, doc)
		VALUES (?, ?, ?, ?, ?, ?, ?)`), l.ID, l.Tenant, l.SandboxID, string(l.State), exp, created, doc)
	switch {
	case err == nil:
		return nil
	case s.isUniqueViolation(err):
		return fmt.Errorf("lease %s: sandbox %s is already in an active lease, or the lease id is taken: %w", l.ID, l.SandboxID, errdefs.ErrConflict)
	}
	return s.dbError(ctx, "insert lease "+l.ID, err)
}

// getLease reads one lease; tenant "" matches any tenant; lock is "" or the
// dialect's row lock.
func (s *Store) getLease(ctx context.Context, q queryer, tenant, id, lock string) (*sandbox.Lease, error) {
	return getDoc[sandbox.Lease](ctx, s, q, `SELECT tenant, doc FROM leases WHERE id = ? `+lock, "lease", tenant, id)
}

// GetLease returns one lease; tenant "" matches any tenant.
func (s *Store) GetLease(ctx context.Context, tenant, id string) (*sandbox.Lease, error) {
	return s.getLease(ctx, s.reader, tenant, id, "")
}

// ListLeases returns the leases matching f, oldest first.
func (s *Store) ListLeases(ctx context.Context, f store.LeaseFilter) ([]*sandbox.Lease, error) {
	if err := store.CheckLimit("list leases", f.Limit); err != nil {
		return nil, err
	}
	var c conds
	c.eq("tenant", f.Tenant)
	c.eq("sandbox_id", f.SandboxID)
	in(&c, "state", "IN", f.States)
	if !f.ExpiresBefore.IsZero() {
		t, err := s.encodeTime("expires_before", f.ExpiresBefore)
		if err != nil {
			return nil, err
		}
		c.add("expires_at < ?", t)
	}
	q, args := s.oldestFirst(`SELECT id, doc FROM leases`, &c, f.Limit)
	return appendRows(ctx, s, s.reader, nil, "list leases", func(r scanner) (*sandbox.Lease, error) {
		var id, doc string
		if err := r.Scan(&id, &doc); err != nil {
			return nil, err
		}
		var l sandbox.Lease
		return &l, unmarshalDoc("lease "+id, doc, &l)
	}, q, args...)
}

// UpdateLease applies fn to the lease and stores the result as
// store.NextLease makes it, in one write transaction holding the row.
func (s *Store) UpdateLease(ctx context.Context, id string, fn func(*sandbox.Lease) error) (*sandbox.Lease, error) {
	get := func(tx *sql.Tx) (*sandbox.Lease, error) { return s.getLease(ctx, tx, "", id, s.d.RowLock()) }
	return update(ctx, s, "lease "+id, get, func(tx *sql.Tx, cur *sandbox.Lease) (*sandbox.Lease, error) {
		next := store.CloneLease(cur)
		if err := fn(next); err != nil {
			return nil, err
		}
		store.NextLease(cur, next)
		doc, err := marshalDoc("update lease "+id, next)
		if err != nil {
			return nil, err
		}
		exp, err := s.encodeTime("expires_at", next.ExpiresAt)
		if err != nil {
			return nil, err
		}
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE leases SET state = ?, expires_at = ?, doc = ? WHERE id = ?`),
			string(next.State), exp, doc, id); err != nil {
			if s.isUniqueViolation(err) {
				return nil, fmt.Errorf("lease %s: sandbox %s is already in another active lease: %w", id, next.SandboxID, errdefs.ErrConflict)
			}
			return nil, s.dbError(ctx, "update lease "+id, err)
		}
		return next, nil
	})
}

// HoldLease inserts a lease hold.
func (s *Store) HoldLease(ctx context.Context, h store.LeaseHold) error {
	if h.ID == "" || h.Tenant == "" || h.Instance == "" || h.ExpiresAt.IsZero() {
		return errdefs.Invalid("lease hold %q of tenant %q: id, tenant, instance and expiry are required", h.ID, h.Tenant)
	}
	exp, err := s.encodeTime("expires_at", h.ExpiresAt)
	if err != nil {
		return err
	}
	_, err = s.writer.ExecContext(ctx, s.q(`INSERT INTO lease_holds (id, tenant, instance, expires_at) VALUES (?, ?, ?, ?)`),
		h.ID, h.Tenant, h.Instance, exp)
	if err != nil && s.isUniqueViolation(err) {
		return fmt.Errorf("lease hold %s: %w", h.ID, errdefs.ErrAlreadyExists)
	}
	if err != nil {
		return s.dbError(ctx, "insert lease hold "+h.ID, err)
	}
	return nil
}

// DropLeaseHold deletes one lease hold.
func (s *Store) DropLeaseHold(ctx context.Context, id string) error {
	if _, err := s.writer.ExecContext(ctx, s.q(`DELETE FROM lease_holds WHERE id = ?`), id); err != nil {
		return s.dbError(ctx, "drop lease hold "+id, err)
	}
	return nil
}

// CountLeaseHolds counts a tenant's unexpired lease holds.
func (s *Store) CountLeaseHolds(ctx context.Context, tenant string, now time.Time) (int, error) {
	at, err := s.encodeTime("now", now)
	if err != nil {
		return 0, err
	}
	var n int
	if err := s.reader.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM lease_holds WHERE tenant = ? AND expires_at > ?`),
		tenant, at).Scan(&n); err != nil {
		return 0, s.dbError(ctx, "count lease holds of "+tenant, err)
	}
	return n, nil
}

// DropLeaseHolds deletes an instance's lease holds and the expired ones.
func (s *Store) DropLeaseHolds(ctx context.Context, instance string, now time.Time) (int, error) {
	at, err := s.encodeTime("now", now)
	if err != nil {
		return 0, err
	}
	res, err := s.writer.ExecContext(ctx, s.q(`DELETE FROM lease_holds WHERE instance = ? OR expires_at <= ?`), instance, at)
	if err != nil {
		return 0, s.dbError(ctx, "drop lease holds of "+instance, err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}
