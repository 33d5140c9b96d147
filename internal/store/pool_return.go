package store

import (
	"context"
	"fmt"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// PoolReturn hands a reset sandbox back to its warm pool.
type PoolReturn interface {
	// ReturnSandbox makes sandbox r.SandboxID a pool member again in one
	// update: tenant "", state r.To, risk level r.RiskLevel, no env,
	// metadata, expiry or failure reason. The sandbox must still be
	// r.Tenant's and in state r.From, and not reserved, else
	// errdefs.ErrConflict and nothing changes; a missing sandbox is
	// errdefs.ErrNotFound.
	ReturnSandbox(ctx context.Context, r Return) (*sandbox.Sandbox, error)
}

// Return is a request to hand a sandbox back to its pool.
type Return struct {
	SandboxID string
	Tenant    string        // the holder it must still belong to
	From      sandbox.State // the state it must be in (draining while reset)
	// To is idle (the default: claimable at once) or ready (nobody's and
	// not claimable until made idle, while its ready hooks run).
	To        sandbox.State
	RiskLevel sandbox.RiskLevel
	Now       time.Time
}

// ApplyReturn checks that sb (a copy of the stored record) may be returned
// by r and changes it into a member in state r.To. Implementations call it inside
// their update transaction, so every store returns a sandbox the same way.
func ApplyReturn(sb *sandbox.Sandbox, r Return) error {
	if sb.Tenant != r.Tenant || sb.State != r.From {
		return fmt.Errorf("sandbox %s is %s of tenant %q, not %s of %q: %w", sb.ID, sb.State, sb.Tenant, r.From, r.Tenant, errdefs.ErrConflict)
	}
	if sb.Reserved != "" {
		return fmt.Errorf("sandbox %s is reserved to %s and never returns to a pool: %w", sb.ID, sb.Reserved, errdefs.ErrConflict)
	}
	to := r.To
	if to == "" {
		to = sandbox.StateIdle
	}
	if to != sandbox.StateIdle && to != sandbox.StateReady {
		return errdefs.Invalid("a sandbox returns to its pool idle or ready, not %s", to)
	}
	if err := sandbox.Transition(sb.State, to); err != nil {
		return err
	}
	sb.Tenant, sb.State, sb.RiskLevel = "", to, r.RiskLevel
	sb.Env, sb.Metadata, sb.ExpiresAt, sb.FailureReason = nil, nil, nil, ""
	sb.ResourceVersion++
	sb.UpdatedAt = r.Now.UTC()
	return nil
}
