package control

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
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

// Problem codes of the network plumbing.
const (
	CodeNetworkModeUnavailable   = "network_mode_unavailable"
	CodeNetworkRequiresRecreate  = "network_mode_requires_recreate"
	CodeNetworkEnforcementDown   = "network_enforcement_unavailable"
	CodeNetworkSubnetsExhausted  = "network_subnets_exhausted"
	restartBackoffMax            = time.Minute
	gatewayReadyTimeout          = 20 * time.Second
	sandboxNetworkPrefix         = "genesis-net-"
	gatewayContainerPrefix       = "genesis-egress-"
	maxSubnetAttempts            = 64
	gatewayStaticHostOffset      = 2 // the gateway's address on each sandbox network: subnet base + 2
	sandboxDynamicRangeBitsExtra = 1 // sandboxes get addresses from the upper half of their /28
)

// gateway runs the one egress gateway container of this service instance
// and keeps it in step with the sandbox network records: it starts it, checks
// its health, marks sandboxes enforcement_down when it stops answering,
// restarts it (with backoff) and pushes every policy again.
type gateway struct {
	s   *Service
	nw  driver.Networker // nil: the driver has no networks
	dir string           // host directory holding the genesis-egress binary; "" if not installed

	mu          sync.Mutex // serialises start/restart and reattachment
	client      *egressclient.Client
	up          bool   // last health check answered
	reason      string // why networked modes are unavailable, when !up
	started     time.Time
	backoff     time.Duration
	nextRestart time.Time
	stopped     bool   // removed by shutdown: never started again
	cursor      uint64 // events: last gateway seq ingested

	locks sync.Map // sandbox id → *sync.Mutex: one network change at a time

	countMu  sync.Mutex
	counters map[[2]string]uint64 // (proto, decision) → events ingested
	bytes    [2]uint64            // up, down of allowed connections
	lost     uint64               // events the gateway dropped before we read them
}

func newGateway(s *Service, egressDir string) *gateway {
	g := &gateway{s: s, dir: egressDir, counters: map[[2]string]uint64{}}
	g.nw, _ = s.driver.(driver.Networker)
	if !s.driver.Capabilities().Networks {
		g.nw = nil
	}
	switch {
	case g.nw == nil:
		g.reason = "the " + s.driver.Name() + " driver cannot make networks"
	case egressDir == "":
		g.reason = "the genesis-egress binary is not installed (build it with make build, or pass --egress-binary)"
	default:
		g.reason = ""
	}
	return g
}

func (g *gateway) cfg() config.Gateway { return g.s.cfg.Network.Gateway }

func (g *gateway) containerName() string { return gatewayContainerPrefix + g.s.instance }

func (g *gateway) runDir() string { return filepath.Join(g.s.cfg.DataDir, "egress-run") }

func (g *gateway) socketPath() string { return filepath.Join(g.runDir(), gatewaySocketRel) }

// available reports whether networked modes can be enforced now (the
// gateway runs, or has not been needed yet and can be started), and why not.
func (g *gateway) available() (ok bool, state, reason string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.nw == nil || g.dir == "":
		return false, "unavailable", g.reason
	case g.up:
		return true, "running", ""
	case g.client == nil && g.reason == "":
		return true, "idle", "started with the first networked sandbox"
	}
	return false, "down", g.reason
}

// image is the image the gateway container runs.
func (g *gateway) image() (string, error) {
	if g.cfg().Image != "" {
		return g.cfg().Image, nil
	}
	p, ok := g.s.cfg.Profile(g.cfg().Profile)
	if !ok {
		return "", fmt.Errorf("network.gateway.profile %q is not a profile: %w", g.cfg().Profile, errdefs.ErrFailedPrecondition)
	}
	ref, ok := g.s.imageRef(p)
	if !ok {
		return "", fmt.Errorf("the image of profile %s (network.gateway.profile) has no recipe: %w", p.Name, errdefs.ErrFailedPrecondition)
	}
	return ref, nil
}

// ensure starts the gateway if it does not answer and reattaches every
// sandbox network. It is called at start-up, by the health loop and before a
// networked sandbox is made.
func (g *gateway) ensure(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.nw == nil || g.dir == "" || g.stopped {
		return g.unavailable()
	}
	if g.client != nil {
		hctx, cancel := context.WithTimeout(ctx, gatewayCallBudget)
		h, err := g.client.Health(hctx)
		cancel()
		if err == nil && h.Started.Equal(g.started) {
			g.up = true
			return nil
		}
		if g.up {
			g.up = false
			g.markDownLocked(ctx, "the egress gateway stopped answering")
		}
	}
	return g.restartLocked(ctx)
}

