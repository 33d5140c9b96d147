package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// MCP server instances: a stdio MCP server run in a sandbox and served to
// unmodified MCP clients at its own Streamable HTTP endpoint
// (/v1/mcp/servers/{id}/mcp) under its own bearer token. See docs/mcp.md.

// MCP instance states.
const (
	MCPStateStarting   = "starting"
	MCPStateReady      = "ready"
	MCPStateRestarting = "restarting"
	MCPStateFailed     = "failed"
	MCPStateStopped    = "stopped"
)

// MCPToolRules are path.Match patterns of tool names: a tool is visible
// when no Deny pattern matches it and, if Allow is not empty, an Allow
// pattern does.
type MCPToolRules struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
	// Approve are tools whose every call waits for a decision
	// (DecideMCPApproval) bound to that call's argument digest.
	Approve []string `json:"approve,omitempty"`
}

// MCPPermissions are what a server declares it needs; each raises its risk.
type MCPPermissions struct {
	// Network lists the hosts (host or host:port) it must reach; they
	// become an egress allowlist of exactly those. Empty: no network.
	Network []string `json:"network,omitempty"`
	// Workspace is none, read or write.
	Workspace string `json:"workspace,omitempty"`
	// Tools names operator tools (network.tools of the service's config)
	// the server calls at http://NAME.tool/: the egress gateway adds each
	// tool's credential, so the sandbox never holds it (tool-proxy
	// network). Exclusive with Network.
	Tools []string `json:"tools,omitempty"`
	// EnvSecrets are operator secrets as raw environment variables of the
	// server ("VAR=secret" or "secret"): risk high, and only a catalog
	// entry may declare them (a spec's are 403 env_secrets_catalog_only).
	EnvSecrets []string `json:"env_secrets,omitempty"`
}

