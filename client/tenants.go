package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Quotas bound what one tenant holds at once; 0 means unlimited.
type Quotas struct {
	MaxSandboxes int     `json:"max_sandboxes"`
	MaxCPU       float64 `json:"max_cpu"`
	MaxMemoryMB  int64   `json:"max_memory_mb"`
	MaxLeases    int     `json:"max_leases"`
}

// QuotasPatch changes the quotas that are set (nil: unchanged; 0: unlimited).
type QuotasPatch struct {
	MaxSandboxes *int     `json:"max_sandboxes,omitempty"`
	MaxCPU       *float64 `json:"max_cpu,omitempty"`
	MaxMemoryMB  *int64   `json:"max_memory_mb,omitempty"`
	MaxLeases    *int     `json:"max_leases,omitempty"`
}

// Usage is what a tenant holds now.
type Usage struct {
	Sandboxes int     `json:"sandboxes"`
	CPU       float64 `json:"cpu"`
	MemoryMB  int64   `json:"memory_mb"`
	Leases    int     `json:"leases"`
}

// Tenant is an owner of API keys, sandboxes, quotas and audit records.
type Tenant struct {
	Name         string `json:"name"`
	Weight       int    `json:"weight"`
	MinRiskLevel string `json:"min_risk_level,omitempty"`
	// MaxToolRiskLevel caps the risk of the tenant's MCP server instances
	// and skill runs (absent: the operator's ceiling alone).
	MaxToolRiskLevel string `json:"max_tool_risk_level,omitempty"`
	Admin            bool   `json:"admin"`
	Quotas           Quotas `json:"quotas"`
	// Source is "config" (defined in the config file; read-only here) or
	// "api".
	Source string `json:"source"`
	// Usage is what the tenant's live sandboxes hold now (set by GET
	// /v1/tenants and GET /v1/tenants/{name}).
	Usage           *Usage    `json:"usage,omitempty"`
	ResourceVersion string    `json:"resource_version"`
	CreatedAt       time.Time `json:"created_at"`
	UpdatedAt       time.Time `json:"updated_at"`
}

// TenantList is the answer of GET /v1/tenants.
type TenantList struct {
	Items []Tenant `json:"items"`
}

// CreateTenantRequest is the body of POST /v1/tenants.
type CreateTenantRequest struct {
	Name             string  `json:"name"`
	Weight           int     `json:"weight,omitempty"`
	MinRiskLevel     string  `json:"min_risk_level,omitempty"`
	MaxToolRiskLevel string  `json:"max_tool_risk_level,omitempty"`
	Admin            bool    `json:"admin,omitempty"`
	Quotas           *Quotas `json:"quotas,omitempty"`
}

// UpdateTenantRequest is the body of PATCH /v1/tenants/{name}; nil fields
// are unchanged.
type UpdateTenantRequest struct {
	Weight       *int    `json:"weight,omitempty"`
	MinRiskLevel *string `json:"min_risk_level,omitempty"`
	// MaxToolRiskLevel "" removes the tenant's own ceiling.
	MaxToolRiskLevel *string      `json:"max_tool_risk_level,omitempty"`
	Admin            *bool        `json:"admin,omitempty"`
	Quotas           *QuotasPatch `json:"quotas,omitempty"`
}

