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

// ComputerPoint is a position in logical display coordinates.
type ComputerPoint struct {
	X int `json:"x"`
	Y int `json:"y"`
}

// DisplaySize is a display size in pixels.
type DisplaySize struct {
	Width  int `json:"width"`
	Height int `json:"height"`
}

// ComputerAction is one step of POST /v1/sandboxes/{id}/computer/actions.
// Action is one of screenshot, mouse_move, left_click, right_click,
// middle_click, double_click, triple_click, click (with Button),
// left_mouse_down, left_mouse_up, left_click_drag / drag, scroll, type,
// key / keypress / hotkey, hold_key, wait, cursor_position, zoom,
// list_windows, wait_for_window (Title: a part of the title, or the class
// or instance name; at most Duration seconds),
// focus_window, launch. The fields are those of the Anthropic computer tool
// and of OpenAI's computer-use actions; see docs/desktop.md.
type ComputerAction struct {
	Action          string            `json:"action"`
	Coordinate      []int             `json:"coordinate,omitempty"`
	X               *int              `json:"x,omitempty"`
	Y               *int              `json:"y,omitempty"`
	StartCoordinate []int             `json:"start_coordinate,omitempty"`
	Path            []ComputerPoint   `json:"path,omitempty"`
	Button          string            `json:"button,omitempty"`
	Text            string            `json:"text,omitempty"`
	Keys            []string          `json:"keys,omitempty"`
	ScrollDirection string            `json:"scroll_direction,omitempty"`
	ScrollAmount    int               `json:"scroll_amount,omitempty"`
	ScrollX         int               `json:"scroll_x,omitempty"`
	ScrollY         int               `json:"scroll_y,omitempty"`
	Duration        float64           `json:"duration,omitempty"`
	Region          []int             `json:"region,omitempty"`
	Window          string            `json:"window,omitempty"`
	Title           string            `json:"title,omitempty"`
	Command         []string          `json:"command,omitempty"`
	Env             map[string]string `json:"env,omitempty"`
	// Sensitive records the action's text in the trace as a count only.
	Sensitive bool `json:"sensitive,omitempty"`
}

// ComputerActionsRequest is a batch of actions, run in order up to the
// first failure; Display declares the logical display size coordinates
// and screenshots are in (the real size when nil).
type ComputerActionsRequest struct {
	Actions    []ComputerAction `json:"actions"`
	Screenshot bool             `json:"screenshot,omitempty"`
	Display    *DisplaySize     `json:"display,omitempty"`
}

// ComputerWindow is a top-level window (logical coordinates). Class and
// Instance are its WM_CLASS names (XTerm, xterm).
type ComputerWindow struct {
	ID       string `json:"id"`
	Title    string `json:"title"`
	Class    string `json:"class,omitempty"`
	Instance string `json:"instance,omitempty"`
	X        int    `json:"x"`
	Y        int    `json:"y"`
	Width    int    `json:"width"`
	Height   int    `json:"height"`
	Active   bool   `json:"active"`
}

// ComputerStepResult answers one action; Screenshot is a base64 PNG.
type ComputerStepResult struct {
	Index      int              `json:"index"`
	Action     string           `json:"action"`
	OK         bool             `json:"ok"`
	Error      string           `json:"error,omitempty"`
	Code       string           `json:"code,omitempty"`
	Screenshot string           `json:"screenshot,omitempty"`
	Cursor     *ComputerPoint   `json:"cursor,omitempty"`
	Windows    []ComputerWindow `json:"windows,omitempty"`
	JobID      string           `json:"job_id,omitempty"`
	DurationMS int64            `json:"duration_ms"`
}

// ComputerActionsResult answers a batch.
type ComputerActionsResult struct {
	Results    []ComputerStepResult `json:"results"`
	Completed  int                  `json:"completed"`
	OK         bool                 `json:"ok"`
	Display    DisplaySize          `json:"display"`
	Real       DisplaySize          `json:"real"`
	Screenshot string               `json:"screenshot,omitempty"`
}

// ComputerPath is the computer-use root of a sandbox.
func ComputerPath(sandboxID string) string {
	return "/v1/sandboxes/" + url.PathEscape(sandboxID) + "/computer"
}

// ComputerActions runs a batch of computer actions on a desktop sandbox.
func (c *Client) ComputerActions(ctx context.Context, sandboxID string, req ComputerActionsRequest) (*ComputerActionsResult, error) {
	var out ComputerActionsResult
	err := c.do(ctx, request{method: http.MethodPost, path: ComputerPath(sandboxID) + "/actions", auth: true, body: req}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// DesktopControlRequest is an agent's request for a human.
type DesktopControlRequest struct {
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// DesktopControl is who holds a desktop's control: "agent", "human:<who>"
// or "" (nobody; the agent may act). Version grows with every change.
type DesktopControl struct {
	SandboxID        string                  `json:"sandbox_id"`
	Holder           string                  `json:"holder"`
	Reason           string                  `json:"reason,omitempty"`
	Since            time.Time               `json:"since"`
	AllowScreenshots bool                    `json:"allow_screenshots"`
	Requests         []DesktopControlRequest `json:"requests"`
	Version          int64                   `json:"version"`
}

// TakeDesktopControlRequest is the body of POST …/control.
type TakeDesktopControlRequest struct {
	Holder           string `json:"holder"`
	Reason           string `json:"reason,omitempty"`
	AllowScreenshots bool   `json:"allow_screenshots,omitempty"`
}

// RequestHumanRequest is the body of POST …/control/requests.
type RequestHumanRequest struct {
	Reason string `json:"reason"`
}

// ControlPath is the control lease of a desktop sandbox.
func ControlPath(sandboxID string) string {
	return "/v1/sandboxes/" + url.PathEscape(sandboxID) + "/control"
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

// CreateDisplayLinkRequest asks for a live-view link.
type CreateDisplayLinkRequest struct {
	// Role is observer (its input is dropped) or controller.
	Role       string `json:"role"`
	TTLSeconds int64  `json:"ttl_seconds"`
}

// DisplayLink is a short-lived live-view link: VNCURL is a WebSocket URL
// carrying RFB that needs no API key; it holds no VNC password.
type DisplayLink struct {
	SandboxID string `json:"sandbox_id"`
	Role      string `json:"role"`
	VNCURL    string `json:"vnc_url"`
	// ViewerURL is the live-view page (noVNC) for a person's browser.
	ViewerURL string    `json:"viewer_url"`
	ExpiresAt time.Time `json:"expires_at"`
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

// RecordingRequest is the body of POST /v1/sandboxes/{id}/display/recording.
type RecordingRequest struct {
	// FPS is the frame rate (1..30, default 5).
	FPS int `json:"fps,omitempty"`
	// SegmentSeconds is a segment's length (1..60, default 2).
	SegmentSeconds int `json:"segment_seconds,omitempty"`
}

// Recording is a desktop's display or a browser's screencast recording; its segments are video.segment
// events of the sandbox's trace (artifacts, with wall-clock start and end).
type Recording struct {
	ID        string `json:"id"`
	SandboxID string `json:"sandbox_id"`
	// Source is what is recorded: display (a desktop) or browser (the
	// active tab's screencast).
	Source         string     `json:"source,omitempty"`
	State          string     `json:"state"`
	FPS            int        `json:"fps"`
	SegmentSeconds int        `json:"segment_seconds"`
	StartedAt      time.Time  `json:"started_at"`
	StoppedAt      *time.Time `json:"stopped_at,omitempty"`
	Segments       int        `json:"segments"`
	Bytes          int64      `json:"bytes"`
	Error          string     `json:"error,omitempty"`
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
