package mcpserve

import (
	"context"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolSpec is what a client lists of a tool, and how its calls are run:
// its name, title, description and annotation hints, whether a caller
// that asked gets progress notifications while it runs, and whether each
// call is recorded in the audit log.
type toolSpec struct {
	Name, Title, Description string
	// ReadOnly: the tool changes nothing. Otherwise Destructive says
	// whether it may change or delete what is there (not only add).
	ReadOnly, Destructive bool
	// Idempotent: calling it again with the same input changes nothing more.
	Idempotent bool
	// OpenWorld: it runs code of the caller's, which may reach beyond the
	// sandbox's own state (the network, where allowed).
	OpenWorld bool
	// Progress: a long call; a caller that gave a progress token hears
	// that it still runs every ProgressInterval.
	Progress bool
	// Audit: each call is recorded as the caller's key, with its outcome.
	Audit bool
}

// tool is the tool's listing; its input and output schemas are inferred
// from the handler's types by the SDK.
func (t toolSpec) tool() *sdk.Tool {
	a := &sdk.ToolAnnotations{ReadOnlyHint: t.ReadOnly, IdempotentHint: t.Idempotent, OpenWorldHint: ptr(t.OpenWorld)}
	if !t.ReadOnly {
		a.DestructiveHint = ptr(t.Destructive)
	}
	return &sdk.Tool{Name: t.Name, Title: t.Title, Description: t.Description, Annotations: a}
}

// toolFunc runs one call of a tool: its result content (nil: the SDK
// makes it from the output), its structured output, and the id the audit
// record names (the sandbox, job or snapshot the call touched).
type toolFunc[In, Out any] func(ctx context.Context, req *sdk.CallToolRequest, in In) (res *sdk.CallToolResult, out Out, target string, err error)

// addTool adds a tool to the session's server: the spec's progress and
// audit around f, and f's error as a result the model reads (its stable
// code first).
func addTool[In, Out any](s *Server, se *session, t toolSpec, f toolFunc[In, Out]) {
	sdk.AddTool(se.srv, t.tool(), func(ctx context.Context, req *sdk.CallToolRequest, in In) (*sdk.CallToolResult, Out, error) {
		stop := func() {}
		if t.Progress {
			stop = s.heartbeat(ctx, req, t.Name)
		}
		res, out, target, err := f(ctx, req, in)
		stop()
		if t.Audit {
			s.audit(ctx, se.p, t.Name, target, err)
		}
		if err != nil {
			var zero Out
			return nil, zero, toolError(err)
		}
		return res, out, nil
	})
}
