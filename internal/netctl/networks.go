package netctl

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
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
	DefaultEventsLimit = 100
	MaxEventsLimit     = 1000
	eventsPullPage     = 1000
)

// PolicyFor picks a new sandbox's policy — the request's, else the
// tenant's default, else the profile's — and normalizes it. A networked
// mode this host cannot enforce fails with 409 network_mode_unavailable:
// it never falls back to open networking.
func (n *Networks) PolicyFor(ctx context.Context, tenant string, p *config.Profile, req *egress.Policy) (egress.Policy, error) {
	pol := p.Network.Policy
	if t, ok := n.cfg.Tenants[tenant]; ok && t.Network != nil {
		pol = t.Network.Policy
	}
	if req != nil {
		pol = *req
	}
	norm, err := pol.Normalize(n.cfg.Network.OperatorConfig)
	if err != nil {
		return egress.Policy{}, err
	}
	if norm.Mode.Networked() {
		if err := n.ensure(ctx); err != nil {
			return egress.Policy{}, errdefs.WithCode(CodeModeUnavailable, fmt.Errorf(
				"network mode %s cannot be enforced on this host, so the sandbox is not made: %v: %w", norm.Mode, err, errdefs.ErrFailedPrecondition))
		}
	}
	return norm, nil
}

// Record stores the network record of a new networked sandbox.
func (n *Networks) Record(ctx context.Context, sb *sandbox.Sandbox, pol egress.Policy) error {
	if !pol.Mode.Networked() {
		return nil
	}
	return n.store.CreateSandboxNetwork(ctx, &sandbox.Network{SandboxID: sb.ID, Tenant: sb.Tenant, Policy: pol,
		Status: sandbox.NetworkPending, UpdatedAt: n.now()})
}

