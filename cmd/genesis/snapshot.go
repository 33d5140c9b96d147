package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"genesis.dev/sandbox/client"
)

// A sandbox's saved state (docs/snapshots.md): "genesis sandbox
// pause|resume|hibernate|snapshot|fork|rollback" and "genesis snapshot
// ls|get|rm".

// newSandboxStateCmds builds the sandbox subcommands that keep or bring
// back a sandbox's state.
func newSandboxStateCmds(a *app) []*cobra.Command {
	return []*cobra.Command{
		newSandboxPauseCmd(a),
		newSandboxResumeCmd(a),
		newSandboxHibernateCmd(a),
		newSandboxSnapshotCmd(a),
		newSandboxForkCmd(a),
		newSandboxRollbackCmd(a),
	}
}

// newSandboxPauseCmd builds "genesis sandbox pause SANDBOX".
func newSandboxPauseCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "pause SANDBOX",
		Short: "Freeze a sandbox's processes, keeping its memory (calls into it answer sandbox_paused until resumed)",
		Args:  exactArgs(1, "one sandbox id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.Sandbox, error) {
				return c.PauseSandbox(ctx, args[0])
			}, func(sb *client.Sandbox) error {
				_, err := fmt.Fprintf(a.stdout, "Sandbox %s is paused: its processes are frozen and its memory kept; `genesis sandbox resume %s` thaws it.\n", sb.ID, sb.ID)
				return err
			})
		}),
	}
}

// newSandboxResumeCmd builds "genesis sandbox resume SANDBOX".
func newSandboxResumeCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "resume SANDBOX",
		Short: "Thaw a paused sandbox, or wake a hibernated one",
		Args:  exactArgs(1, "one sandbox id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.Sandbox, error) {
				return c.ResumeSandbox(ctx, args[0])
			}, func(sb *client.Sandbox) error {
				how := ""
				if sb.MemoryRestored != nil {
					how = ", woken " + restoredText(*sb.MemoryRestored)
				}
				_, err := fmt.Fprintf(a.stdout, "Sandbox %s is %s again%s.\n", sb.ID, sb.State, how)
				return err
			})
		}),
	}
}

// newSandboxHibernateCmd builds "genesis sandbox hibernate SANDBOX".
func newSandboxHibernateCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "hibernate SANDBOX",
		Short: "Save a sandbox's state to disk and remove its container, freeing its memory",
		Long: `Save a sandbox's state to disk and remove its container: it holds no memory
until it is woken, by "genesis sandbox resume SANDBOX" or by the next call
that needs it, under the same id, endpoints and expiry. Under runsc its
processes and memory are kept; under runc its files only (its profile's
services start afresh when it wakes).`,
		Args: exactArgs(1, "one sandbox id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.Sandbox, error) {
				return c.HibernateSandbox(ctx, args[0])
			}, func(sb *client.Sandbox) error {
				kept := "its files"
				if sb.Suspension != nil && sb.Suspension.Memory {
					kept = "its files, processes and memory"
				}
				_, err := fmt.Fprintf(a.stdout, "Sandbox %s is hibernated: its container is gone and %s are on disk; `genesis sandbox resume %s` (or the next call that needs it) wakes it.\n", sb.ID, kept, sb.ID)
				return err
			})
		}),
	}
}

// newSandboxSnapshotCmd builds "genesis sandbox snapshot SANDBOX".
func newSandboxSnapshotCmd(a *app) *cobra.Command {
	var (
		req    client.CreateSnapshotRequest
		memory bool
	)
	cmd := &cobra.Command{
		Use:   "snapshot SANDBOX [--name NAME] [--memory=true|false]",
		Short: "Save a sandbox's state as a snapshot and print its id",
		Long: `Save a sandbox's state as a snapshot and print the snapshot's id. The
sandbox is frozen only while its state is copied. A snapshot holds the
sandbox's files, and under runsc its processes and memory too; without
--memory it takes them where the runtime keeps them, --memory=false takes
files only, and --memory=true fails (memory_checkpoint_unsupported) where
they cannot be kept. Start sandboxes from it with
"genesis sandbox create --snapshot SNAPSHOT", or return the sandbox to it
with "genesis sandbox rollback SANDBOX SNAPSHOT".`,
		Args: exactArgs(1, "one sandbox id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("memory") {
				req.Memory = &memory
			}
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.Snapshot, error) {
				return c.CreateSnapshot(ctx, args[0], req)
			}, func(sn *client.Snapshot) error {
				a.warnf("snapshot of sandbox %s: %s, %s", sn.SandboxID, contentsText(sn.Memory), sizeText(sn.SizeBytes))
				_, err := fmt.Fprintln(a.stdout, sn.ID)
				return err
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&req.Name, "name", "", "a name for the snapshot (letters, digits, '.', '_', '-')")
	f.BoolVar(&memory, "memory", false, "keep processes and memory too (default: where the runtime can)")
	return cmd
}

