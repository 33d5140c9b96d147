package control

import (
	"context"
	"errors"
	"slices"

	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/egress"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/netctl"
	"genesis.dev/sandbox/internal/sandbox"
)

// The egress gateway and the networks of sandboxes are netctl's; control
// checks the caller's tenant and the sandbox, asks the NetworkChange hooks
// and tells netctl which sandboxes live.

// The network types of netctl, under the names control's callers use.
type (
	NetworkCapability = netctl.Capability
	NetworkMetrics    = netctl.Metrics
	NetworkCounter    = netctl.Counter
	NetworkEventsPage = netctl.EventsPage
)

// GetNetwork returns a sandbox's network policy and status. A sandbox
// without a network has mode none and status none.
func (s *Service) GetNetwork(ctx context.Context, tenant, id string) (*sandbox.Network, error) {
	sb, err := s.lookup(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	return s.net.Get(ctx, sb)
}

// UpdateNetwork replaces the policy of a running networked sandbox once the
// NetworkChange hooks allow it (netctl.Networks.Update says the rest).
// Invalid policies are 400; on any failure the policy is unchanged.
func (s *Service) UpdateNetwork(ctx context.Context, tenant, id string, ifVersion int64, pol egress.Policy) (*sandbox.Network, error) {
	sb, err := s.lookup(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	norm, err := pol.Normalize(s.cfg.Network.OperatorConfig)
	if err != nil {
		return nil, err
	}
	if err := s.networkChange(ctx, id, norm); err != nil {
		return nil, err
	}
	return s.net.Update(ctx, sb, ifVersion, norm)
}

// ListNetworkEvents returns a sandbox's egress events after cursor.
func (s *Service) ListNetworkEvents(ctx context.Context, tenant, id string, cursor int64, limit int) (NetworkEventsPage, error) {
	if _, err := s.lookup(ctx, tenant, id); err != nil {
		return NetworkEventsPage{}, err
	}
	return s.net.Events(ctx, id, cursor, limit)
}

// NetworkMetrics returns the egress counters and the gateway state.
func (s *Service) NetworkMetrics(ctx context.Context) NetworkMetrics { return s.net.Metrics(ctx) }

// NetworkCapabilities reports the network modes this host can enforce now.
func (s *Service) NetworkCapabilities() NetworkCapability { return s.net.Capabilities() }

// prepareNetwork points a networked sandbox's container at its own
// network, made now (netctl.Networks.Prepare).
func (s *Service) prepareNetwork(ctx context.Context, sb *sandbox.Sandbox, spec *driver.Spec) error {
	return s.net.Prepare(ctx, sb, spec)
}

// withNetwork fills sb.Network for a networked sandbox.
func (s *Service) withNetwork(ctx context.Context, sb *sandbox.Sandbox) *sandbox.Sandbox {
	if sb != nil {
		if n := s.net.Summary(ctx, sb.ID); n != nil {
			sb.Network = n
		}
	}
	return sb
}

// reconcileNetworks removes the sandbox networks of this instance whose
// sandbox is not live.
func (s *Service) reconcileNetworks(ctx context.Context, live map[string]*sandbox.Sandbox) int {
	return s.net.RemoveOrphans(ctx, func(ctx context.Context, id string) bool {
		if _, ok := live[id]; ok {
			return true
		}
		// live was read before the networks were listed, and a sandbox's
		// record is made before its network: one made since is not in it.
		sb, err := s.store.GetSandbox(ctx, "", id)
		return err == nil && slices.Contains(liveStates, sb.State) || err != nil && !errors.Is(err, errdefs.ErrNotFound)
	})
}
