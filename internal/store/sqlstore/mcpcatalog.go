package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/store"
)

const mcpCatalogColumns = `tenant, name, created_at, doc`

func scanMCPCatalogEntry(r scanner) (*store.MCPCatalogEntry, error) {
	var (
		e   store.MCPCatalogEntry
		at  dbTime
		doc string
	)
	if err := r.Scan(&e.Tenant, &e.Name, &at, &doc); err != nil {
		return nil, err
	}
	e.CreatedAt, e.Doc = at.t, []byte(doc)
	return &e, nil
}

// CreateMCPCatalogEntry stores a tenant's catalog entry.
func (s *Store) CreateMCPCatalogEntry(ctx context.Context, e *store.MCPCatalogEntry) error {
	if e == nil || e.Tenant == "" || e.Name == "" || len(e.Doc) == 0 {
		return errdefs.Invalid("create mcp catalog entry: missing tenant, name or doc")
	}
	at, err := s.encodeTime("created_at", e.CreatedAt)
	if err != nil {
		return err
	}
	_, err = s.writer.ExecContext(ctx, s.q(`INSERT INTO mcp_catalog (`+mcpCatalogColumns+`) VALUES (?, ?, ?, ?)`), e.Tenant, e.Name, at, string(e.Doc))
	if s.isUniqueViolation(err) {
		return fmt.Errorf("mcp catalog entry %s: %w", e.Name, errdefs.ErrAlreadyExists)
	}
	if err != nil {
		return s.dbError(ctx, "create mcp catalog entry "+e.Name, err)
	}
	return nil
}

// GetMCPCatalogEntry returns one entry of the tenant.
func (s *Store) GetMCPCatalogEntry(ctx context.Context, tenant, name string) (*store.MCPCatalogEntry, error) {
	e, err := scanMCPCatalogEntry(s.reader.QueryRowContext(ctx, s.q(`SELECT `+mcpCatalogColumns+` FROM mcp_catalog WHERE tenant = ? AND name = ?`), tenant, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("mcp catalog entry %s: %w", name, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, s.dbError(ctx, "get mcp catalog entry "+name, err)
	}
	return e, nil
}

// ListMCPCatalogEntries returns the tenant's entries by name.
func (s *Store) ListMCPCatalogEntries(ctx context.Context, tenant string) ([]*store.MCPCatalogEntry, error) {
	return appendRows(ctx, s, s.reader, []*store.MCPCatalogEntry{}, "list mcp catalog", scanMCPCatalogEntry,
		`SELECT `+mcpCatalogColumns+` FROM mcp_catalog WHERE tenant = ? ORDER BY name`, tenant)
}

// DeleteMCPCatalogEntry removes one entry of the tenant.
func (s *Store) DeleteMCPCatalogEntry(ctx context.Context, tenant, name string) error {
	res, err := s.writer.ExecContext(ctx, s.q(`DELETE FROM mcp_catalog WHERE tenant = ? AND name = ?`), tenant, name)
	if err != nil {
		return s.dbError(ctx, "delete mcp catalog entry "+name, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("mcp catalog entry %s: %w", name, errdefs.ErrNotFound)
	}
	return nil
}
