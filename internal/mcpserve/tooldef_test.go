package mcpserve

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/snapshots"
	"genesis.dev/sandbox/internal/tenant"
)

// fakeSnapshots pauses, resumes and rolls back; a rollback restores
// memory as memory says.
type fakeSnapshots struct {
	memory bool
	rolled []string
}

func (f *fakeSnapshots) Pause(_ context.Context, tn, id string) (*sandbox.Sandbox, error) {
	return &sandbox.Sandbox{ID: id, Tenant: tn, State: sandbox.StatePaused}, nil
}
func (f *fakeSnapshots) Resume(_ context.Context, tn, id string) (*sandbox.Sandbox, *bool, error) {
	return &sandbox.Sandbox{ID: id, Tenant: tn, State: sandbox.State("running")}, nil, nil
}
func (f *fakeSnapshots) Snapshot(context.Context, string, string, snapshots.SnapshotOptions) (*sandbox.Snapshot, error) {
	return nil, errdefs.ErrNotImplemented
}
func (f *fakeSnapshots) CreateFrom(context.Context, string, snapshots.CreateOptions) (*snapshots.Made, error) {
	return nil, errdefs.ErrNotImplemented
}
func (f *fakeSnapshots) Fork(context.Context, string, string, int, snapshots.CreateOptions) ([]*snapshots.Made, error) {
	return nil, errdefs.ErrNotImplemented
}
func (f *fakeSnapshots) Rollback(_ context.Context, tn, id, snapID string) (*sandbox.Sandbox, bool, error) {
	if snapID == "snap_gone" {
		return nil, false, errdefs.WithCode("snapshot_not_found", errdefs.ErrNotFound)
	}
	f.rolled = append(f.rolled, id+"@"+snapID)
	return &sandbox.Sandbox{ID: id, Tenant: tn, State: sandbox.State("running")}, f.memory, nil
}

// TestToolShapes: every tool a session lists has a description, an
// object input schema and the annotation hints of its spec; the
// lifecycle tools are there with the hints their effects call for.
func TestToolShapes(t *testing.T) {
	t.Parallel()
	s, err := New(Config{Sandboxes: &fakeSandboxes{}, Jobs: unusedJobs{}, Files: unusedFiles{}, Snapshots: &fakeSnapshots{}})
	if err != nil {
		t.Fatal(err)
	}
	cs := connect(t, serve(t, s).URL, "acme")
	defer cs.Close()
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*sdk.Tool{}
	for _, tl := range list.Tools {
		byName[tl.Name] = tl
		a := tl.Annotations
		if tl.Description == "" || tl.Title == "" || a == nil || a.OpenWorldHint == nil {
			t.Errorf("tool %s: %+v", tl.Name, tl)
			continue
		}
		if b, _ := json.Marshal(tl.InputSchema); !json.Valid(b) || string(b) == "null" {
			t.Errorf("tool %s: input schema %s", tl.Name, b)
		}
		if a.ReadOnlyHint != (a.DestructiveHint == nil) {
			t.Errorf("tool %s: read-only %v with destructive %v", tl.Name, a.ReadOnlyHint, a.DestructiveHint)
		}
	}
	want := map[string]struct{ readOnly, destructive, idempotent bool }{
		ToolPause:     {false, false, true},
		ToolResume:    {false, false, true},
		ToolSnapshot:  {false, false, false},
		ToolFork:      {false, false, false},
		ToolRollback:  {false, true, true},
		ToolReadFile:  {true, false, true},
		ToolExec:      {false, true, false},
		ToolWriteFile: {false, true, true},
	}
	for name, w := range want {
		tl := byName[name]
		if tl == nil {
			t.Errorf("tool %s is not listed", name)
			continue
		}
		a := tl.Annotations
		if a.ReadOnlyHint != w.readOnly || a.IdempotentHint != w.idempotent || (!w.readOnly && *a.DestructiveHint != w.destructive) {
			t.Errorf("tool %s: hints %+v, want %+v", name, a, w)
		}
	}
}

