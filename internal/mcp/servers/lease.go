package servers

import (
	"context"
	"fmt"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
)

// MaxLeaseServers is how many MCP servers one lease request may start.
const MaxLeaseServers = 16

// CheckLeaseServers checks the MCP servers a lease request asks for,
// before the lease is made: at most MaxLeaseServers, none naming a lease
// (theirs is the one being acquired), none holding operator secrets
// (CheckLeaseServer: they share no sandbox with the tenant).
func (m *Manager) CheckLeaseServers(ctx context.Context, tenant string, reqs []CreateRequest) error {
	if len(reqs) > MaxLeaseServers {
		return errdefs.Invalid("mcp lists %d servers; a lease starts at most %d", len(reqs), MaxLeaseServers)
	}
	for i, req := range reqs {
		if req.LeaseID != "" {
			return errdefs.Invalid("mcp[%d]: lease_id is the lease being acquired; leave it out", i)
		}
		if err := m.CheckLeaseServer(ctx, tenant, req); err != nil {
			return fmt.Errorf("mcp[%d]: %w", i, err)
		}
	}
	return nil
}

// StartOnLease starts the MCP servers reqs (checked by CheckLeaseServers)
// in the sandbox of tenant's lease leaseID, just acquired, for the API key
// createdBy, and answers them in order. It is all or nothing: when one
// cannot start, the ones started are deleted and the lease is released,
// and the error says which did not start.
func (m *Manager) StartOnLease(ctx context.Context, tenant, leaseID, createdBy string, reqs []CreateRequest) ([]*Instance, error) {
	made := make([]*Instance, 0, len(reqs))
	for i, req := range reqs {
		req.LeaseID, req.CreatedBy = leaseID, createdBy
		inst, err := m.Create(ctx, tenant, req)
		if err != nil {
			m.undoLease(ctx, tenant, leaseID, made)
			return nil, fmt.Errorf("mcp[%d] did not start, so the lease was released: %w", i, err)
		}
		made = append(made, inst)
	}
	return made, nil
}

// undoLease deletes the servers made on a lease and releases it, also
// when ctx has ended.
func (m *Manager) undoLease(ctx context.Context, tenant, leaseID string, made []*Instance) {
	for _, inst := range made {
		_ = m.Delete(tenant, inst.ID)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := m.cfg.Leases.ReleaseLease(rctx, tenant, leaseID); err != nil {
		m.log.Warn("releasing a lease whose MCP server did not start", "lease", leaseID, "err", err)
	}
}
