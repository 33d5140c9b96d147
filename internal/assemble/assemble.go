package assemble

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/artifacts"
	"genesis.dev/sandbox/internal/browser"
	"genesis.dev/sandbox/internal/changes"
	"genesis.dev/sandbox/internal/compat/e2b"
	"genesis.dev/sandbox/internal/compat/opensandbox"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/desktop"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/files"
	"genesis.dev/sandbox/internal/interactive"
	"genesis.dev/sandbox/internal/joblog"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/mcp/servers"
	"genesis.dev/sandbox/internal/mcpserve"
	"genesis.dev/sandbox/internal/ports"
	"genesis.dev/sandbox/internal/skills"
	"genesis.dev/sandbox/internal/snapshots"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/tenancy"
	"genesis.dev/sandbox/internal/trace"
	"genesis.dev/sandbox/internal/volumes"
)

// Config is what the service is built over: its settings, and what the
// process opened or installed before it (the store, the driver, the agent
// and egress binaries' directories).
type Config struct {
	Settings *config.Config
	Store    store.Store
	Driver   driver.Driver
	// Sandboxer places whole sandboxes; nil: this host's (driver/local).
	Sandboxer driver.Sandboxer
	// Images reads the labels of profile images (a browser profile's
	// settings); nil: none are read.
	Images browser.Images
	// AgentDir holds the genesis-agent binary every sandbox mounts.
	AgentDir string
	// EgressDir holds the genesis-egress binary of the egress gateway;
	// empty: networked sandbox modes are unavailable.
	EgressDir string
	// InstanceID names this service instance in container labels.
	InstanceID string
	// ConfigKeys are the API keys given in the config or on the command
	// line, as tenant.ConfigKeyIDs gives them (key id → tenant).
	ConfigKeys map[string]string
	// Metrics is told how long leases and execs take; nil: nobody.
	Metrics Metrics
	Logger  *slog.Logger
	// Now is the service's clock; nil means time.Now.
	Now func() time.Time
	// ImageBuilds are the service's background image builds; nil: none
	// (control.Config.ImageBuilds).
	ImageBuilds control.ImageBuilds

	// TuneControl, if set, edits the control service's config before it
	// is built (tests wrap its store or driver there).
	TuneControl func(*control.Config)
}

// Metrics observes what the control service and the jobs time (the
// service's Prometheus metrics).
type Metrics interface {
	control.Observer
	jobs.Observer
}

// Stack is the built service: its parts, for an edge to serve, and their
// order, for Start, Drain and Close.
type Stack struct {
	Control   *control.Service
	Tenancy   *tenancy.Service // tenants, their API keys and the audit log
	Artifacts *artifacts.Keeper
	// Trace keeps each sandbox's operation trace.
	Trace     *trace.Store
	Jobs      *jobs.Manager
	Services  *jobs.Services
	Files     *files.Gateway
	Terminals *interactive.Terminals
	Ports     *ports.Proxy
	// Previews places each preview on an origin of its own
	// (ports.preview_url).
	Previews *ports.Origins
	// Browser serves the browser profiles, Desktop the desktop
	// (computer-use) ones.
	Browser *browser.Manager
	Desktop *desktop.Manager
	MCP     *servers.Manager
	Skills  *skills.Manager
	// MCPServe serves the service's own sandbox tools as an MCP server;
	// it ends its sessions' sandboxes when it closes.
	MCPServe *mcpserve.Server
	// Snapshots pauses, hibernates, snapshots, forks and rolls back
	// sandboxes.
	Snapshots *snapshots.Manager
	// Changes diffs and patches sandboxes' workspaces.
	Changes *changes.Service
	// Volumes are the tenants' named volumes; nil where sandboxes run on
	// other hosts whose sandboxer provisions none.
	Volumes *volumes.Manager
	// E2B and OpenSandbox are the compatibility adapters, nil when their
	// settings disable them. An edge serves them after binding them to
	// itself (their Bind).
	E2B         *e2b.Adapter
	OpenSandbox *opensandbox.Adapter

	settings *config.Config
	log      *slog.Logger
	// parts are the parts in build order: their hooks are registered in
	// it, Drain and Close run in reverse.
	parts []part

	closeOnce sync.Once
	closeErr  error
}

// part is one component of the stack.
type part struct {
	name string
	// hook is registered with the control service (in list order).
	hook control.Hook
	// drain ends the part's own work in the sandboxes when the service
	// starts to stop; close releases the part at the end. Both run in
	// reverse list order.
	drain func(context.Context)
	close func() error
}

// jobLogSpares is how many empty job log files the job log store keeps
// ready (joblog.Store.KeepSpares): more than the execs that start at once
// between two refills.
const jobLogSpares = 32

