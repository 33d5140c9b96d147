package api

import (
	"net/url"
	"time"
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
	Action string `json:"action"`
	// Coordinate is [x, y] (Anthropic); X and Y are the same (OpenAI).
	Coordinate []int `json:"coordinate,omitempty"`
	X          *int  `json:"x,omitempty"`
	Y          *int  `json:"y,omitempty"`
	// StartCoordinate starts a left_click_drag (Anthropic); Path is a
	// drag's whole path (OpenAI).
	StartCoordinate []int           `json:"start_coordinate,omitempty"`
	Path            []ComputerPoint `json:"path,omitempty"`
	// Button of click: left, right, middle, back, forward (OpenAI).
	Button string `json:"button,omitempty"`
	// Text is typed (type), or is a key chord such as "ctrl+s" (key,
	// hold_key), or modifiers held during a click or scroll ("shift").
	Text string   `json:"text,omitempty"`
	Keys []string `json:"keys,omitempty"`
	// ScrollDirection up|down|left|right with ScrollAmount wheel clicks
	// (Anthropic); ScrollX/ScrollY in pixels, 100 per click (OpenAI).
	ScrollDirection string `json:"scroll_direction,omitempty"`
	ScrollAmount    int    `json:"scroll_amount,omitempty"`
	ScrollX         int    `json:"scroll_x,omitempty"`
	ScrollY         int    `json:"scroll_y,omitempty"`
	// Duration in seconds (wait, hold_key; the most wait_for_window waits).
	Duration float64 `json:"duration,omitempty"`
	// Region [x0, y0, x1, y1] to zoom into.
	Region []int `json:"region,omitempty"`
	// Window is a window id of list_windows (focus_window).
	Window string `json:"window,omitempty"`
	// Title is what wait_for_window waits for: a part of a window's title,
	// or its class or instance name (WM_CLASS: XTerm, xterm), which stay
	// when a program retitles its window (case-sensitive).
	Title string `json:"title,omitempty"`
	// Command is the program to launch (launch), with Env added.
	Command []string          `json:"command,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// Sensitive keeps the action's text (and a launch's env) out of the
	// trace: it is recorded as a count of characters.
	Sensitive bool `json:"sensitive,omitempty"`
}

// ComputerActionsRequest is the body of POST
// /v1/sandboxes/{id}/computer/actions: a batch of actions, run in order up
// to the first failure.
type ComputerActionsRequest struct {
	Actions []ComputerAction `json:"actions"`
	// Screenshot adds a screenshot after the last action.
	Screenshot bool `json:"screenshot,omitempty"`
	// Display is the logical display size the caller's coordinates and
	// screenshots are in; the real display's size when absent.
	Display *DisplaySize `json:"display,omitempty"`
}

// ComputerWindow is a top-level window the window manager lists (logical
// coordinates).
type ComputerWindow struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	// Class is the window's class (WM_CLASS: its program, such as XTerm
	// or Chromium), Instance its instance name (xterm, chromium).
	Class    string `json:"class,omitempty"`
	Instance string `json:"instance,omitempty"`
	X        int    `json:"x"`
	Y        int    `json:"y"`
	Width    int    `json:"width"`
	Height   int    `json:"height"`
	Active   bool   `json:"active"`
}

// ComputerStepResult answers one action.
type ComputerStepResult struct {
	Index  int    `json:"index"`
	Action string `json:"action"`
	OK     bool   `json:"ok"`
	Error  string `json:"error,omitempty"`
	Code   string `json:"code,omitempty"`
	// Screenshot is a base64 PNG (screenshot, zoom).
	Screenshot string           `json:"screenshot,omitempty"`
	Cursor     *ComputerPoint   `json:"cursor,omitempty"`
	Windows    []ComputerWindow `json:"windows,omitempty"`
	// JobID is the job of a launched program.
	JobID      string `json:"job_id,omitempty"`
	DurationMS int64  `json:"duration_ms"`
}

// ComputerActionsResult answers a batch: a result per action run (the
// batch stops at the first failure), and the final screenshot when asked.
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

// DesktopControlRequest is an agent's request for a human.
type DesktopControlRequest struct {
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// DesktopControl is who holds a desktop's control. Version grows with
// every change, so that a caller can wait for the next
// (GET …/control?after=N).
type DesktopControl struct {
	SandboxID string `json:"sandbox_id"`
	// Holder is "agent", "human:<who>" or "" (nobody: the agent may act).
	Holder string    `json:"holder"`
	Reason string    `json:"reason,omitempty"`
	Since  time.Time `json:"since"`
	// AllowScreenshots lets the agent take screenshots while a human holds
	// control (off by default: the human may be typing a password).
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
	// JobID is the recorder's job (ffmpeg in the sandbox): GET
	// /v1/jobs/{id} and its logs answer it.
	JobID string `json:"job_id,omitempty"`
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
