package netctl

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/egress/egressclient"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// Problem codes of the network plumbing.
const (
	CodeModeUnavailable  = "network_mode_unavailable"
	CodeRequiresRecreate = "network_mode_requires_recreate"
	CodeEnforcementDown  = "network_enforcement_unavailable"
	CodeSubnetsExhausted = "network_subnets_exhausted"
	codeInvalidState     = "invalid_state"
)

// Names of what netctl makes: genesis-net-<sandbox id>,
// genesis-egress-<instance id>.
const (
	sandboxNetworkPrefix   = "genesis-net-"
	gatewayContainerPrefix = "genesis-egress-"
)

// Config wires a Networks.
type Config struct {
	Settings *config.Config
	// Driver runs the gateway container; its driver.Networker (when the
	// driver has the Networks capability) makes the networks.
	Driver driver.Driver
	// Store keeps the network records and egress events.
	Store store.NetworkStore
	// SandboxDir is a sandbox's host directory, where its resolver file
	// goes (driver.HostDirs); nil when sandboxes do not run on this host,
	// which refuses networked sandboxes.
	SandboxDir func(id string) string
	// ProfileImage is the image a profile's containers run, and whether it
	// has one (the gateway runs network.gateway.profile's image).
	ProfileImage func(p *config.Profile) (string, bool)
	// EgressDir is the host directory holding the genesis-egress binary
	// the gateway container runs; empty disables networked modes.
	EgressDir string
	// InstanceID names this service instance in container and network
	// labels.
	InstanceID string
	Logger     *slog.Logger
	// Now is the clock of the records; nil means time.Now.
	Now func() time.Time
}

// Networks runs the one egress gateway container of this service instance
// and the networks of its sandboxes, and keeps the gateway in step with the
// sandbox network records: it starts it, checks its health, marks
// sandboxes enforcement_down when it stops answering, restarts it (with
// backoff) and pushes every policy again.
type Networks struct {
	cfg          *config.Config
	driver       driver.Driver
	nw           driver.Networker // nil: the driver has no networks
	store        store.NetworkStore
	sandboxDir   func(id string) string
	profileImage func(*config.Profile) (string, bool)
	dir          string // host directory holding the genesis-egress binary; "" if not installed
	instance     string
	log          *slog.Logger
	now          func() time.Time

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

// New validates c and returns a Networks. It has no side effects; call
// Start.
func New(c Config) (*Networks, error) {
	switch {
	case c.Settings == nil:
		return nil, fmt.Errorf("netctl: nil settings: %w", errdefs.ErrInvalidArgument)
	case c.Driver == nil:
		return nil, fmt.Errorf("netctl: nil driver: %w", errdefs.ErrInvalidArgument)
	case c.Store == nil:
		return nil, fmt.Errorf("netctl: nil store: %w", errdefs.ErrInvalidArgument)
	case c.ProfileImage == nil:
		return nil, fmt.Errorf("netctl: nil profile image: %w", errdefs.ErrInvalidArgument)
	case c.InstanceID == "":
		return nil, errdefs.Invalid("netctl: empty instance id")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	n := &Networks{cfg: c.Settings, driver: c.Driver, store: c.Store, sandboxDir: c.SandboxDir, profileImage: c.ProfileImage,
		dir: c.EgressDir, instance: c.InstanceID, log: c.Logger, now: func() time.Time { return c.Now().UTC() },
		counters: map[[2]string]uint64{}}
	n.nw, _ = c.Driver.(driver.Networker)
	if !c.Driver.Capabilities().Networks {
		n.nw = nil
	}
	switch {
	case n.nw == nil:
		n.reason = "the " + c.Driver.Name() + " driver cannot make networks"
	case c.EgressDir == "":
		n.reason = "the genesis-egress binary is not installed (build it with make build, or pass --egress-binary)"
	}
	return n, nil
}

// Start starts the gateway when networked sandboxes live on from an
// earlier run (otherwise the first networked sandbox starts it). It
// reports whether this host can run a gateway at all: then the caller runs
// Check every network.gateway.health_interval and PullEvents every
// events_interval until Close.
func (n *Networks) Start(ctx context.Context) bool {
	if n.nw == nil || n.dir == "" {
		n.log.Info("networked sandbox modes are unavailable", "reason", n.reason)
		return false
	}
	if recs, err := n.store.ListSandboxNetworks(ctx, sandbox.NetworkActive, sandbox.NetworkEnforcementDown); err == nil && len(recs) > 0 {
		if err := n.ensure(ctx); err != nil {
			n.log.Error("egress gateway did not start; networked sandboxes have no route until it does", "err", err)
		}
	}
	return true
}

// Close drops the control connection; the gateway container keeps running
// (a restarted service adopts it and pushes the policies again).
func (n *Networks) Close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.client != nil {
		n.client.Close()
		n.client = nil
	}
}

// Shutdown ends the gateway for good at the end of a drain: its container
// and run directory are removed and it is not started again by this
// process.
func (n *Networks) Shutdown(ctx context.Context) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stopped, n.up, n.reason = true, false, "the service has drained"
	if n.client != nil {
		n.client.Close()
		n.client = nil
	}
	if n.nw == nil || n.dir == "" {
		return // never started
	}
	cctx, cancel := cleanupCtx(ctx, n.cfg.Intervals.DockerCallTimeout)
	defer cancel()
	if err := n.driver.Remove(cctx, n.containerName()); err != nil {
		n.log.Warn("drain: removing the egress gateway container", "err", err)
	}
	if err := os.RemoveAll(n.runDir()); err != nil {
		n.log.Warn("drain: removing the egress gateway run directory", "err", err)
	}
}

// lock serialises network changes of one sandbox.
func (n *Networks) lock(id string) func() {
	m, _ := n.locks.LoadOrStore(id, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// cleanupCtx returns a context for rollback and cleanup work that must run
// even when the caller's context is already canceled.
func cleanupCtx(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}
