package control

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/tenant"
)

// Problem codes of the tenant API.
const (
	codeTenantInConfig = "tenant_in_config"
	codeTenantInUse    = "tenant_in_use"
)

// DefaultTenant owns the key given with --api-key / GENESIS_API_KEY.
const DefaultTenant = "default"

// syncTenants writes the config's tenants (and the admin tenant when an
// admin key is configured) into the store: the config is authoritative for
// them, so a changed file takes effect at the next start.
func (s *Service) syncTenants(ctx context.Context) error {
	want := map[string]config.Tenant{DefaultTenant: {}} // the tenant of --api-key
	for name, t := range s.cfg.Tenants {
		want[name] = t
	}
	if s.cfg.AdminAPIKey != "" {
		t := want[config.AdminTenant]
		t.Admin = true
		want[config.AdminTenant] = t
	}
	now := s.now()
	for name, t := range want {
		rec := &tenant.Tenant{Name: name, Weight: t.Weight, MinRiskLevel: t.MinRiskLevel, MaxToolRiskLevel: t.MaxToolRiskLevel, Admin: t.Admin, Quotas: t.Quotas,
			Source: tenant.SourceConfig, CreatedAt: now, UpdatedAt: now}
		if _, err := s.store.PutTenant(ctx, rec); err != nil {
			return fmt.Errorf("writing config tenant %s: %w", name, err)
		}
	}
	return nil
}

// Authenticate resolves the hash of a presented API key to its principal.
// staticTenant is the tenant of a key given in the config or on the command
// line (matched by the caller in constant time), "" to look the key up in
// the store. Unknown and revoked keys, and keys whose tenant is gone, are
// errdefs.ErrUnauthenticated. Each call reads the store, so revocations by
// any instance sharing it take effect on the next request.
func (s *Service) Authenticate(ctx context.Context, hash [32]byte, staticTenant string) (tenant.Principal, error) {
	unauth := func(why string) (tenant.Principal, error) {
		return tenant.Principal{}, errdefs.WithCode("unauthenticated", errdefs.Mark(errors.New(why), errdefs.ErrUnauthenticated))
	}
	p := tenant.Principal{Tenant: staticTenant, KeyID: tenant.ConfigKeyID(hash)}
	if staticTenant == "" {
		k, err := s.store.KeyByHash(ctx, hash)
		switch {
		case errors.Is(err, errdefs.ErrNotFound):
			return unauth("invalid API key")
		case err != nil:
			return tenant.Principal{}, err
		case !k.Matches(hash):
			return unauth("invalid API key")
		case k.Revoked():
			return unauth("API key " + k.ID + " is revoked")
		}
		p.Tenant, p.KeyID, p.Scopes = k.Tenant, k.ID, k.Scopes
	}
	p.KeyTenant = p.Tenant
	t, err := s.store.GetTenant(ctx, p.Tenant)
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		return unauth("the tenant of this API key no longer exists")
	case err != nil:
		return tenant.Principal{}, err
	}
	p.Admin = t.Admin
	return p, nil
}

// TenantInput creates a tenant through the API.
type TenantInput struct {
	Name         string
	Weight       int
	MinRiskLevel string
	// MaxToolRiskLevel caps the risk of the tenant's MCP servers and skill runs.
	MaxToolRiskLevel string
	Admin            bool
	Quotas           tenant.Quotas
}

// TenantPatch changes the fields that are not nil.
type TenantPatch struct {
	Weight           *int
	MinRiskLevel     *string
	MaxToolRiskLevel *string
	Admin            *bool
	Quotas           QuotasPatch
}

// QuotasPatch changes the quotas that are not nil.
type QuotasPatch struct {
	MaxSandboxes *int
	MaxCPU       *float64
	MaxMemoryMB  *int64
	MaxLeases    *int
}

// TenantView is a tenant with what it holds now.
type TenantView struct {
	*tenant.Tenant
	Usage tenant.Usage
}

func tenantNotFound(name string) error {
	return errdefs.WithCode("tenant_not_found", fmt.Errorf("tenant %q: %w", name, errdefs.ErrNotFound))
}

// getTenant returns a tenant by a name from a request path.
func (s *Service) getTenant(ctx context.Context, name string) (*tenant.Tenant, error) {
	if !tenant.ValidName(name) {
		return nil, tenantNotFound(name)
	}
	t, err := s.store.GetTenant(ctx, name)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, tenantNotFound(name)
	}
	return t, err
}

