package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// GetNetwork calls GET /v1/sandboxes/{id}/network.
func (c *Client) GetNetwork(ctx context.Context, id string) (*SandboxNetwork, error) {
	p, err := idPath("/v1/sandboxes/", id)
	if err != nil {
		return nil, err
	}
	var v SandboxNetwork
	if err := c.do(ctx, request{method: http.MethodGet, path: p + "/network", auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// SetNetwork calls PUT /v1/sandboxes/{id}/network. ifMatch, if not empty,
// is the resource_version the change is based on (412 when stale).
func (c *Client) SetNetwork(ctx context.Context, id string, pol NetworkPolicy, ifMatch string) (*SandboxNetwork, error) {
	p, err := idPath("/v1/sandboxes/", id)
	if err != nil {
		return nil, err
	}
	r := request{method: http.MethodPut, path: p + "/network", auth: true, body: pol}
	if ifMatch != "" {
		r.header = http.Header{"If-Match": {quoteETag(ifMatch)}}
	}
	var v SandboxNetwork
	if err := c.do(ctx, r, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// NetworkEvents calls GET /v1/sandboxes/{id}/network/events: up to limit
// (0: the server default) events after cursor ("" or "0": from the start).
func (c *Client) NetworkEvents(ctx context.Context, id, cursor string, limit int) (*NetworkEventList, error) {
	p, err := idPath("/v1/sandboxes/", id)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var v NetworkEventList
	if err := c.do(ctx, request{method: http.MethodGet, path: p + "/network/events", query: q, auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}
