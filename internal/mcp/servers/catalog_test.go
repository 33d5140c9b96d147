package servers

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/mcp"
)

// memCatalog is a CatalogStore in memory.
type memCatalog struct {
	mu   sync.Mutex
	docs map[string][]byte // tenant/name
}

func (c *memCatalog) CreateEntry(_ context.Context, tenant, name string, _ time.Time, doc []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.docs[tenant+"/"+name]; ok {
		return errdefs.ErrAlreadyExists
	}
	c.docs[tenant+"/"+name] = doc
	return nil
}

func (c *memCatalog) GetEntry(_ context.Context, tenant, name string) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.docs[tenant+"/"+name]
	if !ok {
		return nil, errdefs.ErrNotFound
	}
	return d, nil
}

func (c *memCatalog) ListEntries(_ context.Context, tenant string) ([][]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out [][]byte
	for k, d := range c.docs {
		if strings.HasPrefix(k, tenant+"/") {
			out = append(out, d)
		}
	}
	return out, nil
}

func (c *memCatalog) DeleteEntry(_ context.Context, tenant, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.docs[tenant+"/"+name]; !ok {
		return errdefs.ErrNotFound
	}
	delete(c.docs, tenant+"/"+name)
	return nil
}

func TestTenantCatalog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := &Manager{cfg: Config{Catalog: []Entry{{Name: "op", Source: SourceBuiltin, Command: []string{"x"}, Owner: OwnerOperator}},
		TenantCatalog: &memCatalog{docs: map[string][]byte{}}, Now: time.Now}}
	good := Entry{Name: "mine", Command: []string{"node", "s.js"}, Tools: mcp.Rules{Deny: []string{"rm"}}}
	e, err := m.AddCatalogEntry(ctx, "a", good)
	if err != nil || e.Source != SourceUnverified || e.Owner != OwnerTenant || e.CreatedAt == nil {
		t.Fatalf("add: %+v %v", e, err)
	}
	at := time.Now()
	for _, tc := range []struct {
		name string
		e    Entry
		code string
	}{
		{"taken", good, "catalog_entry_exists"},
		{"shadows the operator", Entry{Name: "op", Command: []string{"x"}}, "catalog_entry_exists"},
		{"builtin", Entry{Name: "b", Source: SourceBuiltin, Command: []string{"x"}}, "catalog_source_not_allowed"},
		{"verified", Entry{Name: "b", Source: SourceVerified, Command: []string{"x"}}, "catalog_source_not_allowed"},
		{"env secrets", Entry{Name: "b", Command: []string{"x"}, Permissions: Permissions{EnvSecrets: []string{"K"}}}, "env_secrets_catalog_only"},
		{"bad name", Entry{Name: "B", Command: []string{"x"}}, "invalid_argument"},
		{"no command", Entry{Name: "b"}, "invalid_argument"},
		{"bad pin", Entry{Name: "b", Command: []string{"x"}, Pins: []mcp.Pin{{Tool: "t", Hash: "md5:1"}}}, "invalid_argument"},
		{"owner given", Entry{Name: "b", Command: []string{"x"}, Owner: OwnerOperator}, "invalid_argument"},
		{"created_at given", Entry{Name: "b", Command: []string{"x"}, CreatedAt: &at}, "invalid_argument"},
	} {
		if _, err := m.AddCatalogEntry(ctx, "a", tc.e); errdefs.Code(err) != tc.code {
			t.Errorf("%s: %v (code %q), want %s", tc.name, err, errdefs.Code(err), tc.code)
		}
	}
	list, err := m.CatalogFor(ctx, "a")
	if err != nil || len(list) != 2 || list[0].Owner != OwnerOperator || list[1].Name != "mine" || list[1].Owner != OwnerTenant || list[1].Tools.Deny[0] != "rm" {
		t.Fatalf("a's catalog: %+v %v", list, err)
	}
	if list, _ := m.CatalogFor(ctx, "b"); len(list) != 1 {
		t.Errorf("b sees %+v", list)
	}
	if _, err := m.CatalogEntry(ctx, "b", "mine"); errdefs.Code(err) != "catalog_entry_not_found" {
		t.Errorf("b gets a's entry: %v", err)
	}
	if err := m.DeleteCatalogEntry(ctx, "a", "op"); errdefs.Code(err) != "catalog_entry_operator" {
		t.Errorf("delete the operator's: %v", err)
	}
	if err := m.DeleteCatalogEntry(ctx, "b", "mine"); errdefs.Code(err) != "catalog_entry_not_found" {
		t.Errorf("b deletes a's: %v", err)
	}
	if err := m.DeleteCatalogEntry(ctx, "a", "mine"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.CatalogEntry(ctx, "a", "mine"); errdefs.Code(err) != "catalog_entry_not_found" {
		t.Errorf("after delete: %v", err)
	}
}