func (g *gateway) unavailable() error {
	return errdefs.WithCode(CodeNetworkModeUnavailable, fmt.Errorf(
		"networked sandboxes cannot be enforced on this host: %s: %w", g.reason, errdefs.ErrFailedPrecondition))
}

// restartLocked (re)creates the gateway container, waits for its control
// API, joins the upstream networks and every live sandbox network, and
// pushes every policy. g.mu is held.
func (g *gateway) restartLocked(ctx context.Context) (err error) {
	defer func() {
		g.up = err == nil
		if err != nil {
			g.reason = "the egress gateway is not running: " + err.Error()
		} else {
			g.reason = ""
		}
	}()
	if g.client != nil {
		g.client.Close()
		g.client = nil
	}
	ref, err := g.image()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, gatewayReadyTimeout+4*g.s.cfg.Intervals.DockerCallTimeout)
	defer cancel()
	if err := g.ensureUpstream(ctx); err != nil {
		return err
	}
	if err := os.MkdirAll(g.runDir(), 0o700); err != nil {
		return fmt.Errorf("gateway run dir: %w", err)
	}
	if err := os.Chown(g.runDir(), gatewayUser, gatewayUser); err != nil {
		return fmt.Errorf("gateway run dir owner: %w", err)
	}
	_ = os.Remove(g.socketPath())
	name := g.containerName()
	if err := g.s.driver.Remove(ctx, name); err != nil {
		return fmt.Errorf("removing the old gateway container: %w", err)
	}
	cmd := []string{gatewayBinary, "serve", "--control-socket", gatewayRunDir + "/" + gatewaySocketRel}
	mounts := []driver.Mount{
		{Source: g.dir, Target: gatewayMountDir, ReadOnly: true},
		{Source: g.runDir(), Target: gatewayRunDir},
	}
	if ca := g.cfg().UpstreamCA; ca != "" {
		mounts = append(mounts, driver.Mount{Source: ca, Target: gatewayCAPath, ReadOnly: true})
		cmd = append(cmd, "--upstream-ca", gatewayCAPath)
	}
	spec := driver.Spec{
		Name:    name,
		Image:   ref,
		Runtime: sandbox.RuntimeRunc, // runc: hot-plugging sandbox networks needs the host's network stack
		Labels: map[string]string{
			driver.LabelManaged:   "true",
			driver.LabelInstance:  g.s.instance,
			driver.LabelPurpose:   driver.PurposeEgressGateway,
			driver.LabelRuntime:   string(sandbox.RuntimeRunc),
			driver.LabelCreatedAt: g.s.now().Format(time.RFC3339),
		},
		User:      fmt.Sprintf("%d:%d", gatewayUser, gatewayUser),
		Cmd:       cmd,
		Resources: sandbox.Resources{CPU: 1, MemoryMB: 256, Pids: 512},
		ReadOnly:  true,
		Mounts:    mounts,
		Network:   g.cfg().UpstreamNetwork,
		Sysctls:   map[string]string{"net.ipv4.ip_unprivileged_port_start": "0"},
		Hostname:  "egress",
	}
	id, err := g.s.driver.Create(ctx, spec)
	if err != nil {
		return fmt.Errorf("creating the gateway container: %w", err)
	}
	fail := func(err error) error {
		cctx, cancel := cleanupCtx(ctx, g.s.cfg.Intervals.DockerCallTimeout)
		defer cancel()
		if rerr := g.s.driver.Remove(cctx, id); rerr != nil {
			g.s.log.Warn("removing a gateway container that failed to start", "err", rerr)
		}
		return err
	}
	if err := g.s.driver.Start(ctx, id); err != nil {
		return fail(fmt.Errorf("starting the gateway container: %w", err))
	}
	for _, n := range g.s.cfg.Network.UpstreamNetworks {
		if _, err := g.nw.ConnectNetwork(ctx, n, id, ""); err != nil {
			return fail(fmt.Errorf("joining upstream network %s: %w", n, err))
		}
	}
	client := egressclient.Dial(g.socketPath())
	rctx, rcancel := context.WithTimeout(ctx, gatewayReadyTimeout)
	h, err := client.WaitReady(rctx, 20*time.Millisecond)
	rcancel()
	if err != nil {
		client.Close()
		st, ierr := g.s.driver.Inspect(ctx, id)
		if ierr == nil && !st.Running {
			err = fmt.Errorf("the gateway container exited with code %d: %w", st.ExitCode, err)
		}
		return fail(fmt.Errorf("gateway control API did not answer: %w", err))
	}
	g.client, g.started, g.cursor = client, h.Started, 0
	g.s.log.Info("egress gateway started", "container", name, "version", h.Version)
	g.reattachLocked(ctx)
	return nil
}

