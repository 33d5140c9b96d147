package jobs

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// sessionStateDir is where a shell session keeps its saved cwd and exported
// environment inside the sandbox (the sandbox user's own state).
const sessionStateDir = "/tmp/.genesis-sessions"

// CreateSession opens a StatefulSession on a running sandbox.
func (s *Manager) CreateSession(ctx context.Context, tenant, sandboxID string) (*sandbox.Session, error) {
	att, err := s.sbx.Attach(ctx, tenant, sandboxID, control.AttachOptions{})
	if err != nil {
		return nil, err
	}
	sb := att.Sandbox
	now := s.now()
	se := &sandbox.Session{
		ID: sandbox.NewID("ses"), Tenant: tenant, SandboxID: sb.ID, Kind: sandbox.SessionShell,
		State: sandbox.SessionActive, Cwd: "/workspace", CreatedAt: now, UpdatedAt: now,
	}
	if err := s.store.CreateSession(ctx, se); err != nil {
		return nil, err
	}
	return se, nil
}

// GetSession returns a session of tenant.
func (s *Manager) GetSession(ctx context.Context, tenant, id string) (*sandbox.Session, error) {
	if !sandbox.ValidID("ses", id) && !sandbox.ValidID("ctx", id) {
		return nil, fmt.Errorf("session %q: %w", id, errdefs.ErrNotFound)
	}
	return s.store.GetSession(ctx, tenant, id)
}

// GetSessionOf returns a session of tenant if it is of kind: a shell
// session's id is not found as a code context, nor the reverse (every edge
// serves the two kinds under names of their own).
func (s *Manager) GetSessionOf(ctx context.Context, tenant, id string, kind sandbox.SessionKind) (*sandbox.Session, error) {
	se, err := s.GetSession(ctx, tenant, id)
	if err == nil && se.Kind != kind {
		return nil, fmt.Errorf("%s %q: %w", sessionNoun(kind), id, errdefs.ErrNotFound)
	}
	return se, err
}

// CloseSessionOf is CloseSession of a session of kind (see GetSessionOf).
func (s *Manager) CloseSessionOf(ctx context.Context, tenant, id string, kind sandbox.SessionKind) error {
	if _, err := s.GetSessionOf(ctx, tenant, id, kind); err != nil {
		return err
	}
	return s.CloseSession(ctx, tenant, id)
}

// sessionNoun is what the API calls a session of kind.
func sessionNoun(kind sandbox.SessionKind) string {
	if kind == sandbox.SessionPython {
		return "context"
	}
	return "session"
}

func (s *Manager) activeSession(ctx context.Context, tenant, id string, kind sandbox.SessionKind) (*sandbox.Session, error) {
	se, err := s.GetSession(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if se.Kind != kind {
		return nil, fmt.Errorf("%s %q: %w", kind, id, errdefs.ErrNotFound)
	}
	if se.State != sandbox.SessionActive {
		return nil, errdefs.WithCode("session_closed", fmt.Errorf("session %s is closed: %w", id, errdefs.ErrFailedPrecondition))
	}
	return se, nil
}

// sessionLock serializes calls within one session, so each call sees the
// state the previous one saved.
func (s *Manager) sessionLock(id string) *sync.Mutex {
	v, _ := s.sessionLocks.LoadOrStore(id, &sync.Mutex{})
	return v.(*sync.Mutex)
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(v string) string {
	return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
}

// wrapSessionScript wraps a user script so that it starts in the session's
// saved cwd with its saved exported environment, and saves both when it ends
// (also on exit with a status). Per-call env overrides the saved values.
func wrapSessionScript(sessionID, script string, env map[string]string) string {
	dir := shellQuote(sessionStateDir + "/" + sessionID)
	var b strings.Builder
	fmt.Fprintf(&b, "__gs_dir=%s\n", dir)
	b.WriteString(`mkdir -p "$__gs_dir" 2>/dev/null
if [ -r "$__gs_dir/env" ]; then . "$__gs_dir/env"; fi
if [ -r "$__gs_dir/cwd" ]; then cd "$(cat "$__gs_dir/cwd")" 2>/dev/null || cd /workspace 2>/dev/null; fi
`)
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(env[k]))
	}
	b.WriteString(`__gs_save() {
  __gs_rc=$?
  pwd > "$__gs_dir/cwd.tmp" 2>/dev/null && mv -f "$__gs_dir/cwd.tmp" "$__gs_dir/cwd"
  export -p > "$__gs_dir/env.tmp" 2>/dev/null && mv -f "$__gs_dir/env.tmp" "$__gs_dir/env"
  exit $__gs_rc
}
trap __gs_save EXIT
`)
	b.WriteString(script)
	b.WriteString("\n")
	return b.String()
}

