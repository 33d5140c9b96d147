package tenancy

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/tenant"
)

// DefaultTenant owns the key given with --api-key / GENESIS_API_KEY.
const DefaultTenant = "default"

// records is what the service keeps in the store.
type records interface {
	store.Tenants
	store.Audit
	// VolumeUsage counts a tenant's named volumes (a tenant that has any
	// is not deleted).
	VolumeUsage(ctx context.Context, tenant string) (count int, sizeMB int64, err error)
}

// sandboxes is what the service asks the lifecycle core
// (control.Service) about tenants' sandboxes.
type sandboxes interface {
	// LiveSandboxes lists the live sandboxes of tenant name, or of every
	// tenant when name is "".
	LiveSandboxes(ctx context.Context, name string) ([]*sandbox.Sandbox, error)
	// LockTenant takes the tenant's quota lock, which every create and
	// claim for the tenant takes, and returns its unlock.
	LockTenant(ctx context.Context, name string) (unlock func(), err error)
}

// Config wires a Service.
type Config struct {
	// Settings are the service's: the config's tenants, the admin key and
	// the audit retention.
	Settings *config.Config
	Store    records
	// Sandboxes answers what tenants' sandboxes hold (control.Service).
	Sandboxes sandboxes
	// ConfigKeys are the keys given in the config or on the command line,
	// as tenant.ConfigKeyID → tenant (tenant.ConfigKeyIDs): the tokens
	// they made stay live while they are configured (KeyLive).
	ConfigKeys map[string]string
	Logger     *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Service administers tenants, their API keys and the audit log.
type Service struct {
	cfg   *config.Config
	store records
	boxes sandboxes
	log   *slog.Logger
	now   func() time.Time

	// configKeys and keyLive answer KeyLive (keylive.go).
	configKeys map[string]string
	keyLive    keyLiveCache

	wg     sync.WaitGroup
	cancel context.CancelFunc
}

// New validates cfg and returns a Service. It has no side effects; call
// Start.
func New(cfg Config) (*Service, error) {
	if cfg.Settings == nil || cfg.Store == nil || cfg.Sandboxes == nil {
		return nil, errdefs.Invalid("tenancy: settings, store and sandboxes are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{cfg: cfg.Settings, store: cfg.Store, boxes: cfg.Sandboxes, log: cfg.Logger,
		now: func() time.Time { return cfg.Now().UTC() }, configKeys: maps.Clone(cfg.ConfigKeys)}, nil
}

// Start writes the config's tenants to the store (before the control
// service starts: its creates read them), prunes the audit log and
// prunes it again every auditPruneEvery until Close.
func (s *Service) Start(ctx context.Context) error {
	if err := s.syncTenants(ctx); err != nil {
		return err
	}
	s.pruneAudit(ctx)
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	s.wg.Go(func() {
		t := time.NewTicker(auditPruneEvery)
		defer t.Stop()
		for {
			select {
			case <-loopCtx.Done():
				return
			case <-t.C:
				s.pruneAudit(loopCtx)
			}
		}
	})
	return nil
}

// Close stops the audit pruning.
func (s *Service) Close() {
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
}

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
