package netctl

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/egress"
	"genesis.dev/sandbox/internal/egress/egressclient"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// Paths of the egress gateway container.
const (
	gatewayMountDir   = "/.genesis-egress"
	gatewayBinary     = gatewayMountDir + "/genesis-egress"
	gatewayRunDir     = "/run/genesis-egress"
	gatewaySocketRel  = "control.sock"
	gatewayCAPath     = "/etc/genesis-egress/upstream-ca.pem"
	gatewayUser       = 65534 // nobody: binds low ports through a namespaced sysctl, no capability
	gatewayProxyPort  = egress.PortProxy
	gatewayCallBudget = 5 * time.Second // one control call to the gateway
)

// Limits of the gateway's lifecycle and of sandbox subnets.
const (
	restartBackoffMax            = time.Minute
	gatewayReadyTimeout          = 20 * time.Second
	maxSubnetAttempts            = 64
	gatewayStaticHostOffset      = 2 // the gateway's address on each sandbox network: subnet base + 2
	sandboxDynamicRangeBitsExtra = 1 // sandboxes get addresses from the upper half of their /28
)

func (n *Networks) gatewayCfg() config.Gateway { return n.cfg.Network.Gateway }

func (n *Networks) containerName() string { return gatewayContainerPrefix + n.instance }

func (n *Networks) runDir() string { return filepath.Join(n.cfg.DataDir, "egress-run") }

func (n *Networks) socketPath() string { return filepath.Join(n.runDir(), gatewaySocketRel) }

// available reports whether networked modes can be enforced now (the
// gateway runs, or has not been needed yet and can be started), and why not.
func (n *Networks) available() (ok bool, state, reason string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.nw == nil || n.dir == "":
		return false, "unavailable", n.reason
	case n.up:
		return true, "running", ""
	case n.client == nil && n.reason == "":
		return true, "idle", "started with the first networked sandbox"
	}
	return false, "down", n.reason
}

// image is the image the gateway container runs.
func (n *Networks) image() (string, error) {
	if n.gatewayCfg().Image != "" {
		return n.gatewayCfg().Image, nil
	}
	p, ok := n.cfg.Profile(n.gatewayCfg().Profile)
	if !ok {
		return "", fmt.Errorf("network.gateway.profile %q is not a profile: %w", n.gatewayCfg().Profile, errdefs.ErrFailedPrecondition)
	}
	ref, ok := n.profileImage(p)
	if !ok {
		return "", fmt.Errorf("the image of profile %s (network.gateway.profile) has no recipe: %w", p.Name, errdefs.ErrFailedPrecondition)
	}
	return ref, nil
}

// ensure starts the gateway if it does not answer and reattaches every
// sandbox network. It is called at start-up, by the health loop and before a
// networked sandbox is made.
func (n *Networks) ensure(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.nw == nil || n.dir == "" || n.stopped {
		return n.unavailable()
	}
	if n.client != nil {
		hctx, cancel := context.WithTimeout(ctx, gatewayCallBudget)
		h, err := n.client.Health(hctx)
		cancel()
		if err == nil && h.Started.Equal(n.started) {
			n.up = true
			return nil
		}
		if n.up {
			n.up = false
			n.markDownLocked(ctx, "the egress gateway stopped answering")
		}
	}
	return n.restartLocked(ctx)
}

func (n *Networks) unavailable() error {
	return errdefs.WithCode(CodeModeUnavailable, fmt.Errorf(
		"networked sandboxes cannot be enforced on this host: %s: %w", n.reason, errdefs.ErrFailedPrecondition))
}

