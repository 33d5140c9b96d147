package client

import (
	"context"
	"net/http"
	"time"
)

// BrowserStatus reports a browser sandbox's browser.
func (c *Client) BrowserStatus(ctx context.Context, sandboxID string) (*BrowserStatus, error) {
	var out BrowserStatus
	if err := c.do(ctx, request{method: http.MethodGet, path: BrowserPath(sandboxID), auth: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// BrowserActions runs actions in a browser sandbox's active tab.
func (c *Client) BrowserActions(ctx context.Context, sandboxID string, actions ...BrowserAction) (*BrowserActionsResult, error) {
	var out BrowserActionsResult
	err := c.do(ctx, request{method: http.MethodPost, path: BrowserPath(sandboxID) + "/actions", auth: true,
		body: BrowserActionsRequest{Actions: actions}}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateBrowserLink makes a capability URL of a sandbox's browser, valid
// for ttl.
func (c *Client) CreateBrowserLink(ctx context.Context, sandboxID string, ttl time.Duration) (*BrowserLink, error) {
	var out BrowserLink
	err := c.do(ctx, request{method: http.MethodPost, path: BrowserPath(sandboxID) + "/links", auth: true,
		body: CreatePortLinkRequest{TTLSeconds: int64(ttl / time.Second)}}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// BrowserDownloads lists a browser sandbox's downloads with their sha256.
func (c *Client) BrowserDownloads(ctx context.Context, sandboxID string) (*BrowserDownloadList, error) {
	var out BrowserDownloadList
	if err := c.do(ctx, request{method: http.MethodGet, path: BrowserPath(sandboxID) + "/downloads", auth: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// KeepBrowserDownloads keeps downloads (all complete ones when names is
// empty) as artifacts and lists them.
func (c *Client) KeepBrowserDownloads(ctx context.Context, sandboxID string, names ...string) (*BrowserDownloadList, error) {
	var out BrowserDownloadList
	err := c.do(ctx, request{method: http.MethodPost, path: BrowserPath(sandboxID) + "/downloads/keep", auth: true,
		body: KeepBrowserDownloadsRequest{Names: names}}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// SaveBrowserProfile saves the browser profile (cookies, storage) of a
// browser sandbox as an artifact; name may be empty.
func (c *Client) SaveBrowserProfile(ctx context.Context, sandboxID, name string) (*BrowserProfile, error) {
	var out BrowserProfile
	err := c.do(ctx, request{method: http.MethodPost, path: BrowserPath(sandboxID) + "/profile/save", auth: true,
		body: SaveBrowserProfileRequest{Name: name}}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// LoadBrowserProfile replaces the browser profile of a browser sandbox
// with a saved one (an artifact of the caller's, from any sandbox).
func (c *Client) LoadBrowserProfile(ctx context.Context, sandboxID, artifactID string) (*BrowserProfile, error) {
	var out BrowserProfile
	err := c.do(ctx, request{method: http.MethodPost, path: BrowserPath(sandboxID) + "/profile/load", auth: true,
		body: LoadBrowserProfileRequest{ArtifactID: artifactID}}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}
