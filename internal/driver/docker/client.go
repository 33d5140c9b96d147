package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"genesis.dev/sandbox/internal/errdefs"
)

// The Engine API versions this client speaks. Negotiation works as the
// Docker CLI does it: the client uses the lower of the daemon's highest
// version and clientMaxAPIVersion, and refuses a daemon whose lowest
// accepted version (MinAPIVersion) is above that, or whose highest is below
// clientMinAPIVersion.
//
// The client is a small hand-written one rather than the Engine SDK's wire
// types: the driver uses about twenty fields of a dozen endpoints, and every
// one of them keeps its shape from API 1.40 to 1.52 (checked against the
// Engine API changelog for containers create/inspect/start/stop/wait/logs/
// remove/list, images inspect/create/remove, networks create/inspect/
// connect/disconnect/remove/list, info and version). Differences the driver
// has to care about are handled where they arise: networkCreateRequest sends
// CheckDuplicate only below 1.44, where duplicate names stopped being
// accepted at all; import progress reads errorDetail before the "error"
// field deprecated in 1.48; container inspect reads addresses from
// NetworkSettings.Networks, since 1.52 drops the top-level copies.
const (
	clientMaxAPIVersion = "1.52"
	clientMinAPIVersion = "1.40"
)

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 64 << 10

// apiClient speaks the Engine API over a Unix socket.
type apiClient struct {
	http *http.Client

	mu      sync.Mutex
	version string // negotiated, e.g. "1.41"; empty until the first success
}

func newAPIClient(socket string) *apiClient {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConns:        16,
		MaxIdleConnsPerHost: 16,
		DisableCompression:  true,
	}
	return &apiClient{http: &http.Client{Transport: tr}}
}

// apiError is a non-2xx answer of the daemon. It unwraps to its class.
type apiError struct {
	op      string
	status  int
	message string
	class   error
}

func (e *apiError) Error() string {
	return fmt.Sprintf("docker: %s: %s (HTTP %d)", e.op, e.message, e.status)
}

func (e *apiError) Unwrap() error { return e.class }

// classForStatus maps a Docker HTTP status to an errdefs class.
func classForStatus(status int) error {
	switch status {
	case http.StatusBadRequest:
		return errdefs.ErrInvalidArgument
	case http.StatusUnauthorized, http.StatusForbidden:
		return errdefs.ErrPermissionDenied
	case http.StatusNotFound:
		return errdefs.ErrNotFound
	case http.StatusConflict:
		return errdefs.ErrConflict
	case http.StatusNotImplemented:
		return errdefs.ErrNotImplemented
	case http.StatusServiceUnavailable, http.StatusBadGateway:
		return errdefs.ErrUnavailable
	case http.StatusGatewayTimeout:
		return errdefs.ErrDeadlineExceeded
	}
	return errdefs.ErrInternal
}

// statusOf returns the HTTP status of a daemon answer carried by err, or 0.
func statusOf(err error) int {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.status
	}
	return 0
}

// transportError classifies a failure to reach the daemon or to finish a call.
func transportError(ctx context.Context, op string, err error) error {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("docker: %s: %w: %w", op, errdefs.ErrDeadlineExceeded, context.DeadlineExceeded)
	case ctx.Err() != nil:
		return fmt.Errorf("docker: %s: %w", op, ctx.Err())
	}
	return fmt.Errorf("docker: %s: daemon unreachable: %v: %w", op, err, errdefs.ErrUnavailable)
}

// request describes one API call.
type request struct {
	op          string // for messages, e.g. "create container"
	method      string
	path        string // without version prefix, e.g. "/containers/create"
	query       url.Values
	body        any       // JSON-encoded when non-nil
	rawBody     io.Reader // sent as is when non-nil
	contentType string
	versionless bool // do not prefix with /vX.Y
}

