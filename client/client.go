package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// DefaultURL is the service address used by FromEnv when GENESIS_URL is unset.
const DefaultURL = "http://127.0.0.1:8080"

// Environment variables read by FromEnv.
const (
	EnvURL    = "GENESIS_URL"
	EnvAPIKey = "GENESIS_API_KEY"
)

// defaultUserAgent is sent when WithUserAgent is not used.
const defaultUserAgent = "genesis-go-client"

// Limits on how much of a response body the client reads.
const (
	maxResponseBytes = 256 << 20 // exec results carry whole output streams
	maxErrorBytes    = 64 << 10
)

// Client talks to the Genesis Sandbox HTTP API v1. It is safe for concurrent
// use. Every method takes a context that bounds the whole request.
type Client struct {
	baseURL   string
	apiKey    string
	userAgent string
	actAs     string
	http      *http.Client

	// Reconnection backoff of resumed streams (0: the defaults).
	retryMin, retryMax time.Duration
}

// Option configures a Client built by New.
type Option func(*Client)

// WithHTTPClient makes the client send requests through hc instead of
// http.DefaultClient. A nil hc is ignored.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.http = hc
		}
	}
}

// WithUserAgent sets the User-Agent header sent with every request.
func WithUserAgent(ua string) Option {
	return func(c *Client) {
		if ua != "" {
			c.userAgent = ua
		}
	}
}

// WithActAs makes an admin key act for tenant: every call sends
// X-Genesis-Tenant, and the service answers as to that tenant's own key
// (its sandboxes, jobs, files, …); the audit names the admin's key. A
// tenant's key gets 403 admin_required.
func WithActAs(tenant string) Option {
	return func(c *Client) { c.actAs = tenant }
}

