package servers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/mcp"
	"genesis.dev/sandbox/internal/policy"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/trace"
)

// Instance states.
const (
	StateStarting   = "starting"
	StateReady      = "ready"
	StateRestarting = "restarting"
	StateFailed     = "failed"
	StateStopped    = "stopped"
)

// maxRestarts is how often a server that ended is started again (not
// after a protocol breach) before its instance fails.
const maxRestarts = 3

// callRing is how many call records an instance keeps for GET calls.
const callRing = 1000

// leases is what the manager needs of control.
type leases interface {
	AcquireLease(ctx context.Context, in control.AcquireLeaseInput) (*control.LeaseOutput, error)
	GetLease(ctx context.Context, tenant, id string) (*sandbox.Lease, error)
	RenewLease(ctx context.Context, tenant, id string, ttl *int64) (*sandbox.Lease, error)
	ReleaseLease(ctx context.Context, tenant, id string) error
	GetNetwork(ctx context.Context, tenant, id string) (*sandbox.Network, error)
}

// jobRunner is what the manager needs of jobs. The reservation of a
// server's sandbox (control.AttachOptions.Reservation) goes with each call
// that reaches into it.
type jobRunner interface {
	StartServer(ctx context.Context, in jobs.ExecInput) (*sandbox.Job, error)
	ServerOutputLimit() int64
	OpenStdinAs(ctx context.Context, tenant, reservation, jobID string) (io.WriteCloser, error)
	CopyOutput(ctx context.Context, tenant, jobID string, stdout io.Writer) error
	CancelJobAs(ctx context.Context, tenant, reservation, jobID string) (*sandbox.Job, error)
	GetJob(ctx context.Context, tenant, jobID string) (*sandbox.Job, error)
	// Wait waits for a job's final state (jobs.Manager.Wait).
	Wait(ctx context.Context, tenant, jobID string) (*sandbox.Job, error)
}

// readiness waits until a port inside a sandbox answers, where job jobID
// is to listen (its end fails the wait with code jobs.CodeJobEnded).
type readiness interface {
	WaitListening(ctx context.Context, sandboxID, jobID string, port int) error
}

// Config configures a Manager.
type Config struct {
	Leases leases
	Jobs   jobRunner
	// Catalog is the servers a request may name (operator entries).
	Catalog []Entry
	// TenantCatalog, if set, keeps the tenants' own entries.
	TenantCatalog CatalogStore
	// Ceiling is the highest risk an instance may have (default high).
	Ceiling sandbox.RiskLevel
	// TenantCeiling, if set, lowers Ceiling for a tenant that set its own.
	TenantCeiling policy.TenantCeiling
	// LeaseTTL is the length of an instance's own lease, renewed while it
	// runs (default 10 minutes).
	LeaseTTL time.Duration
	// AllowedOrigins are the browser origins an endpoint accepts.
	AllowedOrigins []string
	// Audit, if set, records every call of every instance.
	Audit func(tenant, instance string, rec mcp.CallRecord)
	// Trace, if set, records each tool call (tool, decision, outcome; not
	// its arguments) in the trace of the instance's sandbox.
	Trace trace.Recorder
	// Gate, if set, is asked before each allowed tool call on an instance
	// (pause and abort of the instance's sandbox's agent).
	Gate trace.Gate
	// Ready, if set, waits for a server of transport http to listen
	// (jobs.Services.WaitListening); without it the port must answer at
	// once.
	Ready readiness
	// DialPort, if set, connects to a TCP port inside a sandbox (the port
	// primitive) for the workload of reservation ("" for a sandbox of the
	// tenant's), for servers of transport http; without it they are
	// refused.
	DialPort func(ctx context.Context, tenant, sandboxID, reservation string, port int) (net.Conn, error)
	// NetworkEvents, if set, pages a sandbox's egress events (control's
	// ListNetworkEvents); the call log joins them to each call's window.
	NetworkEvents func(ctx context.Context, tenant, sandboxID string, cursor int64, limit int) ([]sandbox.NetworkEvent, int64, error)
	// Secret reads an operator secret by name (network.secrets), for a
	// catalog entry's env_secrets; nil refuses such entries. A server that
	// holds such a secret runs in a sandbox of its own reserved to it
	// (control.AttachOptions.Reservation): no tenant reaches inside it.
	Secret func(name string) (string, error)
	Logger *slog.Logger
	Now    func() time.Time
}

// Manager runs the instances.
type Manager struct {
	cfg  Config
	log  *slog.Logger
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu    sync.Mutex
	insts map[string]*instance

	audits chan auditItem
}

type auditItem struct {
	tenant, instance string
	rec              mcp.CallRecord
}