// do performs r. On 2xx it returns the open response (caller closes the
// body); otherwise a classified error.
func (c *apiClient) do(ctx context.Context, r request) (*http.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, transportError(ctx, r.op, err)
	}
	path := r.path
	if !r.versionless {
		v, err := c.negotiate(ctx)
		if err != nil {
			return nil, fmt.Errorf("docker: %s: %w", r.op, err)
		}
		path = "/v" + v + path
	}
	u := url.URL{Scheme: "http", Host: "docker", Path: path}
	if len(r.query) > 0 {
		u.RawQuery = r.query.Encode()
	}
	var body io.Reader
	ct := r.contentType
	switch {
	case r.rawBody != nil:
		body = r.rawBody
	case r.body != nil:
		b, err := json.Marshal(r.body)
		if err != nil {
			return nil, fmt.Errorf("docker: %s: encode request: %v: %w", r.op, err, errdefs.ErrInternal)
		}
		body = bytes.NewReader(b)
		ct = "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("docker: %s: build request: %v: %w", r.op, err, errdefs.ErrInvalidArgument)
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, transportError(ctx, r.op, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, readAPIError(r.op, resp)
}

// readAPIError builds the classified error of a non-2xx answer.
func readAPIError(op string, resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var m struct {
		Message string `json:"message"`
	}
	msg := strings.TrimSpace(string(b))
	if json.Unmarshal(b, &m) == nil && m.Message != "" {
		msg = m.Message
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return &apiError{op: op, status: resp.StatusCode, message: msg, class: classForStatus(resp.StatusCode)}
}

// call performs r and decodes a JSON answer into out (if non-nil).
func (c *apiClient) call(ctx context.Context, r request, out any) error {
	resp, err := c.do(ctx, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
	} else {
		err = json.NewDecoder(resp.Body).Decode(out)
	}
	if err != nil {
		if ctx.Err() != nil {
			return transportError(ctx, r.op, err)
		}
		return fmt.Errorf("docker: %s: read answer: %v: %w", r.op, err, errdefs.ErrUnavailable)
	}
	return nil
}

// versionInfo is the answer of GET /version.
type versionInfo struct {
	Version       string `json:"Version"`
	APIVersion    string `json:"ApiVersion"`
	MinAPIVersion string `json:"MinAPIVersion"`
	KernelVersion string `json:"KernelVersion"`
}

// serverVersion asks the daemon for its version (unversioned path).
func (c *apiClient) serverVersion(ctx context.Context) (versionInfo, error) {
	var v versionInfo
	err := c.call(ctx, request{op: "version", method: http.MethodGet, path: "/version", versionless: true}, &v)
	return v, err
}

// negotiate returns the API version to use, asking the daemon once.
func (c *apiClient) negotiate(ctx context.Context) (string, error) {
	c.mu.Lock()
	v := c.version
	c.mu.Unlock()
	if v != "" {
		return v, nil
	}
	info, err := c.serverVersion(ctx)
	if err != nil {
		return "", err
	}
	v, err = pickVersion(info, clientMinAPIVersion, clientMaxAPIVersion)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	c.version = v
	c.mu.Unlock()
	return v, nil
}

// pickVersion chooses the API version for a daemon reporting info, for a
// client speaking versions clientMin to clientMax: the lower of the daemon's
// and the client's highest, refused (ErrUnavailable) when that is below
// either side's lowest. A daemon that reports no MinAPIVersion (very old
// engines) is taken to accept anything up to its highest.
func pickVersion(info versionInfo, clientMin, clientMax string) (string, error) {
	daemonMax, daemonMin := info.APIVersion, info.MinAPIVersion
	if daemonMax == "" {
		return "", fmt.Errorf("daemon reported no API version: %w", errdefs.ErrUnavailable)
	}
	v := clientMax
	if compareVersions(daemonMax, clientMax) < 0 {
		v = daemonMax
	}
	if daemonMin != "" && compareVersions(v, daemonMin) < 0 {
		return "", fmt.Errorf("daemon requires Engine API %s or newer, this client speaks at most %s: %w", daemonMin, clientMax, errdefs.ErrUnavailable)
	}
	if compareVersions(v, clientMin) < 0 {
		return "", fmt.Errorf("daemon speaks Engine API %s at most, this client needs %s or newer: %w", daemonMax, clientMin, errdefs.ErrUnavailable)
	}
	return v, nil
}

// compareVersions compares dotted numeric versions such as "1.41".
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(as), len(bs)); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}