// New returns a client for the service at baseURL (for example
// "http://127.0.0.1:8080"; a path prefix is kept) authenticating with apiKey.
// An empty apiKey sends no Authorization header; only Health and Ready work
// without one. A malformed baseURL is reported by the first call.
func New(baseURL, apiKey string, opts ...Option) *Client {
	c := &Client{
		baseURL:   strings.TrimRight(baseURL, "/"),
		apiKey:    apiKey,
		userAgent: defaultUserAgent,
		http:      http.DefaultClient,
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// FromEnv returns a client configured from GENESIS_URL (default DefaultURL)
// and GENESIS_API_KEY. It fails when GENESIS_URL is not an absolute http or
// https URL.
func FromEnv(opts ...Option) (*Client, error) {
	base := os.Getenv(EnvURL)
	if base == "" {
		base = DefaultURL
	}
	if err := ValidateBaseURL(base); err != nil {
		return nil, fmt.Errorf("%s: %w", EnvURL, err)
	}
	return New(base, os.Getenv(EnvAPIKey), opts...), nil
}

// ValidateBaseURL reports whether base is usable as a service address: an
// absolute http or https URL with a host and no query or fragment.
func ValidateBaseURL(base string) error {
	u, err := url.Parse(base)
	if err != nil {
		return fmt.Errorf("invalid service URL %q: %w", base, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("invalid service URL %q: scheme must be http or https", base)
	}
	if u.Host == "" {
		return fmt.Errorf("invalid service URL %q: no host", base)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("invalid service URL %q: must not have a query or fragment", base)
	}
	return nil
}

// ListSandboxesOptions filters GET /v1/sandboxes. Zero fields do not filter.
type ListSandboxesOptions struct {
	// States keeps sandboxes in any of these states.
	States []string
	// Profile keeps sandboxes of this profile.
	Profile string
	// Metadata keeps sandboxes whose metadata has every one of these pairs.
	Metadata map[string]string
}

// query encodes the options as URL query parameters: state and metadata
// repeat, metadata pairs are "key=value" in key order.
func (o ListSandboxesOptions) query() url.Values {
	q := url.Values{}
	for _, s := range o.States {
		q.Add("state", s)
	}
	if o.Profile != "" {
		q.Set("profile", o.Profile)
	}
	keys := make([]string, 0, len(o.Metadata))
	for k := range o.Metadata {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		q.Add("metadata", k+"="+o.Metadata[k])
	}
	return q
}

// Health calls GET /healthz.
func (c *Client) Health(ctx context.Context) (*Health, error) {
	var h Health
	if err := c.do(ctx, request{method: http.MethodGet, path: "/healthz"}, &h); err != nil {
		return nil, err
	}
	return &h, nil
}

// Ready calls GET /readyz. When the service is not ready (503) it returns the
// health report with its failing checks together with an *APIError of
// status 503, so err == nil means ready.
func (c *Client) Ready(ctx context.Context) (*Health, error) {
	resp, err := c.send(ctx, request{method: http.MethodGet, path: "/readyz"})
	if err != nil {
		return nil, err
	}
	defer drainClose(resp.Body)
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		var h Health
		if err := c.decode(resp, &h); err != nil {
			return nil, err
		}
		return &h, nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
	var h Health
	if resp.StatusCode == http.StatusServiceUnavailable && !isProblem(resp.Header) &&
		json.Unmarshal(body, &h) == nil && h.Status != "" {
		return &h, &APIError{
			Status:    resp.StatusCode,
			RequestID: resp.Header.Get("X-Request-ID"),
			Problem: Problem{
				Title:  "Service Unavailable",
				Status: resp.StatusCode,
				Code:   "unavailable",
				Detail: notReadyDetail(h),
			},
		}
	}
	return nil, newAPIError(resp.StatusCode, resp.Header, body)
}

// notReadyDetail lists the checks of h that are not "ok", in key order.
func notReadyDetail(h Health) string {
	keys := make([]string, 0, len(h.Checks))
	for k, v := range h.Checks {
		if v != "ok" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if len(keys) == 0 {
		return "service not ready"
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + ": " + h.Checks[k]
	}
	return "service not ready: " + strings.Join(parts, "; ")
}

// Capabilities calls GET /v1/capabilities.
func (c *Client) Capabilities(ctx context.Context) (*Capabilities, error) {
	var v Capabilities
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/capabilities", auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// Images calls GET /v1/images: the images of the profiles and the
// progress of those the service builds in the background.
func (c *Client) Images(ctx context.Context) (*ImageList, error) {
	var v ImageList
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/images", auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// Profiles calls GET /v1/profiles.
func (c *Client) Profiles(ctx context.Context) (*ProfileList, error) {
	var v ProfileList
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/profiles", auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// CreateSandbox calls POST /v1/sandboxes. A non-empty idempotencyKey is sent
// as Idempotency-Key: repeating the call with the same key returns the same
// sandbox instead of creating another.
func (c *Client) CreateSandbox(ctx context.Context, req CreateSandboxRequest, idempotencyKey string) (*Sandbox, error) {
	r := request{method: http.MethodPost, path: "/v1/sandboxes", auth: true, body: req}
	if idempotencyKey != "" {
		r.header = http.Header{"Idempotency-Key": {idempotencyKey}}
	}
	var v Sandbox
	if err := c.do(ctx, r, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// ListSandboxes calls GET /v1/sandboxes with the filters of opts.
func (c *Client) ListSandboxes(ctx context.Context, opts ListSandboxesOptions) (*SandboxList, error) {
	var v SandboxList
	r := request{method: http.MethodGet, path: "/v1/sandboxes", query: opts.query(), auth: true}
	if err := c.do(ctx, r, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// GetSandbox calls GET /v1/sandboxes/{id}. The sandbox's ResourceVersion is
// the value to pass as ifMatch to PatchSandbox.
func (c *Client) GetSandbox(ctx context.Context, id string) (*Sandbox, error) {
	p, err := idPath("/v1/sandboxes/", id)
	if err != nil {
		return nil, err
	}
	var v Sandbox
	if err := c.do(ctx, request{method: http.MethodGet, path: p, auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// PatchSandbox calls PATCH /v1/sandboxes/{id}. A non-empty ifMatch (a
// resource_version, quoted or not, or "*") is sent as If-Match; on mismatch
// the call fails with an *APIError of status 412.
func (c *Client) PatchSandbox(ctx context.Context, id string, req PatchSandboxRequest, ifMatch string) (*Sandbox, error) {
	p, err := idPath("/v1/sandboxes/", id)
	if err != nil {
		return nil, err
	}
	r := request{method: http.MethodPatch, path: p, auth: true, body: req}
	if ifMatch != "" {
		r.header = http.Header{"If-Match": {quoteETag(ifMatch)}}
	}
	var v Sandbox
	if err := c.do(ctx, r, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// RenewSandbox calls POST /v1/sandboxes/{id}/renew: the sandbox expires
// ttl from now (0: the service's default TTL). A leased sandbox answers 409
// leased_sandbox (renew its lease).
func (c *Client) RenewSandbox(ctx context.Context, id string, ttl time.Duration) (*Sandbox, error) {
	p, err := idPath("/v1/sandboxes/", id)
	if err != nil {
		return nil, err
	}
	var v Sandbox
	req := RenewSandboxRequest{TTLSeconds: int64(ttl / time.Second)}
	if err := c.do(ctx, request{method: http.MethodPost, path: p + "/renew", auth: true, body: req}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// DeleteSandbox calls DELETE /v1/sandboxes/{id}. Deleting an already
// destroyed sandbox succeeds; an unknown id fails with IsNotFound(err).
func (c *Client) DeleteSandbox(ctx context.Context, id string) error {
	p, err := idPath("/v1/sandboxes/", id)
	if err != nil {
		return err
	}
	return c.do(ctx, request{method: http.MethodDelete, path: p, auth: true}, nil)
}

// Exec calls POST /v1/sandboxes/{id}/exec and waits for the job to end. A
// non-zero exit is a result, not an error; a sandbox that is not running
// fails with an *APIError of status 409.
func (c *Client) Exec(ctx context.Context, id string, req ExecRequest) (*ExecResult, error) {
	p, err := idPath("/v1/sandboxes/", id)
	if err != nil {
		return nil, err
	}
	var v ExecResult
	if err := c.do(ctx, request{method: http.MethodPost, path: p + "/exec", auth: true, body: req}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// GetJob calls GET /v1/jobs/{id}.
func (c *Client) GetJob(ctx context.Context, id string) (*Job, error) {
	p, err := idPath("/v1/jobs/", id)
	if err != nil {
		return nil, err
	}
	var v Job
	if err := c.do(ctx, request{method: http.MethodGet, path: p, auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// ListSandboxJobs calls GET /v1/sandboxes/{id}/jobs: the sandbox's jobs,
// newest first, at most limit (0: 100), in the given states if any.
func (c *Client) ListSandboxJobs(ctx context.Context, sandboxID string, limit int, states ...string) (*JobList, error) {
	p, err := idPath("/v1/sandboxes/", sandboxID)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	for _, st := range states {
		q.Add("state", st)
	}
	var v JobList
	if err := c.do(ctx, request{method: http.MethodGet, path: p + "/jobs", query: q, auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// request describes one API call.
type request struct {
	method string
	path   string // absolute path under the base URL, already escaped
	query  url.Values
	header http.Header
	body   any // JSON-encoded when non-nil
	auth   bool
	// raw, when non-nil, is sent as is (application/octet-stream unless
	// header says otherwise); rawLen is its length, -1 when unknown.
	raw    io.Reader
	rawLen int64
}

// do sends r and decodes a 2xx JSON answer into out (nil: body discarded).
// Non-2xx answers become *APIError.
func (c *Client) do(ctx context.Context, r request, out any) error {
	resp, err := c.send(ctx, r)
	if err != nil {
		return err
	}
	defer drainClose(resp.Body)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
		return newAPIError(resp.StatusCode, resp.Header, body)
	}
	if out == nil {
		return nil
	}
	return c.decode(resp, out)
}

// send builds and sends r. The caller closes the response body.
func (c *Client) send(ctx context.Context, r request) (*http.Response, error) {
	if err := ValidateBaseURL(c.baseURL); err != nil {
		return nil, err
	}
	target := c.baseURL + r.path
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	var body io.Reader
	if r.body != nil {
		b, err := json.Marshal(r.body)
		if err != nil {
			return nil, fmt.Errorf("%s %s: encode request: %w", r.method, r.path, err)
		}
		body = bytes.NewReader(b)
	}
	if r.raw != nil {
		body = r.raw
	}
	req, err := http.NewRequestWithContext(ctx, r.method, target, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", r.method, r.path, err)
	}
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.raw != nil {
		req.Header.Set("Content-Type", "application/octet-stream")
		if r.rawLen >= 0 {
			req.ContentLength = r.rawLen
		}
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	req.Header.Set("User-Agent", c.userAgent)
	if r.auth && c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
		if c.actAs != "" {
			req.Header.Set("X-Genesis-Tenant", c.actAs)
		}
	}
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	// The *url.Error of a failed Do already names the method and URL.
	return c.http.Do(req)
}

// decode reads a JSON success body into out.
func (c *Client) decode(resp *http.Response, out any) error {
	dec := json.NewDecoder(io.LimitReader(resp.Body, maxResponseBytes))
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode %d response: %w",
			resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, err)
	}
	return nil
}

// drainClose reads a little of what is left of body, so the connection can
// be reused, and closes it.
func drainClose(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 4<<10))
	_ = body.Close()
}

// idPath returns prefix + the escaped id, refusing an empty id.
func idPath(prefix, id string) (string, error) {
	if id == "" {
		return "", errors.New("client: empty id")
	}
	return prefix + url.PathEscape(id), nil
}

// quoteETag turns a bare resource_version into a strong entity tag; values
// that already are entity tags (quoted, weak or "*") pass unchanged.
func quoteETag(v string) string {
	if v == "*" || strings.HasPrefix(v, `"`) || strings.HasPrefix(v, `W/"`) {
		return v
	}
	return `"` + v + `"`
}

// isProblem reports whether the response is application/problem+json.
func isProblem(h http.Header) bool {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && mt == "application/problem+json"
}

// CreateTerminalTicket calls POST /v1/sandboxes/{id}/terminal/tickets: a
// single-use ticket for the sandbox's terminal WebSocket, valid for about
// 30 seconds.
func (c *Client) CreateTerminalTicket(ctx context.Context, sandboxID string) (*TerminalTicket, error) {
	p, err := idPath("/v1/sandboxes/", sandboxID)
	if err != nil {
		return nil, err
	}
	var v TerminalTicket
	if err := c.do(ctx, request{method: http.MethodPost, path: p + "/terminal/tickets", body: struct{}{}, auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// Whoami calls GET /v1/whoami: the tenant of this client's key and whether
// it is an admin key.
func (c *Client) Whoami(ctx context.Context) (*Whoami, error) {
	var v Whoami
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/whoami", auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}
