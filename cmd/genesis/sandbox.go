package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"genesis.dev/sandbox/client"
)

// newSandboxCmd builds "genesis sandbox" and its subcommands.
func newSandboxCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "sandbox",
		Aliases: []string{"sandboxes", "sb"},
		Short:   "Create, list, show and remove sandboxes",
	}
	cmd.AddCommand(
		newSandboxCreateCmd(a),
		newSandboxListCmd(a),
		newSandboxGetCmd(a),
		newSandboxRenewCmd(a),
		newSandboxRemoveCmd(a),
		newSandboxTicketCmd(a),
	)
	cmd.AddCommand(newSandboxStateCmds(a)...)
	return cmd
}

// newSandboxCreateCmd builds "genesis sandbox create".
func newSandboxCreateCmd(a *app) *cobra.Command {
	var (
		req            client.CreateSandboxRequest
		res            client.Resources
		env, meta      []string
		ttl, wait      time.Duration
		idempotencyKey string
		volumes        []string
		net            policyFlags
	)
	cmd := &cobra.Command{
		Use:   "create (--profile PROFILE | --snapshot SNAPSHOT) [flags]",
		Short: "Create a sandbox and print its id",
		Args:  exactArgs(0, "no arguments"),
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			if req.Profile == "" && req.SnapshotID == "" {
				return usageErrorf("--profile is required (or --snapshot: a sandbox from a snapshot has the snapshot's profile)")
			}
			if res.CPU < 0 || res.MemoryMB < 0 || res.Pids < 0 || res.DiskMB < 0 {
				return usageErrorf("--cpu, --memory-mb, --pids and --disk-mb must not be negative")
			}
			if ttl < 0 {
				return usageErrorf("--ttl must not be negative")
			}
			var err error
			if req.Volumes, err = parseVolumeFlags(volumes); err != nil {
				return err
			}
			if req.Env, err = parseKV("env", env); err != nil {
				return err
			}
			if req.Metadata, err = parseKV("meta", meta); err != nil {
				return err
			}
			if res != (client.Resources{}) {
				req.Resources = &res
			}
			if net.set() {
				pol, err := net.policy()
				if err != nil {
					return err
				}
				req.Network = &pol
			}
			// Round a fractional TTL up so that --ttl 1500ms is not "no TTL".
			req.TTLSeconds = int64((ttl + time.Second - 1) / time.Second)
			if wait < 0 {
				return usageErrorf("--wait must not be negative")
			}
			req.WaitSeconds = int64((wait + time.Second - 1) / time.Second)

			c, err := a.client()
			if err != nil {
				return err
			}
			timeout := a.timeout
			if timeout > 0 {
				timeout += wait // waiting for capacity is not the call being slow
			}
			ctx, cancel := withTimeout(cmd.Context(), timeout)
			defer cancel()
			sb, err := c.CreateSandbox(ctx, req, idempotencyKey)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return printJSON(a.stdout, sb)
			}
			a.noteMade(sb)
			_, err = fmt.Fprintln(a.stdout, sb.ID)
			return err
		}),
	}
	f := cmd.Flags()
	f.StringVar(&req.Profile, "profile", "", "runtime profile (required without --snapshot; see genesis profiles)")
	f.StringVar(&req.SnapshotID, "snapshot", "", "start from this snapshot: its files, and its processes and memory where it holds them (see genesis snapshot ls)")
	f.StringVar(&req.Runtime, "runtime", "", "OCI runtime, e.g. runc or runsc (default: chosen by risk level)")
	f.StringVar(&req.RiskLevel, "risk", "", "risk level of the code to run (selects the runtime)")
	f.Float64Var(&res.CPU, "cpu", 0, "CPU limit in cores (0: profile default)")
	f.Int64Var(&res.MemoryMB, "memory-mb", 0, "memory limit in MiB (0: profile default)")
	f.Int64Var(&res.Pids, "pids", 0, "process limit (0: profile default)")
	f.Int64Var(&res.DiskMB, "disk-mb", 0, "size of /workspace in MiB, enforced (0: profile default)")
	f.StringArrayVar(&env, "env", nil, "environment variable KEY=VALUE (repeatable)")
	f.StringArrayVar(&meta, "meta", nil, "metadata KEY=VALUE (repeatable)")
	f.DurationVar(&ttl, "ttl", 0, "destroy the sandbox after this long, e.g. 10m (0: service default)")
	f.StringVar(&idempotencyKey, "idempotency-key", "", "retrying with the same key returns the same sandbox")
	f.DurationVar(&wait, "wait", 0, "wait up to this long for host capacity when it is exhausted, or for the profile's image while the service builds it, e.g. 30s (0: fail at once)")
	f.StringArrayVar(&volumes, "volume", nil, "mount a named volume NAME:/PATH[:ro] (repeatable; PATH below /workspace or /mnt)")
	net.register(f, "network")
	return cmd
}

// newSandboxListCmd builds "genesis sandbox ls".
func newSandboxListCmd(a *app) *cobra.Command {
	var (
		opts client.ListSandboxesOptions
		meta []string
	)
	cmd := &cobra.Command{
		Use:     "ls [flags]",
		Aliases: []string{"list"},
		Short:   "List sandboxes",
		Args:    exactArgs(0, "no arguments"),
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			var err error
			if opts.Metadata, err = parseKV("meta", meta); err != nil {
				return err
			}
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.SandboxList, error) {
				return c.ListSandboxes(ctx, opts)
			}, func(list *client.SandboxList) error {
				return a.printSandboxTable(list.Items)
			})
		}),
	}
	f := cmd.Flags()
	f.StringSliceVar(&opts.States, "state", nil, "only sandboxes in this state (repeatable or comma-separated)")
	f.StringVar(&opts.Profile, "profile", "", "only sandboxes of this profile")
	f.StringArrayVar(&meta, "meta", nil, "only sandboxes with metadata KEY=VALUE (repeatable)")
	return cmd
}

