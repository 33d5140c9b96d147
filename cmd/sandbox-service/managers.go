package main

import (
	"log/slog"
	"path/filepath"

	"genesis.dev/sandbox/internal/artifacts"
	"genesis.dev/sandbox/internal/browser"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/desktop"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/files"
	"genesis.dev/sandbox/internal/interactive"
	"genesis.dev/sandbox/internal/joblog"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/mcp/servers"
	"genesis.dev/sandbox/internal/ports"
	"genesis.dev/sandbox/internal/skills"
	"genesis.dev/sandbox/internal/snapshots"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/trace"
)

// managers are the workload packages: they work inside running sandboxes
// through ctl.Attach and follow the sandboxes' lives through the hooks
// they register with ctl.
type managers struct {
	jobs  *jobs.Manager
	arts  *artifacts.Keeper
	files *files.Gateway
	terms *interactive.Terminals
	ports *ports.Proxy
	svcs  *jobs.Services
	mcp   *servers.Manager
	sk    *skills.Manager
	// browser serves the browser routes of browser profiles.
	browser *browser.Manager
	// desktop serves the computer-use routes of desktop profiles.
	desktop *desktop.Manager
	// trace keeps the operation trace of each sandbox.
	trace *trace.Store
	// snapshots keeps sandboxes' state beyond their containers.
	snapshots *snapshots.Manager
}