// CreateTenant creates an API-managed tenant.
func (s *Service) CreateTenant(ctx context.Context, in TenantInput) (*tenant.Tenant, error) {
	now := s.now()
	t := &tenant.Tenant{Name: in.Name, Weight: in.Weight, MinRiskLevel: sandbox.RiskLevel(in.MinRiskLevel),
		MaxToolRiskLevel: sandbox.RiskLevel(in.MaxToolRiskLevel), Admin: in.Admin,
		Quotas: in.Quotas, Source: tenant.SourceAPI, CreatedAt: now, UpdatedAt: now}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	if err := s.store.CreateTenant(ctx, t); err != nil {
		if errors.Is(err, errdefs.ErrAlreadyExists) {
			return nil, errdefs.WithCode("tenant_exists", fmt.Errorf("tenant %q exists: %w", in.Name, errdefs.ErrAlreadyExists))
		}
		return nil, err
	}
	return t, nil
}

// ListTenants lists every tenant with what it holds now: one listing of
// the live sandboxes serves them all.
func (s *Service) ListTenants(ctx context.Context) ([]*TenantView, error) {
	list, err := s.store.ListTenants(ctx)
	if err != nil {
		return nil, err
	}
	live, err := s.store.ListSandboxes(ctx, store.SandboxFilter{States: liveStates})
	if err != nil {
		return nil, err
	}
	byTenant := map[string][]*sandbox.Sandbox{}
	for _, sb := range live {
		byTenant[sb.Tenant] = append(byTenant[sb.Tenant], sb)
	}
	out := make([]*TenantView, len(list))
	for i, t := range list {
		u, _ := usageOf(byTenant[t.Name])
		out[i] = &TenantView{Tenant: t, Usage: u}
	}
	return out, nil
}

// GetTenant returns a tenant and its current usage.
func (s *Service) GetTenant(ctx context.Context, name string) (*TenantView, error) {
	t, err := s.getTenant(ctx, name)
	if err != nil {
		return nil, err
	}
	u, _, err := s.usage(ctx, name)
	if err != nil {
		return nil, err
	}
	return &TenantView{Tenant: t, Usage: u}, nil
}

// UpdateTenant applies patch to an API-managed tenant, honouring ifVersion.
func (s *Service) UpdateTenant(ctx context.Context, name string, ifVersion int64, patch TenantPatch) (*tenant.Tenant, error) {
	if _, err := s.getTenant(ctx, name); err != nil {
		return nil, err
	}
	t, err := s.store.UpdateTenant(ctx, name, ifVersion, s.now(), func(t *tenant.Tenant) error {
		if t.Source == tenant.SourceConfig {
			return inConfig(name)
		}
		set(&t.Weight, patch.Weight)
		if patch.MinRiskLevel != nil {
			t.MinRiskLevel = sandbox.RiskLevel(*patch.MinRiskLevel)
		}
		if patch.MaxToolRiskLevel != nil {
			t.MaxToolRiskLevel = sandbox.RiskLevel(*patch.MaxToolRiskLevel)
		}
		set(&t.Admin, patch.Admin)
		q := patch.Quotas
		set(&t.Quotas.MaxSandboxes, q.MaxSandboxes)
		set(&t.Quotas.MaxCPU, q.MaxCPU)
		set(&t.Quotas.MaxMemoryMB, q.MaxMemoryMB)
		set(&t.Quotas.MaxLeases, q.MaxLeases)
		return t.Validate()
	})
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, tenantNotFound(name)
	}
	return t, err
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

func inConfig(name string) error {
	return errdefs.WithCode(codeTenantInConfig, fmt.Errorf(
		"tenant %s is defined in the config file; change it there and restart: %w", name, errdefs.ErrFailedPrecondition))
}

// DeleteTenant deletes an API-managed tenant and its keys. A tenant that
// still holds live sandboxes is refused (destroy them first). The check
// runs under the tenant's quota lock, which every create takes (in every
// instance sharing the store when the tenant has quotas; otherwise in this
// instance), so no sandbox slips in between.
func (s *Service) DeleteTenant(ctx context.Context, name string, ifVersion int64) error {
	t, err := s.getTenant(ctx, name)
	if err != nil {
		return err
	}
	if t.Source == tenant.SourceConfig {
		return inConfig(name)
	}
	unlock, err := s.lockTenant(ctx, name, true)
	if err != nil {
		return err
	}
	defer unlock()
	u, _, err := s.usage(ctx, name)
	if err != nil {
		return err
	}
	if u.Sandboxes > 0 {
		return errdefs.WithCode(codeTenantInUse, fmt.Errorf(
			"tenant %s still has %d live sandboxes; destroy them first: %w", name, u.Sandboxes, errdefs.ErrFailedPrecondition))
	}
	err = s.store.DeleteTenant(ctx, name, ifVersion)
	if errors.Is(err, errdefs.ErrNotFound) {
		return tenantNotFound(name)
	}
	if err == nil {
		s.keyLive.forget(name, "")
	}
	return err
}

