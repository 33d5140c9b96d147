package servers

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/egress"
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
		return nil, fmt.Errorf("mcp servers: unknown ceiling %q: %w", cfg.Ceiling, errdefs.ErrInvalidArgument)
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

// CreateRequest asks for an instance: a catalog entry or an ad-hoc spec.
type CreateRequest struct {
	Catalog string `json:"catalog,omitempty"`
	Spec    *Spec  `json:"spec,omitempty"`
	// Scope is dedicated (one sandbox per instance; the default).
	Scope string `json:"scope,omitempty"`
	// LeaseID runs the server in a sandbox the tenant already leases
	// (it must be at least as isolated as the decision needs).
	LeaseID string `json:"lease_id,omitempty"`
	// Runtime asks for a runtime at least as strong as the decision's
	// (runsc for a low-risk server, say); a weaker one is refused.
	Runtime sandbox.Runtime `json:"runtime,omitempty"`
	Tools   mcp.Rules       `json:"tools,omitempty"`
	// PinMode is block (the default for medium risk and above) or warn.
	PinMode        mcp.PinMode `json:"pin_mode,omitempty"`
	IdleTTLSeconds int64       `json:"idle_ttl_seconds,omitempty"`
	CallTimeoutMS  int64       `json:"call_timeout_ms,omitempty"`
	CallCeilingMS  int64       `json:"call_ceiling_ms,omitempty"`
	InitTimeoutMS  int64       `json:"init_timeout_ms,omitempty"`
	// ApprovalTTLSeconds is how long a call of a tools.approve tool waits
	// for its decision (default 300; at most the call ceiling).
	ApprovalTTLSeconds int64 `json:"approval_ttl_seconds,omitempty"`
	// CreatedBy is the id of the API key that asks (set by the caller,
	// never read from a body): that key may not approve the instance's
	// calls or changed tools.
	CreatedBy string `json:"-"`
}

