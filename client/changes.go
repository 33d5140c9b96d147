package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// DiffSandbox compares a sandbox's workspace with base: "" or "creation",
// "git" (its repository's HEAD), a snapshot id or another sandbox's id.
func (c *Client) DiffSandbox(ctx context.Context, sandboxID, base string) (*Diff, error) {
	p, err := idPath("/v1/sandboxes/", sandboxID)
	if err != nil {
		return nil, err
	}
	var d Diff
	if err := c.do(ctx, request{method: http.MethodGet, path: p + "/diff", query: diffQuery(base, "json"), auth: true}, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// DiffSandboxPatch is DiffSandbox as a git-compatible patch (what git
// apply accepts), with whether it was truncated.
func (c *Client) DiffSandboxPatch(ctx context.Context, sandboxID, base string) (patch string, truncated bool, err error) {
	p, err := idPath("/v1/sandboxes/", sandboxID)
	if err != nil {
		return "", false, err
	}
	resp, err := c.send(ctx, request{method: http.MethodGet, path: p + "/diff", query: diffQuery(base, "patch"), auth: true})
	if err != nil {
		return "", false, err
	}
	defer drainClose(resp.Body)
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
		return "", false, newAPIError(resp.StatusCode, resp.Header, body)
	}
	var b strings.Builder
	if _, err := io.Copy(&b, io.LimitReader(resp.Body, maxResponseBytes)); err != nil {
		return "", false, fmt.Errorf("GET %s/diff: %w", p, err)
	}
	return b.String(), resp.Header.Get("Genesis-Diff-Truncated") == "true", nil
}

func diffQuery(base, format string) url.Values {
	q := url.Values{"format": {format}}
	if base != "" {
		q.Set("base", base)
	}
	return q
}

// ApplyPatch applies a unified or git diff to a sandbox's workspace, all
// or nothing: a hunk that does not apply is a 409 patch_conflict naming
// the file and hunk, and nothing changes. dryRun checks without changing.
func (c *Client) ApplyPatch(ctx context.Context, sandboxID string, patch []byte, dryRun bool) (*PatchResult, error) {
	p, err := idPath("/v1/sandboxes/", sandboxID)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	if dryRun {
		q.Set("dry_run", "true")
	}
	var res PatchResult
	err = c.do(ctx, request{method: http.MethodPost, path: p + "/patch", query: q, auth: true,
		raw: strings.NewReader(string(patch)), rawLen: int64(len(patch)), header: http.Header{"Content-Type": {"text/x-patch"}}}, &res)
	if err != nil {
		return nil, err
	}
	return &res, nil
}
