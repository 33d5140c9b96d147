package client

import (
	"context"
	"net/http"
	"net/url"
)

// AcquireLease calls POST /v1/leases: a sandbox, warm from a pool when one
// is idle. A full host answers 503 (code capacity_exhausted) with
// Retry-After once wait_seconds have passed.
func (c *Client) AcquireLease(ctx context.Context, req AcquireLeaseRequest) (*Lease, error) {
	var v Lease
	if err := c.do(ctx, request{method: http.MethodPost, path: "/v1/leases", body: req, auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// GetLease calls GET /v1/leases/{id}.
func (c *Client) GetLease(ctx context.Context, id string) (*Lease, error) {
	p, err := idPath("/v1/leases/", id)
	if err != nil {
		return nil, err
	}
	var v Lease
	if err := c.do(ctx, request{method: http.MethodGet, path: p, auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// ListLeases calls GET /v1/leases; states filters (none: all).
func (c *Client) ListLeases(ctx context.Context, states ...string) ([]Lease, error) {
	q := url.Values{}
	for _, s := range states {
		q.Add("state", s)
	}
	var v LeaseList
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/leases", query: q, auth: true}, &v); err != nil {
		return nil, err
	}
	return v.Items, nil
}

// RenewLease calls POST /v1/leases/{id}/renew (ttl nil: the lease's own
// length from now).
func (c *Client) RenewLease(ctx context.Context, id string, ttl *int64) (*Lease, error) {
	p, err := idPath("/v1/leases/", id)
	if err != nil {
		return nil, err
	}
	var v Lease
	r := request{method: http.MethodPost, path: p + "/renew", body: RenewLeaseRequest{TTLSeconds: ttl}, auth: true}
	if err := c.do(ctx, r, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// ReleaseLease calls DELETE /v1/leases/{id}: running jobs are canceled and
// the sandbox destroyed. Releasing a released lease succeeds.
func (c *Client) ReleaseLease(ctx context.Context, id string) error {
	p, err := idPath("/v1/leases/", id)
	if err != nil {
		return err
	}
	return c.do(ctx, request{method: http.MethodDelete, path: p, auth: true}, nil)
}

// Pools calls GET /v1/pools.
func (c *Client) Pools(ctx context.Context) (*PoolList, error) {
	var v PoolList
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/pools", auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// DrainPool calls POST /v1/pools/{name}/drain (a pool name, or a profile
// name for all of its pools).
func (c *Client) DrainPool(ctx context.Context, name string) (*PoolList, error) {
	p, err := idPath("/v1/pools/", name)
	if err != nil {
		return nil, err
	}
	var v PoolList
	if err := c.do(ctx, request{method: http.MethodPost, path: p + "/drain", auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}
