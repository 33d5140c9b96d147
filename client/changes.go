package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Diff is what changed in a sandbox's workspace since a base
// (docs/diff-patch.md).
type Diff struct {
	// Base is what the workspace was compared with: "creation" (with the
	// snapshot it names), a snapshot or a sandbox id.
	Base    string      `json:"base"`
	Files   []DiffFile  `json:"files"`
	Summary DiffSummary `json:"summary"`
	// Truncated says files were left out or shown without lines;
	// TruncatedReason says which.
	Truncated       bool   `json:"truncated"`
	TruncatedReason string `json:"truncated_reason,omitempty"`
}

// DiffFile is one changed file: Status is added, modified, deleted or
// mode_changed; Diff its part of the git-format unified diff (empty for
// binary and too-large files).
type DiffFile struct {
	Path      string `json:"path"`
	Status    string `json:"status"`
	OldMode   string `json:"old_mode,omitempty"`
	NewMode   string `json:"new_mode,omitempty"`
	OldSize   int64  `json:"old_size"`
	NewSize   int64  `json:"new_size"`
	Binary    bool   `json:"binary,omitempty"`
	TooLarge  bool   `json:"too_large,omitempty"`
	Additions int    `json:"additions"`
	Deletions int    `json:"deletions"`
	Diff      string `json:"diff,omitempty"`
}

// DiffSummary counts every changed file, listed or not.
type DiffSummary struct {
	Files       int `json:"files"`
	Added       int `json:"added"`
	Modified    int `json:"modified"`
	Deleted     int `json:"deleted"`
	ModeChanged int `json:"mode_changed"`
	Additions   int `json:"additions"`
	Deletions   int `json:"deletions"`
}

// PatchRequest is the JSON form of a patch's body (the body may also be
// the patch itself, as text/x-patch).
type PatchRequest struct {
	Patch  string `json:"patch"`
	DryRun bool   `json:"dry_run,omitempty"`
}

// PatchResult says what a patch changed, or would for a dry run.
type PatchResult struct {
	Applied bool          `json:"applied"`
	DryRun  bool          `json:"dry_run"`
	Files   []PatchedFile `json:"files"`
}

// PatchedFile is one file a patch wrote or removed: Status is added,
// modified, deleted, mode_changed or renamed (From is where it was).
type PatchedFile struct {
	Path   string `json:"path"`
	Status string `json:"status"`
	From   string `json:"from,omitempty"`
	Size   int64  `json:"size"`
	Mode   string `json:"mode,omitempty"`
}

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
