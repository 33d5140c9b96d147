package servers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/mcp"
)

// Entry is a catalogued server: where its code comes from, how to start
// it, what it declares it needs, and its tool rules and pins.
type Entry struct {
	Name        string            `json:"name" yaml:"name"`
	Description string            `json:"description,omitempty" yaml:"description"`
	Source      Source            `json:"source" yaml:"source"`
	Profile     string            `json:"profile,omitempty" yaml:"profile"`
	Command     []string          `json:"command" yaml:"command"`
	Cwd         string            `json:"cwd,omitempty" yaml:"cwd"`
	Env         map[string]string `json:"env,omitempty" yaml:"env"`
	// Transport is stdio (the default: the command speaks MCP on its
	// stdin and stdout) or http (it serves Streamable HTTP on Port at
	// Path inside its sandbox, reached through the port primitive).
	Transport   string      `json:"transport,omitempty" yaml:"transport"`
	Port        int         `json:"port,omitempty" yaml:"port"`
	Path        string      `json:"path,omitempty" yaml:"path"`
	Permissions Permissions `json:"permissions" yaml:"permissions"`
	Tools       mcp.Rules   `json:"tools" yaml:"tools"`
	// Pins are known-good tool definitions (a changed one is a rug pull
	// from the first tools/list on).
	Pins []mcp.Pin `json:"pins,omitempty" yaml:"pins"`
	// Owner is operator (the config's catalog) or tenant (an entry the
	// tenant added through the API, seen by that tenant alone).
	Owner     string     `json:"owner,omitempty" yaml:"-"`
	CreatedAt *time.Time `json:"created_at,omitempty" yaml:"-"`
}

// Transports of a server.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http"
)

// Owners of catalog entries.
const (
	OwnerOperator = "operator"
	OwnerTenant   = "tenant"
)

