package interactive

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/agent/agentclient"
	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// Interactive terminals. The agent in the sandbox owns each terminal: its
// process, pseudo-terminal and recent output, which outlive every connection
// and a restart of the service. Terminal ids are per sandbox, and reaching a
// sandbox is tenant-checked, so a terminal id alone grants nothing.
//
// Terminals adds the roles of a Hub: each connection (TerminalConn) has
// its own attachment to the agent; only the writer's input and resizes
// reach the terminal.

// terminalSetupTimeout bounds the agent calls that open a connection.
const terminalSetupTimeout = 30 * time.Second

// sandboxes is what terminals need of the control layer.
type sandboxes interface {
	Attach(ctx context.Context, tenant, id string, o control.AttachOptions) (*control.Attachment, error)
}

// Config wires Terminals.
type Config struct {
	// Sandboxes attaches to running sandboxes (a *control.Service).
	Sandboxes sandboxes
	Logger    *slog.Logger
}

// TerminalOptions says which terminal a connection is for.
type TerminalOptions struct {
	Tenant    string
	SandboxID string
	// TerminalID reconnects to an existing terminal of the sandbox; empty
	// starts a new one running the sandbox user's shell.
	TerminalID string
	// Cols and Rows are the window size (0: leave as is, or 80x24 for a new
	// terminal); applied only if the connection becomes the writer.
	Cols, Rows int
	// Takeover makes this connection the writer even if there is one.
	Takeover bool
}

// TerminalEvent is what a connection reads: output, or finally the exit.
type TerminalEvent struct {
	// Output is terminal output; valid until the next call to Next.
	Output []byte
	// Exit is set once the terminal's process has exited; it is the last
	// event.
	Exit *agentproto.ExitResult
}

// Terminals tracks the connections to terminals and who writes to each.
type Terminals struct {
	sbx sandboxes
	log *slog.Logger
	hub *Hub

	mu        sync.Mutex
	bySandbox map[string]map[*TerminalConn]struct{}
}

