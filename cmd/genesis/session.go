package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"genesis.dev/sandbox/client"
)

// sessionAPI is what the session and context commands need of one kind:
// shell sessions or code contexts share the Session record.
type sessionAPI struct {
	noun   string // "session" or "context"
	get    func(*client.Client, context.Context, string) (*client.Session, error)
	delete func(*client.Client, context.Context, string) error
}

var shellSessions = sessionAPI{
	noun:   "session",
	get:    (*client.Client).GetSession,
	delete: (*client.Client).DeleteSession,
}

var codeContexts = sessionAPI{
	noun:   "context",
	get:    (*client.Client).GetContext,
	delete: (*client.Client).DeleteContext,
}

// newSessionCmd builds "genesis session" and its subcommands.
func newSessionCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "session",
		Aliases: []string{"sessions"},
		Short:   "Shell sessions that keep the working directory and exported environment",
	}
	create := &cobra.Command{
		Use:   "create SANDBOX",
		Short: "Open a shell session in a sandbox and print its id",
		Args:  exactArgs(1, "one sandbox id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return a.createSession(cmd, func(c *client.Client, ctx context.Context) (*client.Session, error) {
				return c.CreateSession(ctx, args[0])
			})
		}),
	}
	var f execFlags
	exec := &cobra.Command{
		Use:   "exec [flags] SESSION -- CMD [ARGS...]\n  genesis session exec [flags] SESSION --script 'SHELL TEXT'",
		Short: "Run a command in a session and relay its output and exit status",
		Long: `Run a command in a shell session and wait for it to end. It starts in the
working directory and with the exported environment the session's previous
command left. Output and exit status are relayed as by "genesis exec".`,
		Args: minArgs(1, "SESSION and a command (after --) or --script"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			session, req, err := f.build(a, cmd, args, "SESSION")
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := withTimeout(cmd.Context(), f.wait())
			defer cancel()
			res, err := c.SessionExec(ctx, session, req)
			if err != nil {
				return err
			}
			return a.relayExec(res, f.timeout)
		}),
	}
	f.register(exec)
	cmd.AddCommand(create, newSessionGetCmd(a, shellSessions), exec, newSessionRemoveCmd(a, shellSessions))
	return cmd
}

// createSession runs a create call and prints the new session or context.
func (a *app) createSession(cmd *cobra.Command, create func(*client.Client, context.Context) (*client.Session, error)) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	ctx, cancel := a.callContext(cmd.Context())
	defer cancel()
	se, err := create(c, ctx)
	if err != nil {
		return err
	}
	if a.jsonOutput() {
		return printJSON(a.stdout, se)
	}
	_, err = fmt.Fprintln(a.stdout, se.ID)
	return err
}

// newSessionGetCmd builds "genesis session get" or "genesis context get".
func newSessionGetCmd(a *app, api sessionAPI) *cobra.Command {
	return &cobra.Command{
		Use:   "get " + upper(api.noun),
		Short: "Show one " + api.noun,
		Args:  exactArgs(1, "one "+api.noun+" id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd.Context())
			defer cancel()
			se, err := api.get(c, ctx, args[0])
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return printJSON(a.stdout, se)
			}
			return printFields(a.stdout, []field{
				{"ID", se.ID},
				{"Sandbox", se.SandboxID},
				{"Kind", se.Kind},
				{"State", se.State},
				{"Runs", strconv.FormatInt(se.Runs, 10)},
				{"Last job", se.LastJobID},
				{"Created", formatTime(se.CreatedAt)},
				{"Updated", formatTime(se.UpdatedAt)},
			})
		}),
	}
}

// newSessionRemoveCmd builds "genesis session rm" or "genesis context rm".
func newSessionRemoveCmd(a *app, api sessionAPI) *cobra.Command {
	return &cobra.Command{
		Use:     "rm " + upper(api.noun) + "...",
		Aliases: []string{"delete", "close"},
		Short:   "Close " + api.noun + "s (closed ones are fine) and print their ids",
		Args: func(cmd *cobra.Command, args []string) error {
			if err := minArgs(1, "at least one "+api.noun+" id")(cmd, args); err != nil {
				return err
			}
			return noEmptyArgs(args)
		},
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			deleted, failed := []string{}, false
			for _, id := range args {
				ctx, cancel := a.callContext(cmd.Context())
				err := api.delete(c, ctx, id)
				cancel()
				if err != nil {
					a.printError(id, err)
					failed = true
					continue
				}
				deleted = append(deleted, id)
				if !a.jsonOutput() {
					fmt.Fprintln(a.stdout, id)
				}
			}
			if a.jsonOutput() {
				if err := printJSON(a.stdout, map[string][]string{"deleted": deleted}); err != nil {
					return err
				}
			}
			if failed {
				return &exitError{code: 1}
			}
			return nil
		}),
	}
}

// upper is the placeholder for a noun in usage lines: SESSION, CONTEXT.
func upper(noun string) string {
	b := []byte(noun)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}
