package client

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"genesis.dev/sandbox/api"
)

// OpenSandboxListSandboxes lists the key's sandboxes through the
// OpenSandbox adapter (its first page of 200), as the SDKs would.
func (c *Client) OpenSandboxListSandboxes(ctx context.Context) ([]OpenSandboxSandbox, error) {
	var out api.OpenSandboxSandboxList
	err := c.do(ctx, request{method: http.MethodGet, path: "/opensandbox/v1/sandboxes", query: url.Values{"pageSize": {"200"}},
		header: http.Header{"Open-Sandbox-Api-Key": {c.apiKey}}}, &out)
	return out.Items, err
}

// OpenSandboxEnv returns the environment that points the OpenSandbox SDKs
// at this service with the client's key: OPEN_SANDBOX_DOMAIN is
// host[:port]/opensandbox (with its scheme when it is https; the SDKs
// append /v1).
func (c *Client) OpenSandboxEnv() map[string]string {
	domain := strings.TrimPrefix(c.baseURL, "http://")
	return map[string]string{
		"OPEN_SANDBOX_DOMAIN":  domain + "/opensandbox",
		"OPEN_SANDBOX_API_KEY": c.apiKey,
	}
}
