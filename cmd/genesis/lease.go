package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"genesis.dev/sandbox/client"
)

// newLeaseCmd builds "genesis lease".
func newLeaseCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "lease",
		Aliases: []string{"leases"},
		Short:   "Acquire, renew, release and list sandbox leases",
	}
	cmd.AddCommand(newLeaseAcquireCmd(a), newLeaseRenewCmd(a), newLeaseReleaseCmd(a), newLeaseGetCmd(a), newLeaseListCmd(a))
	return cmd
}

// ttlSeconds rounds a positive duration up to whole seconds.
func ttlSeconds(d time.Duration) *int64 {
	if d == 0 {
		return nil
	}
	n := int64((d + time.Second - 1) / time.Second)
	return &n
}

// newLeaseAcquireCmd builds "genesis lease acquire".
func newLeaseAcquireCmd(a *app) *cobra.Command {
	var (
		req       client.AcquireLeaseRequest
		env, meta []string
		ttl, wait time.Duration
		volumes   []string
		net       policyFlags
	)
	cmd := &cobra.Command{
		Use:   "acquire --profile PROFILE | --snapshot SNAPSHOT [flags]",
		Short: "Lease a sandbox (warm from a pool when one is idle); prints the lease and sandbox ids",
		Args:  exactArgs(0, "no arguments"),
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			if req.Profile == "" && req.SnapshotID == "" {
				return usageErrorf("--profile or --snapshot is required")
			}
			if ttl < 0 || wait < 0 {
				return usageErrorf("--ttl and --wait must not be negative")
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
			if net.set() {
				pol, err := net.policy()
				if err != nil {
					return err
				}
				req.Network = &pol
			}
			req.TTLSeconds = ttlSeconds(ttl)
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
			l, err := c.AcquireLease(ctx, req)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return printJSON(a.stdout, l)
			}
			_, err = fmt.Fprintf(a.stdout, "%s %s\n", l.LeaseID, l.SandboxID)
			return err
		}),
	}
	f := cmd.Flags()
	f.StringVar(&req.Profile, "profile", "", "runtime profile (required unless --snapshot; see genesis profiles)")
	f.StringVar(&req.SnapshotID, "snapshot", "", "start from this snapshot (its profile and runtime): warm from a pool fed from it when one is idle")
	f.StringVar(&req.Runtime, "runtime", "", "OCI runtime, e.g. runc or runsc (default: chosen by risk level)")
	f.StringVar(&req.RiskLevel, "risk", "", "risk level of the code to run (selects the runtime)")
	f.StringVar(&req.Holder, "holder", "", "who holds the lease (free text)")
	f.DurationVar(&ttl, "ttl", 0, "lease length, e.g. 10m (0: the profile's default)")
	f.DurationVar(&wait, "wait", 0, "wait up to this long for capacity when no warm sandbox is idle and the host is full, or for the profile's image while the service builds it")
	f.StringArrayVar(&env, "env", nil, "environment variable KEY=VALUE for every job (repeatable)")
	f.StringArrayVar(&meta, "meta", nil, "metadata KEY=VALUE (repeatable)")
	f.StringArrayVar(&volumes, "volume", nil, "mount a named volume NAME:/PATH[:ro] (repeatable; PATH below /workspace or /mnt)")
	net.register(f, "network")
	return cmd
}

// newLeaseRenewCmd builds "genesis lease renew".
func newLeaseRenewCmd(a *app) *cobra.Command {
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "renew LEASE [--ttl D]",
		Short: "Extend a lease from now (by its own length unless --ttl)",
		Args:  exactArgs(1, "one lease id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			if ttl < 0 {
				return usageErrorf("--ttl must not be negative")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd.Context())
			defer cancel()
			l, err := c.RenewLease(ctx, args[0], ttlSeconds(ttl))
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return printJSON(a.stdout, l)
			}
			_, err = fmt.Fprintf(a.stdout, "%s expires %s\n", l.LeaseID, formatTime(l.ExpiresAt))
			return err
		}),
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 0, "new length from now (0: the lease's own)")
	return cmd
}

// newLeaseReleaseCmd builds "genesis lease release".
func newLeaseReleaseCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "release LEASE...",
		Aliases: []string{"rm"},
		Short:   "Release leases: their jobs are canceled and sandboxes destroyed",
		Args: func(cmd *cobra.Command, args []string) error {
			if err := minArgs(1, "at least one lease id")(cmd, args); err != nil {
				return err
			}
			return noEmptyArgs(args)
		},
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			failed := 0
			for _, id := range args {
				ctx, cancel := a.callContext(cmd.Context())
				err := c.ReleaseLease(ctx, id)
				cancel()
				if err != nil {
					a.printError(id, err)
					failed++
					continue
				}
				if !a.jsonOutput() {
					fmt.Fprintln(a.stdout, id)
				}
			}
			if failed > 0 {
				return &exitError{code: 1}
			}
			return nil
		}),
	}
}