// APIKey is an API key of a tenant. Key (the secret) is set only in the
// answer that created it.
type APIKey struct {
	ID          string `json:"id"`
	Tenant      string `json:"tenant"`
	Prefix      string `json:"prefix"`
	Description string `json:"description,omitempty"`
	// Scopes are the key's rights beyond its tenant's API (ScopeApprove).
	Scopes    []string   `json:"scopes,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	Key       string     `json:"key,omitempty"`
}

// ScopeApprove is the key scope that decides MCP calls held for approval
// and approves changed tool definitions, of MCP servers the key did not
// start. Give it to a person's key, not to an agent's.
const ScopeApprove = "approve"

// APIKeyList is the answer of GET /v1/tenants/{name}/keys.
type APIKeyList struct {
	Items []APIKey `json:"items"`
}

// CreateAPIKeyRequest is the body of POST /v1/tenants/{name}/keys.
type CreateAPIKeyRequest struct {
	Description string `json:"description,omitempty"`
	// Scopes the key holds (ScopeApprove); none by default.
	Scopes []string `json:"scopes,omitempty"`
}

// AuditRecord is one entry of the audit log.
type AuditRecord struct {
	Seq       int64     `json:"seq"`
	Time      time.Time `json:"time"`
	Actor     string    `json:"actor"`
	Tenant    string    `json:"tenant"`
	Action    string    `json:"action"`
	Target    string    `json:"target,omitempty"`
	Status    int       `json:"status"`
	Code      string    `json:"code,omitempty"`
	RequestID string    `json:"request_id,omitempty"`
	Remote    string    `json:"remote,omitempty"`
}

// AuditPage is one page of GET /v1/audit.
type AuditPage struct {
	Items []AuditRecord `json:"items"`
	// NextCursor continues after the last record of this page (or after the
	// given cursor when the page is empty); pass it as Cursor to get the
	// next page or, later, the records written since.
	NextCursor string `json:"next_cursor"`
	// HasMore says that more records matched than this page holds.
	HasMore bool `json:"has_more"`
}

// AuditQuery filters GET /v1/audit. Zero fields do not filter.
type AuditQuery struct {
	Tenant string
	// Action is a whole action ("POST /v1/sandboxes") or a method ("DELETE").
	Action string
	Target string
	Since  time.Time
	Until  time.Time
	// Result is a status ("404"), a status class ("4xx") or a problem code
	// ("quota_exceeded").
	Result string
	Limit  int
	Cursor string
	// Newest lists the newest records first; Cursor then continues with
	// older ones.
	Newest bool
}

func (q AuditQuery) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"tenant": q.Tenant, "action": q.Action, "target": q.Target, "result": q.Result, "cursor": q.Cursor} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339Nano))
	}
	if !q.Until.IsZero() {
		v.Set("until", q.Until.UTC().Format(time.RFC3339Nano))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Newest {
		v.Set("order", "newest")
	}
	return v
}

// CreateTenant calls POST /v1/tenants (admin keys only).
func (c *Client) CreateTenant(ctx context.Context, req CreateTenantRequest) (*Tenant, error) {
	var v Tenant
	if err := c.do(ctx, request{method: http.MethodPost, path: "/v1/tenants", auth: true, body: req}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// ListTenants calls GET /v1/tenants (admin keys only).
func (c *Client) ListTenants(ctx context.Context) (*TenantList, error) {
	var v TenantList
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/tenants", auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// GetTenant calls GET /v1/tenants/{name} (admin keys only); the answer
// includes the tenant's current usage.
func (c *Client) GetTenant(ctx context.Context, name string) (*Tenant, error) {
	p, err := idPath("/v1/tenants/", name)
	if err != nil {
		return nil, err
	}
	var v Tenant
	if err := c.do(ctx, request{method: http.MethodGet, path: p, auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// UpdateTenant calls PATCH /v1/tenants/{name} (admin keys only). A non-empty
// ifMatch is sent as If-Match.
func (c *Client) UpdateTenant(ctx context.Context, name string, req UpdateTenantRequest, ifMatch string) (*Tenant, error) {
	p, err := idPath("/v1/tenants/", name)
	if err != nil {
		return nil, err
	}
	r := request{method: http.MethodPatch, path: p, auth: true, body: req}
	if ifMatch != "" {
		r.header = http.Header{"If-Match": {quoteETag(ifMatch)}}
	}
	var v Tenant
	if err := c.do(ctx, r, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// DeleteTenant calls DELETE /v1/tenants/{name} (admin keys only).
func (c *Client) DeleteTenant(ctx context.Context, name string) error {
	p, err := idPath("/v1/tenants/", name)
	if err != nil {
		return err
	}
	return c.do(ctx, request{method: http.MethodDelete, path: p, auth: true}, nil)
}

// CreateAPIKey calls POST /v1/tenants/{name}/keys (admin keys only). The
// answer's Key is the secret; it is not shown again.
func (c *Client) CreateAPIKey(ctx context.Context, tenant string, req CreateAPIKeyRequest) (*APIKey, error) {
	p, err := idPath("/v1/tenants/", tenant)
	if err != nil {
		return nil, err
	}
	var v APIKey
	if err := c.do(ctx, request{method: http.MethodPost, path: p + "/keys", auth: true, body: req}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// ListAPIKeys calls GET /v1/tenants/{name}/keys (admin keys only).
func (c *Client) ListAPIKeys(ctx context.Context, tenant string) (*APIKeyList, error) {
	p, err := idPath("/v1/tenants/", tenant)
	if err != nil {
		return nil, err
	}
	var v APIKeyList
	if err := c.do(ctx, request{method: http.MethodGet, path: p + "/keys", auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// RevokeAPIKey calls DELETE /v1/tenants/{name}/keys/{key_id} (admin keys
// only). Revoking a revoked key succeeds.
func (c *Client) RevokeAPIKey(ctx context.Context, tenant, keyID string) error {
	p, err := idPath("/v1/tenants/", tenant)
	if err != nil {
		return err
	}
	kp, err := idPath(p+"/keys/", keyID)
	if err != nil {
		return err
	}
	return c.do(ctx, request{method: http.MethodDelete, path: kp, auth: true}, nil)
}

// ListAudit calls GET /v1/audit. A tenant's key sees only its own records;
// an admin key sees all.
func (c *Client) ListAudit(ctx context.Context, q AuditQuery) (*AuditPage, error) {
	var v AuditPage
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/audit", query: q.values(), auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}