// New makes a manager; Close stops its instances.
func New(cfg Config) (*Manager, error) {
	if cfg.Leases == nil || cfg.Jobs == nil {
		return nil, fmt.Errorf("mcp servers: nil leases or jobs: %w", errdefs.ErrInvalidArgument)
	}
	if cfg.Ceiling == "" {
		cfg.Ceiling = sandbox.RiskHigh
	}
	if cfg.Ceiling.Rank() < 0 {
		return nil, errdefs.Invalid("mcp servers: unknown ceiling %q", cfg.Ceiling)
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 10 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Catalog = slices.Clone(cfg.Catalog)
	for i, e := range cfg.Catalog {
		if err := e.Validate(); err != nil {
			return nil, fmt.Errorf("mcp catalog entry %q: %w", e.Name, err)
		}
		cfg.Catalog[i].Owner = OwnerOperator
	}
	ctx, stop := context.WithCancel(context.Background())
	m := &Manager{cfg: cfg, log: cfg.Logger, ctx: ctx, stop: stop, insts: map[string]*instance{}, audits: make(chan auditItem, 4096)}
	m.wg.Add(2)
	go m.sweep()
	go m.auditor()
	return m, nil
}

// Drain stops every instance as Close does, when the service starts to
// stop: an instance's own lease is this process's, not a holder's, and the
// drain of the sandboxes would wait its whole timeout for it.
func (m *Manager) Drain(context.Context) { m.Close() }

// Close stops every instance and waits for them.
func (m *Manager) Close() {
	m.stop()
	m.mu.Lock()
	all := make([]*instance, 0, len(m.insts))
	for _, in := range m.insts {
		all = append(all, in)
	}
	m.mu.Unlock()
	for _, in := range all {
		m.halt(in, StateStopped, "the service is stopping")
	}
	m.wg.Wait()
}

// Catalog lists the catalog.
func (m *Manager) Catalog() []Entry { return slices.Clone(m.cfg.Catalog) }

func (m *Manager) get(tenant, id string) (*instance, error) {
	m.mu.Lock()
	in := m.insts[id]
	m.mu.Unlock()
	if in == nil || in.view.Tenant != tenant {
		return nil, errdefs.WithCode("mcp_server_not_found", fmt.Errorf("no MCP server %s: %w", id, errdefs.ErrNotFound))
	}
	return in, nil
}

// Get returns an instance of tenant.
func (m *Manager) Get(tenant, id string) (*Instance, error) {
	in, err := m.get(tenant, id)
	if err != nil {
		return nil, err
	}
	v := in.snapshot()
	return &v, nil
}

// List lists tenant's instances, newest first.
func (m *Manager) List(tenant string) []Instance {
	m.mu.Lock()
	var out []Instance
	for _, in := range m.insts {
		if in.view.Tenant == tenant {
			out = append(out, in.snapshot())
		}
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b Instance) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return out
}

// Delete stops an instance and forgets it. Deleting one that is gone
// succeeds.
func (m *Manager) Delete(tenant, id string) error {
	in, err := m.get(tenant, id)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil
	}
	m.mu.Lock()
	delete(m.insts, id)
	m.mu.Unlock()
	m.halt(in, StateStopped, "")
	<-in.done
	return nil
}

// sweep stops instances idle past their idle TTL.
func (m *Manager) sweep() {
	defer m.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
		now := m.cfg.Now()
		var idle []*instance
		m.mu.Lock()
		for _, in := range m.insts {
			in.mu.Lock()
			if in.view.IdleTTLSeconds > 0 && in.view.State == StateReady &&
				now.Sub(in.view.LastUsedAt) > time.Duration(in.view.IdleTTLSeconds)*time.Second {
				idle = append(idle, in)
			}
			in.mu.Unlock()
		}
		m.mu.Unlock()
		for _, in := range idle {
			m.halt(in, StateStopped, "idle")
		}
	}
}

// quiet passes on the SDK's warnings and errors only (it logs every
// session's connect and disconnect at info).
type quiet struct{ slog.Handler }

func (q quiet) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && q.Handler.Enabled(ctx, l)
}

func (q quiet) WithAttrs(a []slog.Attr) slog.Handler { return quiet{q.Handler.WithAttrs(a)} }

func (q quiet) WithGroup(g string) slog.Handler { return quiet{q.Handler.WithGroup(g)} }

// Name names the manager as a control hook.
func (m *Manager) Name() string { return "mcp-servers" }

// SandboxEnding stops the instances that run in a sandbox that leaves its
// holder or stops (a lease released or expired, a sandbox destroyed): they
// end with it, stopped, not failed and never restarted elsewhere. The stop
// runs apart from the lifecycle call that tells it.
func (m *Manager) SandboxEnding(_ context.Context, sandboxID, reason string) {
	m.mu.Lock()
	var ending []*instance
	for _, in := range m.insts {
		in.mu.Lock()
		if in.view.SandboxID == sandboxID && in.view.State != StateStopped && in.view.State != StateFailed {
			in.view.State, in.view.LastError = StateStopped, "its sandbox ended: "+reason
			ending = append(ending, in)
		}
		in.mu.Unlock()
	}
	m.mu.Unlock()
	for _, in := range ending {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.stopEnded(in)
		}()
	}
}

// stopEnded ends an instance whose sandbox has ended (state already set).
func (m *Manager) stopEnded(in *instance) {
	in.mu.Lock()
	p := in.proxy
	in.proxy, in.handler = nil, nil
	in.mu.Unlock()
	in.cancel()
	if p != nil {
		p.Close()
	}
	if in.view.OwnLease {
		m.release(in.view.Tenant, in.view.LeaseID)
	}
}
