package client

import (
	"context"
	"net/http"
	"net/url"
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
// list_windows, focus_window, launch. The fields are those of the
// Anthropic computer tool and of OpenAI's computer-use actions; see
// docs/desktop.md.
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
	Command         []string          `json:"command,omitempty"`
	Env             map[string]string `json:"env,omitempty"`
}

// ComputerActionsRequest is a batch of actions, run in order up to the
// first failure; Display declares the logical display size coordinates
// and screenshots are in (the real size when nil).
type ComputerActionsRequest struct {
	Actions    []ComputerAction `json:"actions"`
	Screenshot bool             `json:"screenshot,omitempty"`
	Display    *DisplaySize     `json:"display,omitempty"`
}

// ComputerWindow is a top-level window (logical coordinates).
type ComputerWindow struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	X      int    `json:"x"`
	Y      int    `json:"y"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
	Active bool   `json:"active"`
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
