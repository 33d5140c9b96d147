package servers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/egress"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/mcp"
	"genesis.dev/sandbox/internal/sandbox"
)

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
