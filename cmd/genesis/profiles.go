package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"genesis.dev/sandbox/client"
)

// newProfilesCmd builds "genesis profiles".
func newProfilesCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "profiles",
		Aliases: []string{"profile"},
		Short:   "List runtime profiles, their images and usable runtimes",
		Args:    exactArgs(0, "no arguments"),
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.ProfileList, error) {
				return c.Profiles(ctx)
			}, func(list *client.ProfileList) error {
				return printProfileRows(a.stdout, list.Items, "")
			})
		}),
	}
}

// printProfileRows prints a profile table, each line after indent, then
// how to build the images that are missing.
func printProfileRows(w io.Writer, items []client.Profile, indent string) error {
	tw := newTable(w)
	fmt.Fprintf(tw, "%sNAME\tIMAGE\tRUNTIMES\tNETWORK\tDESCRIPTION\n", indent)
	var missing []client.Profile
	for _, p := range items {
		status := p.ImageStatus
		switch {
		case status == "not_built":
			status = "not built"
			missing = append(missing, p)
		case status == "building" && p.ImageBuild != nil:
			status = fmt.Sprintf("building %d%%", p.ImageBuild.Percent)
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\t%s\n", indent, p.Name, orDash(status),
			runtimesText(p), orDash(p.Network), p.Description)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range missing {
		if p.BuildCommand != "" {
			fmt.Fprintf(w, "%s%s: image %s is not built (%s)\n", indent, p.Name, p.Image, p.BuildCommand)
		} else {
			fmt.Fprintf(w, "%s%s: image %s is not built\n", indent, p.Name, p.Image)
		}
	}
	return nil
}

// runtimesText lists the runtimes a profile can use now, and notes allowed
// runtimes that are not usable.
func runtimesText(p client.Profile) string {
	usable := make(map[string]bool, len(p.UsableRuntimes))
	for _, r := range p.UsableRuntimes {
		usable[r] = true
	}
	var down []string
	for _, r := range p.AllowedRuntimes {
		if !usable[r] {
			down = append(down, r)
		}
	}
	s := orDash(strings.Join(p.UsableRuntimes, ","))
	if len(down) > 0 {
		s += " (unusable: " + strings.Join(down, ",") + ")"
	}
	return s
}
