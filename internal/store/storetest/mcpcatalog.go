package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/store"
)

// testMCPCatalog checks tenants' catalog entries: unique names per tenant,
// tenant isolation, listing by name, deletion.
func testMCPCatalog(t *testing.T, st store.Store) {
	ctx := context.Background()
	entry := func(tenant, name string) *store.MCPCatalogEntry {
		return &store.MCPCatalogEntry{Tenant: tenant, Name: name, CreatedAt: base, Doc: []byte(`{"name":"` + name + `","tenant":"` + tenant + `"}`)}
	}
	for _, e := range []*store.MCPCatalogEntry{entry("a", "zeta"), entry("a", "alpha"), entry("b", "alpha")} {
		if err := st.CreateMCPCatalogEntry(ctx, e); err != nil {
			t.Fatalf("create %s/%s: %v", e.Tenant, e.Name, err)
		}
	}
	if err := st.CreateMCPCatalogEntry(ctx, entry("a", "alpha")); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("a second a/alpha: %v, want ErrAlreadyExists", err)
	}
	if err := st.CreateMCPCatalogEntry(ctx, &store.MCPCatalogEntry{Tenant: "a", Name: "x"}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("no doc: %v, want ErrInvalidArgument", err)
	}
	got, err := st.GetMCPCatalogEntry(ctx, "b", "alpha")
	var doc struct{ Name, Tenant string }
	if err != nil || got.Tenant != "b" || json.Unmarshal(got.Doc, &doc) != nil || doc.Name != "alpha" || doc.Tenant != "b" || !got.CreatedAt.Equal(base) {
		t.Fatalf("get b/alpha: %+v %v", got, err)
	}
	if _, err := st.GetMCPCatalogEntry(ctx, "b", "zeta"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("b/zeta (a's): %v, want ErrNotFound", err)
	}
	list, err := st.ListMCPCatalogEntries(ctx, "a")
	if err != nil || len(list) != 2 || list[0].Name != "alpha" || list[1].Name != "zeta" {
		t.Fatalf("list a: %+v %v", list, err)
	}
	if list, err := st.ListMCPCatalogEntries(ctx, "c"); err != nil || list == nil || len(list) != 0 {
		t.Fatalf("list c: %+v %v, want an empty list", list, err)
	}
	if err := st.DeleteMCPCatalogEntry(ctx, "b", "zeta"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("delete b/zeta (a's): %v, want ErrNotFound", err)
	}
	if err := st.DeleteMCPCatalogEntry(ctx, "a", "alpha"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetMCPCatalogEntry(ctx, "a", "alpha"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("a/alpha after delete: %v", err)
	}
	if _, err := st.GetMCPCatalogEntry(ctx, "b", "alpha"); err != nil {
		t.Fatalf("b/alpha after a's delete: %v", err)
	}
	// The name is free again.
	if err := st.CreateMCPCatalogEntry(ctx, entry("a", "alpha")); err != nil {
		t.Fatal(err)
	}
}
