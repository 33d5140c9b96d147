package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"genesis.dev/sandbox/api"
)

// MCP server instances: a stdio MCP server run in a sandbox and served to
// unmodified MCP clients at its own Streamable HTTP endpoint
// (/v1/mcp/servers/{id}/mcp) under its own bearer token. See docs/mcp.md.

// mcpPath is /v1/mcp/servers/{id}, refusing an empty id.
func mcpPath(id string) (string, error) { return idPath("/v1/mcp/servers/", id) }

// MCPServerURL is the absolute URL of instance id's Streamable HTTP
// endpoint. An MCP client connects to it with the instance's token (not
// the API key) as its bearer token.
func (c *Client) MCPServerURL(id string) string {
	return c.baseURL + "/v1/mcp/servers/" + url.PathEscape(id) + "/mcp"
}

// SandboxMCPURL is the Streamable HTTP endpoint of the service's own MCP
// server of sandbox tools (/v1/mcp/sandbox); it takes the API key as its
// bearer token.
func (c *Client) SandboxMCPURL() string { return c.baseURL + "/v1/mcp/sandbox" }

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
	body := api.ApproveMCPPinRequest{Hash: hash}
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
