package control

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/egress"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// resolvConfTarget is where a networked sandbox's generated resolver file is
// mounted: the gateway is its only name server.
const resolvConfTarget = "/etc/resolv.conf"

// Limits of the network events listing.
const (
	DefaultNetworkEventsLimit = 100
	MaxNetworkEventsLimit     = 1000
	eventsPullPage            = 1000
)

// networkPolicy picks a new sandbox's policy — the request's, else the
// tenant's default, else the profile's — and normalizes it. A networked
// mode this host cannot enforce fails with 409 network_mode_unavailable:
// it never falls back to open networking.
func (s *Service) networkPolicy(ctx context.Context, tenant string, p *config.Profile, req *egress.Policy) (egress.Policy, error) {
	pol := p.Network.Policy
	if t, ok := s.cfg.Tenants[tenant]; ok && t.Network != nil {
		pol = t.Network.Policy
	}
	if req != nil {
		pol = *req
	}
	norm, err := pol.Normalize(s.cfg.Network.OperatorConfig)
	if err != nil {
		return egress.Policy{}, err
	}
	if norm.Mode.Networked() {
		if err := s.gw.ensure(ctx); err != nil {
			return egress.Policy{}, errdefs.WithCode(CodeNetworkModeUnavailable, fmt.Errorf(
				"network mode %s cannot be enforced on this host, so the sandbox is not made: %v: %w", norm.Mode, err, errdefs.ErrFailedPrecondition))
		}
	}
	return norm, nil
}

// recordNetwork stores the network record of a new networked sandbox.
func (s *Service) recordNetwork(ctx context.Context, sb *sandbox.Sandbox, pol egress.Policy) error {
	if !pol.Mode.Networked() {
		return nil
	}
	return s.store.CreateSandboxNetwork(ctx, &sandbox.Network{SandboxID: sb.ID, Tenant: sb.Tenant, Policy: pol,
		Status: sandbox.NetworkPending, UpdatedAt: s.now()})
}

// prepareNetwork makes a networked sandbox's own internal network, joins the
// gateway to it at a fixed address, pushes the policy (so it holds from the
// sandbox's first packet), and points spec at the network, the generated
// resolver file and the proxy. Sandboxes without a network record keep
// network mode none. teardown undoes all of it.
func (s *Service) prepareNetwork(ctx context.Context, sb *sandbox.Sandbox, spec *driver.Spec) error {
	rec, err := s.store.GetSandboxNetwork(ctx, "", sb.ID)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	h, ok := s.boxes.(driver.HostDirs)
	if !ok {
		return fmt.Errorf("network mode %s needs a driver whose sandboxes run on this host: %w", rec.Policy.Mode, errdefs.ErrNotImplemented)
	}
	unlock := s.gw.lock(sb.ID)
	defer unlock()
	gwIP, err := s.makeSandboxNetwork(ctx, sb)
	if err != nil {
		return err
	}
	if err := s.gw.attach(ctx, sb.ID, gwIP, rec.Policy); err != nil {
		return err
	}
	if err := os.MkdirAll(h.SandboxDir(sb.ID), 0o711); err != nil {
		return fmt.Errorf("resolver file: %w", err)
	}
	conf := filepath.Join(h.SandboxDir(sb.ID), "resolv.conf")
	if err := os.WriteFile(conf, []byte("nameserver "+gwIP+"\noptions timeout:1 attempts:2\n"), 0o644); err != nil {
		return fmt.Errorf("resolver file: %w", err)
	}
	spec.Network = sandboxNetworkPrefix + sb.ID
	spec.Mounts = append(spec.Mounts, driver.Mount{Source: conf, Target: resolvConfTarget, ReadOnly: true})
	spec.Env = append(spec.Env, networkEnv(gwIP, rec.Policy)...)
	_, err = s.store.UpdateSandboxNetwork(ctx, sb.ID, 0, s.now(), func(n *sandbox.Network) error {
		n.Status, n.StatusReason, n.GatewayIP = sandbox.NetworkActive, "", gwIP
		return nil
	})
	return err
}