// newManagers builds the managers over ctl and registers their hooks; call
// it before ctl.Start.
func newManagers(ctl *control.Service, st store.Store, drv driver.Driver, cfg *config.Config, agentDir string, images browser.Images, obs jobs.Observer, log *slog.Logger) (*managers, error) {
	blobs, err := artifacts.OpenBlobs(filepath.Join(cfg.DataDir, "artifacts"))
	if err != nil {
		return nil, err
	}
	arts, err := artifacts.NewKeeper(artifacts.KeeperConfig{Blobs: blobs, Store: st, Sandboxes: ctl,
		Limits: cfg.Limits.Artifacts, Retention: cfg.Intervals.ArtifactRetention, Logger: log})
	if err != nil {
		return nil, err
	}
	tr, err := trace.Open(trace.Config{Dir: filepath.Join(cfg.DataDir, "traces"), Retention: cfg.Intervals.LogRetention})
	if err != nil {
		return nil, err
	}
	// The producers record into the trace, and ask it before agent
	// actions, unless trace.record is off.
	var rec trace.Recorder
	var gate trace.Gate
	if cfg.Trace.Record {
		rec, gate = tr, tr
	}
	logs, err := joblog.Open(filepath.Join(cfg.DataDir, "jobs"))
	if err != nil {
		return nil, err
	}
	if err := jobs.InstallKernel(agentDir); err != nil {
		return nil, err
	}
	jm, err := jobs.New(jobs.Config{Sandboxes: ctl, Store: st, Logs: logs, Artifacts: arts, Limits: cfg.Limits,
		LogRetention: cfg.Intervals.LogRetention, Metrics: obs, Trace: rec, Gate: gate, Logger: log})
	if err != nil {
		return nil, err
	}
	fs, err := files.New(files.Config{Sandboxes: ctl, Limits: cfg.Limits.Files, Logger: log})
	if err != nil {
		return nil, err
	}
	terms, err := interactive.New(interactive.Config{Sandboxes: ctl, Logger: log})
	if err != nil {
		return nil, err
	}
	pp, err := newPortsProxy(ctl, cfg, jm.PortHint, log)
	if err != nil {
		return nil, err
	}
	// Order matters where hooks share a moment: jobs cancel their jobs
	// before the keeper sweeps and terminals and port connections close.
	svcs := jobs.NewServices(jm)
	ctl.AddHook(jm)
	ctl.AddHook(svcs) // after the jobs: their cancel ends the services' jobs
	ctl.AddHook(arts)
	ctl.AddHook(terms)
	ctl.AddHook(pp)
	bm, err := browser.New(browser.Config{Sandboxes: browser.FromControl(ctl), Ports: pp, Images: images, Artifacts: arts, ArtifactSource: arts,
		Services: svcs, Trace: rec, Gate: gate, Screenshots: cfg.Trace.Screenshots, Logger: log})
	if err != nil {
		return nil, err
	}
	ctl.AddHook(bm) // after the port proxy: its connections close first
	dm, err := desktop.New(desktop.Config{Sandboxes: desktop.FromControl(ctl), Trace: rec, Gate: gate, Artifacts: arts,
		Screenshots: cfg.Trace.Screenshots, Logger: log})
	if err != nil {
		return nil, err
	}
	ctl.AddHook(dm)
	ms, err := servers.New(servers.Config{Leases: ctl, Jobs: jm, Catalog: mcpCatalog(cfg.MCP), TenantCatalog: mcpCatalogStore{st}, Ceiling: cfg.MCP.MaxRiskLevel, TenantCeiling: ctl.ToolRiskCeiling,
		AllowedOrigins: cfg.MCP.AllowedOrigins, Audit: mcpAudit(ctl, log), Secret: mcpSecret(cfg.Network), Logger: log,
		NetworkEvents: mcpNetworkEvents(ctl), DialPort: mcpDialPort(ctl), Trace: rec, Gate: gate})
	if err != nil {
		return nil, err
	}
	ctl.AddHook(ms) // an instance ends with its sandbox
	sk, err := skills.New(skills.Config{Store: st, Sandboxes: ctl, Jobs: jm, Files: fs, Artifacts: arts,
		Dir: filepath.Join(cfg.DataDir, "skills"), Profile: cfg.Skills.Profile, Ceiling: cfg.Skills.MaxRiskLevel, TenantCeiling: ctl.ToolRiskCeiling,
		AllowNetwork: cfg.Skills.AllowNetwork, Limits: skillLimits(cfg.Skills), Audit: skillsAudit(ctl, log), Logger: log})
	if err != nil {
		return nil, err
	}
	ctl.AddHook(tr) // a trace is kept for the log retention after its sandbox ends
	snapDir := cfg.Snapshots.Dir
	if !filepath.IsAbs(snapDir) {
		snapDir = filepath.Join(cfg.DataDir, snapDir)
	}
	snaps, err := snapshots.New(snapshots.Config{Lifecycle: ctl, Driver: drv, Store: st, Dir: snapDir, Retention: cfg.Snapshots.Retention,
		MaxPerTenant: cfg.Snapshots.MaxPerTenant, MaxBytesPerTenant: cfg.Snapshots.MaxBytesPerTenant, MaxFork: cfg.Snapshots.MaxFork, Sessions: jm, Trace: rec, Logger: log})
	if err != nil {
		return nil, err
	}
	ctl.AddHook(snaps) // last: a sandbox's own snapshots go once everything else let go of it; it wakes hibernated sandboxes
	return &managers{trace: tr, jobs: jm, arts: arts, files: fs, terms: terms, ports: pp, svcs: svcs, mcp: ms, sk: sk, browser: bm, desktop: dm, snapshots: snaps}, nil
}

// newPortsProxy builds the port proxy with the preview-link key of the
// data dir (made on first start).
func newPortsProxy(ctl *control.Service, cfg *config.Config, hint func(string, int) string, log *slog.Logger) (*ports.Proxy, error) {
	keyFile := cfg.Ports.LinkKeyFile
	if !filepath.IsAbs(keyFile) {
		keyFile = filepath.Join(cfg.DataDir, keyFile)
	}
	key, err := ports.LoadOrCreateKey(keyFile)
	if err != nil {
		return nil, err
	}
	signer, err := ports.NewSigner(key)
	if err != nil {
		return nil, err
	}
	return ports.New(ports.Config{
		Sandboxes: ports.FromControl(ctl), Signer: signer, KeyLive: ctl.KeyLive, MaxLinkTTL: cfg.Ports.MaxLinkTTL, DialTimeout: cfg.Ports.DialTimeout, PortHint: hint, Logger: log,
	})
}