// CreateKey makes a new API key of a tenant with scopes (tenant.Scope*).
// The secret is returned once and never stored.
func (s *Service) CreateKey(ctx context.Context, name, description string, scopes []string) (*tenant.Key, string, error) {
	if len(description) > 256 {
		return nil, "", invalid("description is longer than 256 bytes")
	}
	if err := tenant.ValidateScopes(scopes); err != nil {
		return nil, "", errdefs.WithCode("invalid_scope", err)
	}
	if _, err := s.getTenant(ctx, name); err != nil {
		return nil, "", err
	}
	k, secret, err := tenant.NewKey(rand.Reader, name, description, s.now())
	if err != nil {
		return nil, "", err
	}
	k.Scopes = slices.Clone(scopes)
	if err := s.store.CreateKey(ctx, k); err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			return nil, "", tenantNotFound(name)
		}
		return nil, "", err
	}
	return k, secret, nil
}

// ListKeys lists a tenant's keys (never their secrets).
func (s *Service) ListKeys(ctx context.Context, name string) ([]*tenant.Key, error) {
	if _, err := s.getTenant(ctx, name); err != nil {
		return nil, err
	}
	return s.store.ListKeys(ctx, name)
}

// RevokeKey revokes a key of a tenant; revoking a revoked key succeeds. The
// next request with it is refused.
func (s *Service) RevokeKey(ctx context.Context, name, id string) (*tenant.Key, error) {
	if _, err := s.getTenant(ctx, name); err != nil {
		return nil, err
	}
	k, err := s.store.RevokeKey(ctx, name, id, s.now())
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, errdefs.WithCode("key_not_found", fmt.Errorf("key %q of tenant %s: %w", id, name, errdefs.ErrNotFound))
	}
	if err == nil {
		s.keyLive.forget(name, id)
	}
	return k, err
}

// tenantRecord returns the stored tenant, or a zero tenant (no quotas, no
// policy) for a name without a record.
func (s *Service) tenantRecord(ctx context.Context, name string) (*tenant.Tenant, error) {
	t, err := s.store.GetTenant(ctx, name)
	if errors.Is(err, errdefs.ErrNotFound) {
		return &tenant.Tenant{Name: name}, nil
	}
	return t, err
}

// leaseStates are the states of a sandbox held by a lease.
var leaseStates = []sandbox.State{sandbox.StateLeased, sandbox.StateBusy}

// usage sums what a tenant's live sandboxes hold, and returns the earliest
// expiry among them (zero if none).
func (s *Service) usage(ctx context.Context, name string) (tenant.Usage, sandbox.Sandbox, error) {
	live, err := s.store.ListSandboxes(ctx, store.SandboxFilter{Tenant: name, States: liveStates})
	if err != nil {
		return tenant.Usage{}, sandbox.Sandbox{}, err
	}
	u, first := usageOf(live)
	return u, first, nil
}

// usageOf sums what the live sandboxes of one tenant hold, and returns the
// one that expires first (zero if none expires).
func usageOf(live []*sandbox.Sandbox) (tenant.Usage, sandbox.Sandbox) {
	var u tenant.Usage
	var first sandbox.Sandbox
	for _, sb := range live {
		u.Sandboxes++
		u.CPU += sb.Resources.CPU
		u.MemoryMB += sb.Resources.MemoryMB
		if slices.Contains(leaseStates, sb.State) {
			u.Leases++
		}
		if sb.ExpiresAt != nil && (first.ExpiresAt == nil || sb.ExpiresAt.Before(*first.ExpiresAt)) {
			first = *sb
		}
	}
	return u, first
}

// ToolRiskCeiling returns the tenant's own max_tool_risk_level ("": none,
// also for a tenant that is gone, whose keys no longer authenticate).
func (s *Service) ToolRiskCeiling(ctx context.Context, name string) (sandbox.RiskLevel, error) {
	t, err := s.store.GetTenant(ctx, name)
	if errors.Is(err, errdefs.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return t.MaxToolRiskLevel, nil
}
