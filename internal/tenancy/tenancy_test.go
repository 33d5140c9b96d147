package tenancy_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store/sqlite"
	"genesis.dev/sandbox/internal/store/sqlstore"
	"genesis.dev/sandbox/internal/tenancy"
	"genesis.dev/sandbox/internal/tenant"
)

// fakeSandboxes stands in for the control service: the live sandboxes it
// is given, a tenant lock, and whether each listing ran under the lock.
type fakeSandboxes struct {
	mu       sync.Mutex
	live     []*sandbox.Sandbox
	locked   map[string]bool
	lists    int
	unlocked []string // listings of a tenant made without its lock
}

func (f *fakeSandboxes) LiveSandboxes(_ context.Context, name string) ([]*sandbox.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	if name != "" && !f.locked[name] {
		f.unlocked = append(f.unlocked, name)
	}
	var out []*sandbox.Sandbox
	for _, sb := range f.live {
		if name == "" || sb.Tenant == name {
			out = append(out, sb)
		}
	}
	return out, nil
}

func (f *fakeSandboxes) LockTenant(_ context.Context, name string) (func(), error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.locked[name] = true
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.locked[name] = false
	}, nil
}

// newService builds a started Service over a SQLite store and fake
// sandboxes, with config tenant "cfg" and an admin key.
func newService(t *testing.T) (*tenancy.Service, *fakeSandboxes) {
	t.Helper()
	s, boxes, _ := newServiceWithStore(t)
	return s, boxes
}

// newServiceWithStore is newService with its store.
func newServiceWithStore(t *testing.T) (*tenancy.Service, *fakeSandboxes, *sqlstore.Store) {
	t.Helper()
	set, err := config.Default()
	if err != nil {
		t.Fatal(err)
	}
	set.Tenants["cfg"] = config.Tenant{Weight: 3}
	set.AdminAPIKey = "admin-key-0123456789abcdef"
	st, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "state.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	boxes := &fakeSandboxes{locked: map[string]bool{}}
	s, err := tenancy.New(tenancy.Config{Settings: set, Store: st, Sandboxes: boxes})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, boxes, st
}

// TestStartWritesConfigTenants: the default tenant, the config's tenants
// and, with an admin key, the admin tenant are in the store after Start,
// and cannot be changed or deleted through the API.
func TestStartWritesConfigTenants(t *testing.T) {
	t.Parallel()
	s, _ := newService(t)
	ctx := t.Context()
	for _, name := range []string{tenancy.DefaultTenant, "cfg", config.AdminTenant} {
		v, err := s.GetTenant(ctx, name)
		if err != nil {
			t.Fatalf("config tenant %s: %v", name, err)
		}
		if v.Source != tenant.SourceConfig || (name == config.AdminTenant) != v.Admin {
			t.Errorf("tenant %s: source %s admin %v", name, v.Source, v.Admin)
		}
	}
	if v, _ := s.GetTenant(ctx, "cfg"); v.Weight != 3 {
		t.Errorf("cfg's weight %d, want 3 (the config's)", v.Weight)
	}
	if err := s.DeleteTenant(ctx, "cfg", 0); errdefs.Code(err) != "tenant_in_config" {
		t.Errorf("deleting a config tenant: %v, want tenant_in_config", err)
	}
	w := 5
	if _, err := s.UpdateTenant(ctx, "cfg", 0, tenancy.TenantPatch{Weight: &w}); errdefs.Code(err) != "tenant_in_config" {
		t.Errorf("changing a config tenant: %v, want tenant_in_config", err)
	}
}

// TestDeleteTenantChecksUnderLock: a tenant that holds a live sandbox is
// not deleted (tenant_in_use), and its sandboxes are counted while its
// quota lock is held, so none slips in between; once it holds none it is
// deleted with its keys, which stop authenticating.
func TestDeleteTenantChecksUnderLock(t *testing.T) {
	t.Parallel()
	s, boxes := newService(t)
	ctx := t.Context()
	if _, err := s.CreateTenant(ctx, tenancy.TenantInput{Name: "acme"}); err != nil {
		t.Fatal(err)
	}
	_, secret, err := s.CreateKey(ctx, "acme", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	boxes.live = []*sandbox.Sandbox{{ID: "sb_1", Tenant: "acme", State: sandbox.StateLeased, Resources: sandbox.Resources{CPU: 1, MemoryMB: 512}}}
	if err := s.DeleteTenant(ctx, "acme", 0); errdefs.Code(err) != "tenant_in_use" || !errdefs.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("deleting a tenant with a live sandbox: %v, want tenant_in_use", err)
	}
	boxes.live = nil
	if err := s.DeleteTenant(ctx, "acme", 0); err != nil {
		t.Fatalf("deleting a tenant that holds nothing: %v", err)
	}
	if boxes.unlocked != nil || boxes.locked["acme"] {
		t.Errorf("listings without the lock %v, lock still held %v", boxes.unlocked, boxes.locked["acme"])
	}
	if _, err := s.Authenticate(ctx, tenant.HashKey(secret), ""); !errdefs.Is(err, errdefs.ErrUnauthenticated) {
		t.Errorf("a key of a deleted tenant: %v, want unauthenticated", err)
	}
}

