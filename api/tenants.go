package api

import "time"

// Quotas bound what one tenant holds at once; 0 means unlimited.
type Quotas struct {
	MaxSandboxes int     `json:"max_sandboxes"`
	MaxCPU       float64 `json:"max_cpu"`
	MaxMemoryMB  int64   `json:"max_memory_mb"`
	MaxLeases    int     `json:"max_leases"`
	// MaxVolumes bounds the tenant's named volumes and MaxVolumeMB their
	// summed size_mb; the service's volumes.max_per_tenant and
	// max_mb_per_tenant stay the ceiling (the lower of the two set holds).
	MaxVolumes  int   `json:"max_volumes"`
	MaxVolumeMB int64 `json:"max_volume_mb"`
}

// QuotasPatch changes the quotas that are set (nil: unchanged; 0: unlimited).
type QuotasPatch struct {
	MaxSandboxes *int     `json:"max_sandboxes,omitempty"`
	MaxCPU       *float64 `json:"max_cpu,omitempty"`
	MaxMemoryMB  *int64   `json:"max_memory_mb,omitempty"`
	MaxLeases    *int     `json:"max_leases,omitempty"`
	MaxVolumes   *int     `json:"max_volumes,omitempty"`
	MaxVolumeMB  *int64   `json:"max_volume_mb,omitempty"`
}

// Usage is what a tenant holds now.
type Usage struct {
	Sandboxes int     `json:"sandboxes"`
	CPU       float64 `json:"cpu"`
	MemoryMB  int64   `json:"memory_mb"`
	Leases    int     `json:"leases"`
	// Volumes and VolumeMB are the tenant's named volumes and their
	// summed size_mb.
	Volumes  int   `json:"volumes"`
	VolumeMB int64 `json:"volume_mb"`
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
