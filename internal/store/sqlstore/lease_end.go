package sqlstore

import (
	"context"
	"database/sql"
	"errors"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// EndLease ends a lease and drains its sandbox (taking it for e.Instance)
// in one write transaction.
// The sandbox row is locked before the lease row, in the order a claim
// takes them, so the two cannot deadlock on PostgreSQL.
func (s *Store) EndLease(ctx context.Context, e store.LeaseEnd) (*sandbox.Lease, *sandbox.Sandbox, error) {
	if e.LeaseID == "" || e.SandboxID == "" || e.End == nil {
		return nil, nil, errdefs.Invalid("end lease: lease id, sandbox id and end are required")
	}
	var ended *sandbox.Lease
	var before *sandbox.Sandbox
	err := s.inTx(ctx, "end lease "+e.LeaseID, func(tx *sql.Tx) error {
		cur, err := s.getSandbox(ctx, tx, e.SandboxID, s.d.RowLock())
		if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return err
		}
		before = cur
		l, err := s.getLease(ctx, tx, "", e.LeaseID, s.d.RowLock())
		if err != nil {
			return err
		}
		next := store.CloneLease(l)
		if err := store.ApplyLeaseEnd(next, e); err != nil {
			return err
		}
		store.NextLease(l, next)
		doc, err := marshalDoc("end lease "+e.LeaseID, next)
		if err != nil {
			return err
		}
		exp, err := s.encodeTime("expires_at", next.ExpiresAt)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE leases SET state = ?, expires_at = ?, doc = ? WHERE id = ?`),
			string(next.State), exp, doc, e.LeaseID); err != nil {
			return s.dbError(ctx, "end lease "+e.LeaseID, err)
		}
		ended = next
		if cur == nil || !store.DrainOnLeaseEnd(cur.State) {
			return nil
		}
		updated, err := s.encodeTime("updated_at", e.Now.UTC())
		if err != nil {
			return err
		}
		owner := cur.Instance
		if owner != "" && e.Instance != "" {
			owner = e.Instance
		}
		res, err := tx.ExecContext(ctx, s.q(`UPDATE sandboxes SET state = ?, resource_version = ?, updated_at = ?, instance = ?
			WHERE id = ? AND resource_version = ? AND state = ?`),
			string(sandbox.StateDraining), cur.ResourceVersion+1, updated, owner, cur.ID, cur.ResourceVersion, string(cur.State))
		if err != nil {
			return s.dbError(ctx, "drain sandbox "+cur.ID, err)
		}
		return oneRow(res, "drain sandbox "+cur.ID)
	})
	if err != nil {
		return nil, nil, err
	}
	return ended, before, nil
}