var (
	entryNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
	pinHashRE   = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// Validate checks an entry.
func (e Entry) Validate() error {
	if len(e.Command) == 0 || e.Command[0] == "" {
		return errdefs.Invalid("command is required")
	}
	if _, ok := sourceRisk[e.Source]; !ok {
		return errdefs.Invalid("unknown source %q (builtin, verified, registry, unverified, ad-hoc)", e.Source)
	}
	if err := e.Permissions.Validate(); err != nil {
		return err
	}
	switch e.Transport {
	case "", TransportStdio:
		if e.Port != 0 || e.Path != "" {
			return fmt.Errorf("port and path go with transport http: %w", errdefs.ErrInvalidArgument)
		}
	case TransportHTTP:
		if e.Port < 1 || e.Port > 65535 {
			return errdefs.Invalid("transport http needs the port the server listens on (1-65535), got %d", e.Port)
		}
		if e.Path != "" && !strings.HasPrefix(e.Path, "/") {
			return errdefs.Invalid("path must start with /, got %q", e.Path)
		}
	default:
		return errdefs.Invalid("transport must be stdio or http, got %q", e.Transport)
	}
	for _, p := range e.Pins {
		if p.Tool == "" || !pinHashRE.MatchString(p.Hash) {
			return errdefs.Invalid("pin %q: a pin names a tool and a hash sha256:<64 hex digits>, got %q", p.Tool, p.Hash)
		}
	}
	return e.Tools.Validate()
}

// CatalogStore keeps the tenants' own entries as JSON documents (the
// service's store, through an adapter: this package has no store).
type CatalogStore interface {
	// CreateEntry stores a new entry; a name the tenant has is
	// errdefs.ErrAlreadyExists.
	CreateEntry(ctx context.Context, tenant, name string, at time.Time, doc []byte) error
	// GetEntry returns one entry's document (errdefs.ErrNotFound if none).
	GetEntry(ctx context.Context, tenant, name string) ([]byte, error)
	// ListEntries returns the tenant's entries' documents by name.
	ListEntries(ctx context.Context, tenant string) ([][]byte, error)
	// DeleteEntry removes one entry (errdefs.ErrNotFound if none).
	DeleteEntry(ctx context.Context, tenant, name string) error
}

// tenantSources are the sources a tenant may give its own entries:
// builtin and verified are the operator's word, never a tenant's.
var tenantSources = []Source{SourceRegistry, SourceUnverified, SourceAdHoc}

// AddCatalogEntry stores a tenant's own catalog entry, seen by that tenant
// alone. Its source is registry, unverified (the default) or ad-hoc; it
// cannot take the operator's secrets (env_secrets) nor shadow an operator
// entry's name. Instances already started from an entry are unaffected by
// later changes to it.
func (m *Manager) AddCatalogEntry(ctx context.Context, tenant string, e Entry) (*Entry, error) {
	if m.cfg.TenantCatalog == nil {
		return nil, errdefs.WithCode("mcp_catalog_read_only", fmt.Errorf("this service keeps no tenant catalog entries: %w", errdefs.ErrNotImplemented))
	}
	if !entryNameRE.MatchString(e.Name) {
		return nil, invalid("name %q must be 1-63 lowercase letters, digits and dashes", e.Name)
	}
	if e.Owner != "" || e.CreatedAt != nil {
		return nil, invalid("owner and created_at are set by the service")
	}
	if _, ok := m.operatorEntry(e.Name); ok {
		return nil, errdefs.WithCode("catalog_entry_exists", fmt.Errorf(
			"the operator's catalog has an entry %q; a tenant entry cannot shadow it: %w", e.Name, errdefs.ErrAlreadyExists))
	}
	if e.Source == "" {
		e.Source = SourceUnverified
	}
	if !slices.Contains(tenantSources, e.Source) {
		return nil, errdefs.WithCode("catalog_source_not_allowed", fmt.Errorf(
			"a tenant's entry has source registry, unverified or ad-hoc, not %q (builtin and verified are the operator's): %w", e.Source, errdefs.ErrPermissionDenied))
	}
	if len(e.Permissions.EnvSecrets) > 0 {
		return nil, errdefs.WithCode("env_secrets_catalog_only", fmt.Errorf(
			"a tenant's entry cannot take the operator's secrets; only the operator's catalog may declare env_secrets: %w", errdefs.ErrPermissionDenied))
	}
	if err := e.Validate(); err != nil {
		return nil, err
	}
	now := m.cfg.Now().UTC()
	e.Owner, e.CreatedAt = OwnerTenant, &now
	for i := range e.Pins {
		e.Pins[i] = mcp.Pin{Tool: e.Pins[i].Tool, Hash: e.Pins[i].Hash}
	}
	doc, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	err = m.cfg.TenantCatalog.CreateEntry(ctx, tenant, e.Name, now, doc)
	if errors.Is(err, errdefs.ErrAlreadyExists) {
		return nil, errdefs.WithCode("catalog_entry_exists", fmt.Errorf("your catalog has an entry %q (delete it first): %w", e.Name, errdefs.ErrAlreadyExists))
	}
	if err != nil {
		return nil, err
	}
	return &e, nil
}

// CatalogFor lists what tenant may name: the operator's entries, then the
// tenant's own, each by name.
func (m *Manager) CatalogFor(ctx context.Context, tenant string) ([]Entry, error) {
	out := m.Catalog()
	if m.cfg.TenantCatalog == nil {
		return out, nil
	}
	docs, err := m.cfg.TenantCatalog.ListEntries(ctx, tenant)
	if err != nil {
		return nil, err
	}
	for _, doc := range docs {
		e, err := decodeEntry(tenant, doc)
		if err != nil {
			return nil, err
		}
		out = append(out, *e)
	}
	return out, nil
}

// CatalogEntry returns one entry tenant may name.
func (m *Manager) CatalogEntry(ctx context.Context, tenant, name string) (*Entry, error) {
	if e, ok := m.operatorEntry(name); ok {
		return &e, nil
	}
	notFound := errdefs.WithCode("catalog_entry_not_found", fmt.Errorf("no catalog entry %q (GET /v1/mcp/catalog lists them): %w", name, errdefs.ErrNotFound))
	if m.cfg.TenantCatalog == nil || !entryNameRE.MatchString(name) {
		return nil, notFound
	}
	doc, err := m.cfg.TenantCatalog.GetEntry(ctx, tenant, name)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, notFound
	}
	if err != nil {
		return nil, err
	}
	return decodeEntry(tenant, doc)
}

// DeleteCatalogEntry removes one of the tenant's own entries; the
// operator's are the config's.
func (m *Manager) DeleteCatalogEntry(ctx context.Context, tenant, name string) error {
	if _, ok := m.operatorEntry(name); ok {
		return errdefs.WithCode("catalog_entry_operator", fmt.Errorf("%q is an entry of the operator's catalog (the config's): %w", name, errdefs.ErrPermissionDenied))
	}
	if m.cfg.TenantCatalog == nil || !entryNameRE.MatchString(name) {
		return errdefs.WithCode("catalog_entry_not_found", fmt.Errorf("no catalog entry %q: %w", name, errdefs.ErrNotFound))
	}
	err := m.cfg.TenantCatalog.DeleteEntry(ctx, tenant, name)
	if errors.Is(err, errdefs.ErrNotFound) {
		return errdefs.WithCode("catalog_entry_not_found", fmt.Errorf("no catalog entry %q: %w", name, errdefs.ErrNotFound))
	}
	return err
}

func (m *Manager) operatorEntry(name string) (Entry, bool) {
	i := slices.IndexFunc(m.cfg.Catalog, func(e Entry) bool { return e.Name == name })
	if i < 0 {
		return Entry{}, false
	}
	return m.cfg.Catalog[i], true
}

func decodeEntry(tenant string, doc []byte) (*Entry, error) {
	var e Entry
	if err := json.Unmarshal(doc, &e); err != nil {
		return nil, fmt.Errorf("an mcp catalog entry of tenant %s: %w", tenant, err)
	}
	e.Owner = OwnerTenant
	return &e, nil
}
