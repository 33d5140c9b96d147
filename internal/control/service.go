package control

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"genesis.dev/sandbox/internal/admission"
	"genesis.dev/sandbox/internal/agent/agentclient"
	"genesis.dev/sandbox/internal/busy"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/driver/local"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/imagestate"
	"genesis.dev/sandbox/internal/netctl"
	"genesis.dev/sandbox/internal/probe"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// Config wires a Service.
type Config struct {
	Settings *config.Config
	Store    store.Store
	Driver   driver.Driver
	// AgentDir is the host directory holding the genesis-agent binary that is
	// bind-mounted read-only into every sandbox.
	AgentDir string
	// EgressDir is the host directory holding the genesis-egress binary that
	// the egress gateway container runs; empty disables networked modes.
	EgressDir string
	// InstanceID identifies this service instance in container labels.
	InstanceID string
	// Sandboxer places whole sandboxes (host directories, the agent's
	// delivery, how the agent is reached); nil means the local one, for
	// drivers whose containers run on this host.
	Sandboxer driver.Sandboxer
	Logger    *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Metrics is told how long lease grants take; nil: nobody.
	Metrics Observer
	// ImageBuilds are the image builds the service runs in the
	// background; nil when it builds none. A request for a profile whose
	// image is being built waits for it within its wait_seconds, or is
	// answered 503 image_building.
	ImageBuilds ImageBuilds
	// Volumes mounts named volumes into sandboxes; nil: a request for
	// volumes is answered 501 volumes_unsupported.
	Volumes Volumes
}

// Observer is told the latency of control operations (the service's
// Prometheus metrics implement it).
type Observer interface {
	// ObserveLeaseWait records the time from a lease request to its
	// grant (a warm claim or a cold create), by the sandbox's runtime.
	ObserveLeaseWait(rt sandbox.Runtime, d time.Duration)
}

type noObserver struct{}

func (noObserver) ObserveLeaseWait(sandbox.Runtime, time.Duration) {}

// Service is the application service.
type Service struct {
	cfg      *config.Config
	store    store.Store
	driver   driver.Driver
	boxes    driver.Sandboxer
	remote   bool // sandboxes run elsewhere (cfg.Sandboxer set), where every instance reaches them
	instance string
	log      *slog.Logger
	now      func() time.Time
	obs      Observer

	capabilities *probe.Prober // the driver's probe and the profiles' views (capabilities.go)
	agentsMu     sync.Mutex
	agents       map[string]*agentclient.Client
	createSem    chan struct{}
	admitMu      sync.Mutex // serializes the capacity check with the record insert
	admission    *admission.Controller
	capacity     admission.Holds  // the host capacity each live sandbox holds
	net          *netctl.Networks // the egress gateway and the networks of sandboxes
	hooks        []Hook           // hooks.go; set before Start
	started      atomic.Bool

	quotaLocks sync.Map // tenant name → *sync.Mutex (quota.go)

	// Warm pools and draining (pools.go, leases.go).
	pools    map[poolKey]*pool
	poolList []*pool
	draining atomic.Bool
	busy     *busy.Tracker // the jobs on leased sandboxes and their busy records (jobRunning)
	heldMu   sync.Mutex
	held     map[string]heldAgent // sandbox id → its agent connection when a warm claim took it (recycle.go)
	recycles recycleQueue         // the recycles after release answers (recycle_queue.go)

	wg     sync.WaitGroup
	cancel context.CancelFunc

	reps *replicas // replicas.go; nil with a store of one process

	images *imagestate.Images // the profiles' images on this host

	volumes Volumes // volumes.go; nil: none
}