// Prepare makes a networked sandbox's own internal network, joins the
// gateway to it at a fixed address, pushes the policy (so it holds from the
// sandbox's first packet), and points spec at the network, the generated
// resolver file and the proxy. Sandboxes without a network record keep
// network mode none. Release undoes all of it.
func (n *Networks) Prepare(ctx context.Context, sb *sandbox.Sandbox, spec *driver.Spec) error {
	rec, err := n.store.GetSandboxNetwork(ctx, "", sb.ID)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if n.sandboxDir == nil {
		return fmt.Errorf("network mode %s needs a driver whose sandboxes run on this host: %w", rec.Policy.Mode, errdefs.ErrNotImplemented)
	}
	unlock := n.lock(sb.ID)
	defer unlock()
	gwIP, err := n.makeNetwork(ctx, sb)
	if err != nil {
		return err
	}
	if err := n.attach(ctx, sb.ID, gwIP, rec.Policy); err != nil {
		return err
	}
	if err := os.MkdirAll(n.sandboxDir(sb.ID), 0o711); err != nil {
		return fmt.Errorf("resolver file: %w", err)
	}
	conf := filepath.Join(n.sandboxDir(sb.ID), "resolv.conf")
	if err := os.WriteFile(conf, []byte("nameserver "+gwIP+"\noptions timeout:1 attempts:2\n"), 0o644); err != nil {
		return fmt.Errorf("resolver file: %w", err)
	}
	spec.Network = sandboxNetworkPrefix + sb.ID
	spec.Mounts = append(spec.Mounts, driver.Mount{Source: conf, Target: resolvConfTarget, ReadOnly: true})
	spec.Env = append(spec.Env, networkEnv(gwIP, rec.Policy)...)
	_, err = n.store.UpdateSandboxNetwork(ctx, sb.ID, 0, n.now(), func(x *sandbox.Network) error {
		x.Status, x.StatusReason, x.GatewayIP = sandbox.NetworkActive, "", gwIP
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

// makeNetwork creates the sandbox's internal /28 from the pool and returns
// the gateway's address on it.
func (n *Networks) makeNetwork(ctx context.Context, sb *sandbox.Sandbox) (string, error) {
	name := sandboxNetworkPrefix + sb.ID
	if st, err := n.nw.InspectNetwork(ctx, name); err == nil {
		// Made by an earlier attempt of this create.
		p, err := netip.ParsePrefix(st.Subnet)
		if err != nil {
			return "", fmt.Errorf("sandbox network %s has subnet %q: %w", name, st.Subnet, errdefs.ErrInternal)
		}
		gw, _ := subnetPlan(p)
		return gw, nil
	}
	pool := netip.MustParsePrefix(n.gatewayCfg().SubnetPool)
	existing, err := n.nw.ListNetworks(ctx)
	if err != nil {
		return "", err
	}
	var taken []netip.Prefix
	for _, x := range existing {
		if p, err := netip.ParsePrefix(x.Subnet); err == nil {
			taken = append(taken, p)
		}
	}
	for _, p := range subnetCandidates(pool, sb.ID, taken) {
		gw, dynamic := subnetPlan(p)
		_, err := n.nw.CreateNetwork(ctx, driver.NetworkSpec{Name: name, Internal: true, Subnet: p.String(), DynamicRange: dynamic,
			Labels: map[string]string{driver.LabelInstance: n.instance, driver.LabelSandbox: sb.ID, driver.LabelPurpose: driver.PurposeSandboxNetwork}})
		switch {
		case err == nil:
			return gw, nil
		case errors.Is(err, errdefs.ErrConflict):
			continue // overlaps a network we did not list (another tool's)
		default:
			return "", fmt.Errorf("creating the sandbox network: %w", err)
		}
	}
	return "", errdefs.WithCode(CodeSubnetsExhausted, fmt.Errorf(
		"no free /%d left in network.gateway.subnet_pool %s: %w", config.SandboxPrefixBits, pool, errdefs.ErrResourceExhausted))
}

// Release undoes Prepare: the gateway forgets the sandbox, the network is
// removed and the record says removed. Best effort; RemoveOrphans removes
// networks left behind.
func (n *Networks) Release(ctx context.Context, id string) {
	if n.nw == nil {
		return
	}
	rec, err := n.store.GetSandboxNetwork(ctx, "", id)
	if err != nil {
		return // not networked (or the record is unreadable: the reconciler cleans up)
	}
	unlock := n.lock(id)
	defer unlock()
	n.detach(ctx, id)
	if err := n.nw.RemoveNetwork(ctx, sandboxNetworkPrefix+id); err != nil {
		n.log.Error("removing sandbox network", "sandbox", id, "err", err)
	}
	if rec.Status != sandbox.NetworkRemoved {
		n.setStatus(ctx, id, sandbox.NetworkRemoved, "")
	}
}

// setStatus records a status change (best effort, logged).
func (n *Networks) setStatus(ctx context.Context, id string, st sandbox.NetworkStatus, reason string) {
	_, err := n.store.UpdateSandboxNetwork(ctx, id, 0, n.now(), func(x *sandbox.Network) error {
		if x.Status == sandbox.NetworkRemoved {
			return errRemoved
		}
		x.Status, x.StatusReason = st, reason
		return nil
	})
	if err != nil && !errors.Is(err, errRemoved) {
		n.log.Error("recording network status", "sandbox", id, "status", st, "err", err)
	}
}

var errRemoved = errors.New("network removed")

// Summary is the network part shown with a networked sandbox; nil for a
// sandbox without a network.
func (n *Networks) Summary(ctx context.Context, id string) *sandbox.NetworkSummary {
	rec, err := n.store.GetSandboxNetwork(ctx, "", id)
	if err != nil {
		return nil
	}
	return &sandbox.NetworkSummary{Mode: rec.Policy.Mode, Status: rec.Status, StatusReason: rec.StatusReason}
}

// Get returns sb's network policy and status. A sandbox without a network
// has mode none and status none.
func (n *Networks) Get(ctx context.Context, sb *sandbox.Sandbox) (*sandbox.Network, error) {
	rec, err := n.store.GetSandboxNetwork(ctx, sb.Tenant, sb.ID)
	if errors.Is(err, errdefs.ErrNotFound) {
		return &sandbox.Network{SandboxID: sb.ID, Tenant: sb.Tenant, Policy: egress.Policy{Mode: egress.ModeNone},
			Status: sandbox.NetworkNone, ResourceVersion: 1, UpdatedAt: sb.CreatedAt}, nil
	}
	return rec, err
}

// Update replaces the policy of sb, a networked sandbox, with pol (already
// normalized and allowed by the caller). The gateway has the new policy
// before this returns. Switching between none and a networked mode needs a
// new sandbox (409 network_mode_requires_recreate); a stale ifVersion is
// 412; a sandbox that does not run is 409; a gateway that is down is 503.
// On any failure the policy is unchanged.
func (n *Networks) Update(ctx context.Context, sb *sandbox.Sandbox, ifVersion int64, pol egress.Policy) (*sandbox.Network, error) {
	id := sb.ID
	unlock := n.lock(id)
	defer unlock()
	cur, err := n.Get(ctx, sb)
	if err != nil {
		return nil, err
	}
	if ifVersion != 0 && ifVersion != cur.ResourceVersion {
		return nil, fmt.Errorf("network of sandbox %s is at version %d, not %d: %w", id, cur.ResourceVersion, ifVersion, errdefs.ErrPreconditionFailed)
	}
	if !sb.State.Running() {
		return nil, errdefs.WithCode(codeInvalidState, fmt.Errorf("sandbox %s is %s; its network can change only while it runs: %w", id, sb.State, errdefs.ErrFailedPrecondition))
	}
	if cur.Policy.Mode.Networked() != pol.Mode.Networked() {
		return nil, errdefs.WithCode(CodeRequiresRecreate, fmt.Errorf(
			"sandbox %s has mode %s; switching to %s adds or removes its network interface, which a running sandbox cannot do (gVisor cannot hot-plug one): create a new sandbox with that mode: %w",
			id, cur.Policy.Mode, pol.Mode, errdefs.ErrConflict))
	}
	if !pol.Mode.Networked() {
		return cur, nil
	}
	if cur.Status == sandbox.NetworkPending || cur.GatewayIP == "" {
		return nil, errdefs.WithCode(codeInvalidState, fmt.Errorf("the network of sandbox %s is still being set up: %w", id, errdefs.ErrFailedPrecondition))
	}
	if err := n.push(ctx, id, cur.GatewayIP, pol); err != nil {
		return nil, err
	}
	out, err := n.store.UpdateSandboxNetwork(ctx, id, cur.ResourceVersion, n.now(), func(x *sandbox.Network) error {
		x.Policy = pol
		return nil
	})
	if err != nil {
		// Put the stored policy back at the gateway.
		if perr := n.push(ctx, id, cur.GatewayIP, cur.Policy); perr != nil {
			n.log.Error("restoring a sandbox policy at the gateway after a failed update", "sandbox", id, "err", perr)
		}
		return nil, err
	}
	n.log.Info("sandbox network policy changed", "sandbox", id, "mode", pol.Mode)
	return out, nil
}

// EventsPage is one page of a sandbox's egress events.
type EventsPage struct {
	Events []sandbox.NetworkEvent
	// Next is the cursor for the following page (the last event's, or the
	// given cursor when there were none).
	Next int64
}

// Events returns a sandbox's egress events after cursor; limit 0 means
// DefaultEventsLimit.
func (n *Networks) Events(ctx context.Context, id string, cursor int64, limit int) (EventsPage, error) {
	switch {
	case cursor < 0:
		return EventsPage{}, errdefs.Invalid("cursor must not be negative, got %d", cursor)
	case limit < 0 || limit > MaxEventsLimit:
		return EventsPage{}, errdefs.Invalid("limit must be between 1 and %d, got %d", MaxEventsLimit, limit)
	case limit == 0:
		limit = DefaultEventsLimit
	}
	evs, err := n.store.ListNetworkEvents(ctx, id, cursor, limit)
	if err != nil {
		return EventsPage{}, err
	}
	next := cursor
	if len(evs) > 0 {
		next = evs[len(evs)-1].Cursor
	}
	return EventsPage{Events: evs, Next: next}, nil
}

// PullEvents moves new gateway events into the store.
func (n *Networks) PullEvents(ctx context.Context) {
	n.mu.Lock()
	c, cursor := n.client, n.cursor
	n.mu.Unlock()
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
		if err := n.store.AppendNetworkEvents(ctx, evs); err != nil {
			n.log.Warn("storing egress events", "err", err)
			return
		}
		n.count(page)
		cursor = page.Next
		n.mu.Lock()
		if n.client != c {
			n.mu.Unlock()
			return // restarted meanwhile: its sequence starts over
		}
		n.cursor = cursor
		n.mu.Unlock()
		if len(page.Events) < eventsPullPage {
			return
		}
	}
}

func (n *Networks) count(page egress.EventsPage) {
	n.countMu.Lock()
	defer n.countMu.Unlock()
	for _, e := range page.Events {
		n.counters[[2]string{e.Proto, e.Decision}]++
		if e.BytesUp > 0 {
			n.bytes[0] += uint64(e.BytesUp)
		}
		if e.BytesDown > 0 {
			n.bytes[1] += uint64(e.BytesDown)
		}
	}
	n.lost += page.Lost
}

// Counter is one egress counter for /metrics.
type Counter struct {
	Proto, Decision string
	Count           uint64
}

// Metrics are the egress totals this service has recorded.
type Metrics struct {
	Events              []Counter // by proto and decision, sorted
	BytesUp, BytesDown  uint64
	EventsLost          uint64
	GatewayUp           bool
	SandboxesEnforced   int
	SandboxesEnforceOff int
}

// Metrics returns the egress counters and the gateway state.
func (n *Networks) Metrics(ctx context.Context) Metrics {
	var m Metrics
	n.countMu.Lock()
	for k, v := range n.counters {
		m.Events = append(m.Events, Counter{Proto: k[0], Decision: k[1], Count: v})
	}
	m.BytesUp, m.BytesDown, m.EventsLost = n.bytes[0], n.bytes[1], n.lost
	n.countMu.Unlock()
	sort.Slice(m.Events, func(i, j int) bool {
		if m.Events[i].Proto != m.Events[j].Proto {
			return m.Events[i].Proto < m.Events[j].Proto
		}
		return m.Events[i].Decision < m.Events[j].Decision
	})
	_, state, _ := n.available()
	m.GatewayUp = state == "running"
	if recs, err := n.store.ListSandboxNetworks(ctx, sandbox.NetworkActive); err == nil {
		m.SandboxesEnforced = len(recs)
	}
	if recs, err := n.store.ListSandboxNetworks(ctx, sandbox.NetworkEnforcementDown); err == nil {
		m.SandboxesEnforceOff = len(recs)
	}
	return m
}

// Capability says which network modes this host can enforce now.
type Capability struct {
	Modes   map[egress.Mode]bool
	Gateway string // "running", "idle" (starts on first use), "down" or "unavailable"
	Reason  string
	Tools   []string // operator tool names
	// Endpoints are the operator's internal endpoint names.
	Endpoints []string
}

// Capabilities reports the enforceable modes: none always; the networked
// ones only while the gateway runs (or can be started).
func (n *Networks) Capabilities() Capability {
	ok, state, reason := n.available()
	c := Capability{Modes: map[egress.Mode]bool{egress.ModeNone: true}, Gateway: state, Reason: reason}
	for _, m := range []egress.Mode{egress.ModeAllowlist, egress.ModeInternalAPI, egress.ModeToolProxy} {
		c.Modes[m] = ok
	}
	for k := range n.cfg.Network.Tools {
		c.Tools = append(c.Tools, k)
	}
	for k := range n.cfg.Network.InternalEndpoints {
		c.Endpoints = append(c.Endpoints, k)
	}
	sort.Strings(c.Tools)
	sort.Strings(c.Endpoints)
	return c
}

// RemoveOrphans removes the sandbox networks of this instance whose
// sandbox live does not report live, and returns how many. Other
// instances' networks are left alone. live is asked after the networks
// are listed, so a sandbox made meanwhile can be seen.
func (n *Networks) RemoveOrphans(ctx context.Context, live func(ctx context.Context, sandboxID string) bool) int {
	if n.nw == nil {
		return 0
	}
	nets, err := n.nw.ListNetworks(ctx)
	if err != nil {
		n.log.Warn("listing networks", "err", err)
		return 0
	}
	removed := 0
	for _, nt := range nets {
		if nt.Labels[driver.LabelInstance] != n.instance || nt.Labels[driver.LabelPurpose] != driver.PurposeSandboxNetwork {
			continue
		}
		id := nt.Labels[driver.LabelSandbox]
		if live(ctx, id) {
			continue
		}
		if err := n.nw.RemoveNetwork(ctx, nt.Name); err != nil {
			n.log.Warn("removing orphan sandbox network", "network", nt.Name, "err", err)
			continue
		}
		n.setStatus(ctx, id, sandbox.NetworkRemoved, "")
		removed++
	}
	return removed
}