// ensureUpstream makes the upstream bridge if it is missing. It carries no
// instance label: several instances on one host share it.
func (g *gateway) ensureUpstream(ctx context.Context) error {
	name := g.cfg().UpstreamNetwork
	if _, err := g.nw.InspectNetwork(ctx, name); err == nil {
		return nil
	} else if !errors.Is(err, errdefs.ErrNotFound) {
		return err
	}
	_, err := g.nw.CreateNetwork(ctx, driver.NetworkSpec{Name: name, Labels: map[string]string{driver.LabelPurpose: driver.PurposeUpstream}})
	if errors.Is(err, errdefs.ErrAlreadyExists) {
		return nil
	}
	return err
}

// reattachLocked joins the gateway to every live sandbox network and pushes
// its policy again. Failures mark that sandbox's network down. g.mu is held.
func (g *gateway) reattachLocked(ctx context.Context) {
	recs, err := g.s.store.ListSandboxNetworks(ctx, sandbox.NetworkActive, sandbox.NetworkEnforcementDown)
	if err != nil {
		g.s.log.Error("listing sandbox networks to reattach", "err", err)
		return
	}
	for _, n := range recs {
		err := g.attachLocked(ctx, n.SandboxID, n.GatewayIP, n.Policy)
		status, reason := sandbox.NetworkActive, ""
		if err != nil {
			status, reason = sandbox.NetworkEnforcementDown, "policy not pushed after a gateway restart: "+err.Error()
			g.s.log.Warn("reattaching sandbox network", "sandbox", n.SandboxID, "err", err)
		}
		g.s.setNetworkStatus(ctx, n.SandboxID, status, reason)
	}
}

// attachLocked connects the gateway to a sandbox's network at gwIP and
// pushes the policy. g.mu is held.
func (g *gateway) attachLocked(ctx context.Context, sandboxID, gwIP string, pol egress.Policy) error {
	if g.client == nil {
		return g.unavailable()
	}
	got, err := g.nw.ConnectNetwork(ctx, sandboxNetworkPrefix+sandboxID, g.containerName(), gwIP)
	if err != nil {
		return fmt.Errorf("joining the sandbox network: %w", err)
	}
	if got != gwIP {
		return fmt.Errorf("the gateway got address %s on the sandbox network, not %s: %w", got, gwIP, errdefs.ErrInternal)
	}
	return g.pushLocked(ctx, sandboxID, gwIP, pol)
}

// pushLocked sends one sandbox's configuration to the gateway. g.mu is held.
func (g *gateway) pushLocked(ctx context.Context, sandboxID, gwIP string, pol egress.Policy) error {
	if g.client == nil {
		return g.unavailable()
	}
	// The host's own addresses (the Docker bridge gateways among them) are
	// denied as upstreams; they change as networks come and go.
	deny, err := egress.HostAddresses()
	if err != nil {
		return err
	}
	res, err := g.s.cfg.Network.Resolve(pol, deny, nil)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, gatewayCallBudget)
	defer cancel()
	if _, err := g.client.PutSandbox(cctx, sandboxID, egress.SandboxConfig{LocalIP: gwIP, Policy: pol, Resolved: res}); err != nil {
		return errdefs.WithCode(CodeNetworkEnforcementDown, fmt.Errorf("pushing the policy to the egress gateway: %w", err))
	}
	return nil
}

// push sends one sandbox's configuration to a running gateway.
func (g *gateway) push(ctx context.Context, sandboxID, gwIP string, pol egress.Policy) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.up {
		return errdefs.WithCode(CodeNetworkEnforcementDown, fmt.Errorf(
			"the egress gateway is down (%s); the policy is unchanged, retry shortly: %w", g.reason,
			errdefs.WithRetryAfter(g.cfg().RestartBackoff, errdefs.ErrUnavailable)))
	}
	return g.pushLocked(ctx, sandboxID, gwIP, pol)
}

// attach is attachLocked under the lock, for a new sandbox.
func (g *gateway) attach(ctx context.Context, sandboxID, gwIP string, pol egress.Policy) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.attachLocked(ctx, sandboxID, gwIP, pol)
}

// detach forgets a sandbox at the gateway (best effort).
func (g *gateway) detach(ctx context.Context, sandboxID string) {
	g.mu.Lock()
	c := g.client
	g.mu.Unlock()
	if c == nil {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, gatewayCallBudget)
	defer cancel()
	if err := c.DeleteSandbox(cctx, sandboxID); err != nil {
		g.s.log.Warn("removing a sandbox from the egress gateway", "sandbox", sandboxID, "err", err)
	}
}