// networkEnv is the environment of a networked sandbox: the proxy for
// clients that honour it and, in tool-proxy mode, each tool's URL. No
// secret is ever part of it.
func networkEnv(gwIP string, pol egress.Policy) []string {
	proxy := fmt.Sprintf("http://%s:%d", gwIP, gatewayProxyPort)
	noProxy := "localhost,127.0.0.1,::1,." + egress.ToolDomain
	env := []string{"HTTP_PROXY=" + proxy, "HTTPS_PROXY=" + proxy, "http_proxy=" + proxy, "https_proxy=" + proxy,
		"NO_PROXY=" + noProxy, "no_proxy=" + noProxy}
	for _, t := range pol.Tools {
		key := strings.ToUpper(strings.ReplaceAll(t, "-", "_"))
		env = append(env, fmt.Sprintf("GENESIS_TOOL_%s_URL=http://%s.%s/", key, t, egress.ToolDomain))
	}
	return env
}

// makeSandboxNetwork creates the sandbox's internal /28 from the pool and
// returns the gateway's address on it.
func (s *Service) makeSandboxNetwork(ctx context.Context, sb *sandbox.Sandbox) (string, error) {
	nw := s.gw.nw
	name := sandboxNetworkPrefix + sb.ID
	if st, err := nw.InspectNetwork(ctx, name); err == nil {
		// Made by an earlier attempt of this create.
		p, err := netip.ParsePrefix(st.Subnet)
		if err != nil {
			return "", fmt.Errorf("sandbox network %s has subnet %q: %w", name, st.Subnet, errdefs.ErrInternal)
		}
		gw, _ := subnetPlan(p)
		return gw, nil
	}
	pool := netip.MustParsePrefix(s.cfg.Network.Gateway.SubnetPool)
	existing, err := nw.ListNetworks(ctx)
	if err != nil {
		return "", err
	}
	var taken []netip.Prefix
	for _, n := range existing {
		if p, err := netip.ParsePrefix(n.Subnet); err == nil {
			taken = append(taken, p)
		}
	}
	for _, p := range subnetCandidates(pool, sb.ID, taken) {
		gw, dynamic := subnetPlan(p)
		_, err := nw.CreateNetwork(ctx, driver.NetworkSpec{Name: name, Internal: true, Subnet: p.String(), DynamicRange: dynamic,
			Labels: map[string]string{driver.LabelInstance: s.instance, driver.LabelSandbox: sb.ID, driver.LabelPurpose: driver.PurposeSandboxNetwork}})
		switch {
		case err == nil:
			return gw, nil
		case errors.Is(err, errdefs.ErrConflict):
			continue // overlaps a network we did not list (another tool's)
		default:
			return "", fmt.Errorf("creating the sandbox network: %w", err)
		}
	}
	return "", errdefs.WithCode(CodeNetworkSubnetsExhausted, fmt.Errorf(
		"no free /%d left in network.gateway.subnet_pool %s: %w", config.SandboxPrefixBits, pool, errdefs.ErrResourceExhausted))
}

// releaseNetwork undoes prepareNetwork: the gateway forgets the sandbox, the
// network is removed and the record says removed. Best effort; the
// reconciler removes networks left behind.
func (s *Service) releaseNetwork(ctx context.Context, id string) {
	if s.gw.nw == nil {
		return
	}
	rec, err := s.store.GetSandboxNetwork(ctx, "", id)
	if err != nil {
		return // not networked (or the record is unreadable: the reconciler cleans up)
	}
	unlock := s.gw.lock(id)
	defer unlock()
	s.gw.detach(ctx, id)
	if err := s.gw.nw.RemoveNetwork(ctx, sandboxNetworkPrefix+id); err != nil {
		s.log.Error("removing sandbox network", "sandbox", id, "err", err)
	}
	if rec.Status != sandbox.NetworkRemoved {
		s.setNetworkStatus(ctx, id, sandbox.NetworkRemoved, "")
	}
}