// New returns the terminal coordinator.
func New(cfg Config) (*Terminals, error) {
	if cfg.Sandboxes == nil {
		return nil, fmt.Errorf("interactive: nil sandboxes: %w", errdefs.ErrInvalidArgument)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Terminals{sbx: cfg.Sandboxes, log: cfg.Logger, hub: NewHub(), bySandbox: map[string]map[*TerminalConn]struct{}{}}, nil
}

// Name names the terminals' control hook.
func (ts *Terminals) Name() string { return "terminals" }

// SandboxEnding closes every connection to the terminals of a sandbox
// that ends (its terminals end with it, or with its reset).
func (ts *Terminals) SandboxEnding(_ context.Context, sandboxID, _ string) {
	ts.mu.Lock()
	conns := make([]*TerminalConn, 0, len(ts.bySandbox[sandboxID]))
	for c := range ts.bySandbox[sandboxID] {
		conns = append(conns, c)
	}
	ts.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// TerminalConn is one connection to a terminal.
type TerminalConn struct {
	*Conn
	ts        *Terminals
	agent     *agentclient.Client
	att       *agentclient.Attachment
	cancel    context.CancelFunc
	sandboxID string
	id        string
	created   bool
}

// validTerminalSize checks a requested window size (0 = unset).
func validTerminalSize(cols, rows int) error {
	if cols < 0 || rows < 0 || cols > agentproto.MaxTerminalSize || rows > agentproto.MaxTerminalSize {
		return errdefs.WithCode("invalid_terminal_size", fmt.Errorf(
			"terminal size %dx%d: cols and rows must be 1 to %d: %w", cols, rows, agentproto.MaxTerminalSize, errdefs.ErrInvalidArgument))
	}
	return nil
}

func terminalNotFound(sandboxID, id string) error {
	return errdefs.WithCode("terminal_not_found", fmt.Errorf("sandbox %s has no terminal %q: %w", sandboxID, id, errdefs.ErrNotFound))
}

// Open connects to a terminal of a tenant's running sandbox, starting a new
// terminal when o.TerminalID is empty. The connection's output starts with
// the output the agent kept (for a reconnect, the recent screen). Errors
// come before anything is attached: an unknown sandbox or terminal is
// ErrNotFound. The caller must Close the connection; Abort also deletes a
// terminal this connection started.
func (ts *Terminals) Open(ctx context.Context, o TerminalOptions) (*TerminalConn, error) {
	if err := validTerminalSize(o.Cols, o.Rows); err != nil {
		return nil, err
	}
	sa, err := ts.sbx.Attach(ctx, o.Tenant, o.SandboxID, control.AttachOptions{})
	if err != nil {
		return nil, err
	}
	defer sa.Release()
	sb := sa.Sandbox
	setup, cancelSetup := context.WithTimeout(ctx, terminalSetupTimeout)
	defer cancelSetup()
	ag := sa.Agent
	c := &TerminalConn{ts: ts, agent: ag, sandboxID: sb.ID, id: o.TerminalID}
	if c.id == "" {
		c.id = sandbox.NewID("term")
		// The sandbox's env (a warm lease's is set at its claim, not in
		// the container) holds in its terminals as in its jobs.
		if _, err := ag.StartTerminal(setup, agentproto.TerminalStartRequest{ID: c.id, Cols: o.Cols, Rows: o.Rows, Env: sb.Env}); err != nil {
			return nil, fmt.Errorf("sandbox %s: start terminal: %w", sb.ID, err)
		}
		c.created = true
	} else if !sandbox.ValidID("term", c.id) {
		return nil, terminalNotFound(sb.ID, c.id)
	}
	// The attachment lives as long as the connection, not as ctx.
	attCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	att, err := ag.AttachTerminal(attCtx, c.id, agentclient.AttachOptions{Replay: true})
	if err != nil {
		cancel()
		if c.created {
			c.deleteTerminal(ctx)
		}
		if errors.Is(err, errdefs.ErrNotFound) {
			return nil, terminalNotFound(sb.ID, c.id)
		}
		return nil, fmt.Errorf("sandbox %s: attach terminal %s: %w", sb.ID, c.id, err)
	}
	c.att, c.cancel = att, cancel
	c.Conn = ts.hub.Join(sb.ID+"/"+c.id, att, o.Takeover)
	ts.mu.Lock()
	if ts.bySandbox[sb.ID] == nil {
		ts.bySandbox[sb.ID] = map[*TerminalConn]struct{}{}
	}
	ts.bySandbox[sb.ID][c] = struct{}{}
	ts.mu.Unlock()

	if c.Writer() && !c.created && o.Cols > 0 && o.Rows > 0 {
		if err := resizeTerminal(setup, ag, c.id, o.Cols, o.Rows); err != nil {
			ts.log.Warn("terminal resize on connect", "sandbox", sb.ID, "terminal", c.id, "err", err)
		}
	}
	return c, nil
}

// ID is the terminal's id.
func (c *TerminalConn) ID() string { return c.id }

// Created reports whether this connection started the terminal.
func (c *TerminalConn) Created() bool { return c.created }

// Resize sets the window size if this connection is the writer; it reports
// whether it did. Resizing an exited terminal changes nothing.
func (c *TerminalConn) Resize(ctx context.Context, cols, rows int) (bool, error) {
	if err := validTerminalSize(cols, rows); err != nil || cols == 0 || rows == 0 {
		return false, errdefs.WithCode("invalid_terminal_size", fmt.Errorf(
			"terminal size %dx%d: cols and rows must be 1 to %d: %w", cols, rows, agentproto.MaxTerminalSize, errdefs.ErrInvalidArgument))
	}
	if !c.Writer() {
		return false, nil
	}
	return true, resizeTerminal(ctx, c.agent, c.id, cols, rows)
}

// Next returns the next output, and last the exit. An error means the
// connection to the terminal was lost (the terminal may still run).
func (c *TerminalConn) Next() (TerminalEvent, error) {
	fr, err := c.att.Next()
	if err != nil {
		return TerminalEvent{}, err
	}
	if fr.Type == agentproto.FrameExit {
		x, err := agentclient.DecodeExit(fr)
		if err != nil {
			return TerminalEvent{}, err
		}
		return TerminalEvent{Exit: &x}, nil
	}
	return TerminalEvent{Output: fr.Payload}, nil
}

// Close ends the connection; the terminal keeps running. If it was the
// writer, the terminal has no writer until another connection takes over.
func (c *TerminalConn) Close() {
	if !c.Leave() {
		return
	}
	c.ts.mu.Lock()
	if m := c.ts.bySandbox[c.sandboxID]; m != nil {
		delete(m, c)
		if len(m) == 0 {
			delete(c.ts.bySandbox, c.sandboxID)
		}
	}
	c.ts.mu.Unlock()
	c.att.Close()
	c.cancel()
}

// Abort is Close that also deletes the terminal if this connection started
// it: for a connection that never reached its client.
func (c *TerminalConn) Abort(ctx context.Context) {
	c.Close()
	if c.created {
		c.deleteTerminal(ctx)
	}
}

func (c *TerminalConn) deleteTerminal(ctx context.Context) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), terminalSetupTimeout)
	defer cancel()
	if err := c.agent.DeleteTerminal(dctx, c.id); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		c.ts.log.Warn("deleting an unused terminal", "sandbox", c.sandboxID, "terminal", c.id, "err", err)
	}
}

// resizeTerminal sets a terminal's window size; a terminal whose process
// has exited (the agent answers failed precondition) is left alone.
func resizeTerminal(ctx context.Context, ag *agentclient.Client, id string, cols, rows int) error {
	_, err := ag.ResizeTerminal(ctx, id, cols, rows)
	if errors.Is(err, errdefs.ErrConflict) {
		return nil
	}
	return err
}