// MCPSpec is an ad-hoc server (source ad-hoc, risk high): a stdio MCP
// server command in a profile.
type MCPSpec struct {
	Command []string          `json:"command"`
	Cwd     string            `json:"cwd,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Profile string            `json:"profile,omitempty"`
	// Transport is stdio (the default) or http: the server serves
	// Streamable HTTP on Port at Path (default /mcp) inside its sandbox.
	Transport   string          `json:"transport,omitempty"`
	Port        int             `json:"port,omitempty"`
	Path        string          `json:"path,omitempty"`
	Permissions *MCPPermissions `json:"permissions,omitempty"`
}

// MCPCreateRequest is the body of POST /v1/mcp/servers: exactly one of
// Catalog and Spec.
type MCPCreateRequest struct {
	Catalog string   `json:"catalog,omitempty"`
	Spec    *MCPSpec `json:"spec,omitempty"`
	// Scope is dedicated (the default: one sandbox for the instance) or
	// ephemeral (each tools/call in a sandbox and server of its own).
	Scope string `json:"scope,omitempty"`
	// LeaseID runs the server in a sandbox the tenant already leases.
	LeaseID string `json:"lease_id,omitempty"`
	// Runtime asks for a stronger runtime than the risk requires (runsc
	// where runc would do); a weaker one is refused.
	Runtime string `json:"runtime,omitempty"`
	// Tools are added to the catalog entry's rules (an allow list narrows
	// the entry's, never widens it).
	Tools *MCPToolRules `json:"tools,omitempty"`
	// PinMode is block (the default) or warn (honoured for risk low only).
	PinMode        string `json:"pin_mode,omitempty"`
	IdleTTLSeconds int64  `json:"idle_ttl_seconds,omitempty"`
	CallTimeoutMS  int64  `json:"call_timeout_ms,omitempty"`
	CallCeilingMS  int64  `json:"call_ceiling_ms,omitempty"`
	InitTimeoutMS  int64  `json:"init_timeout_ms,omitempty"`
	// ApprovalTTLSeconds is how long a held call (Tools.Approve) waits
	// for its decision before it is refused as expired.
	ApprovalTTLSeconds int64 `json:"approval_ttl_seconds,omitempty"`
}

// MCPDecision is where and how an instance runs, with the inputs and the
// rule that decided.
type MCPDecision struct {
	Source         string `json:"source"`
	SourceRisk     string `json:"source_risk"`
	PermissionRisk string `json:"permission_risk"`
	Risk           string `json:"risk"`
	Ceiling        string `json:"ceiling"`
	// CeilingFrom is operator, or tenant when the tenant's
	// max_tool_risk_level is the lower.
	CeilingFrom string `json:"ceiling_from,omitempty"`
	// Rule is the decision in words.
	Rule string `json:"rule"`
	// MinRuntime is the least runtime the risk allows (runc or runsc).
	MinRuntime string `json:"min_runtime"`
	// Network is none, allowlist (with Hosts) or tool-proxy (with Tools).
	Network string   `json:"network"`
	Hosts   []string `json:"hosts,omitempty"`
	Tools   []string `json:"tools,omitempty"`
	// Secrets is none, gateway (credentials added by the egress gateway
	// outside the sandbox), env (raw environment variables, declared) or
	// gateway+env.
	Secrets string `json:"secrets"`
}

// MCPImplementation is what a server said it is in its initialize answer.
type MCPImplementation struct {
	Name        string            `json:"name"`
	Title       string            `json:"title,omitempty"`
	Description string            `json:"description,omitempty"`
	Version     string            `json:"version"`
	WebsiteURL  string            `json:"websiteUrl,omitempty"`
	Icons       []json.RawMessage `json:"icons,omitempty"`
}

// MCPServer is an MCP server instance.
type MCPServer struct {
	ID      string   `json:"id"`
	Tenant  string   `json:"tenant"`
	Catalog string   `json:"catalog,omitempty"`
	Command []string `json:"command"`
	Profile string   `json:"profile"`
	Scope   string   `json:"scope"`
	// Endpoint is the path of the Streamable HTTP endpoint (MCPServerURL
	// gives the absolute URL).
	Endpoint string `json:"endpoint"`
	// Token is the endpoint's bearer token: only in the answer to create.
	Token string `json:"token,omitempty"`
	// CreatedBy is the id of the API key that started the server: it may
	// not approve the server's calls or changed tools.
	CreatedBy string `json:"created_by,omitempty"`
	LeaseID   string `json:"lease_id"`
	OwnLease  bool   `json:"own_lease"`
	SandboxID string `json:"sandbox_id"`
	// JobID is the server process's job: its stderr is GetJob's logs.
	JobID    string      `json:"job_id,omitempty"`
	Runtime  string      `json:"runtime"`
	Risk     string      `json:"risk"`
	Network  string      `json:"network"`
	Decision MCPDecision `json:"decision"`
	State    string      `json:"state"`
	Restarts int         `json:"restarts"`
	// OutputRestarts counts planned restarts of a server whose stdout
	// neared its output limit (not failures); its sessions end with each.
	OutputRestarts  int                `json:"output_restarts,omitempty"`
	LastExitCode    *int               `json:"last_exit_code,omitempty"`
	LastError       string             `json:"last_error,omitempty"`
	Server          *MCPImplementation `json:"server,omitempty"`
	ProtocolVersion string             `json:"protocol_version,omitempty"`
	Tools           MCPToolRules       `json:"tools"`
	PinMode         string             `json:"pin_mode"`
	IdleTTLSeconds  int64              `json:"idle_ttl_seconds"`
	CreatedAt       time.Time          `json:"created_at"`
	ReadyAt         *time.Time         `json:"ready_at,omitempty"`
	LastUsedAt      time.Time          `json:"last_used_at"`
	// Secrets names what the server holds or reaches: "env:VAR=secret"
	// for env secrets, "gateway:TOOL" for operator tools. Never values.
	Secrets []string `json:"secrets,omitempty"`
}

// MCPServerList is the body of GET /v1/mcp/servers.
type MCPServerList struct {
	Items []MCPServer `json:"items"`
}

// MCPTool is an MCP Tool object as the server listed it; the schemas and
// annotations are kept as they came.
type MCPTool struct {
	Name         string            `json:"name"`
	Title        string            `json:"title,omitempty"`
	Description  string            `json:"description,omitempty"`
	InputSchema  json.RawMessage   `json:"inputSchema"`
	OutputSchema json.RawMessage   `json:"outputSchema,omitempty"`
	Annotations  json.RawMessage   `json:"annotations,omitempty"`
	Icons        []json.RawMessage `json:"icons,omitempty"`
	Meta         json.RawMessage   `json:"_meta,omitempty"`
}

// MCPToolList is the body of GET /v1/mcp/servers/{id}/tools.
type MCPToolList struct {
	Items []MCPTool `json:"items"`
}

// MCPPinChange is a tool definition that differs from its pin.
type MCPPinChange struct {
	Hash       string          `json:"hash"`
	SeenAt     time.Time       `json:"seen_at"`
	Definition json.RawMessage `json:"definition"`
	// Blocked is true when the tool is hidden and refused until approved.
	Blocked bool `json:"blocked"`
}

// MCPPin is the hash of a tool's canonical definition as first listed (or
// as approved since), and its change if the server's differs now.
type MCPPin struct {
	Tool       string          `json:"tool"`
	Hash       string          `json:"hash"`
	PinnedAt   time.Time       `json:"pinned_at"`
	Definition json.RawMessage `json:"definition"`
	Changed    *MCPPinChange   `json:"changed,omitempty"`
}

// MCPPinList is the body of GET /v1/mcp/servers/{id}/pins.
type MCPPinList struct {
	Items []MCPPin `json:"items"`
}

// MCPCallRecord is the record of one tools/call, resources/read or
// prompts/get through an instance's endpoint.
type MCPCallRecord struct {
	Seq        int64     `json:"seq"`
	Time       time.Time `json:"time"`
	Session    string    `json:"session,omitempty"`
	Client     string    `json:"client,omitempty"`
	Method     string    `json:"method"`
	Tool       string    `json:"tool,omitempty"`
	ArgsDigest string    `json:"args_digest,omitempty"`
	ArgsBytes  int       `json:"args_bytes"`
	// Decision is allowed, refused or hidden.
	Decision   string `json:"decision"`
	Rule       string `json:"rule,omitempty"`
	DurationMS int64  `json:"duration_ms"`
	// Outcome is ok, tool_error, error, timeout, cancelled or refused.
	Outcome     string `json:"outcome"`
	Error       string `json:"error,omitempty"`
	ResultBytes int    `json:"result_bytes"`
	// Secrets are the instance's Secrets at the call.
	Secrets []string `json:"secrets,omitempty"`
	// Egress are the egress gateway's events of the instance's sandbox in
	// the call's window, when it has network (concurrent calls share
	// theirs; the newest may come on a later read).
	Egress []NetworkEvent `json:"egress,omitempty"`
	// SandboxID is, for scope ephemeral, the sandbox of the call's own
	// server.
	SandboxID string `json:"sandbox_id,omitempty"`
}

// MCPCallPage is the body of GET /v1/mcp/servers/{id}/calls.
type MCPCallPage struct {
	Items []MCPCallRecord `json:"items"`
	// NextCursor continues after the page; "" at the end.
	NextCursor string `json:"next_cursor"`
}

// MCPCatalogEntry is a server a create may name by catalog.
type MCPCatalogEntry struct {
	Name        string            `json:"name"`
	Description string            `json:"description,omitempty"`
	Source      string            `json:"source"`
	Profile     string            `json:"profile,omitempty"`
	Command     []string          `json:"command"`
	Cwd         string            `json:"cwd,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	// Transport is stdio (the default) or http: the server serves
	// Streamable HTTP on Port at Path (default /mcp) inside its sandbox.
	Transport   string         `json:"transport,omitempty"`
	Port        int            `json:"port,omitempty"`
	Path        string         `json:"path,omitempty"`
	Permissions MCPPermissions `json:"permissions"`
	Tools       MCPToolRules   `json:"tools"`
	Pins        []MCPPin       `json:"pins,omitempty"`
	// Owner is operator (the service's config) or tenant (an entry your
	// tenant added, seen by it alone).
	Owner     string     `json:"owner,omitempty"`
	CreatedAt *time.Time `json:"created_at,omitempty"`
}

