package main

import (
	"context"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"genesis.dev/sandbox/client"
)

// newWhoamiCmd builds "genesis whoami".
func newWhoamiCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "whoami",
		Short: "Show the tenant of the API key and whether it is an admin key",
		Args:  exactArgs(0, "no arguments"),
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.Whoami, error) {
				return c.Whoami(ctx)
			}, func(w *client.Whoami) error {
				return printFields(a.stdout, []field{{"Tenant", w.Tenant}, {"Key", w.KeyID}, {"Admin", strconv.FormatBool(w.Admin)},
					{"Scopes", orDash(strings.Join(w.Scopes, ","))}})
			})
		}),
	}
}