// New validates cfg and returns a Service. It has no side effects; call Start.
func New(cfg Config) (*Service, error) {
	switch {
	case cfg.Settings == nil:
		return nil, fmt.Errorf("control: nil settings: %w", errdefs.ErrInvalidArgument)
	case cfg.Store == nil:
		return nil, fmt.Errorf("control: nil store: %w", errdefs.ErrInvalidArgument)
	case cfg.Driver == nil:
		return nil, fmt.Errorf("control: nil driver: %w", errdefs.ErrInvalidArgument)
	case cfg.AgentDir == "":
		return nil, errdefs.Invalid("control: empty agent dir")
	case cfg.InstanceID == "":
		return nil, errdefs.Invalid("control: empty instance id")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Metrics == nil {
		cfg.Metrics = noObserver{}
	}
	dataDir, err := filepath.Abs(cfg.Settings.DataDir)
	if err != nil {
		return nil, fmt.Errorf("control: data dir: %w", err)
	}
	boxes := cfg.Sandboxer
	if boxes == nil {
		l, err := local.New(local.Config{Driver: cfg.Driver, Root: filepath.Join(dataDir, "sandboxes"), AgentDir: cfg.AgentDir, Logger: cfg.Logger})
		if err != nil {
			return nil, err
		}
		boxes = l
	}
	var s *Service
	// Sandboxes placed by another sandboxer run elsewhere (a cluster's
	// nodes): this host's CPUs and memory do not bound them.
	adm, err := newAdmission(cfg.Settings, cfg.Sandboxer != nil, cfg.Now, func(ctx context.Context, tenant string) int { return s.tenantWeight(ctx, tenant) })
	if err != nil {
		return nil, err
	}
	s = &Service{
		cfg:       cfg.Settings,
		store:     cfg.Store,
		driver:    cfg.Driver,
		boxes:     boxes,
		images:    imagestate.New(cfg.Settings.ImageRepository, cfg.Driver, cfg.ImageBuilds),
		volumes:   cfg.Volumes,
		remote:    cfg.Sandboxer != nil,
		instance:  cfg.InstanceID,
		log:       cfg.Logger,
		now:       func() time.Time { return cfg.Now().UTC() },
		obs:       cfg.Metrics,
		agents:    map[string]*agentclient.Client{},
		held:      map[string]heldAgent{},
		createSem: make(chan struct{}, 4),
		admission: adm,
		recycles:  recycleQueue{sem: make(chan struct{}, recycleWorkers)},
	}
	s.busy = busy.New(busy.Config{Write: s.writeBusy})
	var sandboxDir func(string) string
	if h, ok := boxes.(driver.HostDirs); ok {
		sandboxDir = h.SandboxDir
	}
	s.net, err = netctl.New(netctl.Config{Settings: cfg.Settings, Driver: cfg.Driver, Store: cfg.Store, SandboxDir: sandboxDir,
		ProfileImage: s.images.Ref, EgressDir: cfg.EgressDir, InstanceID: cfg.InstanceID, Logger: cfg.Logger, Now: cfg.Now})
	if err != nil {
		return nil, err
	}
	s.capabilities, err = probe.New(probe.Config{Driver: cfg.Driver, Sandboxer: boxes, Settings: cfg.Settings, Images: s.images, Logger: cfg.Logger, Now: s.now})
	if err != nil {
		return nil, err
	}
	s.initPools()
	return s, nil
}

// Start runs the first capability probe and reconciliation (recovering from
// a previous crash), then starts the background probe and reconcile loops.
func (s *Service) Start(ctx context.Context) error {
	s.started.Store(true)
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	if err := s.startReplicas(ctx, loopCtx); err != nil {
		cancel()
		return err
	}
	// Lease holds of this instance are what its last process left.
	if _, err := s.store.DropLeaseHolds(ctx, s.instance, s.now()); err != nil {
		s.log.Warn("dropping the lease holds an earlier run left (they expire by themselves)", "err", err)
	}
	s.RefreshProbe(ctx)
	s.recoverWorkspaces(ctx)
	if err := s.Reconcile(ctx, true); err != nil {
		s.log.Error("startup reconcile failed", "err", err)
	}
	if err := s.adoptCapacity(ctx); err != nil {
		s.log.Error("accounting for the host capacity of existing sandboxes failed", "err", err)
	}
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.capabilities.Run(loopCtx, s.cfg.Intervals.Probe) }()
	if s.net.Start(ctx) {
		s.loop(loopCtx, s.cfg.Network.Gateway.HealthInterval, s.net.Check)
		s.loop(loopCtx, s.cfg.Network.Gateway.EventsInterval, s.net.PullEvents)
	}
	s.loop(loopCtx, s.cfg.Intervals.Reconcile, func(ctx context.Context) {
		if err := s.Reconcile(ctx, false); err != nil {
			s.log.Warn("reconcile failed", "err", err)
		}
	})
	s.startPools(loopCtx)
	return nil
}

func (s *Service) loop(ctx context.Context, every time.Duration, fn func(context.Context)) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				fn(ctx)
			}
		}
	}()
}

// Close stops the background loops and closes agent connections. Sandboxes
// keep running; a restarted service adopts them.
func (s *Service) Close() {
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
	s.busy.Wait()
	s.net.Close()
	s.agentsMu.Lock()
	defer s.agentsMu.Unlock()
	for id, c := range s.agents {
		c.Close()
		delete(s.agents, id)
	}
}

// InstanceID loads or creates the persistent instance id in dataDir, so a
// restarted service recognises the containers it made.
func InstanceID(dataDir string) (string, error) {
	p := filepath.Join(dataDir, "instance_id")
	if b, err := os.ReadFile(p); err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	id := "gs-" + hex.EncodeToString(b[:])
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return "", err
	}
	return id, os.WriteFile(p, []byte(id+"\n"), 0o644)
}

// agent returns the (cached) agent client of a sandbox.
func (s *Service) agent(id string) *agentclient.Client {
	s.agentsMu.Lock()
	defer s.agentsMu.Unlock()
	c, ok := s.agents[id]
	if !ok {
		// Named by the sandbox, not by its address (a socket path below
		// the data dir, a Pod's address): the name reaches API answers.
		c = agentclient.NewNamed(agentclient.Dialer(s.boxes.AgentDialer(id)), "the agent of sandbox "+id)
		s.agents[id] = c
	}
	return c
}

func (s *Service) dropAgent(id string) {
	s.agentsMu.Lock()
	c, ok := s.agents[id]
	delete(s.agents, id)
	s.agentsMu.Unlock()
	if ok {
		c.Close()
	}
}

// cleanupCtx returns a context for rollback and cleanup work that must run
// even when the caller's context is already canceled.
func cleanupCtx(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}