// AddMCPCatalogEntryRequest is the body of POST /v1/mcp/catalog: a
// tenant's own entry. Source is registry, unverified (the default) or
// ad-hoc; env_secrets are the operator's catalog's alone.
type AddMCPCatalogEntryRequest struct {
	Name        string            `json:"name"`
	Description string            `json:"description,omitempty"`
	Source      string            `json:"source,omitempty"`
	Profile     string            `json:"profile,omitempty"`
	Command     []string          `json:"command"`
	Cwd         string            `json:"cwd,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	// Transport is stdio (the default) or http: the server serves
	// Streamable HTTP on Port at Path (default /mcp) inside its sandbox.
	Transport   string         `json:"transport,omitempty"`
	Port        int            `json:"port,omitempty"`
	Path        string         `json:"path,omitempty"`
	Permissions MCPPermissions `json:"permissions,omitzero"`
	Tools       MCPToolRules   `json:"tools,omitzero"`
	// Pins are known-good definitions by tool: {tool, hash} as GET
	// /v1/mcp/servers/{id}/pins shows them.
	Pins []MCPPinRef `json:"pins,omitempty"`
}

// MCPPinRef is a pin given by hash alone.
type MCPPinRef struct {
	Tool string `json:"tool"`
	Hash string `json:"hash"`
}

// MCPCatalog is the body of GET /v1/mcp/catalog.
type MCPCatalog struct {
	Items []MCPCatalogEntry `json:"items"`
}

// mcpPath is /v1/mcp/servers/{id}, refusing an empty id.
func mcpPath(id string) (string, error) { return idPath("/v1/mcp/servers/", id) }

// MCPServerURL is the absolute URL of instance id's Streamable HTTP
// endpoint. An MCP client connects to it with the instance's token (not
// the API key) as its bearer token.
func (c *Client) MCPServerURL(id string) string {
	return c.baseURL + "/v1/mcp/servers/" + url.PathEscape(id) + "/mcp"
}

// CreateMCPServer calls POST /v1/mcp/servers and returns the instance once
// its server has initialized, with its Token (shown only here).
func (c *Client) CreateMCPServer(ctx context.Context, req MCPCreateRequest) (*MCPServer, error) {
	var v MCPServer
	if err := c.do(ctx, request{method: http.MethodPost, path: "/v1/mcp/servers", body: req, auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// ListMCPServers calls GET /v1/mcp/servers (newest first).
func (c *Client) ListMCPServers(ctx context.Context) ([]MCPServer, error) {
	var v MCPServerList
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/mcp/servers", auth: true}, &v); err != nil {
		return nil, err
	}
	return v.Items, nil
}

// GetMCPServer calls GET /v1/mcp/servers/{id}.
func (c *Client) GetMCPServer(ctx context.Context, id string) (*MCPServer, error) {
	p, err := mcpPath(id)
	if err != nil {
		return nil, err
	}
	var v MCPServer
	if err := c.do(ctx, request{method: http.MethodGet, path: p, auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// DeleteMCPServer calls DELETE /v1/mcp/servers/{id}: the server is stopped
// and its own lease released. Deleting an instance that is gone succeeds.
func (c *Client) DeleteMCPServer(ctx context.Context, id string) error {
	p, err := mcpPath(id)
	if err != nil {
		return err
	}
	return c.do(ctx, request{method: http.MethodDelete, path: p, auth: true}, nil)
}

// MCPServerTools calls GET /v1/mcp/servers/{id}/tools: the tools as the
// instance's clients see them (the tool policy applied).
func (c *Client) MCPServerTools(ctx context.Context, id string) ([]MCPTool, error) {
	p, err := mcpPath(id)
	if err != nil {
		return nil, err
	}
	var v MCPToolList
	if err := c.do(ctx, request{method: http.MethodGet, path: p + "/tools", auth: true}, &v); err != nil {
		return nil, err
	}
	return v.Items, nil
}

// MCPServerPins calls GET /v1/mcp/servers/{id}/pins.
func (c *Client) MCPServerPins(ctx context.Context, id string) ([]MCPPin, error) {
	p, err := mcpPath(id)
	if err != nil {
		return nil, err
	}
	var v MCPPinList
	if err := c.do(ctx, request{method: http.MethodGet, path: p + "/pins", auth: true}, &v); err != nil {
		return nil, err
	}
	return v.Items, nil
}

// ApproveMCPPin calls POST /v1/mcp/servers/{id}/pins/{tool}/approve: the
// tool's changed definition, whose hash must be hash, becomes its pin.
func (c *Client) ApproveMCPPin(ctx context.Context, id, tool, hash string) (*MCPPin, error) {
	p, err := mcpPath(id)
	if err != nil {
		return nil, err
	}
	tp, err := idPath(p+"/pins/", tool)
	if err != nil {
		return nil, err
	}
	body := struct {
		Hash string `json:"hash"`
	}{hash}
	var v MCPPin
	if err := c.do(ctx, request{method: http.MethodPost, path: tp + "/approve", body: body, auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// MCPServerCalls calls GET /v1/mcp/servers/{id}/calls: the call records
// after cursor ("" from the start), oldest first, at most limit (0: the
// service's default); next is the cursor of the next page, "" at the end.
func (c *Client) MCPServerCalls(ctx context.Context, id, cursor string, limit int) (items []MCPCallRecord, next string, err error) {
	p, err := mcpPath(id)
	if err != nil {
		return nil, "", err
	}
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var v MCPCallPage
	if err := c.do(ctx, request{method: http.MethodGet, path: p + "/calls", query: q, auth: true}, &v); err != nil {
		return nil, "", err
	}
	return v.Items, v.NextCursor, nil
}

// MCPCatalog calls GET /v1/mcp/catalog.
func (c *Client) MCPCatalog(ctx context.Context) ([]MCPCatalogEntry, error) {
	var v MCPCatalog
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/mcp/catalog", auth: true}, &v); err != nil {
		return nil, err
	}
	return v.Items, nil
}

func mcpCatalogPath(name string) (string, error) { return idPath("/v1/mcp/catalog/", name) }

// AddMCPCatalogEntry calls POST /v1/mcp/catalog.
func (c *Client) AddMCPCatalogEntry(ctx context.Context, req AddMCPCatalogEntryRequest) (*MCPCatalogEntry, error) {
	var v MCPCatalogEntry
	if err := c.do(ctx, request{method: http.MethodPost, path: "/v1/mcp/catalog", body: req, auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// GetMCPCatalogEntry calls GET /v1/mcp/catalog/{name}.
func (c *Client) GetMCPCatalogEntry(ctx context.Context, name string) (*MCPCatalogEntry, error) {
	p, err := mcpCatalogPath(name)
	if err != nil {
		return nil, err
	}
	var v MCPCatalogEntry
	if err := c.do(ctx, request{method: http.MethodGet, path: p, auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// DeleteMCPCatalogEntry calls DELETE /v1/mcp/catalog/{name}: one of your
// tenant's own entries (running instances are unaffected).
func (c *Client) DeleteMCPCatalogEntry(ctx context.Context, name string) error {
	p, err := mcpCatalogPath(name)
	if err != nil {
		return err
	}
	return c.do(ctx, request{method: http.MethodDelete, path: p, auth: true}, nil)
}

// MCP approval states.
const (
	MCPApprovalPending   = "pending"
	MCPApprovalApproved  = "approved"
	MCPApprovalDenied    = "denied"
	MCPApprovalExpired   = "expired"
	MCPApprovalAbandoned = "abandoned"
)

// MCPApproval is a tools/call held for a decision, bound to exactly that
// call: its instance, tool and argument digest, until ExpiresAt.
type MCPApproval struct {
	ID         string          `json:"id"`
	Instance   string          `json:"instance"`
	Tool       string          `json:"tool"`
	Arguments  json.RawMessage `json:"arguments,omitempty"`
	ArgsDigest string          `json:"args_digest"`
	Session    string          `json:"session,omitempty"`
	Client     string          `json:"client,omitempty"`
	State      string          `json:"state"`
	CreatedAt  time.Time       `json:"created_at"`
	ExpiresAt  time.Time       `json:"expires_at"`
	DecidedAt  *time.Time      `json:"decided_at,omitempty"`
	DecidedBy  string          `json:"decided_by,omitempty"`
	Reason     string          `json:"reason,omitempty"`
}

// MCPApprovalList is the body of GET /v1/mcp/servers/{id}/approvals.
type MCPApprovalList struct {
	Items []MCPApproval `json:"items"`
}

// MCPApprovalDecision is the body of POST
// /v1/mcp/servers/{id}/approvals/{approval}.
type MCPApprovalDecision struct {
	// Decision is approve or deny.
	Decision string `json:"decision"`
	// ArgsDigest must be the held call's: a decision never applies to
	// other arguments.
	ArgsDigest string `json:"args_digest"`
	Reason     string `json:"reason,omitempty"`
}

// MCPServerApprovals calls GET /v1/mcp/servers/{id}/approvals: the held
// calls, pending and decided (the newest 200).
func (c *Client) MCPServerApprovals(ctx context.Context, id string) ([]MCPApproval, error) {
	p, err := mcpPath(id)
	if err != nil {
		return nil, err
	}
	var v MCPApprovalList
	if err := c.do(ctx, request{method: http.MethodGet, path: p + "/approvals", auth: true}, &v); err != nil {
		return nil, err
	}
	return v.Items, nil
}

// DecideMCPApproval calls POST /v1/mcp/servers/{id}/approvals/{approval}.
func (c *Client) DecideMCPApproval(ctx context.Context, id, approval string, d MCPApprovalDecision) (*MCPApproval, error) {
	p, err := mcpPath(id)
	if err != nil {
		return nil, err
	}
	ap, err := idPath(p+"/approvals/", approval)
	if err != nil {
		return nil, err
	}
	var v MCPApproval
	if err := c.do(ctx, request{method: http.MethodPost, path: ap, body: d, auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}