// restartLocked (re)creates the gateway container, waits for its control
// API, joins the upstream networks and every live sandbox network, and
// pushes every policy. n.mu is held.
func (n *Networks) restartLocked(ctx context.Context) (err error) {
	defer func() {
		n.up = err == nil
		if err != nil {
			n.reason = "the egress gateway is not running: " + err.Error()
		} else {
			n.reason = ""
		}
	}()
	if n.client != nil {
		n.client.Close()
		n.client = nil
	}
	ref, err := n.image()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, gatewayReadyTimeout+4*n.cfg.Intervals.DockerCallTimeout)
	defer cancel()
	if err := n.ensureUpstream(ctx); err != nil {
		return err
	}
	if err := os.MkdirAll(n.runDir(), 0o700); err != nil {
		return fmt.Errorf("gateway run dir: %w", err)
	}
	if err := os.Chown(n.runDir(), gatewayUser, gatewayUser); err != nil {
		return fmt.Errorf("gateway run dir owner: %w", err)
	}
	_ = os.Remove(n.socketPath())
	name := n.containerName()
	if err := n.driver.Remove(ctx, name); err != nil {
		return fmt.Errorf("removing the old gateway container: %w", err)
	}
	cmd := []string{gatewayBinary, "serve", "--control-socket", gatewayRunDir + "/" + gatewaySocketRel}
	mounts := []driver.Mount{
		{Source: n.dir, Target: gatewayMountDir, ReadOnly: true},
		{Source: n.runDir(), Target: gatewayRunDir},
	}
	if ca := n.gatewayCfg().UpstreamCA; ca != "" {
		mounts = append(mounts, driver.Mount{Source: ca, Target: gatewayCAPath, ReadOnly: true})
		cmd = append(cmd, "--upstream-ca", gatewayCAPath)
	}
	spec := driver.Spec{
		Name:    name,
		Image:   ref,
		Runtime: sandbox.RuntimeRunc, // runc: hot-plugging sandbox networks needs the host's network stack
		Labels: map[string]string{
			driver.LabelManaged:   "true",
			driver.LabelInstance:  n.instance,
			driver.LabelPurpose:   driver.PurposeEgressGateway,
			driver.LabelRuntime:   string(sandbox.RuntimeRunc),
			driver.LabelCreatedAt: n.now().Format(time.RFC3339),
		},
		User:      fmt.Sprintf("%d:%d", gatewayUser, gatewayUser),
		Cmd:       cmd,
		Resources: sandbox.Resources{CPU: 1, MemoryMB: 256, Pids: 512},
		ReadOnly:  true,
		Mounts:    mounts,
		Network:   n.gatewayCfg().UpstreamNetwork,
		Sysctls:   map[string]string{"net.ipv4.ip_unprivileged_port_start": "0"},
		Hostname:  "egress",
	}
	id, err := n.driver.Create(ctx, spec)
	if err != nil {
		return fmt.Errorf("creating the gateway container: %w", err)
	}
	fail := func(err error) error {
		cctx, cancel := cleanupCtx(ctx, n.cfg.Intervals.DockerCallTimeout)
		defer cancel()
		if rerr := n.driver.Remove(cctx, id); rerr != nil {
			n.log.Warn("removing a gateway container that failed to start", "err", rerr)
		}
		return err
	}
	if err := n.driver.Start(ctx, id); err != nil {
		return fail(fmt.Errorf("starting the gateway container: %w", err))
	}
	for _, up := range n.cfg.Network.UpstreamNetworks {
		if _, err := n.nw.ConnectNetwork(ctx, up, id, ""); err != nil {
			return fail(fmt.Errorf("joining upstream network %s: %w", up, err))
		}
	}
	client := egressclient.Dial(n.socketPath())
	rctx, rcancel := context.WithTimeout(ctx, gatewayReadyTimeout)
	h, err := client.WaitReady(rctx, 20*time.Millisecond)
	rcancel()
	if err != nil {
		client.Close()
		st, ierr := n.driver.Inspect(ctx, id)
		if ierr == nil && !st.Running {
			err = fmt.Errorf("the gateway container exited with code %d: %w", st.ExitCode, err)
		}
		return fail(fmt.Errorf("gateway control API did not answer: %w", err))
	}
	n.client, n.started, n.cursor = client, h.Started, 0
	n.log.Info("egress gateway started", "container", name, "version", h.Version)
	n.reattachLocked(ctx)
	return nil
}

