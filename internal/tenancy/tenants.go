package tenancy

import (
	"context"
	"errors"
	"fmt"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/tenant"
)

// Problem codes of the tenant API.
const (
	codeTenantInConfig = "tenant_in_config"
	codeTenantInUse    = "tenant_in_use"
)

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
	MaxVolumes   *int
	MaxVolumeMB  *int64
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
	live, err := s.boxes.LiveSandboxes(ctx, "")
	if err != nil {
		return nil, err
	}
	byTenant := map[string][]*sandbox.Sandbox{}
	for _, sb := range live {
		byTenant[sb.Tenant] = append(byTenant[sb.Tenant], sb)
	}
	out := make([]*TenantView, len(list))
	for i, t := range list {
		u, _ := tenant.UsageOf(byTenant[t.Name])
		if u.Volumes, u.VolumeMB, err = s.store.VolumeUsage(ctx, t.Name); err != nil {
			return nil, err
		}
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
	u, err := s.usage(ctx, name)
	if err != nil {
		return nil, err
	}
	return &TenantView{Tenant: t, Usage: u}, nil
}

// usage is what the live sandboxes and the named volumes of tenant name
// hold.
func (s *Service) usage(ctx context.Context, name string) (tenant.Usage, error) {
	live, err := s.boxes.LiveSandboxes(ctx, name)
	if err != nil {
		return tenant.Usage{}, err
	}
	u, _ := tenant.UsageOf(live)
	if u.Volumes, u.VolumeMB, err = s.store.VolumeUsage(ctx, name); err != nil {
		return tenant.Usage{}, err
	}
	return u, nil
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
		set(&t.Quotas.MaxVolumes, q.MaxVolumes)
		set(&t.Quotas.MaxVolumeMB, q.MaxVolumeMB)
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
	unlock, err := s.boxes.LockTenant(ctx, name)
	if err != nil {
		return err
	}
	defer unlock()
	u, err := s.usage(ctx, name)
	if err != nil {
		return err
	}
	if u.Sandboxes > 0 {
		return errdefs.WithCode(codeTenantInUse, fmt.Errorf(
			"tenant %s still has %d live sandboxes; destroy them first: %w", name, u.Sandboxes, errdefs.ErrFailedPrecondition))
	}
	// Its named volumes hold data on the host that nobody could reach once
	// the tenant is gone (a volume create takes the quota lock too).
	if u.Volumes > 0 {
		return errdefs.WithCode(codeTenantInUse, fmt.Errorf(
			"tenant %s still has %d named volumes; delete them first: %w", name, u.Volumes, errdefs.ErrFailedPrecondition))
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