// printSandboxTable prints one row per sandbox.
func (a *app) printSandboxTable(items []client.Sandbox) error {
	now := a.now()
	return printTable(a.stdout, "ID\tSTATE\tPROFILE\tRUNTIME\tRISK\tAGE\tEXPIRES", items, func(tw io.Writer, s client.Sandbox) {
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			s.ID, orDash(s.State), orDash(s.Profile), orDash(s.Runtime), orDash(s.RiskLevel), age, expires)
	})
}

// newSandboxGetCmd builds "genesis sandbox get".
func newSandboxGetCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "get SANDBOX",
		Aliases: []string{"show", "inspect"},
		Short:   "Show one sandbox",
		Args:    exactArgs(1, "one sandbox id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.Sandbox, error) {
				return c.GetSandbox(ctx, args[0])
			}, func(sb *client.Sandbox) error {
				return printFields(a.stdout, a.sandboxFields(sb))
			})
		}),
	}
}

// newSandboxRenewCmd builds "genesis sandbox renew SANDBOX [--ttl D]".
func newSandboxRenewCmd(a *app) *cobra.Command {
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "renew SANDBOX [--ttl 1h]",
		Short: "Set a sandbox's expiry to a TTL from now (a leased sandbox: renew its lease)",
		Args:  exactArgs(1, "one sandbox id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.Sandbox, error) {
				return c.RenewSandbox(ctx, args[0], ttl)
			}, func(sb *client.Sandbox) error {
				return printFields(a.stdout, a.sandboxFields(sb))
			})
		}),
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 0, "how long from now (default: the service's default TTL)")
	return cmd
}

// sandboxFields is the text detail view of a sandbox.
func (a *app) sandboxFields(s *client.Sandbox) []field {
	var res []string
	if s.Resources.CPU != 0 {
		res = append(res, "cpu "+strconv.FormatFloat(s.Resources.CPU, 'g', -1, 64))
	}
	if s.Resources.MemoryMB != 0 {
		res = append(res, fmt.Sprintf("memory %d MiB", s.Resources.MemoryMB))
	}
	if s.Resources.Pids != 0 {
		res = append(res, fmt.Sprintf("pids %d", s.Resources.Pids))
	}
	if s.Resources.DiskMB != 0 {
		res = append(res, fmt.Sprintf("disk %d MiB", s.Resources.DiskMB))
	}
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
		{"State", s.State},
		{"Suspended", a.suspensionText(s)},
		{"Failure", s.FailureReason},
		{"Reserved", s.Reserved},
		{"Profile", s.Profile},
		{"Runtime", s.Runtime},
		{"Risk level", s.RiskLevel},
		{"Image", s.Image},
		{"Resources", strings.Join(res, ", ")},
		{"Env keys", strings.Join(s.EnvKeys, ", ")},
		{"Metadata", joinMap(s.Metadata)},
		{"Version", s.ResourceVersion},
		{"Created", formatTime(s.CreatedAt)},
		{"Updated", formatTime(s.UpdatedAt)},
		{"Expires", expires},
	}
}

// newSandboxRemoveCmd builds "genesis sandbox rm".
func newSandboxRemoveCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "rm SANDBOX...",
		Aliases: []string{"delete", "remove"},
		Short:   "Destroy sandboxes (already destroyed ones are fine)",
		Args: func(cmd *cobra.Command, args []string) error {
			if err := minArgs(1, "at least one sandbox id")(cmd, args); err != nil {
				return err
			}
			return noEmptyArgs(args)
		},
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			return a.removeEach(cmd, args, c.DeleteSandbox)
		}),
	}
}

// newSandboxTicketCmd builds "genesis sandbox terminal-ticket".
func newSandboxTicketCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "terminal-ticket SANDBOX",
		Short: "Get a single-use ticket for the sandbox's terminal WebSocket",
		Long: `Get a ticket that opens the sandbox's terminal WebSocket once, within
about 30 seconds, as this key: GET /v1/sandboxes/{id}/terminal?ticket=T. For
clients such as browsers that cannot send an Authorization header on a
WebSocket; the API key itself never goes into a URL.`,
		Args: exactArgs(1, "one sandbox id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.TerminalTicket, error) {
				return c.CreateTerminalTicket(ctx, args[0])
			}, func(t *client.TerminalTicket) error {
				return printFields(a.stdout, []field{{"Ticket", t.Ticket}, {"Expires", formatTime(t.ExpiresAt)}})
			})
		}),
	}
}

// removeEach deletes each id with del, printing the ids it deleted (or,
// with --json, {"deleted": [...]}) and a problem for each it could not;
// any failure exits 1 after the rest were tried.
func (a *app) removeEach(cmd *cobra.Command, ids []string, del func(context.Context, string) error) error {
	deleted := []string{}
	failed := 0
	for _, id := range ids {
		ctx, cancel := a.callContext(cmd.Context())
		err := del(ctx, id)
		cancel()
		if err != nil {
			a.printError(id, err)
			failed++
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
	if failed > 0 {
		return &exitError{code: 1}
	}
	return nil
}
