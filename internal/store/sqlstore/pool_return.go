package sqlstore

import (
	"context"
	"database/sql"
	"fmt"

	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// ReturnSandbox makes a reset sandbox an idle pool member again, as
// store.ApplyReturn changes it, in one write transaction holding the row.
func (s *Store) ReturnSandbox(ctx context.Context, r store.Return) (*sandbox.Sandbox, error) {
	get := func(tx *sql.Tx) (*sandbox.Sandbox, error) { return s.getSandbox(ctx, tx, r.SandboxID, s.d.RowLock()) }
	return update(ctx, s, "sandbox "+r.SandboxID, get, func(tx *sql.Tx, cur *sandbox.Sandbox) (*sandbox.Sandbox, error) {
		next := store.CloneSandbox(cur)
		if err := store.ApplyReturn(next, r); err != nil {
			return nil, err
		}
		store.NormalizeSandbox(next)
		row, err := s.encodeSandbox(next)
		if err != nil {
			return nil, fmt.Errorf("return sandbox %s: %w", r.SandboxID, err)
		}
		res, err := tx.ExecContext(ctx, s.q(`UPDATE sandboxes SET tenant = ?, state = ?, risk_level = ?, env = ?, metadata = ?,
			failure_reason = ?, resource_version = ?, updated_at = ?, expires_at = ?
			WHERE id = ? AND resource_version = ? AND state = ?`),
			row.tenant, row.state, row.riskLevel, row.env, row.metadata, row.failureReason, row.resourceVersion, row.updatedAt, row.expiresAt,
			cur.ID, cur.ResourceVersion, string(cur.State))
		if err != nil {
			return nil, s.dbError(ctx, "return sandbox "+r.SandboxID, err)
		}
		if err := oneRow(res, "return sandbox "+r.SandboxID); err != nil {
			return nil, err
		}
		return next, nil
	})
}
