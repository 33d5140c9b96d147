package snapshots

import (
	"context"
	"errors"
	"fmt"

	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// Create makes a sandbox as every edge's create does: from snapshotID
// through m when it is set (made says what came back), else a fresh one
// through ctl (made nil). A snapshot asked of a service that keeps none
// (m nil) is not_supported.
func Create(ctx context.Context, ctl *control.Service, m *Manager, snapshotID string, in CreateOptions) (sb *sandbox.Sandbox, made *Made, err error) {
	if snapshotID == "" {
		sb, err = ctl.CreateSandbox(ctx, in)
		return sb, nil, err
	}
	if m == nil {
		return nil, nil, errdefs.WithCode("not_supported", fmt.Errorf("this service keeps no snapshots: %w", errdefs.ErrNotImplemented))
	}
	if made, err = m.CreateFrom(ctx, snapshotID, in); err != nil {
		return nil, nil, err
	}
	return made.Sandbox, made, nil
}

// Lease acquires a lease as every edge's acquire does: on a sandbox made
// from snapshotID through m when it is set, else through ctl (made nil).
// A snapshot asked of a service that keeps none is not_supported.
func Lease(ctx context.Context, ctl *control.Service, m *Manager, snapshotID string, in control.AcquireLeaseInput) (*control.LeaseOutput, *Made, error) {
	if snapshotID == "" {
		out, err := ctl.AcquireLease(ctx, in)
		return out, nil, err
	}
	if m == nil {
		return nil, nil, errdefs.WithCode("not_supported", errdefs.Mark(errors.New("this service keeps no snapshots"), errdefs.ErrNotImplemented))
	}
	return m.LeaseFrom(ctx, snapshotID, in)
}

// ListOfSandbox is List as the API lists: with sandboxID set, another
// tenant's or no sandbox is not found rather than an empty list ("" lists
// every snapshot of tenant).
func (m *Manager) ListOfSandbox(ctx context.Context, tenant, sandboxID string, limit int) ([]*sandbox.Snapshot, error) {
	if sandboxID != "" {
		if _, err := m.cfg.Lifecycle.GetSandbox(ctx, tenant, sandboxID); err != nil {
			return nil, err
		}
	}
	return m.List(ctx, tenant, sandboxID, limit)
}