// newLeaseGetCmd builds "genesis lease get".
func newLeaseGetCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "get LEASE",
		Aliases: []string{"show"},
		Short:   "Show one lease",
		Args:    exactArgs(1, "one lease id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.Lease, error) {
				return c.GetLease(ctx, args[0])
			}, func(l *client.Lease) error {
				ended := ""
				if l.EndedAt != nil {
					ended = formatTime(*l.EndedAt) + " (" + l.EndReason + ")"
				}
				return printFields(a.stdout, []field{
					{"ID", l.LeaseID}, {"State", l.State}, {"Sandbox", l.SandboxID}, {"Warm", strconv.FormatBool(l.Warm)},
					{"Profile", l.Profile}, {"Runtime", l.Runtime}, {"Holder", l.Holder}, {"Metadata", joinMap(l.Metadata)},
					{"TTL", (time.Duration(l.TTLSeconds) * time.Second).String()}, {"Created", formatTime(l.CreatedAt)},
					{"Renewed", formatTime(l.RenewedAt)}, {"Expires", formatTime(l.ExpiresAt)}, {"Ended", ended},
				})
			})
		}),
	}
}

// newLeaseListCmd builds "genesis lease ls".
func newLeaseListCmd(a *app) *cobra.Command {
	var states []string
	cmd := &cobra.Command{
		Use:     "ls [--state S]",
		Aliases: []string{"list"},
		Short:   "List leases",
		Args:    exactArgs(0, "no arguments"),
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (client.LeaseList, error) {
				list, err := c.ListLeases(ctx, states...)
				return client.LeaseList{Items: list}, err
			}, func(list client.LeaseList) error {
				now := a.now()
				return printTable(a.stdout, "LEASE\tSTATE\tSANDBOX\tPROFILE\tRUNTIME\tWARM\tHOLDER\tEXPIRES", list.Items, func(tw io.Writer, l client.Lease) {
					expires := "-"
					if l.State == "active" {
						expires = "in " + shortDuration(l.ExpiresAt.Sub(now))
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%v\t%s\t%s\n", l.LeaseID, l.State, l.SandboxID, l.Profile, l.Runtime, l.Warm, orDash(l.Holder), expires)
				})
			})
		}),
	}
	cmd.Flags().StringSliceVar(&states, "state", nil, "only leases in this state: active, released, expired (repeatable)")
	return cmd
}

// newPoolCmd builds "genesis pool".
func newPoolCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "pool",
		Aliases: []string{"pools"},
		Short:   "Show and drain warm pools",
	}
	printPools := func(pl *client.PoolList) error {
		return printTable(a.stdout, "POOL\tIDLE\tLEASED\tBUSY\tSTARTING\tTOTAL\tMIN/MAX\tHITS\tMISSES\tRECYCLED\tREFILL/S\tSTATE", pl.Items, func(tw io.Writer, p client.Pool) {
			state := p.State
			switch {
			case state == "" && p.Draining: // a service older than pool states
				state = "draining"
			case state == "":
				state = "ok"
			}
			if p.LastError != "" && !p.Draining {
				state += ": " + p.LastError
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d/%d\t%d\t%d\t%d\t%.2f\t%s\n", p.Name, p.Counts["idle"], p.Counts["leased"],
				p.Counts["busy"], p.Starting, p.Total, p.MinIdle, p.MaxTotal, p.Hits, p.Misses, p.Recycled, p.RefillRate, state)
		})
	}
	ls := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List warm pools with counts, hits, misses, refill rate and state (a pool fed from a snapshot is named <profile>-<runtime>-<snapshot id>)",
		Args:    exactArgs(0, "no arguments"),
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.PoolList, error) {
				pl, err := c.Pools(ctx)
				if err == nil {
					sort.Slice(pl.Items, func(i, j int) bool { return pl.Items[i].Name < pl.Items[j].Name })
				}
				return pl, err
			}, printPools)
		}),
	}
	drain := &cobra.Command{
		Use:   "drain POOL",
		Short: "Stop a pool (or all pools of a profile) handing out sandboxes and destroy its idle members",
		Args:  exactArgs(1, "one pool or profile name"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.PoolList, error) {
				return c.DrainPool(ctx, args[0])
			}, printPools)
		}),
	}
	cmd.AddCommand(ls, drain)
	return cmd
}
