package client

import (
	"context"
	"net/http"
)

// CreateSession calls POST /v1/sandboxes/{id}/sessions: a shell session
// whose working directory and exported environment carry over from one
// SessionExec to the next.
func (c *Client) CreateSession(ctx context.Context, sandboxID string) (*Session, error) {
	p, err := idPath("/v1/sandboxes/", sandboxID)
	if err != nil {
		return nil, err
	}
	var v Session
	if err := c.do(ctx, request{method: http.MethodPost, path: p + "/sessions", auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// GetSession calls GET /v1/sessions/{id}.
func (c *Client) GetSession(ctx context.Context, id string) (*Session, error) {
	return c.getSession(ctx, "/v1/sessions/", id)
}

// SessionExec calls POST /v1/sessions/{id}/exec and waits for the command to
// end. Calls in one session run one at a time. Background and streamed
// execution are not available in sessions (400).
func (c *Client) SessionExec(ctx context.Context, sessionID string, req ExecRequest) (*ExecResult, error) {
	p, err := idPath("/v1/sessions/", sessionID)
	if err != nil {
		return nil, err
	}
	var v ExecResult
	if err := c.do(ctx, request{method: http.MethodPost, path: p + "/exec", auth: true, body: req}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// DeleteSession calls DELETE /v1/sessions/{id}. Closing a closed session
// succeeds.
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	return c.deleteSession(ctx, "/v1/sessions/", id)
}

// CreateContext calls POST /v1/sandboxes/{id}/contexts: a Python
// code-interpreter context whose variables persist between RunCode calls.
// It fails with 409 context_start_failed when the sandbox's profile has no
// python3, and 400 language_unsupported for other languages.
func (c *Client) CreateContext(ctx context.Context, sandboxID string, req CreateContextRequest) (*Session, error) {
	p, err := idPath("/v1/sandboxes/", sandboxID)
	if err != nil {
		return nil, err
	}
	var v Session
	if err := c.do(ctx, request{method: http.MethodPost, path: p + "/contexts", auth: true, body: req}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// GetContext calls GET /v1/contexts/{id}.
func (c *Client) GetContext(ctx context.Context, id string) (*Session, error) {
	return c.getSession(ctx, "/v1/contexts/", id)
}

// RunCode calls POST /v1/contexts/{id}/run. An exception in the code is a
// result (Status "error", Error set), not an error.
func (c *Client) RunCode(ctx context.Context, contextID string, req RunCodeRequest) (*RunCodeResult, error) {
	p, err := idPath("/v1/contexts/", contextID)
	if err != nil {
		return nil, err
	}
	var v RunCodeResult
	if err := c.do(ctx, request{method: http.MethodPost, path: p + "/run", auth: true, body: req}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// DeleteContext calls DELETE /v1/contexts/{id}: the kernel stops and its
// variables are gone. Closing a closed context succeeds.
func (c *Client) DeleteContext(ctx context.Context, id string) error {
	return c.deleteSession(ctx, "/v1/contexts/", id)
}

func (c *Client) getSession(ctx context.Context, prefix, id string) (*Session, error) {
	p, err := idPath(prefix, id)
	if err != nil {
		return nil, err
	}
	var v Session
	if err := c.do(ctx, request{method: http.MethodGet, path: p, auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

func (c *Client) deleteSession(ctx context.Context, prefix, id string) error {
	p, err := idPath(prefix, id)
	if err != nil {
		return err
	}
	return c.do(ctx, request{method: http.MethodDelete, path: p, auth: true}, nil)
}