// ensureUpstream makes the upstream bridge if it is missing. It carries no
// instance label: several instances on one host share it.
func (n *Networks) ensureUpstream(ctx context.Context) error {
	name := n.gatewayCfg().UpstreamNetwork
	if _, err := n.nw.InspectNetwork(ctx, name); err == nil {
		return nil
	} else if !errors.Is(err, errdefs.ErrNotFound) {
		return err
	}
	_, err := n.nw.CreateNetwork(ctx, driver.NetworkSpec{Name: name, Labels: map[string]string{driver.LabelPurpose: driver.PurposeUpstream}})
	if errors.Is(err, errdefs.ErrAlreadyExists) {
		return nil
	}
	return err
}

// reattachLocked joins the gateway to every live sandbox network and pushes
// its policy again. Failures mark that sandbox's network down. n.mu is held.
func (n *Networks) reattachLocked(ctx context.Context) {
	recs, err := n.store.ListSandboxNetworks(ctx, sandbox.NetworkActive, sandbox.NetworkEnforcementDown)
	if err != nil {
		n.log.Error("listing sandbox networks to reattach", "err", err)
		return
	}
	for _, rec := range recs {
		err := n.attachLocked(ctx, rec.SandboxID, rec.GatewayIP, rec.Policy)
		status, reason := sandbox.NetworkActive, ""
		if err != nil {
			status, reason = sandbox.NetworkEnforcementDown, "policy not pushed after a gateway restart: "+err.Error()
			n.log.Warn("reattaching sandbox network", "sandbox", rec.SandboxID, "err", err)
		}
		n.setStatus(ctx, rec.SandboxID, status, reason)
	}
}

// attachLocked connects the gateway to a sandbox's network at gwIP and
// pushes the policy. n.mu is held.
func (n *Networks) attachLocked(ctx context.Context, sandboxID, gwIP string, pol egress.Policy) error {
	if n.client == nil {
		return n.unavailable()
	}
	got, err := n.nw.ConnectNetwork(ctx, sandboxNetworkPrefix+sandboxID, n.containerName(), gwIP)
	if err != nil {
		return fmt.Errorf("joining the sandbox network: %w", err)
	}
	if got != gwIP {
		return fmt.Errorf("the gateway got address %s on the sandbox network, not %s: %w", got, gwIP, errdefs.ErrInternal)
	}
	return n.pushLocked(ctx, sandboxID, gwIP, pol)
}

// pushLocked sends one sandbox's configuration to the gateway. n.mu is held.
func (n *Networks) pushLocked(ctx context.Context, sandboxID, gwIP string, pol egress.Policy) error {
	if n.client == nil {
		return n.unavailable()
	}
	// The host's own addresses (the Docker bridge gateways among them) are
	// denied as upstreams; they change as networks come and go.
	deny, err := egress.HostAddresses()
	if err != nil {
		return err
	}
	res, err := n.cfg.Network.Resolve(pol, deny, nil)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, gatewayCallBudget)
	defer cancel()
	if _, err := n.client.PutSandbox(cctx, sandboxID, egress.SandboxConfig{LocalIP: gwIP, Policy: pol, Resolved: res}); err != nil {
		return errdefs.WithCode(CodeEnforcementDown, fmt.Errorf("pushing the policy to the egress gateway: %w", err))
	}
	return nil
}

// push sends one sandbox's configuration to a running gateway.
func (n *Networks) push(ctx context.Context, sandboxID, gwIP string, pol egress.Policy) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.up {
		return errdefs.WithCode(CodeEnforcementDown, fmt.Errorf(
			"the egress gateway is down (%s); the policy is unchanged, retry shortly: %w", n.reason,
			errdefs.WithRetryAfter(n.gatewayCfg().RestartBackoff, errdefs.ErrUnavailable)))
	}
	return n.pushLocked(ctx, sandboxID, gwIP, pol)
}

// attach is attachLocked under the lock, for a new sandbox.
func (n *Networks) attach(ctx context.Context, sandboxID, gwIP string, pol egress.Policy) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.attachLocked(ctx, sandboxID, gwIP, pol)
}

// detach forgets a sandbox at the gateway (best effort).
func (n *Networks) detach(ctx context.Context, sandboxID string) {
	n.mu.Lock()
	c := n.client
	n.mu.Unlock()
	if c == nil {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, gatewayCallBudget)
	defer cancel()
	if err := c.DeleteSandbox(cctx, sandboxID); err != nil {
		n.log.Warn("removing a sandbox from the egress gateway", "sandbox", sandboxID, "err", err)
	}
}

