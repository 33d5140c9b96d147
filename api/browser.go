package api

import (
	"encoding/json"
	"net/url"
	"time"
)

// BrowserAction is one step of POST /v1/sandboxes/{id}/browser/actions.
type BrowserAction struct {
	// Type: navigate, back, forward, reload, click, fill, type, press,
	// hover, scroll, select, wait, evaluate, text, snapshot, screenshot,
	// upload, tab_new, tab_activate (or tab_switch), tab_close, tabs.
	Type     string `json:"type"`
	URL      string `json:"url,omitempty"`
	Selector string `json:"selector,omitempty"` // a CSS selector
	Text     string `json:"text,omitempty"`
	// Value is the option value select chooses.
	Value string `json:"value,omitempty"`
	// Key names a key for press: Enter, Tab, Escape, Backspace, Delete,
	// ArrowUp, ArrowDown, ArrowLeft, ArrowRight, Home, End, PageUp,
	// PageDown, Space, or one character.
	Key string `json:"key,omitempty"`
	// X, Y are viewport coordinates (click or hover without a selector);
	// DeltaX, DeltaY scroll the page.
	X      *float64 `json:"x,omitempty"`
	Y      *float64 `json:"y,omitempty"`
	DeltaX float64  `json:"delta_x,omitempty"`
	DeltaY float64  `json:"delta_y,omitempty"`
	// Expression is evaluated in the page (evaluate); a promise is awaited.
	Expression string `json:"expression,omitempty"`
	// Ms waits this long (wait without a selector).
	Ms int `json:"ms,omitempty"`
	// Screenshot: format png (default) or jpeg, quality (jpeg), full_page;
	// name is the artifact's name (default screenshot-N.png).
	Format   string `json:"format,omitempty"`
	Quality  int    `json:"quality,omitempty"`
	FullPage bool   `json:"full_page,omitempty"`
	// Scale resizes the screenshot (0.1-2; default 1).
	Scale float64 `json:"scale,omitempty"`
	Name  string  `json:"name,omitempty"`
	// Keep false answers the screenshot in the action's value
	// (BrowserImage) instead of keeping it as an artifact (the default).
	Keep *bool `json:"keep,omitempty"`
	// Compress encodes a PNG for size rather than speed (the default is
	// fast encoding: larger files, a fraction of the time).
	Compress bool `json:"compress,omitempty"`
	// Files are paths inside the sandbox (upload).
	Files []string `json:"files,omitempty"`
	// Tab is a tab id (tab_activate, tab_close; default the active tab).
	Tab string `json:"tab,omitempty"`
	// TimeoutMs bounds this action (default the profile's action_timeout).
	TimeoutMs int `json:"timeout_ms,omitempty"`
	// Sensitive records the action's text in the sandbox's trace as a
	// count, not the text (text typed into a password field always is).
	Sensitive bool `json:"sensitive,omitempty"`
}

// BrowserImage is the value of a screenshot action with keep false.
type BrowserImage struct {
	MIME string `json:"mime"`
	// Data is the image (base64 in JSON).
	Data []byte `json:"data"`
}

// BrowserActionsRequest is the body of POST .../browser/actions.
type BrowserActionsRequest struct {
	Actions []BrowserAction `json:"actions"`
}

// BrowserActionResult is what one action did.
type BrowserActionResult struct {
	Index int    `json:"index"`
	Type  string `json:"type"`
	OK    bool   `json:"ok"`
	Ms    int64  `json:"ms"`
	Error string `json:"error,omitempty"`
	// Value is what evaluate returned, text's text, tabs' list, tab_new's
	// tab id.
	Value json.RawMessage `json:"value,omitempty"`
	// Artifact is a screenshot, kept as an artifact
	// (GET /v1/artifacts/{id}/content).
	Artifact *Artifact `json:"artifact,omitempty"`
}