// check is one health-loop step: when the gateway does not answer (or
// answers as a new process that lost its state), every enforced sandbox is
// marked enforcement_down at once; the gateway is restarted after the
// backoff and the policies pushed again.
func (g *gateway) check(ctx context.Context) {
	if g.nw == nil || g.dir == "" {
		return
	}
	g.mu.Lock()
	c, started, up, stopped := g.client, g.started, g.up, g.stopped
	g.mu.Unlock()
	if stopped {
		return
	}
	if c == nil && !up {
		// Started lazily: only when a sandbox needs it.
		recs, err := g.s.store.ListSandboxNetworks(ctx, sandbox.NetworkActive, sandbox.NetworkEnforcementDown)
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
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return
	}
	now := time.Now()
	if g.up {
		g.up = false
		g.reason = "the egress gateway stopped answering: " + herr.Error()
		g.backoff = g.cfg().RestartBackoff
		g.nextRestart = now.Add(g.backoff)
		g.s.log.Error("egress gateway down; networked sandboxes have no route until it is back", "err", herr)
		g.markDownLocked(ctx, g.reason)
	}
	if now.Before(g.nextRestart) {
		return
	}
	if err := g.restartLocked(ctx); err != nil {
		g.backoff = min(2*max(g.backoff, g.cfg().RestartBackoff), restartBackoffMax)
		g.nextRestart = time.Now().Add(g.backoff)
		g.s.log.Error("restarting the egress gateway failed", "err", err, "retry_in", g.backoff)
		g.markDownLocked(ctx, g.reason)
		return
	}
	g.backoff = 0
}

// markDownLocked marks every enforced sandbox network enforcement_down.
func (g *gateway) markDownLocked(ctx context.Context, reason string) {
	recs, err := g.s.store.ListSandboxNetworks(ctx, sandbox.NetworkActive, sandbox.NetworkEnforcementDown)
	if err != nil {
		g.s.log.Error("listing sandbox networks to mark down", "err", err)
		return
	}
	for _, n := range recs {
		g.s.setNetworkStatus(ctx, n.SandboxID, sandbox.NetworkEnforcementDown, reason)
	}
}

// lock serialises network changes of one sandbox.
func (g *gateway) lock(id string) func() {
	m, _ := g.locks.LoadOrStore(id, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// subnetFor picks a free /28 of the pool for a sandbox, starting at a
// place derived from its id; taken lists subnets already in use.
func subnetCandidates(pool netip.Prefix, id string, taken []netip.Prefix) []netip.Prefix {
	bits := config.SandboxPrefixBits
	n := uint32(1) << (bits - pool.Bits())
	h := fnv.New32a()
	h.Write([]byte(id))
	start := h.Sum32() % n
	base := pool.Addr().As4()
	baseU := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	var out []netip.Prefix
	for i := uint32(0); i < n && len(out) < maxSubnetAttempts; i++ {
		v := baseU + ((start+i)%n)<<(32-bits)
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

// startNetworking starts the gateway (when this host can run one) and its
// health and event loops.
func (s *Service) startNetworking(ctx, loopCtx context.Context) {
	g := s.gw
	if g.nw == nil || g.dir == "" {
		s.log.Info("networked sandbox modes are unavailable", "reason", g.reason)
		return
	}
	// The gateway starts with the first networked sandbox; after a restart
	// of the service it is needed at once if networked sandboxes live on.
	if recs, err := s.store.ListSandboxNetworks(ctx, sandbox.NetworkActive, sandbox.NetworkEnforcementDown); err == nil && len(recs) > 0 {
		if err := g.ensure(ctx); err != nil {
			s.log.Error("egress gateway did not start; networked sandboxes have no route until it does", "err", err)
		}
	}
	s.loop(loopCtx, g.cfg().HealthInterval, g.check)
	s.loop(loopCtx, g.cfg().EventsInterval, g.pullEvents)
}

// close drops the control connection; the gateway container keeps running
// (a restarted service adopts it and pushes the policies again).
func (g *gateway) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.client != nil {
		g.client.Close()
		g.client = nil
	}
}

// shutdown ends the gateway for good at the end of a drain: its container
// and run directory are removed and it is not started again by this
// process.
func (g *gateway) shutdown(ctx context.Context) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopped, g.up, g.reason = true, false, "the service has drained"
	if g.client != nil {
		g.client.Close()
		g.client = nil
	}
	if g.nw == nil || g.dir == "" {
		return // never started
	}
	cctx, cancel := cleanupCtx(ctx, g.s.cfg.Intervals.DockerCallTimeout)
	defer cancel()
	if err := g.s.driver.Remove(cctx, g.containerName()); err != nil {
		g.s.log.Warn("drain: removing the egress gateway container", "err", err)
	}
	if err := os.RemoveAll(g.runDir()); err != nil {
		g.s.log.Warn("drain: removing the egress gateway run directory", "err", err)
	}
}