// Spec is an ad-hoc server: a command in a profile.
type Spec struct {
	Command []string          `json:"command"`
	Cwd     string            `json:"cwd,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Profile string            `json:"profile,omitempty"`
	// Transport, Port and Path: as in a catalog entry (stdio by default;
	// http with the port the server listens on).
	Transport   string      `json:"transport,omitempty"`
	Port        int         `json:"port,omitempty"`
	Path        string      `json:"path,omitempty"`
	Permissions Permissions `json:"permissions,omitempty"`
}

// Instance is the API view of an instance.
type Instance struct {
	ID        string   `json:"id"`
	Tenant    string   `json:"tenant"`
	Catalog   string   `json:"catalog,omitempty"`
	Command   []string `json:"command"`
	Profile   string   `json:"profile"`
	Scope     string   `json:"scope"`
	Endpoint  string   `json:"endpoint"`
	Token     string   `json:"token,omitempty"` // only in the answer to create
	LeaseID   string   `json:"lease_id"`
	OwnLease  bool     `json:"own_lease"`
	SandboxID string   `json:"sandbox_id"`
	// JobID is the server process's job: its stderr is
	// GET /v1/jobs/{job_id}/logs (resumable).
	JobID    string            `json:"job_id,omitempty"`
	Runtime  sandbox.Runtime   `json:"runtime"`
	Risk     sandbox.RiskLevel `json:"risk"`
	Network  string            `json:"network"`
	Decision Decision          `json:"decision"`
	State    string            `json:"state"`
	Restarts int               `json:"restarts"`
	// OutputRestarts counts the planned restarts of a server whose
	// stdout neared its job's output limit (not failures: they do not
	// count against the restart budget). Its sessions end with it.
	OutputRestarts  int                 `json:"output_restarts,omitempty"`
	LastExitCode    *int                `json:"last_exit_code,omitempty"`
	LastError       string              `json:"last_error,omitempty"`
	Server          *sdk.Implementation `json:"server,omitempty"`
	ProtocolVersion string              `json:"protocol_version,omitempty"`
	Tools           mcp.Rules           `json:"tools"`
	PinMode         mcp.PinMode         `json:"pin_mode"`
	IdleTTLSeconds  int64               `json:"idle_ttl_seconds"`
	CreatedAt       time.Time           `json:"created_at"`
	ReadyAt         *time.Time          `json:"ready_at,omitempty"`
	LastUsedAt      time.Time           `json:"last_used_at"`
	// Secrets are the secrets the server's process holds or reaches, by
	// name: "env:VAR=secret" for env_secrets, "gateway:TOOL" for operator
	// tools (whose credentials stay at the gateway). Never their values.
	Secrets []string `json:"secrets,omitempty"`
	// CreatedBy is the id of the API key that started the instance.
	CreatedBy string `json:"created_by,omitempty"`
}

// instance is one running server.
type instance struct {
	tokenHash [32]byte
	policy    *mcp.Policy
	cfg       mcp.Config // timeouts
	cmd       jobs.ExecInput
	callSpec  callSpec  // scope ephemeral: what each call's sandbox runs
	http      *httpSpec // transport http: where the server listens
	cancel    context.CancelFunc
	done      chan struct{}
	// reservation is what the instance's sandboxes are reserved to
	// (mcp:<id>) when its server holds operator secrets; "" otherwise.
	reservation string

	// rollover is set when the server is stopped because its stdout
	// neared the output limit: the next start is planned, not a failure.
	rollover atomic.Bool

	mu        sync.Mutex
	view      Instance
	stdio     *mcp.Stdio
	proxy     *mcp.Proxy
	handler   http.Handler
	calls     []CallEntry
	seq       int64
	approvals []*Approval
}

// CallEntry is a call record with its place in the instance's log.
type CallEntry struct {
	Seq int64 `json:"seq"`
	mcp.CallRecord
	// Egress are the egress gateway's events of the instance's sandbox in
	// the call's window (from its start to its end), when the sandbox has
	// network. Concurrent calls of one instance share their events. The
	// gateway's events reach the store every few seconds, so those of a
	// call that just ended may come on a later read.
	Egress []sandbox.NetworkEvent `json:"egress,omitempty"`
}

func newToken() (string, [32]byte) {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	tok := "gmcp_" + base64.RawURLEncoding.EncodeToString(b)
	return tok, sha256.Sum256([]byte(tok))
}

func invalid(format string, a ...any) error {
	return fmt.Errorf(format+": %w", append(a, errdefs.ErrInvalidArgument)...)
}

// Create starts an instance and returns it ready (or the reason it could
// not start; nothing is left behind).
func (m *Manager) Create(ctx context.Context, tenant string, req CreateRequest) (*Instance, error) {
	var entry Entry
	switch {
	case req.Catalog != "" && req.Spec != nil:
		return nil, invalid("catalog and spec are mutually exclusive")
	case req.Catalog != "":
		e, err := m.CatalogEntry(ctx, tenant, req.Catalog)
		if err != nil {
			return nil, err
		}
		entry = *e
	case req.Spec != nil:
		entry = Entry{Source: SourceAdHoc, Command: req.Spec.Command, Cwd: req.Spec.Cwd, Env: req.Spec.Env,
			Profile: req.Spec.Profile, Permissions: req.Spec.Permissions, Transport: req.Spec.Transport, Port: req.Spec.Port, Path: req.Spec.Path}
		if err := entry.Validate(); err != nil {
			return nil, err
		}
		if len(entry.Permissions.EnvSecrets) > 0 {
			return nil, errdefs.WithCode("env_secrets_catalog_only", fmt.Errorf(
				"an ad-hoc server cannot take the operator's secrets; only a catalog entry may declare env_secrets: %w", errdefs.ErrPermissionDenied))
		}
	default:
		return nil, invalid("one of catalog and spec is required")
	}
	if req.LeaseID != "" {
		if err := needOwnSandbox(entry); err != nil {
			return nil, err
		}
	}
	switch req.Scope {
	case "", "dedicated":
		req.Scope = "dedicated"
	case "ephemeral":
		if req.LeaseID != "" {
			return nil, invalid("scope ephemeral starts a sandbox of its own for each call; it takes no lease_id")
		}
		if entry.Transport == TransportHTTP {
			return nil, invalid("scope ephemeral runs stdio servers; an http server is dedicated")
		}
	default:
		return nil, invalid("scope must be dedicated, got %q", req.Scope)
	}
	rules := mcp.Rules{Allow: slices.Concat(entry.Tools.Allow, req.Tools.Allow), Deny: slices.Concat(entry.Tools.Deny, req.Tools.Deny),
		Approve: slices.Concat(entry.Tools.Approve, req.Tools.Approve)}
	if len(entry.Tools.Allow) > 0 && len(req.Tools.Allow) > 0 {
		// a request narrows the entry's allow list, never widens it
		rules.Allow = slices.DeleteFunc(slices.Clone(req.Tools.Allow), func(t string) bool {
			ok, _ := entry.Tools.Visible(t)
			return !ok
		})
		if len(rules.Allow) == 0 {
			return nil, invalid("tools.allow names no tool the catalog entry allows")
		}
	}
	if err := rules.Validate(); err != nil {
		return nil, err
	}
	if req.IdleTTLSeconds < 0 || req.CallTimeoutMS < 0 || req.CallCeilingMS < 0 || req.InitTimeoutMS < 0 || req.ApprovalTTLSeconds < 0 {
		return nil, invalid("idle_ttl_seconds, call_timeout_ms, call_ceiling_ms, init_timeout_ms and approval_ttl_seconds must not be negative")
	}
	switch req.PinMode {
	case "", mcp.PinBlock, mcp.PinWarn:
	default:
		return nil, invalid("pin_mode must be block or warn, got %q", req.PinMode)
	}
	ceiling, from, err := m.cfg.TenantCeiling.Ceiling(ctx, tenant, m.cfg.Ceiling)
	if err != nil {
		return nil, err
	}
	dec, err := Decide(entry.Source, entry.Permissions, ceiling)
	dec.CeilingFrom = from
	if err != nil {
		if from == "tenant" && errdefs.Code(err) == "risk_above_ceiling" {
			err = errdefs.WithCode("risk_above_ceiling", fmt.Errorf("%w (the ceiling is tenant %s's max_tool_risk_level)", err, tenant))
		}
		return nil, err
	}
	if req.Runtime != "" {
		if req.Runtime.Isolation() == 0 {
			return nil, invalid("unknown runtime %q", req.Runtime)
		}
		if req.Runtime.Isolation() < dec.Isolation.Isolation() {
			return nil, errdefs.WithCode("runtime_too_weak", fmt.Errorf(
				"the server's risk %s needs runtime %s or stronger, not %s (it is never downgraded): %w",
				dec.Risk, dec.Isolation, req.Runtime, errdefs.ErrInvalidArgument))
		}
	}
	mode := req.PinMode
	if mode == "" || dec.Risk.Rank() >= sandbox.RiskMedium.Rank() {
		mode = mcp.PinBlock // a change of a medium-risk server's tools always blocks
	}
	if mode == mcp.PinWarn && req.PinMode == "" {
		mode = mcp.PinBlock
	}

	id := sandbox.NewID("mcp")
	tok, hash := newToken()
	now := m.cfg.Now().UTC()
	in := &instance{tokenHash: hash, done: make(chan struct{})}
	in.policy, err = mcp.NewPolicy(rules, mode, entry.Pins, m.cfg.Now, nil)
	if err != nil {
		return nil, err
	}
	in.cfg = mcp.Config{
		InitTimeout: time.Duration(req.InitTimeoutMS) * time.Millisecond, CallTimeout: time.Duration(req.CallTimeoutMS) * time.Millisecond,
		CallCeiling: time.Duration(req.CallCeilingMS) * time.Millisecond, AllowedOrigins: m.cfg.AllowedOrigins,
		Logger: slog.New(quiet{m.log.Handler()}),
	}
	approvalTTL := DefaultApprovalTTL
	if req.ApprovalTTLSeconds > 0 {
		approvalTTL = time.Duration(req.ApprovalTTLSeconds) * time.Second
	}
	in.cfg.Approver = approver{m: m, in: in, ttl: approvalTTL}
	if entry.Transport == TransportHTTP {
		if m.cfg.DialPort == nil {
			return nil, errdefs.WithCode("mcp_http_not_configured", fmt.Errorf("this service cannot reach ports in sandboxes, so it runs stdio servers only: %w", errdefs.ErrNotImplemented))
		}
		path := entry.Path
		if path == "" {
			path = "/mcp"
		}
		in.http = &httpSpec{port: entry.Port, path: path}
	}
	if req.Scope == "ephemeral" {
		in.callSpec = callSpec{profile: entry.Profile, decision: dec, runtime: req.Runtime}
		in.cfg.CallBackend = func(ctx context.Context) (sdk.Transport, string, func(), error) { return m.callServer(ctx, in) }
	}
	var secrets []string
	for _, e := range entry.Permissions.EnvSecrets {
		secrets = append(secrets, "env:"+e)
	}
	for _, t := range entry.Permissions.Tools {
		secrets = append(secrets, "gateway:"+t)
	}
	in.view = Instance{ID: id, Tenant: tenant, CreatedBy: req.CreatedBy, Catalog: entry.Name, Command: entry.Command, Profile: entry.Profile, Scope: req.Scope, Secrets: secrets,
		Endpoint: "/v1/mcp/servers/" + id + "/mcp", Risk: dec.Risk, Network: dec.Network, Decision: dec, State: StateStarting,
		Tools: rules, PinMode: mode, IdleTTLSeconds: req.IdleTTLSeconds, CreatedAt: now, LastUsedAt: now}

	env, secretValues, err := m.serverEnv(entry) // before the sandbox: nothing to undo
	if err != nil {
		return nil, err
	}
	if len(secretValues) > 0 {
		// Operator secrets go into no sandbox a tenant reaches: the
		// server's sandboxes are reserved to the instance.
		in.reservation = "mcp:" + id
	}

	// The sandbox: a lease of its own, or the tenant's.
	var sb *sandbox.Sandbox
	if req.LeaseID != "" {
		l, err := m.cfg.Leases.GetLease(ctx, tenant, req.LeaseID)
		if err != nil {
			return nil, err
		}
		if l.State != sandbox.LeaseActive {
			return nil, errdefs.WithCode("lease_not_active", fmt.Errorf("lease %s is %s: %w", l.ID, l.State, errdefs.ErrFailedPrecondition))
		}
		if err := control.CheckReservation(&sandbox.Sandbox{ID: l.SandboxID, Reserved: l.Reserved}, ""); err != nil {
			return nil, err // another server's own sandbox, which holds operator secrets
		}
		if req.Runtime != "" && l.Runtime.Isolation() < req.Runtime.Isolation() {
			return nil, errdefs.WithCode("runtime_too_weak", fmt.Errorf(
				"runtime %s was asked for; lease %s runs %s: %w", req.Runtime, l.ID, l.Runtime, errdefs.ErrFailedPrecondition))
		}
		if l.Runtime.Isolation() < dec.Isolation.Isolation() {
			return nil, errdefs.WithCode("runtime_too_weak", fmt.Errorf(
				"the server's risk %s needs runtime %s or stronger; lease %s runs %s (it is never downgraded): %w",
				dec.Risk, dec.Isolation, l.ID, l.Runtime, errdefs.ErrFailedPrecondition))
		}
		// The lease's network must be no wider than the decision's: a
		// server never reaches more than its risk allows because its
		// sandbox happens to.
		n, err := m.cfg.Leases.GetNetwork(ctx, tenant, l.SandboxID)
		if err != nil {
			return nil, err
		}
		if !n.Policy.Within(*networkPolicy(dec)) {
			return nil, errdefs.WithCode("lease_network_wider", fmt.Errorf(
				"lease %s's sandbox has network %s, wider than the server's decision (network %s): %w",
				l.ID, n.Policy, *networkPolicy(dec), errdefs.ErrFailedPrecondition))
		}
		in.view.LeaseID, in.view.SandboxID, in.view.Runtime, in.view.Profile = l.ID, l.SandboxID, l.Runtime, l.Profile
	} else {
		out, err := m.ownLease(ctx, tenant, "mcp:"+id, entry.Profile, dec, req.Runtime, map[string]string{"mcp_server": id}, in.reservation)
		if err != nil {
			return nil, err
		}
		sb = out.Sandbox
		in.view.LeaseID, in.view.OwnLease, in.view.SandboxID, in.view.Runtime, in.view.Profile = out.Lease.ID, true, sb.ID, sb.Runtime, sb.Profile
	}
	in.cmd = jobs.ExecInput{Tenant: tenant, SandboxID: in.view.SandboxID, Command: entry.Command, Cwd: entry.Cwd, Env: env,
		Reservation: in.reservation, Secrets: secretValues}

	rctx, cancel := context.WithCancel(m.ctx)
	in.cancel = cancel
	if err := m.start(ctx, rctx, in); err != nil {
		cancel()
		if in.view.OwnLease {
			m.release(tenant, in.view.LeaseID)
		}
		close(in.done)
		return nil, err
	}
	m.mu.Lock()
	m.insts[id] = in
	m.mu.Unlock()
	m.wg.Add(1)
	go m.supervise(rctx, in)
	v := in.snapshot()
	v.Token = tok
	return &v, nil
}

// httpSpec is where a server of transport http listens in its sandbox.
type httpSpec struct {
	port int
	path string
}

// startHTTP waits until the server's port accepts (within the init
// timeout, failing at once if the job ends) and returns a Streamable HTTP
// client transport to it over the port primitive. Every message still
// passes through the bridge, parsed for policy and audit.
func (m *Manager) startHTTP(ctx context.Context, in *instance, jobID string) (sdk.Transport, error) {
	tenant, sandboxID, spec := in.cmd.Tenant, in.view.SandboxID, *in.http
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		return m.cfg.DialPort(ctx, tenant, sandboxID, in.reservation, spec.port)
	}
	wait := in.cfg.InitTimeout
	if wait <= 0 {
		wait = mcp.DefaultInitTimeout
	}
	deadline := time.Now().Add(wait)
	for {
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		c, err := dial(dctx, "", "")
		cancel()
		if err == nil {
			c.Close()
			break
		}
		if j, gerr := m.cfg.Jobs.GetJob(ctx, tenant, jobID); gerr == nil && j.State.Final() {
			return nil, errdefs.WithCode("mcp_server_exited", fmt.Errorf(
				"the MCP server exited before it listened on port %d (%s, exit code %s; its output: GET /v1/jobs/%s/logs): %w",
				spec.port, j.State, exitCode(j), jobID, errdefs.ErrBadGateway))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, errdefs.WithCode("mcp_init_timeout", fmt.Errorf(
				"the MCP server did not listen on port %d within %s: %w", spec.port, wait, errdefs.ErrUnavailable))
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: dial, MaxIdleConnsPerHost: 16, IdleConnTimeout: time.Minute}}
	return &sdk.StreamableClientTransport{Endpoint: "http://127.0.0.1:" + strconv.Itoa(spec.port) + spec.path, HTTPClient: hc, MaxRetries: 3}, nil
}

// callSpec is how an ephemeral instance's call servers are placed (they
// run the instance's command).
type callSpec struct {
	profile  string
	decision Decision
	runtime  sandbox.Runtime
}

// ownLease leases a sandbox for a server of decision dec (at least as
// strong a runtime as rt, if given), reserved to reservation if set, and
// checks its placement.
func (m *Manager) ownLease(ctx context.Context, tenant, holder, profile string, dec Decision, rt sandbox.Runtime, meta map[string]string, reservation string) (*control.LeaseOutput, error) {
	ttl := int64(m.cfg.LeaseTTL / time.Second)
	out, err := m.cfg.Leases.AcquireLease(ctx, control.AcquireLeaseInput{
		Tenant: tenant, Profile: profile, RiskLevel: string(dec.Risk), Runtime: string(rt), TTLSeconds: &ttl, Holder: holder,
		Network: networkPolicy(dec), Metadata: meta, Reserved: reservation,
	})
	if err != nil {
		return nil, err
	}
	if out.Sandbox.Runtime.Isolation() < dec.Isolation.Isolation() { // placement is policy's; check it anyway
		m.release(tenant, out.Lease.ID)
		return nil, fmt.Errorf("lease placed a risk %s server on %s: %w", dec.Risk, out.Sandbox.Runtime, errdefs.ErrInternal)
	}
	if out.Sandbox.Reserved != reservation { // the claim's; check it anyway
		m.release(tenant, out.Lease.ID)
		return nil, fmt.Errorf("lease's sandbox is reserved to %q, not %q: %w", out.Sandbox.Reserved, reservation, errdefs.ErrInternal)
	}
	return out, nil
}

// callServer starts one call's server (scope ephemeral) in a sandbox of its
// own, leased with the instance's decision; done kills it and releases the
// lease, so nothing of one call is left for the next.
func (m *Manager) callServer(ctx context.Context, in *instance) (sdk.Transport, string, func(), error) {
	tenant, id, spec := in.cmd.Tenant, in.view.ID, in.callSpec
	out, err := m.ownLease(ctx, tenant, "mcp:"+id+":call", spec.profile, spec.decision, spec.runtime,
		map[string]string{"mcp_server": id, "mcp_scope": "ephemeral"}, in.reservation)
	if err != nil {
		return nil, "", nil, err
	}
	sb := out.Sandbox
	release := func() { m.release(tenant, out.Lease.ID) }
	cmd := in.cmd
	cmd.SandboxID = sb.ID
	job, err := m.cfg.Jobs.StartServer(ctx, cmd)
	if err != nil {
		release()
		return nil, sb.ID, nil, err
	}
	jctx, stop := context.WithCancel(m.ctx)
	kill := func(string) {
		kctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = m.cfg.Jobs.CancelJobAs(kctx, tenant, in.reservation, job.ID)
	}
	stdin, err := m.cfg.Jobs.OpenStdinAs(jctx, tenant, in.reservation, job.ID)
	if err != nil {
		stop()
		kill("")
		release()
		return nil, sb.ID, nil, err
	}
	pr, pw := io.Pipe()
	go func() {
		err := m.cfg.Jobs.CopyOutput(jctx, tenant, job.ID, pw)
		if err == nil {
			err = io.EOF
		}
		pw.CloseWithError(err)
	}()
	done := func() {
		_ = stdin.Close()
		kill("")
		stop()
		release()
	}
	return mcp.NewStdio(pr, stdin, 0, kill), sb.ID, done, nil
}

// outputMeter counts a server's stdout on its way to the bridge. Past soft
// bytes, at the end of a line (an answer is whole), or past hard bytes in
// any case, it calls full once: the server is stopped and started again
// before the agent's output limit would silence it.
//
// It passes whole lines only: the end of the output that is not a line
// yet waits for its newline. The stop that full asks for may cut a line
// (the process killed mid-write, or its log full); that line never reaches
// the bridge, which would judge it a protocol breach, so the stop stays a
// planned restart. Without a planned stop, a last line without newline is
// passed on at the end (the bridge judges it like any other).
type outputMeter struct {
	w          io.Writer
	soft, hard int64
	full       func()
	n          int64
	done       bool
	partial    []byte
}

// maxPartial is the most the meter holds back of one line: a longer line
// passes on as it comes, and the bridge refuses it as too long.
const maxPartial = mcp.DefaultMaxLine + 1

func (o *outputMeter) Write(p []byte) (int, error) {
	size := len(p)
	o.n += int64(size)
	var err error
	if i := bytes.LastIndexByte(p, '\n'); i >= 0 {
		if len(o.partial) > 0 {
			_, err = o.w.Write(o.partial)
			o.partial = o.partial[:0]
		}
		if err == nil {
			_, err = o.w.Write(p[:i+1])
		}
		p = p[i+1:]
	}
	o.partial = append(o.partial, p...)
	if err == nil && len(o.partial) > maxPartial {
		_, err = o.w.Write(o.partial)
		o.partial = o.partial[:0]
	}
	if !o.done && (o.n >= o.hard || (o.n >= o.soft && len(o.partial) == 0)) {
		o.done = true
		o.full()
	}
	if err != nil {
		return 0, err
	}
	return size, nil
}

// end is the end of the output: a last line without newline is passed on,
// unless the planned stop may have cut it.
func (o *outputMeter) end() error {
	if o.done || len(o.partial) == 0 {
		return nil
	}
	_, err := o.w.Write(o.partial)
	o.partial = nil
	return err
}

// NetworkChange implements control.NetworkChangeHook: the network of a
// sandbox an instance runs in may not grow wider than the instance's
// decision (409 network_wider_than_mcp_server).
func (m *Manager) NetworkChange(_ context.Context, sandboxID string, pol egress.Policy) error {
	m.mu.Lock()
	insts := slices.Collect(maps.Values(m.insts))
	m.mu.Unlock()
	for _, in := range insts {
		v := in.snapshot()
		if v.SandboxID != sandboxID || v.State == StateStopped || v.State == StateFailed {
			continue
		}
		if want := *networkPolicy(v.Decision); !pol.Within(want) {
			return errdefs.WithCode("network_wider_than_mcp_server", fmt.Errorf(
				"MCP server %s runs in sandbox %s and its decision allows network %s, not %s: %w",
				v.ID, sandboxID, want, pol, errdefs.ErrConflict))
		}
	}
	return nil
}

// serverEnv is the environment of an entry's server process: its env and
// the values of its env_secrets, read now (a secret that cannot be read
// fails the create: secret_unreadable), and those values.
func (m *Manager) serverEnv(e Entry) (map[string]string, []string, error) {
	if len(e.Permissions.EnvSecrets) == 0 {
		return e.Env, nil, nil
	}
	if m.cfg.Secret == nil {
		return nil, nil, errdefs.WithCode("secret_unreadable", fmt.Errorf("this service reads no secrets for env_secrets: %w", errdefs.ErrUnavailable))
	}
	env := maps.Clone(e.Env)
	if env == nil {
		env = map[string]string{}
	}
	var values []string
	for _, es := range e.Permissions.EnvSecrets {
		v, name, err := ParseEnvSecret(es)
		if err != nil {
			return nil, nil, err
		}
		val, err := m.cfg.Secret(name)
		if err != nil {
			return nil, nil, errdefs.WithCode("secret_unreadable", fmt.Errorf("env secret %s: %v: %w", name, err, errdefs.ErrUnavailable))
		}
		env[v] = val
		values = append(values, val)
	}
	return env, values, nil
}

// CodeNeedOwnSandbox is the problem code of a server that holds operator
// secrets (env_secrets) asked to start in a sandbox the tenant reaches:
// lease_id, or a lease's mcp option.
const CodeNeedOwnSandbox = "env_secrets_need_own_sandbox"

// needOwnSandbox refuses an entry with env_secrets a sandbox it would share
// with its tenant.
func needOwnSandbox(e Entry) error {
	if len(e.Permissions.EnvSecrets) == 0 {
		return nil
	}
	return errdefs.WithCode(CodeNeedOwnSandbox, fmt.Errorf(
		"catalog entry %q declares env_secrets: the operator's secrets never go into a sandbox the tenant can reach, so it runs only in a sandbox of its own, reserved to it; leave out lease_id (or start it with POST /v1/mcp/servers rather than a lease's mcp): %w",
		e.Name, errdefs.ErrInvalidArgument))
}

// CheckLeaseServer checks, before a lease is made, that req may start in
// that lease's sandbox (POST /v1/leases with mcp): its catalog entry
// exists, and it holds no operator secrets (CodeNeedOwnSandbox).
func (m *Manager) CheckLeaseServer(ctx context.Context, tenant string, req CreateRequest) error {
	if req.Catalog == "" || req.Spec != nil {
		return nil // Create refuses what is left (a spec cannot name env_secrets)
	}
	e, err := m.CatalogEntry(ctx, tenant, req.Catalog)
	if err != nil {
		return err
	}
	return needOwnSandbox(*e)
}

// networkPolicy is the egress policy of a decision.
func networkPolicy(d Decision) *egress.Policy {
	switch d.Network {
	case "tool-proxy":
		return &egress.Policy{Mode: egress.ModeToolProxy, Tools: slices.Clone(d.Tools)}
	case "allowlist":
	default:
		return &egress.Policy{Mode: egress.ModeNone}
	}
	p := &egress.Policy{Mode: egress.ModeAllowlist}
	for _, h := range d.Hosts {
		r := egress.Rule{Host: h}
		if host, port, err := net.SplitHostPort(h); err == nil {
			if n, err := strconv.Atoi(port); err == nil {
				r = egress.Rule{Host: host, Ports: []int{n}}
			}
		}
		p.Allow = append(p.Allow, r)
	}
	return p
}

func (m *Manager) release(tenant, leaseID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.cfg.Leases.ReleaseLease(ctx, tenant, leaseID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		m.log.Warn("releasing an MCP server's lease", "lease", leaseID, "err", err)
	}
}

// start starts the server process and initializes it. ctx bounds the
// start; rctx is the instance's life.
func (m *Manager) start(ctx, rctx context.Context, in *instance) error {
	tenant := in.cmd.Tenant
	job, err := m.cfg.Jobs.StartServer(ctx, in.cmd)
	if err != nil {
		return err
	}
	kill := func(reason string) {
		m.log.Warn("killing an MCP server", "instance", in.view.ID, "job", job.ID, "reason", reason)
		kctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = m.cfg.Jobs.CancelJobAs(kctx, tenant, in.reservation, job.ID)
	}
	if in.http != nil {
		return m.startHTTPInstance(ctx, in, job.ID, kill)
	}
	// The stdin stream lives as long as the instance, not the request
	// that started it.
	stdin, err := m.cfg.Jobs.OpenStdinAs(rctx, tenant, in.reservation, job.ID)
	if err != nil {
		kill("its stdin could not be opened: " + err.Error())
		return err
	}
	pr, pw := io.Pipe()
	limit := m.cfg.Jobs.ServerOutputLimit()
	margin := min(limit/4, 4<<20)
	out := &outputMeter{w: pw, soft: limit - margin, hard: limit - min(margin/4, 64<<10), full: func() {
		in.rollover.Store(true)
		kill(fmt.Sprintf("its stdout neared its output limit of %d bytes; it is started again", limit))
	}}
	go func() {
		err := m.cfg.Jobs.CopyOutput(rctx, tenant, job.ID, out)
		if err == nil {
			err = cmp.Or(out.end(), io.EOF)
		}
		pw.CloseWithError(err)
	}()
	stdio := mcp.NewStdio(pr, stdin, 0, kill)
	p, err := mcp.Connect(ctx, m.bridgeConfig(in, stdio, job.ID))
	if err != nil {
		kill("it did not initialize: " + err.Error())
		_ = stdin.Close()
		if b := stdio.Breach(); b != nil {
			err = errdefs.WithCode("mcp_protocol_breach", fmt.Errorf("%v: %w", b, errdefs.ErrBadGateway))
		} else if j, gerr := m.cfg.Jobs.GetJob(context.Background(), tenant, job.ID); gerr == nil && j.State.Final() {
			err = errdefs.WithCode("mcp_server_exited", fmt.Errorf(
				"the MCP server exited before it initialized (%s, exit code %s; its stderr: GET /v1/jobs/%s/logs): %w",
				j.State, exitCode(j), job.ID, errdefs.ErrBadGateway))
		}
		return err
	}
	m.ready(in, p, stdio)
	return nil
}

// bridgeConfig is the instance's bridge configuration for a backend of
// job jobID (which it records as the instance's job).
func (m *Manager) bridgeConfig(in *instance, backend sdk.Transport, jobID string) mcp.Config {
	cfg := in.cfg
	cfg.Backend = backend
	cfg.Policy = in.policy
	cfg.OnCall = func(rec mcp.CallRecord) { m.record(in, rec) }
	if m.cfg.Gate != nil {
		cfg.Gate = func(ctx context.Context) error {
			in.mu.Lock()
			tenant, sandboxID := in.view.Tenant, in.view.SandboxID
			in.mu.Unlock()
			return m.cfg.Gate.Admit(ctx, tenant, sandboxID, "mcp.tool_call")
		}
	}
	in.mu.Lock()
	in.view.JobID = jobID
	in.mu.Unlock()
	return cfg
}

// ready makes p the instance's bridge (stdio nil for an http server).
func (m *Manager) ready(in *instance, p *mcp.Proxy, stdio *mcp.Stdio) {
	now := m.cfg.Now().UTC()
	in.mu.Lock()
	in.proxy, in.handler, in.stdio = p, p.Handler(), stdio
	in.view.State, in.view.ReadyAt, in.view.LastError = StateReady, &now, ""
	in.view.Server, in.view.ProtocolVersion = p.ServerInfo(), p.ProtocolVersion()
	in.mu.Unlock()
}

// startHTTPInstance connects the bridge to a server of transport http.
func (m *Manager) startHTTPInstance(ctx context.Context, in *instance, jobID string, kill func(string)) error {
	t, err := m.startHTTP(ctx, in, jobID)
	if err != nil {
		kill(err.Error())
		return err
	}
	p, err := mcp.Connect(ctx, m.bridgeConfig(in, t, jobID))
	if err != nil {
		kill("it did not initialize: " + err.Error())
		return err
	}
	m.ready(in, p, nil)
	// An HTTP connection does not end with the process: the job's end
	// closes the bridge, and supervise takes it from there.
	go func() {
		for {
			select {
			case <-p.Done():
				return
			case <-time.After(500 * time.Millisecond):
			}
			if j, err := m.cfg.Jobs.GetJob(m.ctx, in.cmd.Tenant, jobID); err == nil && j.State.Final() {
				p.Close()
				return
			}
		}
	}()
	return nil
}

func exitCode(j *sandbox.Job) string {
	if j.ExitCode == nil {
		return "none"
	}
	return strconv.Itoa(*j.ExitCode)
}

// supervise restarts the server when it ends (up to maxRestarts, never
// after a protocol breach) and renews its own lease.
func (m *Manager) supervise(ctx context.Context, in *instance) {
	defer m.wg.Done()
	defer close(in.done)
	renew := time.NewTicker(m.cfg.LeaseTTL / 3)
	defer renew.Stop()
	for {
		in.mu.Lock()
		p := in.proxy
		in.mu.Unlock()
		if p != nil {
			select {
			case <-ctx.Done():
				return
			case <-renew.C:
				if !m.renew(ctx, in) {
					return
				}
				continue
			case <-p.Done():
			}
			if m.ended(ctx, in, p) {
				return
			}
		}
		if in.rollover.Swap(false) {
			// planned: its output log is full, not a failure
			in.mu.Lock()
			in.view.OutputRestarts++
			in.view.State = StateRestarting
			in.mu.Unlock()
			sctx, cancel := context.WithTimeout(ctx, time.Minute)
			err := m.start(sctx, ctx, in)
			cancel()
			if err == nil || ctx.Err() != nil {
				continue
			}
			in.mu.Lock()
			in.view.LastError = err.Error()
			in.mu.Unlock()
		}
		in.mu.Lock()
		restarts := in.view.Restarts
		if restarts >= maxRestarts {
			why := in.view.LastError
			in.mu.Unlock()
			m.halt(in, StateFailed, fmt.Sprintf("%s (after %d restarts)", why, restarts))
			return
		}
		in.view.Restarts++
		in.view.State = StateRestarting
		in.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(250<<restarts) * time.Millisecond):
		}
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		err := m.start(sctx, ctx, in)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			m.log.Warn("restarting an MCP server", "instance", in.view.ID, "err", err)
			in.mu.Lock()
			in.view.LastError = err.Error()
			in.mu.Unlock()
			if errdefs.Code(err) == "mcp_protocol_breach" || errors.Is(err, errdefs.ErrFailedPrecondition) || errors.Is(err, errdefs.ErrNotFound) {
				// a breach, or its sandbox has ended: starting again cannot help
				m.halt(in, StateFailed, err.Error())
				return
			}
		}
	}
}

// renew renews an instance's own lease; false when the lease has ended
// (and with it the instance).
func (m *Manager) renew(ctx context.Context, in *instance) bool {
	if !in.view.OwnLease {
		return true
	}
	ttl := int64(m.cfg.LeaseTTL / time.Second)
	_, err := m.cfg.Leases.RenewLease(ctx, in.view.Tenant, in.view.LeaseID, &ttl)
	if err == nil || ctx.Err() != nil {
		return true
	}
	m.log.Warn("renewing an MCP server's lease", "instance", in.view.ID, "err", err)
	if errors.Is(err, errdefs.ErrNotFound) || errors.Is(err, errdefs.ErrFailedPrecondition) {
		m.halt(in, StateFailed, "its lease ended: "+err.Error())
		return false
	}
	return true
}

// ended handles the end of a server's connection: true when the instance
// is over (a protocol breach, or a process that hung up but still runs).
func (m *Manager) ended(ctx context.Context, in *instance, p *mcp.Proxy) bool {
	why := "the server ended"
	if err := p.Err(); err != nil {
		why += ": " + err.Error()
	}
	in.mu.Lock()
	jobID, stdio := in.view.JobID, in.stdio
	in.proxy, in.handler = nil, nil
	in.mu.Unlock()
	p.Close()
	over := false
	if stdio != nil {
		if b := stdio.Breach(); b != nil {
			why, over = "protocol breach: "+b.Error(), true
		}
	}
	// The process's end is recorded just after its output ends.
	jctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		j, err := m.cfg.Jobs.GetJob(jctx, in.view.Tenant, jobID)
		if err != nil {
			break
		}
		if j.State.Final() {
			if !over {
				why += fmt.Sprintf(" (job %s %s, exit code %s)", jobID, j.State, exitCode(j))
			}
			in.mu.Lock()
			in.view.LastExitCode = j.ExitCode
			in.mu.Unlock()
			break
		}
		if over || jctx.Err() != nil {
			// it is being killed, or it closed its stdout and still runs
			_, _ = m.cfg.Jobs.CancelJobAs(context.WithoutCancel(jctx), in.view.Tenant, in.reservation, jobID)
			if !over {
				why, over = why+" (it closed its stdout but kept running)", true
			}
			break
		}
		select {
		case <-jctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	in.mu.Lock()
	in.view.LastError = why
	in.mu.Unlock()
	if over {
		m.halt(in, StateFailed, why)
	}
	return over
}

// halt ends an instance: its proxy, its process and its own lease.
func (m *Manager) halt(in *instance, state, why string) {
	in.mu.Lock()
	if in.view.State == StateStopped || in.view.State == StateFailed {
		in.mu.Unlock()
		return
	}
	in.view.State = state
	if why != "" && state == StateFailed {
		in.view.LastError = why
	}
	p, jobID := in.proxy, in.view.JobID
	in.proxy, in.handler = nil, nil
	in.mu.Unlock()
	in.cancel()
	if p != nil {
		p.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if jobID != "" {
		_, _ = m.cfg.Jobs.CancelJobAs(ctx, in.view.Tenant, in.reservation, jobID)
	}
	if in.view.OwnLease {
		m.release(in.view.Tenant, in.view.LeaseID)
	}
}

func (m *Manager) record(in *instance, rec mcp.CallRecord) {
	in.mu.Lock()
	rec.Secrets = in.view.Secrets
	in.seq++
	in.calls = append(in.calls, CallEntry{Seq: in.seq, CallRecord: rec})
	if len(in.calls) > callRing {
		in.calls = slices.Delete(in.calls, 0, len(in.calls)-callRing)
	}
	tenant, id, sandboxID := in.view.Tenant, in.view.ID, in.view.SandboxID
	in.mu.Unlock()
	m.traceCall(tenant, id, sandboxID, rec)
	if m.cfg.Audit == nil {
		return
	}
	select {
	case m.audits <- auditItem{tenant, id, rec}:
	default:
		m.log.Error("the MCP audit queue is full; a call record is only in the instance's call log", "instance", id, "tool", rec.Tool)
	}
}

// traceCall records a tool call in the trace of the instance's sandbox.
func (m *Manager) traceCall(tenant, instance, sandboxID string, rec mcp.CallRecord) {
	if m.cfg.Trace == nil || rec.Method != "tools/call" || sandboxID == "" {
		return
	}
	b, err := json.Marshal(map[string]any{"instance": instance, "session": rec.Session, "tool": rec.Tool,
		"args_digest": rec.ArgsDigest, "args_bytes": rec.ArgsBytes, "decision": rec.Decision, "rule": rec.Rule,
		"outcome": rec.Outcome, "error": rec.Error, "duration_ms": rec.DurationMS, "result_bytes": rec.ResultBytes})
	if err != nil {
		return
	}
	m.cfg.Trace.Record(m.ctx, tenant, sandboxID, trace.Event{Actor: trace.ActorAgent, Kind: trace.KindMCPToolCall, Data: b})
}

// auditor writes call records to the audit log off the call's path.
func (m *Manager) auditor() {
	defer m.wg.Done()
	for {
		select {
		case a := <-m.audits:
			m.cfg.Audit(a.tenant, a.instance, a.rec)
		case <-m.ctx.Done():
			for {
				select {
				case a := <-m.audits:
					m.cfg.Audit(a.tenant, a.instance, a.rec)
				default:
					return
				}
			}
		}
	}
}

func (in *instance) snapshot() Instance {
	in.mu.Lock()
	defer in.mu.Unlock()
	v := in.view
	v.Command = slices.Clone(v.Command)
	return v
}

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

// Calls are an instance's call records after cursor (a seq), oldest
// first, at most limit; next is the cursor of the next page ("" at the end).
func (m *Manager) Calls(ctx context.Context, tenant, id string, cursor int64, limit int) (recs []CallEntry, next string, err error) {
	in, err := m.get(tenant, id)
	if err != nil {
		return nil, "", err
	}
	if limit <= 0 || limit > callRing {
		limit = 100
	}
	in.mu.Lock()
	for _, c := range in.calls {
		if c.Seq <= cursor {
			continue
		}
		if len(recs) == limit {
			next = strconv.FormatInt(recs[len(recs)-1].Seq, 10)
			break
		}
		recs = append(recs, c)
	}
	sandboxID, network := in.view.SandboxID, in.view.Network
	in.mu.Unlock()
	if len(recs) > 0 && network != "" && network != "none" && m.cfg.NetworkEvents != nil {
		if err := m.joinEgress(ctx, tenant, sandboxID, recs); err != nil {
			return nil, "", err
		}
	}
	return recs, next, nil
}

// maxEgressJoin bounds the events read to join one page of calls.
const maxEgressJoin = 10000

// joinEgress gives each call the sandbox's egress events made in its
// window. An event's time is when the sandbox made the attempt; an allowed
// connection is recorded only when it ends, which may be after the call
// answered, so its event joins the call that opened it. Events are listed
// in the order they were recorded: the scan stops after a page whose last
// event was recorded (made, plus open for) after the window.
func (m *Manager) joinEgress(ctx context.Context, tenant, sandboxID string, recs []CallEntry) error {
	from := recs[0].Time
	to := from
	for _, r := range recs {
		if end := r.Time.Add(time.Duration(r.DurationMS+1) * time.Millisecond); end.After(to) {
			to = end
		}
	}
	var cursor int64
	for read := 0; read < maxEgressJoin; {
		evs, next, err := m.cfg.NetworkEvents(ctx, tenant, sandboxID, cursor, 1000)
		if errors.Is(err, errdefs.ErrNotFound) {
			return nil // the sandbox is gone and its events with it
		}
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if ev.Time.Before(from) || ev.Time.After(to) {
				continue
			}
			for i := range recs {
				end := recs[i].Time.Add(time.Duration(recs[i].DurationMS+1) * time.Millisecond)
				if !ev.Time.Before(recs[i].Time) && !ev.Time.After(end) {
					recs[i].Egress = append(recs[i].Egress, ev)
				}
			}
		}
		if len(evs) == 0 || next == cursor || recordedAt(evs[len(evs)-1]).After(to) {
			return nil
		}
		cursor, read = next, read+len(evs)
	}
	return nil
}

// recordedAt is when the gateway recorded ev: once it was made, or for an
// allowed connection, once it ended.
func recordedAt(ev sandbox.NetworkEvent) time.Time {
	return ev.Time.Add(time.Duration(ev.DurationMS) * time.Millisecond)
}

// Tools lists an instance's tools as its clients see them.
func (m *Manager) Tools(ctx context.Context, tenant, id string) ([]*sdk.Tool, error) {
	in, err := m.get(tenant, id)
	if err != nil {
		return nil, err
	}
	in.mu.Lock()
	p := in.proxy
	state := in.view.State
	in.mu.Unlock()
	if p == nil {
		return nil, errdefs.WithCode("mcp_server_not_ready", fmt.Errorf("MCP server %s is %s: %w", id, state, errdefs.ErrUnavailable))
	}
	return p.Tools(ctx)
}

// Pins are an instance's tool pins.
func (m *Manager) Pins(tenant, id string) ([]mcp.Pin, error) {
	in, err := m.get(tenant, id)
	if err != nil {
		return nil, err
	}
	return in.policy.Pins(), nil
}

// ApprovePin approves the changed definition of a tool (by its hash).
func (m *Manager) ApprovePin(tenant, id, tool, hash, keyID string) (mcp.Pin, error) {
	in, err := m.get(tenant, id)
	if err != nil {
		return mcp.Pin{}, err
	}
	if err := in.approvableBy(keyID); err != nil {
		return mcp.Pin{}, err
	}
	if hash == "" {
		return mcp.Pin{}, invalid("hash is required: the hash of the changed definition being approved (GET …/pins)")
	}
	return in.policy.Approve(tool, hash)
}

// ServeMCP serves an instance's Streamable HTTP endpoint. The caller is
// authenticated by the instance's own bearer token, never a tenant key;
// the token is not passed to the server.
func (m *Manager) ServeMCP(w http.ResponseWriter, r *http.Request, id string, fail func(http.ResponseWriter, *http.Request, error)) {
	m.mu.Lock()
	in := m.insts[id]
	m.mu.Unlock()
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if in == nil || !ok {
		// an unknown instance and a missing token answer alike
		w.Header().Set("WWW-Authenticate", `Bearer realm="genesis-mcp"`)
		fail(w, r, errdefs.WithCode("mcp_token_invalid", fmt.Errorf("this endpoint takes the instance's bearer token: %w", errdefs.ErrUnauthenticated)))
		return
	}
	h := sha256.Sum256([]byte(tok))
	if subtle.ConstantTimeCompare(h[:], in.tokenHash[:]) != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="genesis-mcp", error="invalid_token"`)
		fail(w, r, errdefs.WithCode("mcp_token_invalid", fmt.Errorf("this endpoint takes the instance's bearer token: %w", errdefs.ErrUnauthenticated)))
		return
	}
	in.mu.Lock()
	handler, state, why := in.handler, in.view.State, in.view.LastError
	in.view.LastUsedAt = m.cfg.Now().UTC()
	in.mu.Unlock()
	if handler == nil {
		if state == StateRestarting || state == StateStarting {
			w.Header().Set("Retry-After", "1")
		}
		fail(w, r, errdefs.WithCode("mcp_server_not_ready", fmt.Errorf("MCP server %s is %s %s: %w", id, state, why, errdefs.ErrUnavailable)))
		return
	}
	r.Header.Del("Authorization")
	handler.ServeHTTP(w, r)
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