// BrowserActionsResult is the answer of POST .../browser/actions. The
// actions run in order and stop at the first that fails: OK is false, the
// last result says why, and the actions after it did not run.
type BrowserActionsResult struct {
	OK      bool                  `json:"ok"`
	Results []BrowserActionResult `json:"results"`
	// URL, Title and Tab are the active tab's after the last action run.
	URL   string `json:"url"`
	Title string `json:"title"`
	Tab   string `json:"tab"`
}

// BrowserTab is one page of the browser (the tabs action's value).
type BrowserTab struct {
	ID     string `json:"id"`
	URL    string `json:"url"`
	Title  string `json:"title"`
	Active bool   `json:"active"`
}

// BrowserStatus is GET /v1/sandboxes/{id}/browser.
type BrowserStatus struct {
	SandboxID string `json:"sandbox_id"`
	// Ready is true once Chromium answers on its DevTools port.
	Ready bool `json:"ready"`
	// Browser is Chromium's product string (Chrome/156...), once ready.
	Browser  string            `json:"browser,omitempty"`
	Versions map[string]string `json:"versions,omitempty"`
	// CDPURL is the DevTools endpoint for chromium.connectOverCDP (send the
	// API key as a header); PlaywrightURL the endpoint for
	// browserType.connect, when the profile serves it.
	CDPURL        string `json:"cdp_url"`
	PlaywrightURL string `json:"playwright_url,omitempty"`
	DownloadsDir  string `json:"downloads_dir"`
	// Session reports whether the actions API holds a connection open.
	Session bool `json:"session"`
}

// BrowserLink is a capability URL of a sandbox's browser: no API key is
// needed until ExpiresAt or until the sandbox ends.
type BrowserLink struct {
	CDPURL        string    `json:"cdp_url"`
	PlaywrightURL string    `json:"playwright_url,omitempty"`
	SandboxID     string    `json:"sandbox_id"`
	ExpiresAt     time.Time `json:"expires_at"`
}

// BrowserPath is the path of sandbox id's browser root.
func BrowserPath(id string) string { return "/v1/sandboxes/" + url.PathEscape(id) + "/browser" }

// BrowserDownload is a file the browser downloaded into its downloads
// directory.
type BrowserDownload struct {
	Name    string    `json:"name"`
	Path    string    `json:"path"`
	Size    int64     `json:"size"`
	SHA256  string    `json:"sha256,omitempty"`
	ModTime time.Time `json:"mtime"`
	// Partial is set while Chromium still writes the file (no digest yet).
	Partial bool `json:"partial,omitempty"`
	// Artifact is set when the file was kept.
	Artifact *Artifact `json:"artifact,omitempty"`
}

// BrowserDownloadList is GET /v1/sandboxes/{id}/browser/downloads, newest
// first.
type BrowserDownloadList struct {
	Items []BrowserDownload `json:"items"`
}

// KeepBrowserDownloadsRequest is the body of POST
// .../browser/downloads/keep: the names to keep (all complete ones when
// empty).
type KeepBrowserDownloadsRequest struct {
	Names []string `json:"names,omitempty"`
}

// SaveBrowserProfileRequest is the body of POST
// .../browser/profile/save: the artifact's file name (default
// browser-profile.tar.gz).
type SaveBrowserProfileRequest struct {
	Name string `json:"name,omitempty"`
}

// LoadBrowserProfileRequest is the body of POST .../browser/profile/load:
// a saved profile, an artifact of the caller's.
type LoadBrowserProfileRequest struct {
	ArtifactID string `json:"artifact_id"`
}

// BrowserProfile is what saving or loading a browser profile did. Both
// stop the sandbox's Chromium (closing its pages) and start it again.
type BrowserProfile struct {
	SandboxID string `json:"sandbox_id"`
	// Artifact is the saved profile (a tar.gz of Chromium's
	// user-data-dir without its caches), or the one loaded.
	Artifact Artifact `json:"artifact"`
	// Entries and Bytes count what a load extracted.
	Entries    int   `json:"entries,omitempty"`
	Bytes      int64 `json:"bytes,omitempty"`
	DurationMS int64 `json:"duration_ms"`
}
