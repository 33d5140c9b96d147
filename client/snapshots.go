package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
)

// PauseSandbox freezes a sandbox's processes, keeping its memory.
func (c *Client) PauseSandbox(ctx context.Context, id string) (*Sandbox, error) {
	return c.sandboxAction(ctx, id, "pause", nil)
}

// ResumeSandbox brings a paused or hibernated sandbox back.
func (c *Client) ResumeSandbox(ctx context.Context, id string) (*Sandbox, error) {
	return c.sandboxAction(ctx, id, "resume", nil)
}

// HibernateSandbox saves a sandbox's state to disk and frees its memory.
func (c *Client) HibernateSandbox(ctx context.Context, id string) (*Sandbox, error) {
	return c.sandboxAction(ctx, id, "hibernate", nil)
}

// RollbackSandbox returns a sandbox to a snapshot under the same id.
func (c *Client) RollbackSandbox(ctx context.Context, id, snapshotID string) (*Sandbox, error) {
	return c.sandboxAction(ctx, id, "rollback", RollbackRequest{SnapshotID: snapshotID})
}

func (c *Client) sandboxAction(ctx context.Context, id, action string, body any) (*Sandbox, error) {
	var sb Sandbox
	if err := c.do(ctx, request{method: http.MethodPost, path: "/v1/sandboxes/" + url.PathEscape(id) + "/" + action, body: body, auth: true}, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// CreateSnapshot saves a sandbox's state as a new snapshot.
func (c *Client) CreateSnapshot(ctx context.Context, sandboxID string, req CreateSnapshotRequest) (*Snapshot, error) {
	var sn Snapshot
	if err := c.do(ctx, request{method: http.MethodPost, path: "/v1/sandboxes/" + url.PathEscape(sandboxID) + "/snapshots", body: req, auth: true}, &sn); err != nil {
		return nil, err
	}
	return &sn, nil
}

// ListSnapshots lists the caller's snapshots (of one sandbox when
// sandboxID is not empty), newest first.
func (c *Client) ListSnapshots(ctx context.Context, sandboxID string) ([]Snapshot, error) {
	path := "/v1/snapshots"
	if sandboxID != "" {
		path = "/v1/sandboxes/" + url.PathEscape(sandboxID) + "/snapshots"
	}
	var l SnapshotList
	if err := c.do(ctx, request{method: http.MethodGet, path: path, auth: true}, &l); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// GetSnapshot returns one snapshot.
func (c *Client) GetSnapshot(ctx context.Context, id string) (*Snapshot, error) {
	var sn Snapshot
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/snapshots/" + url.PathEscape(id), auth: true}, &sn); err != nil {
		return nil, err
	}
	return &sn, nil
}

// DeleteSnapshot deletes a snapshot; deleting a deleted one succeeds.
func (c *Client) DeleteSnapshot(ctx context.Context, id string) error {
	return c.do(ctx, request{method: http.MethodDelete, path: "/v1/snapshots/" + url.PathEscape(id), auth: true}, nil)
}

// ForkSandbox makes count copies of a sandbox.
func (c *Client) ForkSandbox(ctx context.Context, id string, req ForkRequest) (*ForkResult, error) {
	if req.Count <= 0 {
		return nil, fmt.Errorf("client: fork count must be positive, got %d", req.Count)
	}
	var out ForkResult
	if err := c.do(ctx, request{method: http.MethodPost, path: "/v1/sandboxes/" + url.PathEscape(id) + "/fork", body: req, auth: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
