package main

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"

	"genesis.dev/sandbox/client"
)

// printExports prints env as sorted `export` lines for a shell's eval.
func (a *app) printExports(env map[string]string) error {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if _, err := fmt.Fprintf(a.stdout, "export %s=%s\n", k, shellJoin([]string{env[k]})); err != nil {
			return err
		}
	}
	return nil
}

// newOpenSandboxCmd builds "genesis opensandbox": the OpenSandbox SDK
// adapter (docs/compat-opensandbox.md).
func newOpenSandboxCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "opensandbox",
		Short: "Point the unmodified OpenSandbox SDKs at this service",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "env",
		Short: "Check the OpenSandbox adapter with the API key and print the OPEN_SANDBOX_* variables to export",
		Long: "Lists the key's sandboxes through /opensandbox as the SDKs would (so a service without the\n" +
			"adapter or a wrong key fails here), then prints `export` lines for OPEN_SANDBOX_DOMAIN and\n" +
			"OPEN_SANDBOX_API_KEY:\n" +
			"  eval \"$(genesis opensandbox env)\"",
		Args: exactArgs(0, "no arguments"),
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (map[string]string, error) {
				if _, err := c.OpenSandboxListSandboxes(ctx); err != nil {
					return nil, err
				}
				return c.OpenSandboxEnv(), nil
			}, a.printExports)
		}),
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "ls",
		Short: "List the sandboxes as the OpenSandbox SDKs see them (GET /opensandbox/v1/sandboxes)",
		Args:  exactArgs(0, "no arguments"),
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) ([]client.OpenSandboxSandbox, error) {
				return c.OpenSandboxListSandboxes(ctx)
			}, func(list []client.OpenSandboxSandbox) error {
				return printTable(a.stdout, "SANDBOX\tIMAGE\tSTATE\tEXPIRES", list, func(w io.Writer, s client.OpenSandboxSandbox) {
					img := ""
					if s.Image != nil {
						img = s.Image.URI
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", s.ID, img, s.Status.State, s.ExpiresAt)
				})
			})
		}),
	})
	return cmd
}

// newE2BCmd builds "genesis e2b": the E2B SDK adapter (docs/compat-e2b.md).
func newE2BCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "e2b",
		Short: "Point the unmodified E2B SDKs at this service",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "env",
		Short: "Check the E2B adapter with the API key and print the E2B_* variables to export",
		Long: "Lists the key's sandboxes through /e2b as the E2B SDKs would (so a service without the\n" +
			"adapter or a wrong key fails here), then prints `export` lines for E2B_API_URL,\n" +
			"E2B_SANDBOX_URL, E2B_API_KEY (the key, e2b_-prefixed) and E2B_VALIDATE_API_KEY:\n" +
			"  eval \"$(genesis e2b env)\"",
		Args: exactArgs(0, "no arguments"),
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (map[string]string, error) {
				if _, err := c.E2BListSandboxes(ctx); err != nil {
					return nil, err
				}
				return c.E2BEnv(), nil
			}, a.printExports)
		}),
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "ls",
		Short: "List the running sandboxes as the E2B SDKs see them (GET /e2b/v2/sandboxes)",
		Args:  exactArgs(0, "no arguments"),
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) ([]client.E2BSandbox, error) {
				return c.E2BListSandboxes(ctx)
			}, func(list []client.E2BSandbox) error {
				return printTable(a.stdout, "SANDBOX\tTEMPLATE\tSTATE\tENDS", list, func(w io.Writer, s client.E2BSandbox) {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", s.SandboxID, s.TemplateID, s.State, formatTime(s.EndAt))
				})
			})
		}),
	})
	return cmd
}