// newSandboxForkCmd builds "genesis sandbox fork SANDBOX --count N".
func newSandboxForkCmd(a *app) *cobra.Command {
	var (
		req  client.ForkRequest
		ttl  time.Duration
		meta []string
	)
	cmd := &cobra.Command{
		Use:   "fork SANDBOX --count N [--ttl D] [--meta K=V]",
		Short: "Make N copies of a sandbox, with its state, and print their ids",
		Long: `Make N copies of a sandbox from one snapshot of it, and print the new
sandboxes' ids, one per line. Each copy has its own identity and its own copy
of the workspace; under runsc its processes and memory too. For each copy a
line on stderr says whether its memory came back and which shell sessions and
code contexts it has in place of the original's. Copies that could not be
made are reported on stderr; the exit status is 1 only when none was made.`,
		Args: exactArgs(1, "one sandbox id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			if req.Count <= 0 {
				return usageErrorf("--count must be at least 1")
			}
			if ttl < 0 {
				return usageErrorf("--ttl must not be negative")
			}
			var err error
			if req.Metadata, err = parseKV("meta", meta); err != nil {
				return err
			}
			req.TTLSeconds = int64((ttl + time.Second - 1) / time.Second)
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.ForkResult, error) {
				return c.ForkSandbox(ctx, args[0], req)
			}, func(res *client.ForkResult) error {
				for _, sb := range res.Sandboxes {
					a.noteMade(&sb)
					if _, err := fmt.Fprintln(a.stdout, sb.ID); err != nil {
						return err
					}
				}
				for _, e := range res.Errors {
					a.warnf("a copy failed: %s (%s)", e.Detail, e.Code)
				}
				if len(res.Sandboxes) == 0 {
					return &exitError{code: 1}
				}
				return nil
			})
		}),
	}
	f := cmd.Flags()
	f.IntVar(&req.Count, "count", 0, "how many copies (required)")
	f.DurationVar(&ttl, "ttl", 0, "destroy each copy after this long, e.g. 10m (0: service default)")
	f.StringArrayVar(&meta, "meta", nil, "metadata KEY=VALUE of each copy (repeatable)")
	return cmd
}

// newSandboxRollbackCmd builds "genesis sandbox rollback SANDBOX SNAPSHOT".
func newSandboxRollbackCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "rollback SANDBOX SNAPSHOT",
		Short: "Return a sandbox to one of its snapshots, under the same id and endpoints",
		Args:  exactArgs(2, "a sandbox id and a snapshot id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.Sandbox, error) {
				return c.RollbackSandbox(ctx, args[0], args[1])
			}, func(sb *client.Sandbox) error {
				how := ""
				if sb.MemoryRestored != nil {
					how = ", " + restoredText(*sb.MemoryRestored)
				}
				_, err := fmt.Fprintf(a.stdout, "Sandbox %s is back at snapshot %s%s.\n", sb.ID, args[1], how)
				return err
			})
		}),
	}
}

// noteMade tells, on stderr, what a sandbox made from a snapshot got back:
// its memory or not, and its copies of the snapshot's sessions.
func (a *app) noteMade(sb *client.Sandbox) {
	if sb.MemoryRestored == nil && len(sb.SessionsFromSnapshot) == 0 {
		return
	}
	parts := []string{}
	if sb.MemoryRestored != nil {
		parts = append(parts, restoredText(*sb.MemoryRestored))
	}
	if s := sessionsText(sb.SessionsFromSnapshot); s != "" {
		parts = append(parts, "sessions "+s)
	}
	a.warnf("%s: %s", sb.ID, strings.Join(parts, "; "))
}

// suspensionText says, for the detail view of a paused or hibernated
// sandbox, since when, what it keeps and any operation under way.
func (a *app) suspensionText(sb *client.Sandbox) string {
	su := sb.Suspension
	if su == nil {
		return ""
	}
	text := "since " + formatTime(su.Since)
	if !su.Since.IsZero() {
		text += " (" + shortDuration(a.now().Sub(su.Since)) + " ago)"
	}
	switch {
	case sb.State == "hibernated" && su.Memory:
		text += "; wakes with its processes and memory"
	case sb.State == "hibernated":
		text += "; wakes with its files only"
	default:
		text += "; frozen, its memory kept"
	}
	if su.Operation != "" {
		text += "; " + su.Operation + " now"
	}
	return text
}

// restoredText says whether processes and memory came back.
func restoredText(memory bool) string {
	if memory {
		return "with its processes and memory"
	}
	return "with its files only (its processes started afresh)"
}

