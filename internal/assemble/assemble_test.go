package assemble

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/driver/fake"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/store/sqlite"
)

// build builds a stack over the fake driver and a SQLite store in a
// temporary directory; it starts nothing (no container, no agent).
func build(t *testing.T, configure func(*config.Config)) *Stack {
	t.Helper()
	set, err := config.Default()
	if err != nil {
		t.Fatal(err)
	}
	set.WarmPools = false
	set.DataDir = t.TempDir()
	if configure != nil {
		configure(set)
	}
	st, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(set.DataDir, "state.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	agentDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(agentDir, "genesis-agent"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := Build(t.Context(), Config{Settings: set, Store: st, Driver: fake.New(fake.Config{}), AgentDir: agentDir, InstanceID: "gs-assemble"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// names lists the names of the parts that have what has says.
func names(s *Stack, has func(part) bool) []string {
	var out []string
	for _, p := range s.parts {
		if has(p) {
			out = append(out, p.name)
		}
	}
	return out
}

// TestOneOrderedList: the parts are built in one list whose order is the
// order of their hooks and, reversed, of their Drain and Close, and every
// manager that has a Close is in it. The orders this pins are the
// service's: the jobs before their services (a job's cancel ends a
// service's jobs) and closed after them, the port proxy's connections
// closed before the browser's sessions, the producers' hooks before the
// trace ends a sandbox's trace, the E2B adapter closed (its auto-pauses
// finished) before the snapshots, the snapshots closed (idle hibernations
// finished) before the managers they use, the recorders (browser, desktop) and the
// job followers closed before the trace and the control service, and
// the job logs (their spare files) after the jobs that write them.
func TestOneOrderedList(t *testing.T) {
	t.Parallel()
	s := build(t, nil)
	if s.Tenancy == nil || s.MCPServe == nil || s.E2B == nil || s.OpenSandbox == nil || s.Browser == nil || s.Desktop == nil || s.MCP == nil || s.Skills == nil || s.Trace == nil || s.Snapshots == nil || s.Volumes == nil {
		t.Fatalf("a part is missing from the stack: %+v", s)
	}
	hooks := names(s, func(p part) bool { return p.hook != nil })
	wantHooks := []string{"artifacts", "jobs", "services", "terminals", "ports", "browser", "desktop", "mcp-servers", "snapshots", "volumes", "e2b", "opensandbox", "trace ending"}
	if !slices.Equal(hooks, wantHooks) {
		t.Errorf("hooks in the order %v, want %v", hooks, wantHooks)
	}
	closers := names(s, func(p part) bool { return p.close != nil })
	wantClosers := []string{"control", "tenancy", "trace", "job logs", "jobs", "services", "browser", "desktop", "mcp-servers", "snapshots", "mcp-serve", "e2b"}
	if !slices.Equal(closers, wantClosers) {
		t.Errorf("parts with a Close %v, want %v", closers, wantClosers)
	}
	drainers := names(s, func(p part) bool { return p.drain != nil })
	if want := []string{"browser", "desktop", "mcp-servers", "mcp-serve"}; !slices.Equal(drainers, want) {
		t.Errorf("parts with a Drain %v, want %v", drainers, want)
	}
}

// TestCloseRunsInReverseBuildOrder: Close calls every part's Close once,
// last built first, and goes on past a part whose Close fails, returning
// its error; a second Close closes nothing again. Drain ends the parts'
// own work in the same reverse order, then drains the control service.
func TestCloseRunsInReverseBuildOrder(t *testing.T) {
	t.Parallel()
	s := build(t, nil)
	var drained, closed []string
	failing := errors.New("the trace's files")
	for i := range s.parts {
		p := &s.parts[i]
		if d := p.drain; d != nil {
			p.drain = func(ctx context.Context) { drained = append(drained, p.name); d(ctx) }
		}
		if c := p.close; c != nil {
			p.close = func() error {
				closed = append(closed, p.name)
				err := c()
				if p.name == "trace" {
					return failing
				}
				return err
			}
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := s.Drain(ctx); err != nil {
		t.Fatalf("drain: %v", err)
	}
	if want := []string{"mcp-serve", "mcp-servers", "desktop", "browser"}; !slices.Equal(drained, want) {
		t.Errorf("drained %v, want %v", drained, want)
	}
	if !s.Control.Draining() {
		t.Error("after Drain the control service is not draining")
	}

	err := s.Close()
	built := names(s, func(p part) bool { return p.close != nil })
	slices.Reverse(built)
	if !slices.Equal(closed, built) {
		t.Errorf("closed %v, want the reverse of the build order %v", closed, built)
	}
	if !errors.Is(err, failing) {
		t.Errorf("Close: %v, want the trace's error", err)
	}
	n := len(closed)
	if err2 := s.Close(); len(closed) != n || !errors.Is(err2, failing) {
		t.Errorf("a second Close closed %v again (%v)", closed[n:], err2)
	}
}

// TestBuildLeavesOutDisabledAdapters: the compatibility adapters are parts
// only when their settings enable them.
func TestBuildLeavesOutDisabledAdapters(t *testing.T) {
	t.Parallel()
	s := build(t, func(c *config.Config) { c.E2B.Enabled, c.OpenSandbox.Enabled = false, false })
	if s.E2B != nil || s.OpenSandbox != nil {
		t.Errorf("disabled adapters built: %v %v", s.E2B, s.OpenSandbox)
	}
	if got := names(s, func(p part) bool { return p.name == "e2b" || p.name == "opensandbox" }); len(got) != 0 {
		t.Errorf("disabled adapters in the list: %v", got)
	}
}

// TestBuildFailsCleanly: a config Build cannot use is refused with an
// invalid-argument error, and a part that fails to build fails Build.
func TestBuildFailsCleanly(t *testing.T) {
	t.Parallel()
	if _, err := Build(t.Context(), Config{}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Build without settings, store and driver: %v, want invalid argument", err)
	}
	set, err := config.Default()
	if err != nil {
		t.Fatal(err)
	}
	set.DataDir = t.TempDir()
	set.Ports.PreviewURL = "not a preview template"
	st, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(set.DataDir, "state.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if s, err := Build(t.Context(), Config{Settings: set, Store: st, Driver: fake.New(fake.Config{}), AgentDir: t.TempDir(), InstanceID: "gs-assemble"}); err == nil {
		s.Close()
		t.Fatal("Build with a bad ports.preview_url succeeded")
	}
}
