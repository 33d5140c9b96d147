package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

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