// contentsText says what a snapshot holds.
func contentsText(memory bool) string {
	if memory {
		return "files, processes and memory"
	}
	return "files only"
}

// sessionsText renders the snapshot's sessions and their copies as
// "ses_a→ses_b, ctx_c→ctx_d", ordered by the original's id.
func sessionsText(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "→" + m[k]
	}
	return strings.Join(parts, ", ")
}

// sizeText renders a byte count for people: 512 B, 3.4 MiB.
func sizeText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/unit, 0
	for v >= unit && i < 3 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGT"[i])
}

// newSnapshotCmd builds "genesis snapshot" and its subcommands.
func newSnapshotCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "snapshot",
		Aliases: []string{"snapshots", "snap"},
		Short:   "List, show and delete snapshots (genesis sandbox snapshot takes one)",
	}
	cmd.AddCommand(newSnapshotListCmd(a), newSnapshotGetCmd(a), newSnapshotRemoveCmd(a))
	return cmd
}

// newSnapshotListCmd builds "genesis snapshot ls [--sandbox SANDBOX]".
func newSnapshotListCmd(a *app) *cobra.Command {
	var sandboxID string
	cmd := &cobra.Command{
		Use:     "ls [--sandbox SANDBOX]",
		Aliases: []string{"list"},
		Short:   "List your snapshots, newest first",
		Args:    exactArgs(0, "no arguments"),
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) ([]client.Snapshot, error) {
				return c.ListSnapshots(ctx, sandboxID)
			}, func(items []client.Snapshot) error {
				return a.printSnapshotTable(items)
			})
		}),
	}
	cmd.Flags().StringVar(&sandboxID, "sandbox", "", "only the snapshots of this sandbox")
	return cmd
}

// printSnapshotTable prints one row per snapshot.
func (a *app) printSnapshotTable(items []client.Snapshot) error {
	now := a.now()
	return printTable(a.stdout, "ID\tNAME\tSANDBOX\tSTATE\tRUNTIME\tMEMORY\tSIZE\tAGE\tEXPIRES", items, func(tw io.Writer, s client.Snapshot) {
		age := "-"
		if !s.CreatedAt.IsZero() {
			age = shortDuration(now.Sub(s.CreatedAt))
		}
		expires := "-"
		if s.ExpiresAt != nil {
			if d := s.ExpiresAt.Sub(now); d > 0 {
				expires = "in " + shortDuration(d)
			} else {
				expires = "expired"
			}
		}
		memory := "no"
		if s.Memory {
			memory = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			s.ID, orDash(s.Name), s.SandboxID, orDash(s.State), orDash(s.Runtime), memory, sizeText(s.SizeBytes), age, expires)
	})
}

// newSnapshotGetCmd builds "genesis snapshot get SNAPSHOT".
func newSnapshotGetCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "get SNAPSHOT",
		Aliases: []string{"show", "inspect"},
		Short:   "Show one snapshot",
		Args:    exactArgs(1, "one snapshot id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.Snapshot, error) {
				return c.GetSnapshot(ctx, args[0])
			}, func(sn *client.Snapshot) error {
				return printFields(a.stdout, a.snapshotFields(sn))
			})
		}),
	}
}

// snapshotFields is the text detail view of a snapshot.
func (a *app) snapshotFields(s *client.Snapshot) []field {
	expires := ""
	if s.ExpiresAt != nil {
		expires = formatTime(*s.ExpiresAt)
		if d := s.ExpiresAt.Sub(a.now()); d > 0 {
			expires += " (in " + shortDuration(d) + ")"
		} else {
			expires += " (expired)"
		}
	}
	return []field{
		{"ID", s.ID},
		{"Name", s.Name},
		{"State", s.State},
		{"Error", s.Error},
		{"Sandbox", s.SandboxID},
		{"Parent", s.Parent},
		{"Profile", s.Profile},
		{"Runtime", s.Runtime},
		{"Risk level", s.RiskLevel},
		{"Holds", contentsText(s.Memory)},
		{"Size", sizeText(s.SizeBytes)},
		{"Created", formatTime(s.CreatedAt)},
		{"Expires", expires},
	}
}

// newSnapshotRemoveCmd builds "genesis snapshot rm SNAPSHOT...".
func newSnapshotRemoveCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "rm SNAPSHOT...",
		Aliases: []string{"delete", "remove"},
		Short:   "Delete snapshots (already deleted ones are fine)",
		Args: func(cmd *cobra.Command, args []string) error {
			if err := minArgs(1, "at least one snapshot id")(cmd, args); err != nil {
				return err
			}
			return noEmptyArgs(args)
		},
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			return a.removeEach(cmd, args, c.DeleteSnapshot)
		}),
	}
}