// setNetworkStatus records a status change (best effort, logged).
func (s *Service) setNetworkStatus(ctx context.Context, id string, st sandbox.NetworkStatus, reason string) {
	_, err := s.store.UpdateSandboxNetwork(ctx, id, 0, s.now(), func(n *sandbox.Network) error {
		if n.Status == sandbox.NetworkRemoved {
			return errRemoved
		}
		n.Status, n.StatusReason = st, reason
		return nil
	})
	if err != nil && !errors.Is(err, errRemoved) {
		s.log.Error("recording network status", "sandbox", id, "status", st, "err", err)
	}
}

var errRemoved = errors.New("network removed")

// GetNetwork returns a sandbox's network policy and status. A sandbox
// without a network has mode none and status none.
func (s *Service) GetNetwork(ctx context.Context, tenant, id string) (*sandbox.Network, error) {
	sb, err := s.GetSandbox(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	n, err := s.store.GetSandboxNetwork(ctx, tenant, id)
	if errors.Is(err, errdefs.ErrNotFound) {
		return &sandbox.Network{SandboxID: sb.ID, Tenant: sb.Tenant, Policy: egress.Policy{Mode: egress.ModeNone},
			Status: sandbox.NetworkNone, ResourceVersion: 1, UpdatedAt: sb.CreatedAt}, nil
	}
	return n, err
}

// UpdateNetwork replaces the policy of a running networked sandbox. The
// gateway has the new policy before this returns. Switching between none
// and a networked mode needs a new sandbox (409
// network_mode_requires_recreate); invalid policies are 400; a stale
// ifVersion is 412; a gateway that is down is 503. On any failure the policy
// is unchanged.
func (s *Service) UpdateNetwork(ctx context.Context, tenant, id string, ifVersion int64, pol egress.Policy) (*sandbox.Network, error) {
	sb, err := s.GetSandbox(ctx, tenant, id)
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
	unlock := s.gw.lock(id)
	defer unlock()
	cur, err := s.GetNetwork(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if ifVersion != 0 && ifVersion != cur.ResourceVersion {
		return nil, fmt.Errorf("network of sandbox %s is at version %d, not %d: %w", id, cur.ResourceVersion, ifVersion, errdefs.ErrPreconditionFailed)
	}
	if !sb.State.Running() {
		return nil, errdefs.WithCode("invalid_state", fmt.Errorf("sandbox %s is %s; its network can change only while it runs: %w", id, sb.State, errdefs.ErrFailedPrecondition))
	}
	if cur.Policy.Mode.Networked() != norm.Mode.Networked() {
		return nil, errdefs.WithCode(CodeNetworkRequiresRecreate, fmt.Errorf(
			"sandbox %s has mode %s; switching to %s adds or removes its network interface, which a running sandbox cannot do (gVisor cannot hot-plug one): create a new sandbox with that mode: %w",
			id, cur.Policy.Mode, norm.Mode, errdefs.ErrConflict))
	}
	if !norm.Mode.Networked() {
		return cur, nil
	}
	if cur.Status == sandbox.NetworkPending || cur.GatewayIP == "" {
		return nil, errdefs.WithCode("invalid_state", fmt.Errorf("the network of sandbox %s is still being set up: %w", id, errdefs.ErrFailedPrecondition))
	}
	if err := s.gw.push(ctx, id, cur.GatewayIP, norm); err != nil {
		return nil, err
	}
	out, err := s.store.UpdateSandboxNetwork(ctx, id, cur.ResourceVersion, s.now(), func(n *sandbox.Network) error {
		n.Policy = norm
		return nil
	})
	if err != nil {
		// Put the stored policy back at the gateway.
		if perr := s.gw.push(ctx, id, cur.GatewayIP, cur.Policy); perr != nil {
			s.log.Error("restoring a sandbox policy at the gateway after a failed update", "sandbox", id, "err", perr)
		}
		return nil, err
	}
	s.log.Info("sandbox network policy changed", "sandbox", id, "mode", norm.Mode)
	return out, nil
}

// NetworkEventsPage is one page of a sandbox's egress events.
type NetworkEventsPage struct {
	Events []sandbox.NetworkEvent
	// Next is the cursor for the following page (the last event's, or the
	// given cursor when there were none).
	Next int64
}

// ListNetworkEvents returns a sandbox's egress events after cursor.
func (s *Service) ListNetworkEvents(ctx context.Context, tenant, id string, cursor int64, limit int) (NetworkEventsPage, error) {
	if _, err := s.GetSandbox(ctx, tenant, id); err != nil {
		return NetworkEventsPage{}, err
	}
	switch {
	case cursor < 0:
		return NetworkEventsPage{}, invalid("cursor must not be negative, got %d", cursor)
	case limit < 0 || limit > MaxNetworkEventsLimit:
		return NetworkEventsPage{}, invalid("limit must be between 1 and %d, got %d", MaxNetworkEventsLimit, limit)
	case limit == 0:
		limit = DefaultNetworkEventsLimit
	}
	evs, err := s.store.ListNetworkEvents(ctx, id, cursor, limit)
	if err != nil {
		return NetworkEventsPage{}, err
	}
	next := cursor
	if len(evs) > 0 {
		next = evs[len(evs)-1].Cursor
	}
	return NetworkEventsPage{Events: evs, Next: next}, nil
}

// pullEvents moves new gateway events into the store.
func (g *gateway) pullEvents(ctx context.Context) {
	g.mu.Lock()
	c, cursor := g.client, g.cursor
	g.mu.Unlock()
	if c == nil {
		return
	}
	for range 20 {
		cctx, cancel := context.WithTimeout(ctx, gatewayCallBudget)
		page, err := c.Events(cctx, cursor, eventsPullPage)
		cancel()
		if err != nil {
			return // the health loop reports a dead gateway
		}
		evs := make([]sandbox.NetworkEvent, 0, len(page.Events))
		for _, e := range page.Events {
			evs = append(evs, sandbox.NetworkEvent{SandboxID: e.Sandbox, Time: e.Time.UTC(), DurationMS: e.DurationMS, Name: e.Name, Address: e.Address,
				Port: e.Port, Proto: e.Proto, Decision: e.Decision, Reason: e.Reason, BytesUp: e.BytesUp, BytesDown: e.BytesDown})
		}
		if err := g.s.store.AppendNetworkEvents(ctx, evs); err != nil {
			g.s.log.Warn("storing egress events", "err", err)
			return
		}
		g.count(page)
		cursor = page.Next
		g.mu.Lock()
		if g.client != c {
			g.mu.Unlock()
			return // restarted meanwhile: its sequence starts over
		}
		g.cursor = cursor
		g.mu.Unlock()
		if len(page.Events) < eventsPullPage {
			return
		}
	}
}

func (g *gateway) count(page egress.EventsPage) {
	g.countMu.Lock()
	defer g.countMu.Unlock()
	for _, e := range page.Events {
		g.counters[[2]string{e.Proto, e.Decision}]++
		if e.BytesUp > 0 {
			g.bytes[0] += uint64(e.BytesUp)
		}
		if e.BytesDown > 0 {
			g.bytes[1] += uint64(e.BytesDown)
		}
	}
	g.lost += page.Lost
}

// NetworkCounter is one egress counter for /metrics.
type NetworkCounter struct {
	Proto, Decision string
	Count           uint64
}

// NetworkMetrics are the egress totals this service has recorded.
type NetworkMetrics struct {
	Events              []NetworkCounter // by proto and decision, sorted
	BytesUp, BytesDown  uint64
	EventsLost          uint64
	GatewayUp           bool
	SandboxesEnforced   int
	SandboxesEnforceOff int
}

// NetworkMetrics returns the egress counters and the gateway state.
func (s *Service) NetworkMetrics(ctx context.Context) NetworkMetrics {
	g := s.gw
	var m NetworkMetrics
	g.countMu.Lock()
	for k, v := range g.counters {
		m.Events = append(m.Events, NetworkCounter{Proto: k[0], Decision: k[1], Count: v})
	}
	m.BytesUp, m.BytesDown, m.EventsLost = g.bytes[0], g.bytes[1], g.lost
	g.countMu.Unlock()
	sort.Slice(m.Events, func(i, j int) bool {
		if m.Events[i].Proto != m.Events[j].Proto {
			return m.Events[i].Proto < m.Events[j].Proto
		}
		return m.Events[i].Decision < m.Events[j].Decision
	})
	_, state, _ := g.available()
	m.GatewayUp = state == "running"
	if recs, err := s.store.ListSandboxNetworks(ctx, sandbox.NetworkActive); err == nil {
		m.SandboxesEnforced = len(recs)
	}
	if recs, err := s.store.ListSandboxNetworks(ctx, sandbox.NetworkEnforcementDown); err == nil {
		m.SandboxesEnforceOff = len(recs)
	}
	return m
}

// NetworkCapability says which network modes this host can enforce now.
type NetworkCapability struct {
	Modes   map[egress.Mode]bool
	Gateway string // "running", "idle" (starts on first use), "down" or "unavailable"
	Reason  string
	Tools   []string // operator tool names
	// Endpoints are the operator's internal endpoint names.
	Endpoints []string
}

// NetworkCapabilities reports the enforceable modes: none always; the
// networked ones only while the gateway runs.
func (s *Service) NetworkCapabilities() NetworkCapability {
	ok, state, reason := s.gw.available()
	c := NetworkCapability{Modes: map[egress.Mode]bool{egress.ModeNone: true}, Gateway: state, Reason: reason}
	for _, m := range []egress.Mode{egress.ModeAllowlist, egress.ModeInternalAPI, egress.ModeToolProxy} {
		c.Modes[m] = ok
	}
	for k := range s.cfg.Network.Tools {
		c.Tools = append(c.Tools, k)
	}
	for k := range s.cfg.Network.InternalEndpoints {
		c.Endpoints = append(c.Endpoints, k)
	}
	sort.Strings(c.Tools)
	sort.Strings(c.Endpoints)
	return c
}

// reconcileNetworks removes sandbox networks of this instance whose sandbox
// is not live, and gateway containers of this instance other than the
// current one. Other instances' networks are left alone.
func (s *Service) reconcileNetworks(ctx context.Context, live map[string]*sandbox.Sandbox) int {
	if s.gw.nw == nil {
		return 0
	}
	nets, err := s.gw.nw.ListNetworks(ctx)
	if err != nil {
		s.log.Warn("listing networks", "err", err)
		return 0
	}
	n := 0
	for _, nt := range nets {
		if nt.Labels[driver.LabelInstance] != s.instance || nt.Labels[driver.LabelPurpose] != driver.PurposeSandboxNetwork {
			continue
		}
		id := nt.Labels[driver.LabelSandbox]
		if _, ok := live[id]; ok {
			continue
		}
		// live was read before the networks were listed, and a sandbox's
		// record is made before its network: one made since is not in it.
		sb, err := s.store.GetSandbox(ctx, "", id)
		if err == nil && slices.Contains(liveStates, sb.State) || err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			continue
		}
		if err := s.gw.nw.RemoveNetwork(ctx, nt.Name); err != nil {
			s.log.Warn("removing orphan sandbox network", "network", nt.Name, "err", err)
			continue
		}
		s.setNetworkStatus(ctx, id, sandbox.NetworkRemoved, "")
		n++
	}
	return n
}

// networkSummary fills sb.Network for a networked sandbox.
func (s *Service) withNetwork(ctx context.Context, sb *sandbox.Sandbox) *sandbox.Sandbox {
	if sb == nil {
		return sb
	}
	if n, err := s.store.GetSandboxNetwork(ctx, "", sb.ID); err == nil {
		sb.Network = &sandbox.NetworkSummary{Mode: n.Policy.Mode, Status: n.Status, StatusReason: n.StatusReason}
	}
	return sb
}