// TestTenantViewsCarryUsage: GetTenant and ListTenants report what each
// tenant's live sandboxes hold; the list reads them once for all tenants.
func TestTenantViewsCarryUsage(t *testing.T) {
	t.Parallel()
	s, boxes := newService(t)
	ctx := t.Context()
	exp := time.Now().Add(time.Hour)
	boxes.live = []*sandbox.Sandbox{
		{ID: "sb_1", Tenant: "cfg", State: sandbox.StateReady, Resources: sandbox.Resources{CPU: 0.5, MemoryMB: 256}, ExpiresAt: &exp},
		{ID: "sb_2", Tenant: "cfg", State: sandbox.StateBusy, Resources: sandbox.Resources{CPU: 1, MemoryMB: 512}},
	}
	want := tenant.Usage{Sandboxes: 2, CPU: 1.5, MemoryMB: 768, Leases: 1}
	if v, err := s.GetTenant(ctx, "cfg"); err != nil || v.Usage != want {
		t.Fatalf("GetTenant: %+v %v, want usage %+v", v, err, want)
	}
	before := boxes.lists
	list, err := s.ListTenants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := boxes.lists - before; n != 1 {
		t.Errorf("ListTenants listed sandboxes %d times, want once", n)
	}
	got := map[string]tenant.Usage{}
	for _, v := range list {
		got[v.Name] = v.Usage
	}
	if got["cfg"] != want || got[tenancy.DefaultTenant] != (tenant.Usage{}) || len(got) != 3 {
		t.Errorf("ListTenants usage %+v, want cfg %+v and nothing for the others", got, want)
	}
}

