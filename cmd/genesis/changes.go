package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"genesis.dev/sandbox/client"
)

// maxPatchInput bounds a patch read from stdin or a file (the service's
// limit is 8 MiB; one byte more lets it say so).
const maxPatchInput = 8<<20 + 1

// newDiffCmd builds "genesis diff SANDBOX [--base B] [--stat]".
func newDiffCmd(a *app) *cobra.Command {
	var (
		base string
		stat bool
	)
	cmd := &cobra.Command{
		Use:   "diff [--base creation|git|SNAPSHOT|SANDBOX] [--stat] SANDBOX",
		Short: "Show what changed in a sandbox's workspace (docs/diff-patch.md)",
		Long: `Print what changed in a sandbox's workspace since --base: creation (the
default: the snapshot the sandbox was made from, else an empty workspace), git
(the HEAD commit of the workspace's repository, as git status sees it), a
snapshot id or another sandbox's id. Prints a patch that git apply accepts;
--stat prints one line a file instead, -o json the whole answer. Binary and
large files are named, not shown; a diff over its limits says it is
truncated.`,
		Args: exactArgs(1, "one sandbox id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			if stat || a.jsonOutput() {
				return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.Diff, error) {
					return c.DiffSandbox(ctx, args[0], base)
				}, func(d *client.Diff) error { return printDiffStat(a.stdout, d) })
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd.Context())
			defer cancel()
			patch, truncated, err := c.DiffSandboxPatch(ctx, args[0], base)
			if err != nil {
				return err
			}
			if truncated {
				fmt.Fprintln(a.stderr, "genesis: the diff is truncated (see the first line); genesis diff --stat lists every file")
			}
			_, err = io.WriteString(a.stdout, patch)
			return err
		}),
	}
	cmd.Flags().StringVar(&base, "base", "", "creation (default), git, a snapshot id or a sandbox id")
	cmd.Flags().BoolVar(&stat, "stat", false, "one line a changed file instead of the patch")
	return cmd
}

func printDiffStat(w io.Writer, d *client.Diff) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "STATUS\tPATH\t+\t-\tSIZE")
	for _, f := range d.Files {
		note := ""
		switch {
		case f.Binary:
			note = " (binary)"
		case f.TooLarge:
			note = " (too large to show)"
		}
		fmt.Fprintf(tw, "%s\t%s%s\t%d\t%d\t%d→%d\n", f.Status, f.Path, note, f.Additions, f.Deletions, f.OldSize, f.NewSize)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	s := d.Summary
	_, err := fmt.Fprintf(w, "%d files changed against %s: %d added, %d modified, %d deleted, %d mode changed; +%d -%d lines\n",
		s.Files, d.Base, s.Added, s.Modified, s.Deleted, s.ModeChanged, s.Additions, s.Deletions)
	if err == nil && d.Truncated {
		_, err = fmt.Fprintf(w, "truncated: %s\n", d.TruncatedReason)
	}
	return err
}

// newPatchCmd builds "genesis patch SANDBOX [--dry-run] [FILE]".
func newPatchCmd(a *app) *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "patch [--dry-run] SANDBOX [FILE]",
		Short: "Apply a unified or git diff to a sandbox's workspace (docs/diff-patch.md)",
		Long: `Apply a patch (from FILE, or stdin) to a sandbox's workspace, paths relative
to /workspace. All or nothing: a hunk that does not apply fails with
patch_conflict naming the file and hunk, and nothing changes. --dry-run checks
that it applies and changes nothing.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			in := a.stdin
			if len(args) == 2 && args[1] != "-" {
				f, err := os.Open(args[1])
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			}
			patch, err := io.ReadAll(io.LimitReader(in, maxPatchInput))
			if err != nil {
				return fmt.Errorf("reading the patch: %w", err)
			}
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.PatchResult, error) {
				return c.ApplyPatch(ctx, args[0], patch, dryRun)
			}, func(r *client.PatchResult) error {
				for _, f := range r.Files {
					line := fmt.Sprintf("%s %s", f.Status, f.Path)
					if f.From != "" {
						line += " (from " + f.From + ")"
					}
					fmt.Fprintln(a.stdout, line)
				}
				verb := "applied"
				if r.DryRun {
					verb = "would apply (dry run: nothing changed)"
				}
				files := "files"
				if len(r.Files) == 1 {
					files = "file"
				}
				_, err := fmt.Fprintf(a.stdout, "%s: %d %s\n", verb, len(r.Files), files)
				return err
			})
		}),
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "check that the patch applies; change nothing")
	return cmd
}