// drainer is a part with work of its own in the sandboxes (recordings, MCP
// servers' own leases) that must end before they are drained or handed
// over.
type drainer interface{ Drain(ctx context.Context) }

// add appends a built component to the list, with its control hooks, its
// Drain and its Close as it has them.
func (s *Stack) add(name string, v any) {
	p := part{name: name}
	if h, ok := v.(control.Hook); ok {
		p.hook = h
	}
	if d, ok := v.(drainer); ok {
		p.drain = d.Drain
	}
	switch c := v.(type) {
	case interface{ Close() error }:
		p.close = c.Close
	case interface{ Close() }:
		p.close = func() error { c.Close(); return nil }
	}
	s.parts = append(s.parts, p)
}

// Build builds the control service and every part over it, in one list,
// and registers their control hooks in its order. It starts nothing (see
// Start). When a part fails to build, the parts built before it are
// closed.
func Build(ctx context.Context, c Config) (_ *Stack, err error) {
	if c.Settings == nil || c.Store == nil || c.Driver == nil {
		return nil, errdefs.Invalid("assemble: settings, store and driver are required")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	set, log := c.Settings, c.Logger
	s := &Stack{settings: set, log: log}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()

	// Named volumes live on this host's data dir, built for sandboxes on
	// this host, or are kept by a sandboxer that provisions them (a
	// cluster's claims); below control, which mounts them.
	prov, _ := c.Sandboxer.(driver.VolumeProvisioner)
	if c.Sandboxer == nil || prov != nil {
		volDir := set.Volumes.Dir
		if !filepath.IsAbs(volDir) {
			if volDir, err = filepath.Abs(filepath.Join(set.DataDir, cmp.Or(volDir, "volumes"))); err != nil {
				return nil, err
			}
		}
		if s.Volumes, err = volumes.New(volumes.Config{Store: c.Store, Dir: volDir, MaxSizeMB: set.Volumes.MaxSizeMB,
			MaxMBPerTenant: set.Volumes.MaxMBPerTenant, MaxPerTenant: set.Volumes.MaxPerTenant, Roots: set.Volumes.Roots,
			// The tenant's quota lock is control's, built next (below
			// volumes, which it mounts); nothing calls this before Start.
			LockTenant: func(ctx context.Context, tenant string) (func(), error) { return s.Control.LockTenant(ctx, tenant) },
			UID:        volumes.DefaultUID, GID: volumes.DefaultGID, Provisioner: prov, Now: c.Now, Logger: log}); err != nil {
			return nil, err
		}
	}
	// The lifecycle core everything else works over.
	cc := control.Config{Settings: set, Store: c.Store, Driver: c.Driver, Sandboxer: c.Sandboxer, AgentDir: c.AgentDir, EgressDir: c.EgressDir,
		InstanceID: c.InstanceID, Logger: log, Now: c.Now, Metrics: c.Metrics, ImageBuilds: c.ImageBuilds}
	if s.Volumes != nil {
		cc.Volumes = s.Volumes
	}
	if c.TuneControl != nil {
		c.TuneControl(&cc)
	}
	if s.Control, err = control.New(cc); err != nil {
		return nil, err
	}
	s.add("control", s.Control)
	// Tenants, their keys and the audit log, over the store and what
	// control knows of tenants' sandboxes.
	if s.Tenancy, err = tenancy.New(tenancy.Config{Settings: set, Store: c.Store, Sandboxes: s.Control, ConfigKeys: c.ConfigKeys,
		Logger: log, Now: c.Now}); err != nil {
		return nil, err
	}
	s.add("tenancy", s.Tenancy)

	blobs, err := artifacts.OpenBlobs(filepath.Join(set.DataDir, "artifacts"))
	if err != nil {
		return nil, err
	}
	if s.Artifacts, err = artifacts.NewKeeper(artifacts.KeeperConfig{Blobs: blobs, Store: c.Store, Sandboxes: s.Control,
		Limits: set.Limits.Artifacts, Retention: set.Intervals.ArtifactRetention, Now: c.Now, Logger: log}); err != nil {
		return nil, err
	}
	s.add("artifacts", s.Artifacts)

	// The trace is built before the parts that record into it and closed
	// after them; its hook, which ends a sandbox's trace, is the last of
	// the list ("trace ending" below), after every producer's.
	if s.Trace, err = trace.Open(trace.Config{Dir: filepath.Join(set.DataDir, "traces"), Retention: set.Intervals.LogRetention, Now: c.Now}); err != nil {
		return nil, err
	}
	s.parts = append(s.parts, part{name: "trace", close: s.Trace.Close})
	// The producers record into the trace, and ask it before agent
	// actions, unless trace.record is off.
	var rec trace.Recorder
	var gate trace.Gate
	if set.Trace.Record {
		rec, gate = s.Trace, s.Trace
	}

	logs, err := joblog.Open(filepath.Join(set.DataDir, "jobs"))
	if err != nil {
		return nil, err
	}
	// Spare files for new job logs: a synchronous exec renames one into
	// place instead of creating its log on the exec's path. Closed after
	// the jobs, which write the logs.
	if err := logs.KeepSpares(jobLogSpares); err != nil {
		return nil, err
	}
	s.add("job logs", logs)
	if err := jobs.InstallKernel(c.AgentDir); err != nil {
		return nil, err
	}
	if s.Jobs, err = jobs.New(jobs.Config{Sandboxes: s.Control, Store: c.Store, Logs: logs, Artifacts: s.Artifacts, Limits: set.Limits,
		LogRetention: set.Intervals.LogRetention, Metrics: c.Metrics, Trace: rec, Gate: gate, Now: c.Now, Logger: log}); err != nil {
		return nil, err
	}
	// The jobs close before the control service: their followers hold
	// busy attachments.
	s.add("jobs", s.Jobs)
	s.Services = jobs.NewServices(s.Jobs)
	// After the jobs: their cancel ends the services' jobs. Closed before
	// them: no service restarts while they close.
	s.add("services", s.Services)

	if s.Files, err = files.New(files.Config{Sandboxes: s.Control, Limits: set.Limits.Files, Logger: log}); err != nil {
		return nil, err
	}
	s.add("files", s.Files)
	if s.Terminals, err = interactive.New(interactive.Config{Sandboxes: s.Control, Logger: log}); err != nil {
		return nil, err
	}
	s.add("terminals", s.Terminals)
	if s.Ports, err = portProxy(s.Control, s.Tenancy.KeyLive, set, s.Jobs.PortHint, c.Now, log); err != nil {
		return nil, err
	}
	s.add("ports", s.Ports)
	if s.Previews, err = ports.ParseOrigins(set.PreviewTemplate()); err != nil {
		return nil, fmt.Errorf("ports.preview_url: %w", err)
	}

	if s.Browser, err = browser.New(browser.Config{Sandboxes: browser.FromControl(s.Control, s.Jobs), Ports: s.Ports, Images: c.Images,
		Artifacts: s.Artifacts, ArtifactSource: s.Artifacts, Services: s.Services, Ready: s.Services, Trace: rec, Gate: gate, Screenshots: set.Trace.Screenshots, Logger: log}); err != nil {
		return nil, err
	}
	// After the port proxy: its CDP and Playwright connections close
	// first when a sandbox ends.
	s.add("browser", s.Browser)
	if s.Desktop, err = desktop.New(desktop.Config{Sandboxes: desktop.FromControl(s.Control, s.Jobs), Trace: rec, Gate: gate, Artifacts: s.Artifacts,
		Screenshots: set.Trace.Screenshots, Ready: s.Services, Logger: log}); err != nil {
		return nil, err
	}
	s.add("desktop", s.Desktop)
	if s.MCP, err = servers.New(servers.Config{Leases: s.Control, Jobs: s.Jobs, Catalog: mcpCatalog(set.MCP), TenantCatalog: mcpCatalogStore{c.Store},
		Ceiling: set.MCP.MaxRiskLevel, TenantCeiling: s.Tenancy.ToolRiskCeiling, AllowedOrigins: set.MCP.AllowedOrigins, Audit: mcpAudit(s.Tenancy, log),
		Secret: operatorSecret(set.Network), NetworkEvents: mcpNetworkEvents(s.Control), DialPort: mcpDialPort(s.Control), Ready: s.Services, Trace: rec, Gate: gate,
		Now: c.Now, Logger: log}); err != nil {
		return nil, err
	}
	// An instance ends with its sandbox; at shutdown the instances end
	// (Drain) before the sandboxes are drained: their leases are this
	// process's, not a holder's.
	s.add("mcp-servers", s.MCP)
	if s.Skills, err = skills.New(skills.Config{Store: c.Store, Sandboxes: s.Control, Jobs: s.Jobs, Files: s.Files, Artifacts: s.Artifacts,
		Dir: filepath.Join(set.DataDir, "skills"), Profile: set.Skills.Profile, Ceiling: set.Skills.MaxRiskLevel, TenantCeiling: s.Tenancy.ToolRiskCeiling,
		AllowNetwork: set.Skills.AllowNetwork, Limits: skillLimits(set.Skills), Audit: skillsAudit(s.Tenancy, log), Now: c.Now, Logger: log}); err != nil {
		return nil, err
	}
	s.add("skills", s.Skills)
	// Snapshots, after the parts whose state a snapshot holds: its hook
	// removes a sandbox's own snapshots once they let go of it, and it
	// closes (idle hibernations under way finish) before them.
	snapDir := set.Snapshots.Dir
	if !filepath.IsAbs(snapDir) {
		snapDir = filepath.Join(set.DataDir, snapDir)
	}
	if s.Snapshots, err = snapshots.New(snapshots.Config{Lifecycle: s.Control, Driver: c.Driver, Store: c.Store, Dir: snapDir, Instance: c.InstanceID,
		Retention: set.Snapshots.Retention, MaxPerTenant: set.Snapshots.MaxPerTenant, MaxBytesPerTenant: set.Snapshots.MaxBytesPerTenant,
		MaxBytesPerSnapshot: set.Snapshots.MaxBytesPerSnapshot, MaxFork: set.Snapshots.MaxFork, Sessions: s.Jobs, Trace: rec, Now: c.Now, Logger: log}); err != nil {
		return nil, err
	}
	s.add("snapshots", s.Snapshots)
	if s.Volumes != nil {
		s.add("volumes", s.Volumes) // its Sweep releases the holds of ended sandboxes
	}
	if s.Changes, err = changes.New(changes.Config{Files: s.Files, Sandboxes: s.Control, Snapshots: s.Snapshots, Trace: rec, Logger: log}); err != nil {
		return nil, err
	}
	// The service's own MCP server calls control, jobs, files, the browser,
	// the desktop and the snapshots as the HTTP handlers do; its sessions end (with their
	// sandboxes) at Drain, while the control service still serves.
	if s.MCPServe, err = mcpserve.New(mcpserve.Config{Sandboxes: s.Control, Jobs: s.Jobs, Files: s.Files, Browser: s.Browser, Desktop: s.Desktop, Snapshots: s.Snapshots, Audit: mcpServeAudit(s.Tenancy, log),
		Now: c.Now, Logger: log}); err != nil {
		return nil, err
	}
	s.add("mcp-serve", s.MCPServe)

	if err := s.buildAdapters(set, log); err != nil {
		return nil, err
	}
	// Each adapter forgets the processes and code contexts of a sandbox
	// that ended; the E2B adapter pauses one created with onTimeout
	// "pause" at its timeout, and closes (auto-pauses under way finish)
	// before the snapshots.
	if s.E2B != nil {
		s.add("e2b", s.E2B)
	}
	if s.OpenSandbox != nil {
		s.add("opensandbox", s.OpenSandbox)
	}

	// A trace is kept for the log retention after its sandbox ends.
	s.parts = append(s.parts, part{name: "trace ending", hook: s.Trace})

	for _, p := range s.parts {
		if p.hook != nil {
			s.Control.AddHook(p.hook)
		}
	}
	return s, nil
}

// Start writes the config's tenants to the store (Tenancy.Start), then
// starts the control service: its first reconcile and the hooks' Recover,
// then its loops (reconcile, probe, warm pools). Call it once the edge is
// built and listens.
func (s *Stack) Start(ctx context.Context) error {
	if err := s.Tenancy.Start(ctx); err != nil {
		return err
	}
	return s.Control.Start(ctx)
}

// Drain is the first half of a shutdown, while the edge still serves:
// every part with work of its own in the sandboxes ends it, in reverse
// list order (the MCP servers give back their own leases, the recordings
// keep their last segment); then the control service either hands this
// instance's sandboxes over to the other replicas (Service.HandsOver) or
// drains them (no new sandboxes or leases, the active leases given
// intervals.drain_timeout, then everything of this instance destroyed).
// Close follows once the edge has stopped.
func (s *Stack) Drain(ctx context.Context) error {
	for i := len(s.parts) - 1; i >= 0; i-- {
		if d := s.parts[i].drain; d != nil {
			d(ctx)
		}
	}
	if s.Control.HandsOver() {
		s.log.Info("handing this instance's sandboxes over to the other replicas")
		hctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if err := s.Control.StopTaking(hctx); err != nil {
			return fmt.Errorf("waiting for the pool members being made: %w", err)
		}
		return nil
	}
	timeout := s.settings.Intervals.DrainTimeout
	dctx, cancel := context.WithTimeout(ctx, timeout+2*time.Minute)
	defer cancel()
	return s.Control.Drain(dctx, timeout)
}

// Close closes every part that has a Close, in reverse list order, so that
// a part closes before the parts it works over (the job followers before
// the control service, the recorders before the trace), and returns their
// errors joined. Close is idempotent. The sandboxes keep running unless
// Drain destroyed them: a service started on the same store adopts them.
func (s *Stack) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		for i := len(s.parts) - 1; i >= 0; i-- {
			p := s.parts[i]
			if p.close == nil {
				continue
			}
			if err := p.close(); err != nil {
				errs = append(errs, fmt.Errorf("closing %s: %w", p.name, err))
			}
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}
