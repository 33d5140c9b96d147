package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// ReturnSandbox makes a reset sandbox an idle pool member again.
func (s *Store) ReturnSandbox(ctx context.Context, r store.Return) (*sandbox.Sandbox, error) {
	var next *sandbox.Sandbox
	err := s.inTx(ctx, "return sandbox "+r.SandboxID, func(tx pgx.Tx) error {
		cur, err := getSandbox(ctx, tx, r.SandboxID, "FOR UPDATE")
		if err != nil {
			return err
		}
		next = store.CloneSandbox(cur)
		if err := store.ApplyReturn(next, r); err != nil {
			return err
		}
		store.NormalizeSandbox(next)
		row, err := encodeSandbox(next)
		if err != nil {
			return fmt.Errorf("return sandbox %s: %w", r.SandboxID, err)
		}
		tag, err := tx.Exec(ctx, `UPDATE sandboxes SET tenant = $1, state = $2, risk_level = $3, env = $4, metadata = $5,
			failure_reason = $6, resource_version = $7, updated_at = $8, expires_at = $9
			WHERE id = $10 AND resource_version = $11 AND state = $12`,
			row.tenant, row.state, row.riskLevel, row.env, row.metadata, row.failureReason, row.resourceVersion, row.updatedAt, row.expiresAt,
			cur.ID, cur.ResourceVersion, string(cur.State))
		if err != nil {
			return dbError(ctx, "return sandbox "+r.SandboxID, err)
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("return sandbox %s: record changed during the update: %w", r.SandboxID, errdefs.ErrConflict)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return next, nil
}