// SessionExec runs a command or script inside a shell session: it starts in
// the cwd and exported environment the previous call left, and saves them
// when it ends.
func (s *Manager) SessionExec(ctx context.Context, sessionID string, in ExecInput) (*ExecOutput, error) {
	se, err := s.activeSession(ctx, in.Tenant, sessionID, sandbox.SessionShell)
	if err != nil {
		return nil, err
	}
	if len(in.Command) > 0 && in.Script != "" {
		return nil, invalid("command and script are mutually exclusive")
	}
	script := in.Script
	if len(in.Command) > 0 {
		q := make([]string, len(in.Command))
		for i, a := range in.Command {
			q[i] = shellQuote(a)
		}
		script = strings.Join(q, " ")
	}
	if script == "" {
		return nil, invalid("one of command and script is required")
	}
	if in.Cwd != "" {
		script = "cd " + shellQuote(in.Cwd) + " || exit 1\n" + script
	}
	if err := control.ValidateEnv(in.Env); err != nil {
		return nil, err
	}
	mu := s.sessionLock(se.ID)
	mu.Lock()
	defer mu.Unlock()
	// The agent runs the wrapper; the job keeps the caller's command or
	// script and cwd (what the console and the job's trace show).
	in.SandboxID, in.wrapped = se.SandboxID, wrapSessionScript(se.ID, script, in.Env)
	out, err := s.Exec(ctx, in)
	if err != nil {
		return nil, err
	}
	if _, uerr := s.store.UpdateSession(ctx, se.ID, func(x *sandbox.Session) error {
		x.LastJobID, x.Runs, x.UpdatedAt = out.Job.ID, x.Runs+1, s.now()
		return nil
	}); uerr != nil {
		s.log.Warn("recording session run", "session", se.ID, "err", uerr)
	}
	return out, nil
}

// CloseSession ends a session and removes its saved state in the sandbox.
// Closing a closed session succeeds.
func (s *Manager) CloseSession(ctx context.Context, tenant, id string) error {
	se, err := s.GetSession(ctx, tenant, id)
	if err != nil {
		return err
	}
	if se.State == sandbox.SessionClosed {
		return nil
	}
	if _, err := s.store.UpdateSession(ctx, se.ID, func(x *sandbox.Session) error {
		x.State, x.UpdatedAt = sandbox.SessionClosed, s.now()
		return nil
	}); err != nil {
		return err
	}
	s.sessionLocks.Delete(se.ID)
	if se.KernelJobID != "" {
		if _, err := s.CancelJob(ctx, se.Tenant, se.KernelJobID); err != nil {
			s.log.Warn("stopping context kernel", "context", se.ID, "err", err)
		}
	}
	if sb, err := s.store.GetSandbox(ctx, "", se.SandboxID); err == nil && sb.State.Running() {
		dir := sessionStateDir + "/" + se.ID
		if se.Kind == sandbox.SessionPython {
			dir = contextStateDir + "/" + se.ID
		}
		if _, err := s.Exec(ctx, ExecInput{Tenant: se.Tenant, SandboxID: se.SandboxID, Command: []string{"rm", "-rf", dir}, TimeoutMS: 10000}); err != nil {
			s.log.Warn("removing session state", "session", se.ID, "err", err)
		}
	}
	return nil
}