// TestRollbackForgetsContexts: a rollback that brought the memory back
// keeps the session's code contexts of the sandbox; one without it
// forgets them (their kernels are gone); a refused rollback is an error
// result with the problem's code and is audited.
func TestRollbackForgetsContexts(t *testing.T) {
	t.Parallel()
	for _, memory := range []bool{true, false} {
		snaps := &fakeSnapshots{memory: memory}
		var audited []string
		s, err := New(Config{Sandboxes: &fakeSandboxes{}, Jobs: unusedJobs{}, Files: unusedFiles{}, Snapshots: snaps,
			Audit: func(_ context.Context, rec *tenant.AuditRecord) {
				audited = append(audited, rec.Action+" "+rec.Target+" "+rec.Code)
			}})
		if err != nil {
			t.Fatal(err)
		}
		se := s.newSession(tenant.Principal{Tenant: "acme", KeyID: "key_acme"}, nil)
		se.contexts[contextKey{sandbox: "sbx_1", language: "python"}] = "ctx_1"
		se.contexts[contextKey{sandbox: "sbx_2", language: "python"}] = "ctx_2"
		cs := connectSession(t, se)
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: ToolRollback, Arguments: map[string]any{"sandbox_id": "sbx_1", "snapshot_id": "snap_1"}})
		if err != nil || res.IsError {
			t.Fatalf("rollback: %v %+v", err, res)
		}
		var out StateOutput
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &out); err != nil || out.SandboxID != "sbx_1" || out.MemoryRestored == nil || *out.MemoryRestored != memory {
			t.Fatalf("memory %v: output %s", memory, b)
		}
		_, kept := se.contexts[contextKey{sandbox: "sbx_1", language: "python"}]
		_, other := se.contexts[contextKey{sandbox: "sbx_2", language: "python"}]
		if kept != memory || !other {
			t.Errorf("memory %v: context of the rolled back sandbox kept %v, of another %v", memory, kept, other)
		}
		res, err = cs.CallTool(context.Background(), &sdk.CallToolParams{Name: ToolRollback, Arguments: map[string]any{"sandbox_id": "sbx_1", "snapshot_id": "snap_gone"}})
		if err != nil || !res.IsError || !containsText(res, "snapshot_not_found") {
			t.Errorf("a refused rollback: %v %+v", err, res)
		}
		if len(audited) != 2 || audited[0] != "mcp rollback_sandbox sbx_1 " || audited[1] != "mcp rollback_sandbox sbx_1 snapshot_not_found" {
			t.Errorf("audit %q", audited)
		}
	}
}

// connectSession connects a client to a session's server in memory.
func connectSession(t *testing.T, se *session) *sdk.ClientSession {
	t.Helper()
	ct, st := sdk.NewInMemoryTransports()
	ss, err := se.srv.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Close() })
	return cs
}

func containsText(res *sdk.CallToolResult, s string) bool {
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok && strings.Contains(tc.Text, s) {
			return true
		}
	}
	return false
}

// TestCallsBuildNoSessionServer: the SDK asks for a server on every
// request; only the one that starts a session builds a session's server
// with its tools, so a call of an open session costs no schema building.
func TestCallsBuildNoSessionServer(t *testing.T) {
	t.Parallel()
	s, err := New(Config{Sandboxes: &fakeSandboxes{}, Jobs: unusedJobs{}, Files: unusedFiles{}, Snapshots: &fakeSnapshots{}})
	if err != nil {
		t.Fatal(err)
	}
	cs := connect(t, serve(t, s).URL, "acme")
	defer cs.Close()
	opened := s.built.Load()
	if opened < 1 {
		t.Fatalf("no session server was built for the session")
	}
	for range 5 {
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: ToolPause, Arguments: map[string]any{"sandbox_id": "sbx_1"}})
		if err != nil || res.IsError {
			t.Fatalf("pause: %v %+v", err, res)
		}
	}
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if n := s.built.Load(); n != opened {
		t.Errorf("%d session servers built by the calls of an open session, want 0", n-opened)
	}
}
