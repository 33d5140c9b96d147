package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/tenancy"
	"genesis.dev/sandbox/internal/tenant"
)

// fakeTenants knows tenants a and admin; a stored key "stored-admin" is an
// admin's, any other unknown key is refused.
type fakeTenants struct{ admin bool }

func (f *fakeTenants) Authenticate(ctx context.Context, hash [32]byte, static string) (tenant.Principal, error) {
	if static != "" {
		return tenant.Principal{Tenant: static, KeyID: "cfg"}, nil
	}
	if hash == sha256.Sum256([]byte("stored-admin")) {
		return tenant.Principal{Tenant: "admin", KeyID: "key_1", Admin: f.admin}, nil
	}
	return tenant.Principal{}, errdefs.ErrUnauthenticated
}

func (f *fakeTenants) GetTenant(ctx context.Context, name string) (*tenancy.TenantView, error) {
	if name == "a" || name == "admin" {
		return &tenancy.TenantView{Tenant: &tenant.Tenant{Name: name}}, nil
	}
	return nil, errdefs.ErrNotFound
}

func TestAuthenticator(t *testing.T) {
	t.Parallel()
	ft := &fakeTenants{admin: true}
	a, err := New(Config{Tenants: ft, Keys: map[string]string{"cfg-a": "a"}, ApproverKeys: map[string]string{"cfg-approver": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if p, err := a.Key(ctx, "cfg-a"); err != nil || p.Tenant != "a" || len(p.Scopes) != 0 {
		t.Fatalf("config key: %+v %v", p, err)
	}
	if p, err := a.Key(ctx, "cfg-approver"); err != nil || len(p.Scopes) != 1 || p.Scopes[0] != tenant.ScopeApprove {
		t.Fatalf("approver key: %+v %v", p, err)
	}
	if _, err := a.Key(ctx, "nobody"); !errors.Is(err, errdefs.ErrUnauthenticated) {
		t.Fatalf("unknown key: %v", err)
	}
	user, _ := a.Key(ctx, "cfg-a")
	if p, err := a.ActAs(ctx, user, "a"); err != nil || p.Tenant != "a" {
		t.Fatalf("acting as itself: %+v %v", p, err)
	}
	if _, err := a.ActAs(ctx, user, "admin"); errdefs.Code(err) != "admin_required" {
		t.Fatalf("a tenant's key acting for another: %v", err)
	}
	admin, _ := a.Key(ctx, "stored-admin")
	if p, err := a.ActAs(ctx, admin, "a"); err != nil || p.Tenant != "a" || p.KeyID != "key_1" {
		t.Fatalf("admin acting for a: %+v %v", p, err)
	}
	if _, err := a.ActAs(ctx, admin, "gone"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("admin acting for a missing tenant: %v", err)
	}
	sum := sha256.Sum256([]byte("stored-admin"))
	if p, err := a.Reissued(ctx, sum, "a", "ticket"); err != nil || p.Tenant != "a" {
		t.Fatalf("reissued for a: %+v %v", p, err)
	}
	ft.admin = false // the key lost its admin tenant meanwhile
	if _, err := a.Reissued(ctx, sum, "a", "ticket"); errdefs.Code(err) != "admin_required" {
		t.Fatalf("reissued after losing admin: %v", err)
	}
	if p, err := a.Reissued(ctx, sum, "admin", "ticket"); err != nil || p.Tenant != "admin" {
		t.Fatalf("reissued for its own tenant: %+v %v", p, err)
	}
}
