package store

import (
	"context"
	"time"
)

// MCPCatalogEntry is a tenant's own MCP catalog entry. The store keeps Doc,
// a JSON document the MCP servers package owns (the entry), as JSON.
type MCPCatalogEntry struct {
	Tenant    string
	Name      string
	CreatedAt time.Time
	Doc       []byte
}

// MCPCatalog keeps the tenants' MCP catalog entries. An entry is
// immutable: replacing one is a delete and a create.
type MCPCatalog interface {
	// CreateMCPCatalogEntry stores e; a name the tenant already has is
	// errdefs.ErrAlreadyExists.
	CreateMCPCatalogEntry(ctx context.Context, e *MCPCatalogEntry) error
	// GetMCPCatalogEntry returns one entry of the tenant.
	GetMCPCatalogEntry(ctx context.Context, tenant, name string) (*MCPCatalogEntry, error)
	// ListMCPCatalogEntries returns the tenant's entries by name.
	ListMCPCatalogEntries(ctx context.Context, tenant string) ([]*MCPCatalogEntry, error)
	// DeleteMCPCatalogEntry removes one entry of the tenant.
	DeleteMCPCatalogEntry(ctx context.Context, tenant, name string) error
}