// TestListAuditScopesATenantsKey: a tenant's key reads its own records
// only (another tenant's is admin_required, none asked is its own); an
// admin key reads any tenant's and the anonymous records.
func TestListAuditScopesATenantsKey(t *testing.T) {
	t.Parallel()
	s, _ := newService(t)
	ctx := t.Context()
	for _, rec := range []*tenant.AuditRecord{
		{Actor: "key_a", Tenant: "cfg", Action: "POST /v1/sandboxes", Status: 201},
		{Actor: "key_b", Tenant: tenancy.DefaultTenant, Action: "POST /v1/sandboxes", Status: 201},
		{Actor: tenant.ActorAnonymous, Action: "POST (no route)", Status: 401},
	} {
		if err := s.RecordAudit(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	cfgKey := tenant.Principal{Tenant: "cfg", KeyID: "key_a"}
	admin := tenant.Principal{Tenant: config.AdminTenant, Admin: true}
	for _, tc := range []struct {
		name     string
		p        tenant.Principal
		asked    string
		want     int
		wantCode string
	}{
		{"own tenant, none asked", cfgKey, "", 1, ""},
		{"own tenant asked", cfgKey, "cfg", 1, ""},
		{"another tenant", cfgKey, tenancy.DefaultTenant, 0, "admin_required"},
		{"admin, every tenant", admin, "", 3, ""},
		{"admin, one tenant", admin, tenancy.DefaultTenant, 1, ""},
	} {
		list, err := s.ListAudit(ctx, tc.p, tenancy.AuditFilter{Tenant: tc.asked, Limit: 10})
		if tc.wantCode != "" {
			if err == nil || errdefs.Code(err) != tc.wantCode {
				t.Errorf("%s: err %v, want code %s", tc.name, err, tc.wantCode)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(list) != tc.want {
			t.Errorf("%s: %d records, want %d", tc.name, len(list), tc.want)
		}
		for _, rec := range list {
			if !tc.p.Admin && rec.Tenant != tc.p.Tenant {
				t.Errorf("%s: a record of tenant %q", tc.name, rec.Tenant)
			}
		}
	}
}

// TestDeleteTenantWithVolumes: a tenant that has named volumes is not
// deleted (tenant_in_use): their data would be out of anyone's reach.
func TestDeleteTenantWithVolumes(t *testing.T) {
	t.Parallel()
	s, _, st := newServiceWithStore(t)
	ctx := t.Context()
	if _, err := s.CreateTenant(ctx, tenancy.TenantInput{Name: "acme"}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	v := &sandbox.Volume{ID: sandbox.NewID("vol"), Tenant: "acme", Name: "data", SizeMB: 8, State: sandbox.VolumeReady, CreatedAt: now, UpdatedAt: now}
	if err := st.CreateVolume(ctx, v); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTenant(ctx, "acme", 0); errdefs.Code(err) != "tenant_in_use" {
		t.Fatalf("deleting a tenant with a volume: %v, want tenant_in_use", err)
	}
	if err := st.DeleteVolume(ctx, v.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTenant(ctx, "acme", 0); err != nil {
		t.Fatalf("deleting a tenant without volumes: %v", err)
	}
}

// TestVolumeQuotas: a tenant's max_volumes and max_volume_mb are set at
// create, changed by a patch (nil leaves them, 0 lifts them), refused when
// negative, written from the config for config tenants, and its views
// count its named volumes; a tenant with volumes is not deleted.
func TestVolumeQuotas(t *testing.T) {
	t.Parallel()
	s, _, st := newServiceWithStore(t)
	ctx := t.Context()
	if _, err := s.CreateTenant(ctx, tenancy.TenantInput{Name: "acme", Quotas: tenant.Quotas{MaxVolumes: 2, MaxVolumeMB: 300}}); err != nil {
		t.Fatal(err)
	}
	mb := int64(500)
	v, err := s.UpdateTenant(ctx, "acme", 0, tenancy.TenantPatch{Quotas: tenancy.QuotasPatch{MaxVolumeMB: &mb}})
	if err != nil || v.Quotas.MaxVolumes != 2 || v.Quotas.MaxVolumeMB != 500 {
		t.Fatalf("patching max_volume_mb: %+v %v, want max_volumes 2 (unchanged) and max_volume_mb 500", v, err)
	}
	neg := -1
	if _, err := s.UpdateTenant(ctx, "acme", 0, tenancy.TenantPatch{Quotas: tenancy.QuotasPatch{MaxVolumes: &neg}}); !errdefs.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a negative max_volumes: %v, want invalid argument", err)
	}
	now := time.Now()
	for i, size := range []int64{100, 150} {
		vol := &sandbox.Volume{ID: sandbox.NewID("vol"), Tenant: "acme", Name: "v" + string(rune('a'+i)), SizeMB: size,
			State: sandbox.VolumeReady, CreatedAt: now, UpdatedAt: now}
		if err := st.CreateVolume(ctx, vol); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.GetTenant(ctx, "acme")
	if err != nil || got.Usage.Volumes != 2 || got.Usage.VolumeMB != 250 || got.Quotas.MaxVolumeMB != 500 {
		t.Fatalf("GetTenant: %+v %v, want 2 volumes of 250 MiB and max_volume_mb 500", got, err)
	}
	list, err := s.ListTenants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range list {
		if v.Name == "acme" && (v.Usage.Volumes != 2 || v.Usage.VolumeMB != 250) {
			t.Errorf("ListTenants: acme's usage %+v, want 2 volumes of 250 MiB", v.Usage)
		}
	}
	if err := s.DeleteTenant(ctx, "acme", 0); errdefs.Code(err) != "tenant_in_use" {
		t.Errorf("deleting a tenant with volumes: %v, want tenant_in_use", err)
	}
}

// TestConfigTenantVolumeQuotas: the config's quotas for a tenant carry
// its volume quotas into the store.
func TestConfigTenantVolumeQuotas(t *testing.T) {
	t.Parallel()
	set, err := config.Default()
	if err != nil {
		t.Fatal(err)
	}
	set.Tenants["cfg"] = config.Tenant{Quotas: tenant.Quotas{MaxVolumes: 4, MaxVolumeMB: 1024}}
	st, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "state.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s, err := tenancy.New(tenancy.Config{Settings: set, Store: st, Sandboxes: &fakeSandboxes{locked: map[string]bool{}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	v, err := s.GetTenant(t.Context(), "cfg")
	if err != nil || v.Quotas.MaxVolumes != 4 || v.Quotas.MaxVolumeMB != 1024 {
		t.Fatalf("config tenant: %+v %v, want max_volumes 4, max_volume_mb 1024", v, err)
	}
}
