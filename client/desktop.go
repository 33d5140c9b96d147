package client

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"
)

// ComputerActions runs a batch of computer actions on a desktop sandbox.
func (c *Client) ComputerActions(ctx context.Context, sandboxID string, req ComputerActionsRequest) (*ComputerActionsResult, error) {
	var out ComputerActionsResult
	err := c.do(ctx, request{method: http.MethodPost, path: ComputerPath(sandboxID) + "/actions", auth: true, body: req}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// DesktopControl reports who holds a desktop's control. With after >= 0
// the service answers once the version is past after, or after wait.
func (c *Client) DesktopControl(ctx context.Context, sandboxID string, after int64, wait time.Duration) (*DesktopControl, error) {
	p := ControlPath(sandboxID)
	if after >= 0 {
		p += "?after=" + strconv.FormatInt(after, 10) + "&wait_ms=" + strconv.FormatInt(wait.Milliseconds(), 10)
	}
	var out DesktopControl
	if err := c.do(ctx, request{method: http.MethodGet, path: p, auth: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// TakeDesktopControl makes holder ("agent" or "human:<who>") the holder.
func (c *Client) TakeDesktopControl(ctx context.Context, sandboxID string, req TakeDesktopControlRequest) (*DesktopControl, error) {
	var out DesktopControl
	if err := c.do(ctx, request{method: http.MethodPost, path: ControlPath(sandboxID), auth: true, body: req}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ReleaseDesktopControl gives control back to nobody.
func (c *Client) ReleaseDesktopControl(ctx context.Context, sandboxID string) (*DesktopControl, error) {
	var out DesktopControl
	if err := c.do(ctx, request{method: http.MethodDelete, path: ControlPath(sandboxID), auth: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RequestHuman records an agent's request for a human.
func (c *Client) RequestHuman(ctx context.Context, sandboxID, reason string) (*DesktopControl, error) {
	var out DesktopControl
	if err := c.do(ctx, request{method: http.MethodPost, path: ControlPath(sandboxID) + "/requests", auth: true, body: RequestHumanRequest{Reason: reason}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DialDisplayVNC opens the live view of a desktop sandbox: RFB (3.8, the
// None security type) to its VNC server, carried over a WebSocket through
// the service (GET /v1/sandboxes/{id}/display/vnc). role is observer
// (the service drops its input) or controller (takes the pen from any
// other controller).
func (c *Client) DialDisplayVNC(ctx context.Context, sandboxID, role string) (net.Conn, error) {
	return c.DialDisplayVNCAs(ctx, sandboxID, role, "")
}

// DialDisplayVNCAs is DialDisplayVNC for a person named who: a
// controller's input makes "human:<who>" the holder of the desktop's
// control (the agent's actions answer 409 control_held until the view
// closes) and is recorded in the trace under that name. Empty who is
// "viewer".
func (c *Client) DialDisplayVNCAs(ctx context.Context, sandboxID, role, who string) (net.Conn, error) {
	if err := ValidateBaseURL(c.baseURL); err != nil {
		return nil, err
	}
	u := c.baseURL + "/v1/sandboxes/" + url.PathEscape(sandboxID) + "/display/vnc?role=" + url.QueryEscape(role)
	if who != "" {
		u += "&who=" + url.QueryEscape(who)
	}
	u = "ws" + strings.TrimPrefix(u, "http")
	h := http.Header{}
	h.Set("Authorization", "Bearer "+c.apiKey)
	if c.userAgent != "" {
		h.Set("User-Agent", c.userAgent)
	}
	ws, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: c.http, HTTPHeader: h,
		CompressionMode: websocket.CompressionDisabled, Subprotocols: []string{"binary"}})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
			return nil, newAPIError(resp.StatusCode, resp.Header, body)
		}
		return nil, fmt.Errorf("live view of sandbox %s: %w", sandboxID, err)
	}
	ws.SetReadLimit(-1)
	return websocket.NetConn(context.WithoutCancel(ctx), ws, websocket.MessageBinary), nil
}

// CreateDisplayLink makes a live-view link of a desktop sandbox for role,
// valid for ttl.
func (c *Client) CreateDisplayLink(ctx context.Context, sandboxID, role string, ttl time.Duration) (*DisplayLink, error) {
	var out DisplayLink
	err := c.do(ctx, request{method: http.MethodPost, path: "/v1/sandboxes/" + url.PathEscape(sandboxID) + "/display/links", auth: true,
		body: CreateDisplayLinkRequest{Role: role, TTLSeconds: int64(ttl / time.Second)}}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// StartRecording calls POST /v1/sandboxes/{id}/display/recording.
func (c *Client) StartRecording(ctx context.Context, sandboxID string, req RecordingRequest) (*Recording, error) {
	return c.recording(ctx, http.MethodPost, sandboxID, "/display/recording", &req)
}

// StopRecording calls DELETE /v1/sandboxes/{id}/display/recording: it
// answers once the last segment is kept.
func (c *Client) StopRecording(ctx context.Context, sandboxID string) (*Recording, error) {
	return c.recording(ctx, http.MethodDelete, sandboxID, "/display/recording", nil)
}

// GetRecording calls GET /v1/sandboxes/{id}/display/recording.
func (c *Client) GetRecording(ctx context.Context, sandboxID string) (*Recording, error) {
	return c.recording(ctx, http.MethodGet, sandboxID, "/display/recording", nil)
}

// StartBrowserRecording calls POST /v1/sandboxes/{id}/browser/recording:
// the active tab's screencast, recorded like a desktop's display.
func (c *Client) StartBrowserRecording(ctx context.Context, sandboxID string, req RecordingRequest) (*Recording, error) {
	return c.recording(ctx, http.MethodPost, sandboxID, "/browser/recording", &req)
}

// StopBrowserRecording calls DELETE /v1/sandboxes/{id}/browser/recording.
func (c *Client) StopBrowserRecording(ctx context.Context, sandboxID string) (*Recording, error) {
	return c.recording(ctx, http.MethodDelete, sandboxID, "/browser/recording", nil)
}

// GetBrowserRecording calls GET /v1/sandboxes/{id}/browser/recording.
func (c *Client) GetBrowserRecording(ctx context.Context, sandboxID string) (*Recording, error) {
	return c.recording(ctx, http.MethodGet, sandboxID, "/browser/recording", nil)
}

func (c *Client) recording(ctx context.Context, method, sandboxID, sub string, body any) (*Recording, error) {
	p, err := idPath("/v1/sandboxes/", sandboxID)
	if err != nil {
		return nil, err
	}
	var v Recording
	r := request{method: method, path: p + sub, auth: true}
	if body != nil {
		r.body = body
	}
	if err := c.do(ctx, r, &v); err != nil {
		return nil, err
	}
	return &v, nil
}
