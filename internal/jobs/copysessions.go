package jobs

import (
	"context"
	"fmt"
	"strings"

	"genesis.dev/sandbox/internal/sandbox"
)

// CopySessions gives sandbox to, a copy of another sandbox made from a
// saved state, records of the sessions that state holds: each shell
// session (its cwd and environment are files the copy has), and each code
// context when the copy's processes came back (its kernel runs in the
// copy). A copy gets an id of its own; inside the sandbox its state
// directory is linked to the one the saved state knows. It returns the
// saved state's session ids → the copies' ids. A copy's code context does
// not own its kernel's job (the job record is the source sandbox's): the
// kernel lives until the sandbox ends.
func (s *Manager) CopySessions(ctx context.Context, tenant, to string, from []sandbox.Session, memory bool) (map[string]string, error) {
	out := map[string]string{}
	var links strings.Builder
	now := s.now()
	for _, old := range from {
		if old.State != sandbox.SessionActive || (old.Kind == sandbox.SessionPython && !memory) {
			continue
		}
		prefix, dir := "ses", sessionStateDir
		if old.Kind == sandbox.SessionPython {
			prefix, dir = "ctx", contextStateDir
		}
		se := &sandbox.Session{ID: sandbox.NewID(prefix), Tenant: tenant, SandboxID: to, Kind: old.Kind, State: sandbox.SessionActive,
			Cwd: old.Cwd, CreatedAt: now, UpdatedAt: now}
		if err := s.store.CreateSession(ctx, se); err != nil {
			return out, err
		}
		out[old.ID] = se.ID
		fmt.Fprintf(&links, "mkdir -p %s && ln -sfn %s %s/%s\n", dir, old.ID, dir, se.ID)
	}
	if links.Len() == 0 {
		return out, nil
	}
	res, err := s.Exec(ctx, ExecInput{Tenant: tenant, SandboxID: to, Script: "set -e\n" + links.String(), TimeoutMS: 10_000})
	if err == nil && (res.Job.ExitCode == nil || *res.Job.ExitCode != 0) {
		err = fmt.Errorf("linking the copied sessions' state: %s: %s", res.Job.State, res.Stderr)
	}
	return out, err
}

// ListSandboxSessions returns every session and code context of a
// sandbox, oldest first.
func (s *Manager) ListSandboxSessions(ctx context.Context, sandboxID string) ([]*sandbox.Session, error) {
	return s.store.ListSandboxSessions(ctx, sandboxID)
}
