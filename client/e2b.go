package client

import (
	"context"
	"net/http"
)

// E2BListSandboxes calls the E2B adapter's GET /e2b/v2/sandboxes with the
// client's key as X-API-KEY, as the E2B SDKs do: the running sandboxes of
// the key's tenant. A service that does not serve the adapter answers 404.
func (c *Client) E2BListSandboxes(ctx context.Context) ([]E2BSandbox, error) {
	var out []E2BSandbox
	err := c.do(ctx, request{method: http.MethodGet, path: "/e2b/v2/sandboxes", header: http.Header{"X-Api-Key": {c.apiKey}}}, &out)
	return out, err
}

// E2BEnv returns the environment that points the E2B SDKs at this
// service with the client's key (E2B_VALIDATE_API_KEY=false lets the
// Python SDK take a key that is not hex).
func (c *Client) E2BEnv() map[string]string {
	return map[string]string{
		"E2B_API_URL":          c.baseURL + "/e2b",
		"E2B_SANDBOX_URL":      c.baseURL + "/e2b",
		"E2B_API_KEY":          "e2b_" + c.apiKey,
		"E2B_VALIDATE_API_KEY": "false",
	}
}
