package mcpserve

import (
	"context"
	"fmt"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/browser"
	"genesis.dev/sandbox/internal/tenant"
)

// Tool names of the optional tools.
const (
	ToolBrowser     = "browser"
	ToolPreviewLink = "preview_link"
)

// Browser runs browser actions in a sandbox of a browser profile
// (browser.Manager).
type Browser interface {
	Run(ctx context.Context, tenant, id string, req *api.BrowserActionsRequest) (*browser.ActionsResult, error)
}

// PreviewLinker makes a preview link of a sandbox's port: a URL that opens
// it without the API key until it expires (the edge's, which knows the
// preview origins); ttl 0 takes its default.
type PreviewLinker func(ctx context.Context, by tenant.Principal, sandboxID string, port int, ttl time.Duration) (url string, expires time.Time, err error)

// BrowserInput is browser's input.
type BrowserInput struct {
	SandboxID string              `json:"sandbox_id" jsonschema:"the sandbox's id (a sandbox of a browser profile, e.g. browser-playwright)"`
	Actions   []api.BrowserAction `json:"actions" jsonschema:"the actions, run in order until one fails: navigate (url), back, forward, reload, click (selector or x/y), fill (selector, text), type (text), press (key), hover, scroll (delta_x/delta_y), select (selector, value), wait (selector or ms), evaluate (expression), text (selector), snapshot (the page's accessibility tree), screenshot (full_page, format png or jpeg), tab_new, tab_activate, tab_close, tabs"`
}

// BrowserActionOutput is what one action did.
type BrowserActionOutput struct {
	Index int    `json:"index"`
	Type  string `json:"type"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	Value any    `json:"value,omitempty" jsonschema:"what the action returned (evaluate's value, text's text, tabs' list); a screenshot is the index of its image in the result's content"`
}

// BrowserOutput is browser's output.
type BrowserOutput struct {
	OK      bool                  `json:"ok" jsonschema:"every action ran; otherwise the failed one says why and the ones after it did not run"`
	URL     string                `json:"url"`
	Title   string                `json:"title"`
	Results []BrowserActionOutput `json:"results"`
}

// PreviewLinkInput is preview_link's input.
type PreviewLinkInput struct {
	SandboxID  string `json:"sandbox_id" jsonschema:"the sandbox's id"`
	Port       int    `json:"port" jsonschema:"the port a server in the sandbox listens on"`
	TTLSeconds int64  `json:"ttl_seconds,omitempty" jsonschema:"how long the link opens the port, in seconds; 0: an hour (or the service's maximum, if shorter)"`
}

// PreviewLinkOutput is preview_link's output.
type PreviewLinkOutput struct {
	URL       string    `json:"url" jsonschema:"opens the port in a browser without the API key until it expires"`
	ExpiresAt time.Time `json:"expires_at"`
}

// The browser and preview link tools' shapes.
var (
	browserTool = toolSpec{Name: ToolBrowser, Title: "Drive a browser",
		Description: "Run actions in the headless Chromium of a sandbox of a browser profile (create it with profile browser-playwright): navigate, click, fill, " +
			"type, press, scroll, read text or the accessibility snapshot, evaluate JavaScript, and take screenshots, returned as image content.",
		Destructive: true, OpenWorld: true, Progress: true, Audit: true}
	previewLinkTool = toolSpec{Name: ToolPreviewLink, Title: "Open a preview link",
		Description: "Make a link that opens a port of a sandbox (a web server the code started) in a browser, without the API key, until it expires. " +
			"Give it to the user to look at what runs in the sandbox.",
		Audit: true}
)

func (s *Server) addOptionalTools(se *session, previews PreviewLinker) {
	p := se.p
	if s.cfg.Browser != nil {
		addTool(s, se, browserTool, func(ctx context.Context, _ *sdk.CallToolRequest, in BrowserInput) (*sdk.CallToolResult, BrowserOutput, string, error) {
			res, out, err := s.browse(ctx, p.Tenant, in)
			return res, out, in.SandboxID, err
		})
	}
	if previews != nil {
		addTool(s, se, previewLinkTool, func(ctx context.Context, _ *sdk.CallToolRequest, in PreviewLinkInput) (*sdk.CallToolResult, PreviewLinkOutput, string, error) {
			u, exp, err := previews(ctx, p, in.SandboxID, in.Port, time.Duration(in.TTLSeconds)*time.Second)
			if err != nil {
				return nil, PreviewLinkOutput{}, in.SandboxID, err
			}
			return nil, PreviewLinkOutput{URL: u, ExpiresAt: exp.UTC()}, in.SandboxID, nil
		})
	}
}

// browse runs the actions; screenshots come back in the answer (never
// kept as artifacts) as image content.
func (s *Server) browse(ctx context.Context, tenant string, in BrowserInput) (*sdk.CallToolResult, BrowserOutput, error) {
	if len(in.Actions) == 0 {
		return nil, BrowserOutput{}, invalid("actions is empty")
	}
	acts := make([]api.BrowserAction, len(in.Actions))
	copy(acts, in.Actions)
	for i := range acts {
		if acts[i].Type == "screenshot" {
			acts[i].Keep = ptr(false)
		}
	}
	r, err := s.cfg.Browser.Run(ctx, tenant, in.SandboxID, &api.BrowserActionsRequest{Actions: acts})
	if err != nil {
		return nil, BrowserOutput{}, err
	}
	res, out := browserResult(r)
	return res, out, nil
}

// browserResult is a run of actions as the model reads it: a text
// summary, each screenshot as image content, and the structured output.
func browserResult(r *browser.ActionsResult) (*sdk.CallToolResult, BrowserOutput) {
	out := BrowserOutput{OK: r.OK, URL: r.URL, Title: r.Title, Results: make([]BrowserActionOutput, 0, len(r.Results))}
	var text strings.Builder
	fmt.Fprintf(&text, "page %q at %s", r.Title, r.URL)
	var images []sdk.Content
	for _, a := range r.Results {
		o := BrowserActionOutput{Index: a.Index, Type: a.Type, OK: a.OK, Error: a.Error, Value: a.Value}
		if img, ok := a.Value.(api.BrowserImage); ok {
			images = append(images, &sdk.ImageContent{Data: img.Data, MIMEType: img.MIME})
			o.Value = fmt.Sprintf("image %d", len(images))
		}
		out.Results = append(out.Results, o)
		switch {
		case !a.OK:
			fmt.Fprintf(&text, "\n%d %s failed: %s", a.Index, a.Type, a.Error)
		case a.Type == "text" || a.Type == "evaluate" || a.Type == "snapshot":
			fmt.Fprintf(&text, "\n%d %s: %v", a.Index, a.Type, o.Value)
		}
	}
	return &sdk.CallToolResult{Content: append([]sdk.Content{&sdk.TextContent{Text: text.String()}}, images...)}, out
}
