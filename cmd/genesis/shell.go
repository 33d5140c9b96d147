package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"genesis.dev/sandbox/client"
)

// newShellCmd builds "genesis shell".
func newShellCmd(a *app) *cobra.Command {
	var (
		terminal string
		takeover bool
	)
	cmd := &cobra.Command{
		Use:   "shell [flags] SANDBOX",
		Short: "Open an interactive terminal in a sandbox",
		Long: `Open an interactive terminal in a sandbox: the sandbox user's shell on a
pseudo-terminal, with this terminal in raw mode and window size changes
forwarded. genesis exits with the remote process's exit status.

The terminal keeps running when the connection drops; reconnect with
--terminal ID (the recent screen is replayed). Only one connection writes to
a terminal: others watch read-only unless they use --takeover.`,
		Args: exactArgs(1, "SANDBOX"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return a.shell(cmd.Context(), args[0], terminal, takeover)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&terminal, "terminal", "", "reconnect to this terminal instead of starting a new shell")
	f.BoolVar(&takeover, "takeover", false, "become the terminal's writer even if another connection is")
	return cmd
}

// shell runs one terminal session.
func (a *app) shell(ctx context.Context, sandboxID, terminal string, takeover bool) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	in, _ := a.stdin.(*os.File)
	tty := in != nil && isTerminal(in)
	opts := client.TerminalOptions{Terminal: terminal, Takeover: takeover}
	if tty {
		if cols, rows, ok := terminalSize(in); ok {
			opts.Cols, opts.Rows = cols, rows
		}
	}
	dctx, cancel := a.callContext(ctx)
	t, err := c.OpenTerminal(dctx, sandboxID, opts)
	cancel()
	if err != nil {
		return err
	}
	defer t.Close()

	nl := "\n"
	if tty {
		restore, err := makeRaw(in)
		if err != nil {
			return fmt.Errorf("putting the terminal in raw mode: %w", err)
		}
		defer restore()
		nl = "\r\n" // raw mode: no output post-processing
	}
	s := &shellSession{a: a, t: t, nl: nl}
	if terminal == "" {
		s.note("terminal %s (reconnect or watch with --terminal %s)", t.ID, t.ID)
	}
	if !t.Writer {
		s.note("terminal %s: watching read-only, another connection is writing (use --takeover)", t.ID)
	}
	return s.run(ctx, tty, in)
}

// shellSession pumps one terminal connection.
type shellSession struct {
	a  *app
	t  *client.Terminal
	nl string // line end for notes on stderr
}

func (s *shellSession) note(format string, args ...any) {
	fmt.Fprintf(s.a.stderr, "genesis: "+format+s.nl, args...)
}

func (s *shellSession) run(ctx context.Context, tty bool, in *os.File) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// Local input → terminal. The read may stay blocked when the session
	// ends; the process is about to exit then.
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := s.a.stdin.Read(buf)
			if n > 0 {
				if s.t.Write(ctx, buf[:n]) != nil {
					return
				}
			}
			if err != nil {
				return // end of input: keep showing output until the exit
			}
		}
	}()
	if tty {
		winch := make(chan os.Signal, 1)
		notifyResize(winch) // no such signal on Windows: the size is sent once
		defer signal.Stop(winch)
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-winch:
				}
				if cols, rows, ok := terminalSize(in); ok {
					if s.t.Resize(ctx, cols, rows) != nil {
						return
					}
				}
			}
		}()
	}

	for {
		ev, err := s.t.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return &exitError{code: 130}
			}
			how := err.Error()
			if tc := (*client.TerminalClosed)(nil); errors.As(err, &tc) && tc.Status != -1 {
				how = fmt.Sprintf("closed by the service (%d)", tc.Status)
			}
			return fmt.Errorf("connection to terminal %s lost: %s; the terminal may still run: reconnect with --terminal %s", s.t.ID, how, s.t.ID)
		}
		if ev.Message == nil {
			if _, err := s.a.stdout.Write(ev.Output); err != nil {
				return err
			}
			continue
		}
		switch m := ev.Message; m.Type {
		case "writer":
			// On a line of its own: the cursor may be anywhere.
			fmt.Fprint(s.a.stderr, s.nl)
			if s.t.Writer {
				s.note("you are now the writer")
			} else {
				s.note("another connection took over: watching read-only; your input is ignored")
			}
		case "exit":
			if m.Code != nil && *m.Code != 0 {
				return &exitError{code: *m.Code}
			}
			return nil
		}
	}
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// terminalSize returns the window size of the terminal f.
func terminalSize(f *os.File) (cols, rows int, ok bool) {
	cols, rows, err := term.GetSize(int(f.Fd()))
	return cols, rows, err == nil && cols > 0 && rows > 0
}

// makeRaw puts the terminal f in raw mode and returns the function that
// restores its previous mode.
func makeRaw(f *os.File) (func(), error) {
	old, err := term.MakeRaw(int(f.Fd()))
	if err != nil {
		return nil, err
	}
	return func() { _ = term.Restore(int(f.Fd()), old) }, nil
}
