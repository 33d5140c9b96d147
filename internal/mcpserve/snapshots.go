package mcpserve

import (
	"context"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/snapshots"
)

// Tool names of the lifecycle and snapshot tools.
const (
	ToolPause    = "pause_sandbox"
	ToolResume   = "resume_sandbox"
	ToolSnapshot = "snapshot_sandbox"
	ToolFork     = "fork_sandbox"
	ToolRollback = "rollback_sandbox"
)

// Snapshots pauses and resumes sandboxes, takes snapshots of them, makes
// sandboxes from them and rolls sandboxes back to them (snapshots.Manager).
type Snapshots interface {
	Pause(ctx context.Context, tenant, id string) (*sandbox.Sandbox, error)
	Resume(ctx context.Context, tenant, id string) (*sandbox.Sandbox, *bool, error)
	Snapshot(ctx context.Context, tenant, id string, o snapshots.SnapshotOptions) (*sandbox.Snapshot, error)
	CreateFrom(ctx context.Context, snapID string, in snapshots.CreateOptions) (*snapshots.Made, error)
	Fork(ctx context.Context, tenant, id string, count int, in snapshots.CreateOptions) ([]*snapshots.Made, error)
	Rollback(ctx context.Context, tenant, id, snapID string) (*sandbox.Sandbox, bool, error)
}

// SnapshotInput is snapshot_sandbox's input.
type SnapshotInput struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the sandbox's id"`
	Name      string `json:"name,omitempty" jsonschema:"a name for the snapshot"`
}

