package mcpserve

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"genesis.dev/sandbox/api"
)

// ToolComputer is the name of the desktop (computer-use) tool.
const ToolComputer = "computer"

// Desktop runs computer-use actions on a sandbox's desktop
// (desktop.Manager); a human holding its control refuses them.
type Desktop interface {
	Run(ctx context.Context, tenant, id string, req *api.ComputerActionsRequest) (*api.ComputerActionsResult, error)
}

// ComputerInput is computer's input.
type ComputerInput struct {
	SandboxID  string               `json:"sandbox_id" jsonschema:"the sandbox's id (a sandbox of a desktop profile, e.g. desktop-vnc)"`
	Actions    []api.ComputerAction `json:"actions" jsonschema:"the actions, run in order until one fails: screenshot, left_click, right_click, double_click, mouse_move, left_click_drag, type (text), key (text: a chord such as ctrl+s), scroll, wait, cursor_position, zoom, launch, list_windows (coordinates as [x, y])"`
	Screenshot bool                 `json:"screenshot,omitempty" jsonschema:"add a screenshot after the last action"`
}

// ComputerStepOutput is what one action did.
type ComputerStepOutput struct {
	Index  int    `json:"index"`
	Action string `json:"action"`
	OK     bool   `json:"ok"`
	Error  string `json:"error,omitempty"`
	Image  int    `json:"image,omitempty" jsonschema:"the number of its screenshot among the result's images (1 is the first)"`
}

// ComputerOutput is computer's output.
type ComputerOutput struct {
	OK        bool                 `json:"ok"`
	Completed int                  `json:"completed"`
	Width     int                  `json:"width" jsonschema:"the display's width, the space of the coordinates"`
	Height    int                  `json:"height"`
	Results   []ComputerStepOutput `json:"results"`
}

// computerTool is the computer tool's shape.
var computerTool = toolSpec{Name: ToolComputer, Title: "Use a computer",
	Description: "Run computer-use actions (mouse, keyboard, screenshots) on the desktop of a sandbox of a desktop profile (create it with profile desktop-vnc). " +
		"Screenshots come back as image content. While a person holds the desktop's control, actions are refused with control_held: wait and try again.",
	Destructive: true, OpenWorld: true, Progress: true, Audit: true}

func (s *Server) addComputerTool(se *session) {
	if s.cfg.Desktop == nil {
		return
	}
	p := se.p
	addTool(s, se, computerTool, func(ctx context.Context, _ *sdk.CallToolRequest, in ComputerInput) (*sdk.CallToolResult, ComputerOutput, string, error) {
		if len(in.Actions) == 0 && !in.Screenshot {
			return nil, ComputerOutput{}, in.SandboxID, invalid("actions is empty (give actions, or screenshot: true)")
		}
		r, err := s.cfg.Desktop.Run(ctx, p.Tenant, in.SandboxID, &api.ComputerActionsRequest{Actions: in.Actions, Screenshot: in.Screenshot})
		if err != nil {
			return nil, ComputerOutput{}, in.SandboxID, err
		}
		res, out := computerResult(r)
		return res, out, in.SandboxID, nil
	})
}

// computerResult is a run of computer actions as the model reads it: a
// text summary, each screenshot as image content, the structured output.
func computerResult(r *api.ComputerActionsResult) (*sdk.CallToolResult, ComputerOutput) {
	out := ComputerOutput{OK: r.OK, Completed: r.Completed, Width: r.Display.Width, Height: r.Display.Height, Results: make([]ComputerStepOutput, 0, len(r.Results))}
	var text strings.Builder
	fmt.Fprintf(&text, "%d of %d actions done on a %dx%d display", r.Completed, len(r.Results), r.Display.Width, r.Display.Height)
	var images []sdk.Content
	add := func(b64 string) int {
		b, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || len(b) == 0 {
			return 0
		}
		images = append(images, &sdk.ImageContent{Data: b, MIMEType: "image/png"})
		return len(images)
	}
	for _, st := range r.Results {
		o := ComputerStepOutput{Index: st.Index, Action: st.Action, OK: st.OK, Error: st.Error}
		if st.Screenshot != "" {
			o.Image = add(st.Screenshot)
		}
		if !st.OK {
			fmt.Fprintf(&text, "\n%d %s failed: %s", st.Index, st.Action, st.Error)
		}
		out.Results = append(out.Results, o)
	}
	if r.Screenshot != "" {
		if n := add(r.Screenshot); n > 0 {
			fmt.Fprintf(&text, "\nthe screen after the last action is image %d", n)
		}
	}
	return &sdk.CallToolResult{Content: append([]sdk.Content{&sdk.TextContent{Text: text.String()}}, images...)}, out
}