// Check is one health-loop step: when the gateway does not answer (or
// answers as a new process that lost its state), every enforced sandbox is
// marked enforcement_down at once; the gateway is restarted after the
// backoff and the policies pushed again.
func (n *Networks) Check(ctx context.Context) {
	if n.nw == nil || n.dir == "" {
		return
	}
	n.mu.Lock()
	c, started, up, stopped := n.client, n.started, n.up, n.stopped
	n.mu.Unlock()
	if stopped {
		return
	}
	if c == nil && !up {
		// Started lazily: only when a sandbox needs it.
		recs, err := n.store.ListSandboxNetworks(ctx, sandbox.NetworkActive, sandbox.NetworkEnforcementDown)
		if err != nil || len(recs) == 0 {
			return
		}
	}
	var herr error
	if c == nil {
		herr = errors.New("not started")
	} else {
		hctx, cancel := context.WithTimeout(ctx, gatewayCallBudget)
		h, err := c.Health(hctx)
		cancel()
		switch {
		case err != nil:
			herr = err
		case !h.Started.Equal(started):
			herr = errors.New("the gateway restarted and lost its policies")
		}
	}
	if herr == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped {
		return
	}
	now := time.Now()
	if n.up {
		n.up = false
		n.reason = "the egress gateway stopped answering: " + herr.Error()
		n.backoff = n.gatewayCfg().RestartBackoff
		n.nextRestart = now.Add(n.backoff)
		n.log.Error("egress gateway down; networked sandboxes have no route until it is back", "err", herr)
		n.markDownLocked(ctx, n.reason)
	}
	if now.Before(n.nextRestart) {
		return
	}
	if err := n.restartLocked(ctx); err != nil {
		n.backoff = min(2*max(n.backoff, n.gatewayCfg().RestartBackoff), restartBackoffMax)
		n.nextRestart = time.Now().Add(n.backoff)
		n.log.Error("restarting the egress gateway failed", "err", err, "retry_in", n.backoff)
		n.markDownLocked(ctx, n.reason)
		return
	}
	n.backoff = 0
}

// markDownLocked marks every enforced sandbox network enforcement_down.
func (n *Networks) markDownLocked(ctx context.Context, reason string) {
	recs, err := n.store.ListSandboxNetworks(ctx, sandbox.NetworkActive, sandbox.NetworkEnforcementDown)
	if err != nil {
		n.log.Error("listing sandbox networks to mark down", "err", err)
		return
	}
	for _, rec := range recs {
		n.setStatus(ctx, rec.SandboxID, sandbox.NetworkEnforcementDown, reason)
	}
}

// subnetCandidates lists free /28s of the pool for a sandbox, starting at
// a place derived from its id; taken lists subnets already in use.
func subnetCandidates(pool netip.Prefix, id string, taken []netip.Prefix) []netip.Prefix {
	bits := config.SandboxPrefixBits
	count := uint32(1) << (bits - pool.Bits())
	h := fnv.New32a()
	h.Write([]byte(id))
	start := h.Sum32() % count
	base := pool.Addr().As4()
	baseU := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	var out []netip.Prefix
	for i := uint32(0); i < count && len(out) < maxSubnetAttempts; i++ {
		v := baseU + ((start+i)%count)<<(32-bits)
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), bits)
		free := true
		for _, t := range taken {
			if t.Overlaps(p) {
				free = false
				break
			}
		}
		if free {
			out = append(out, p)
		}
	}
	return out
}

// subnetPlan is the layout of one sandbox network: the gateway at base+2,
// sandboxes from the upper half.
func subnetPlan(p netip.Prefix) (gwIP string, dynamic string) {
	b := p.Addr().As4()
	g := b
	g[3] += gatewayStaticHostOffset
	d := b
	d[3] += byte(1 << (32 - p.Bits() - sandboxDynamicRangeBitsExtra))
	return netip.AddrFrom4(g).String(), netip.PrefixFrom(netip.AddrFrom4(d), p.Bits()+sandboxDynamicRangeBitsExtra).String()
}
