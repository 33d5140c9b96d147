package mcpserve

import (
	"context"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/snapshots"
)

// Tool names of the snapshot tools.
const (
	ToolSnapshot = "snapshot_sandbox"
	ToolFork     = "fork_sandbox"
)

// Snapshots takes snapshots of sandboxes and makes sandboxes from them
// (snapshots.Manager).
type Snapshots interface {
	Snapshot(ctx context.Context, tenant, id string, o snapshots.SnapshotOptions) (*sandbox.Snapshot, error)
	CreateFrom(ctx context.Context, snapID string, in snapshots.CreateOptions) (*snapshots.Made, error)
	Fork(ctx context.Context, tenant, id string, count int, in snapshots.CreateOptions) ([]*snapshots.Made, error)
}

// SnapshotInput is snapshot_sandbox's input.
type SnapshotInput struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the sandbox's id"`
	Name      string `json:"name,omitempty" jsonschema:"a name for the snapshot"`
}

// SnapshotOutput is snapshot_sandbox's output.
type SnapshotOutput struct {
	SnapshotID string `json:"snapshot_id" jsonschema:"give it as snapshot_id to create_sandbox to start a sandbox from it"`
	SandboxID  string `json:"sandbox_id"`
	State      string `json:"state"`
	Memory     bool   `json:"memory" jsonschema:"the snapshot holds the processes and memory (gVisor), not only the files"`
}

// ForkInput is fork_sandbox's input.
type ForkInput struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the sandbox to copy"`
	Count     int    `json:"count,omitempty" jsonschema:"how many copies; default 1"`
	Keep      bool   `json:"keep,omitempty" jsonschema:"keep the copies after this MCP session ends; default false: destroyed with the session"`
}

// ForkOutput is fork_sandbox's output.
type ForkOutput struct {
	Sandboxes []SandboxOutput `json:"sandboxes"`
	// Errors say why copies could not be made.
	Errors []string `json:"errors,omitempty"`
}

func (s *Server) addSnapshotTools(se *session) {
	if s.cfg.Snapshots == nil {
		return
	}
	p := se.p
	sdk.AddTool(se.srv, &sdk.Tool{Name: ToolSnapshot, Title: "Snapshot a sandbox",
		Description: "Save a sandbox's state as a snapshot: its files, and under gVisor its processes and memory too (running programs and code contexts). " +
			"Start new sandboxes from it with create_sandbox's snapshot_id.",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(false)}},
		func(ctx context.Context, req *sdk.CallToolRequest, in SnapshotInput) (*sdk.CallToolResult, SnapshotOutput, error) {
			stop := s.heartbeat(ctx, req, ToolSnapshot)
			sn, err := s.cfg.Snapshots.Snapshot(ctx, p.Tenant, in.SandboxID, snapshots.SnapshotOptions{Name: in.Name})
			stop()
			if err != nil {
				s.audit(ctx, p, ToolSnapshot, in.SandboxID, err)
				return nil, SnapshotOutput{}, toolError(err)
			}
			s.audit(ctx, p, ToolSnapshot, sn.ID, nil)
			return nil, SnapshotOutput{SnapshotID: sn.ID, SandboxID: sn.SandboxID, State: string(sn.State), Memory: sn.Memory}, nil
		})
	sdk.AddTool(se.srv, &sdk.Tool{Name: ToolFork, Title: "Fork a sandbox",
		Description: "Copy a running sandbox into new sandboxes with the same state (files; under gVisor processes, memory and code contexts too), " +
			"to try several things from one point. The copies are destroyed when this MCP session ends unless keep is true.",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(false)}},
		func(ctx context.Context, req *sdk.CallToolRequest, in ForkInput) (*sdk.CallToolResult, ForkOutput, error) {
			count := in.Count
			if count == 0 {
				count = 1
			}
			stop := s.heartbeat(ctx, req, ToolFork)
			made, err := s.cfg.Snapshots.Fork(ctx, p.Tenant, in.SandboxID, count, snapshots.CreateOptions{Tenant: p.Tenant})
			stop()
			if err != nil {
				s.audit(ctx, p, ToolFork, in.SandboxID, err)
				return nil, ForkOutput{}, toolError(err)
			}
			out := ForkOutput{Sandboxes: []SandboxOutput{}}
			for _, m := range made {
				if m.Err != nil {
					out.Errors = append(out.Errors, toolError(m.Err).Error())
					continue
				}
				s.adopt(se, req.Session, in.SandboxID, m, in.Keep)
				s.listSandbox(se, m.Sandbox.ID, m.Sandbox.Profile)
				s.audit(ctx, p, ToolFork, m.Sandbox.ID, nil)
				out.Sandboxes = append(out.Sandboxes, sandboxOutput(m.Sandbox, in.Keep))
			}
			if len(out.Sandboxes) == 0 {
				err := errdefs.WithCode("fork_failed", errdefs.Mark(errorsOf(out.Errors), errdefs.ErrUnavailable))
				return nil, ForkOutput{}, toolError(err)
			}
			return nil, out, nil
		})
}

// adopt takes a sandbox made from another's state into the session: owned
// unless kept, and, when its memory came back, the session's code contexts
// of the source carried over to their copies (their variables are there).
func (s *Server) adopt(se *session, ss *sdk.ServerSession, from string, m *snapshots.Made, keep bool) {
	if !keep {
		s.own(se, ss, m.Sandbox.ID)
	}
	if !m.Memory || from == "" {
		return
	}
	se.mu.Lock()
	defer se.mu.Unlock()
	for k, id := range se.contexts {
		if k.sandbox != from {
			continue
		}
		if cp := m.Sessions[id]; cp != "" {
			se.contexts[contextKey{sandbox: m.Sandbox.ID, language: k.language}] = cp
		}
	}
}

func sandboxOutput(sb *sandbox.Sandbox, keep bool) SandboxOutput {
	return SandboxOutput{SandboxID: sb.ID, Profile: sb.Profile, Runtime: string(sb.Runtime), RiskLevel: string(sb.RiskLevel),
		State: string(sb.State), Kept: keep, ExpiresAt: sb.ExpiresAt}
}

// forkErrors is the reasons no copy of a fork was made.
type forkErrors []string

func (e forkErrors) Error() string {
	if len(e) == 0 {
		return "no copy was made"
	}
	return "no copy was made: " + e[0]
}

func errorsOf(list []string) error { return forkErrors(list) }