// SnapshotOutput is snapshot_sandbox's output.
type SnapshotOutput struct {
	SnapshotID string `json:"snapshot_id" jsonschema:"give it as snapshot_id to create_sandbox to start a sandbox from it, or to rollback_sandbox to return this sandbox to it"`
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

// RollbackInput is rollback_sandbox's input.
type RollbackInput struct {
	SandboxID  string `json:"sandbox_id" jsonschema:"the sandbox to return to the snapshot"`
	SnapshotID string `json:"snapshot_id" jsonschema:"a snapshot of a sandbox of the same profile and runtime (from snapshot_sandbox)"`
}

// StateOutput is a sandbox after pause_sandbox, resume_sandbox or
// rollback_sandbox.
type StateOutput struct {
	SandboxOutput
	// MemoryRestored says whether the processes and memory came back (a
	// rollback, or the resume of a hibernated sandbox); absent otherwise.
	MemoryRestored *bool `json:"memory_restored,omitempty" jsonschema:"the processes and memory came back (gVisor), not only the files; false: programs and code contexts start afresh"`
}

// The lifecycle and snapshot tools' shapes.
var (
	pauseTool = toolSpec{Name: ToolPause, Title: "Pause a sandbox",
		Description: "Freeze a sandbox's processes, keeping its memory and files, until resume_sandbox; a paused sandbox runs nothing. " +
			"Pausing a paused sandbox succeeds.",
		Idempotent: true, Audit: true}
	resumeTool = toolSpec{Name: ToolResume, Title: "Resume a sandbox",
		Description: "Bring a paused (or hibernated) sandbox back: its processes go on where they stopped. Resuming a running sandbox succeeds.",
		Idempotent:  true, Progress: true, Audit: true}
	snapshotTool = toolSpec{Name: ToolSnapshot, Title: "Snapshot a sandbox",
		Description: "Save a sandbox's state as a snapshot: its files, and under gVisor its processes and memory too (running programs and code contexts). " +
			"Start new sandboxes from it with create_sandbox's snapshot_id, or return this sandbox to it with rollback_sandbox.",
		Progress: true, Audit: true}
	forkTool = toolSpec{Name: ToolFork, Title: "Fork a sandbox",
		Description: "Copy a running sandbox into new sandboxes with the same state (files; under gVisor processes, memory and code contexts too), " +
			"to try several things from one point. The copies are destroyed when this MCP session ends unless keep is true.",
		Progress: true, Audit: true}
	rollbackTool = toolSpec{Name: ToolRollback, Title: "Roll a sandbox back to a snapshot",
		Description: "Return a sandbox to a snapshot of it (snapshot_sandbox) under the same id: its files become the snapshot's, and under gVisor " +
			"its processes and memory too. Everything done since the snapshot is lost.",
		Destructive: true, Idempotent: true, Progress: true, Audit: true}
)

func (s *Server) addSnapshotTools(se *session) {
	sn := s.cfg.Snapshots
	if sn == nil {
		return
	}
	p := se.p
	addTool(s, se, pauseTool, func(ctx context.Context, _ *sdk.CallToolRequest, in SandboxIDInput) (*sdk.CallToolResult, StateOutput, string, error) {
		sb, err := sn.Pause(ctx, p.Tenant, in.SandboxID)
		if err != nil {
			return nil, StateOutput{}, in.SandboxID, err
		}
		return nil, StateOutput{SandboxOutput: sandboxOutput(sb, !se.owns(sb.ID))}, sb.ID, nil
	})
	addTool(s, se, resumeTool, func(ctx context.Context, _ *sdk.CallToolRequest, in SandboxIDInput) (*sdk.CallToolResult, StateOutput, string, error) {
		sb, memory, err := sn.Resume(ctx, p.Tenant, in.SandboxID)
		if err != nil {
			return nil, StateOutput{}, in.SandboxID, err
		}
		if memory != nil && !*memory {
			se.forgetContexts(sb.ID)
		}
		return nil, StateOutput{SandboxOutput: sandboxOutput(sb, !se.owns(sb.ID)), MemoryRestored: memory}, sb.ID, nil
	})
	addTool(s, se, snapshotTool, func(ctx context.Context, _ *sdk.CallToolRequest, in SnapshotInput) (*sdk.CallToolResult, SnapshotOutput, string, error) {
		snap, err := sn.Snapshot(ctx, p.Tenant, in.SandboxID, snapshots.SnapshotOptions{Name: in.Name})
		if err != nil {
			return nil, SnapshotOutput{}, in.SandboxID, err
		}
		return nil, SnapshotOutput{SnapshotID: snap.ID, SandboxID: snap.SandboxID, State: string(snap.State), Memory: snap.Memory}, snap.ID, nil
	})
	addTool(s, se, rollbackTool, func(ctx context.Context, _ *sdk.CallToolRequest, in RollbackInput) (*sdk.CallToolResult, StateOutput, string, error) {
		if in.SnapshotID == "" {
			return nil, StateOutput{}, in.SandboxID, invalid("snapshot_id is required")
		}
		sb, memory, err := sn.Rollback(ctx, p.Tenant, in.SandboxID, in.SnapshotID)
		if err != nil {
			return nil, StateOutput{}, in.SandboxID, err
		}
		if !memory {
			// The kernels of the session's code contexts did not come back.
			se.forgetContexts(sb.ID)
		}
		return nil, StateOutput{SandboxOutput: sandboxOutput(sb, !se.owns(sb.ID)), MemoryRestored: &memory}, sb.ID, nil
	})
	addTool(s, se, forkTool, func(ctx context.Context, req *sdk.CallToolRequest, in ForkInput) (*sdk.CallToolResult, ForkOutput, string, error) {
		count := in.Count
		if count == 0 {
			count = 1
		}
		made, err := sn.Fork(ctx, p.Tenant, in.SandboxID, count, snapshots.CreateOptions{Tenant: p.Tenant})
		if err != nil {
			return nil, ForkOutput{}, in.SandboxID, err
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
			return nil, ForkOutput{}, in.SandboxID, errdefs.WithCode("fork_failed", errdefs.Mark(errorsOf(out.Errors), errdefs.ErrUnavailable))
		}
		return nil, out, in.SandboxID, nil
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
