package store

import (
	"context"
	"time"

	"genesis.dev/sandbox/internal/sandbox"
)

// NetworkStore keeps the network policy and status of networked sandboxes
// and their egress audit events.
type NetworkStore interface {
	// CreateSandboxNetwork inserts the network record of an existing
	// sandbox (ResourceVersion is set to 1). A second record for the same
	// sandbox returns errdefs.ErrAlreadyExists; an unknown sandbox
	// errdefs.ErrNotFound.
	CreateSandboxNetwork(ctx context.Context, n *sandbox.Network) error
	// GetSandboxNetwork returns a sandbox's network record; tenant "" matches
	// any tenant.
	GetSandboxNetwork(ctx context.Context, tenant, sandboxID string) (*sandbox.Network, error)
	// UpdateSandboxNetwork applies fn to the record and stores the result,
	// bumping ResourceVersion and setting UpdatedAt to now. A non-zero
	// ifVersion that differs from the stored one returns
	// errdefs.ErrPreconditionFailed without calling fn; an error from fn
	// aborts the update. Sandbox and tenant cannot change.
	UpdateSandboxNetwork(ctx context.Context, sandboxID string, ifVersion int64, now time.Time, fn func(*sandbox.Network) error) (*sandbox.Network, error)
	// ListSandboxNetworks returns the records whose status is one of
	// statuses (all when empty), ordered by sandbox id.
	ListSandboxNetworks(ctx context.Context, statuses ...sandbox.NetworkStatus) ([]*sandbox.Network, error)
	// AppendNetworkEvents records events in order, giving each a Cursor
	// greater than any before it. Events of unknown sandboxes are dropped.
	AppendNetworkEvents(ctx context.Context, events []sandbox.NetworkEvent) error
	// ListNetworkEvents returns up to limit events of a sandbox with Cursor
	// greater than after, oldest first.
	ListNetworkEvents(ctx context.Context, sandboxID string, after int64, limit int) ([]sandbox.NetworkEvent, error)
}
