package store

import (
	"context"
	"fmt"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// LeaseEnder ends a lease and takes its sandbox from the holder in one
// transaction, so that a crash leaves either both (the lease active, the
// sandbox the holder's) or neither: the sandbox of an ended lease is
// never left in the holder's hands, and a draining one is what start-up
// recovery finishes.
type LeaseEnder interface {
	// EndLease applies e.End to lease e.LeaseID (it sets the final state,
	// EndedAt and EndReason; an error from it aborts and changes nothing)
	// and, in the same transaction, moves the lease's sandbox to draining
	// unless it is draining or destroyed already. The lease must be
	// active (else errdefs.ErrFailedPrecondition) and its sandbox must be
	// e.SandboxID (else errdefs.ErrConflict). It returns the ended lease
	// and the sandbox as it was before the change (its state then says
	// whether it may be reset). A missing lease is errdefs.ErrNotFound;
	// a missing sandbox ends the lease alone (nil sandbox). A drained
	// sandbox that has an owner becomes e.Instance's when that is set.
	EndLease(ctx context.Context, e LeaseEnd) (*sandbox.Lease, *sandbox.Sandbox, error)
}

// LeaseEnd is one EndLease request.
type LeaseEnd struct {
	LeaseID   string
	SandboxID string
	// End changes the active lease into its final form.
	End func(*sandbox.Lease) error
	Now time.Time
	// Instance, when set, is the service instance that ends the lease: a
	// sandbox of another instance that the end drains becomes its in the
	// same write. Should that process die before the sandbox is gone, the
	// leader adopts the draining record from it and finishes the destroy
	// at once; left with its owner, the record would look like a drain
	// still under way and wait out the stuck-drain bound.
	Instance string
}

// ApplyLeaseEnd checks that l (a copy of the stored lease) is active and
// of e.SandboxID and applies e.End. Implementations call it inside their
// transaction, so every store ends a lease the same way.
func ApplyLeaseEnd(l *sandbox.Lease, e LeaseEnd) error {
	if l.SandboxID != e.SandboxID {
		return fmt.Errorf("lease %s holds sandbox %s, not %s: %w", l.ID, l.SandboxID, e.SandboxID, errdefs.ErrConflict)
	}
	if l.State != sandbox.LeaseActive {
		return fmt.Errorf("lease %s is %s: %w", l.ID, l.State, errdefs.ErrFailedPrecondition)
	}
	if err := e.End(l); err != nil {
		return err
	}
	if !l.State.Final() {
		return fmt.Errorf("lease %s: ending it left it %s: %w", l.ID, l.State, errdefs.ErrInvalidArgument)
	}
	return nil
}

// DrainOnLeaseEnd reports whether the sandbox of an ended lease, now in
// state st, moves to draining: every state but draining and destroyed.
func DrainOnLeaseEnd(st sandbox.State) bool {
	return st != sandbox.StateDraining && st != sandbox.StateDestroyed && sandbox.CanTransition(st, sandbox.StateDraining)
}
