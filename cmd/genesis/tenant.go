package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"genesis.dev/sandbox/client"
)

// quotaFlags are the --max-* flags of tenant create and tenant quota.
type quotaFlags struct {
	q  client.Quotas
	fs *pflag.FlagSet
}

func (f *quotaFlags) register(fs *pflag.FlagSet) {
	f.fs = fs
	fs.IntVar(&f.q.MaxSandboxes, "max-sandboxes", 0, "live sandboxes at once (0: unlimited)")
	fs.Float64Var(&f.q.MaxCPU, "max-cpu", 0, "CPUs of live sandboxes together (0: unlimited)")
	fs.Int64Var(&f.q.MaxMemoryMB, "max-memory-mb", 0, "MiB of memory of live sandboxes together (0: unlimited)")
	fs.IntVar(&f.q.MaxLeases, "max-leases", 0, "active leases at once (0: unlimited)")
	fs.IntVar(&f.q.MaxVolumes, "max-volumes", 0, "named volumes (0: the service's volumes.max_per_tenant alone)")
	fs.Int64Var(&f.q.MaxVolumeMB, "max-volume-mb", 0, "MiB of named volumes together (0: the service's volumes.max_mb_per_tenant alone)")
}

func (f *quotaFlags) validate() error {
	if f.q.MaxSandboxes < 0 || f.q.MaxCPU < 0 || f.q.MaxMemoryMB < 0 || f.q.MaxLeases < 0 || f.q.MaxVolumes < 0 || f.q.MaxVolumeMB < 0 {
		return usageErrorf("quotas must not be negative (0 is unlimited)")
	}
	return nil
}

// patch returns the quotas whose flags were given, nil if none was.
func (f *quotaFlags) patch() *client.QuotasPatch {
	var p client.QuotasPatch
	set := false
	for name, apply := range map[string]func(){
		"max-sandboxes": func() { p.MaxSandboxes = &f.q.MaxSandboxes },
		"max-cpu":       func() { p.MaxCPU = &f.q.MaxCPU },
		"max-memory-mb": func() { p.MaxMemoryMB = &f.q.MaxMemoryMB },
		"max-leases":    func() { p.MaxLeases = &f.q.MaxLeases },
		"max-volumes":   func() { p.MaxVolumes = &f.q.MaxVolumes },
		"max-volume-mb": func() { p.MaxVolumeMB = &f.q.MaxVolumeMB },
	} {
		if f.fs.Changed(name) {
			apply()
			set = true
		}
	}
	if !set {
		return nil
	}
	return &p
}

// newTenantCmd builds "genesis tenant" (the admin API; needs an admin key).
func newTenantCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "tenant",
		Aliases: []string{"tenants"},
		Short:   "Manage tenants, their quotas and API keys (needs an admin key)",
	}
	var (
		in client.CreateTenantRequest
		qf quotaFlags
	)
	create := &cobra.Command{
		Use:   "create NAME [flags]",
		Short: "Create a tenant and print its name",
		Args:  exactArgs(1, "one tenant name"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			if err := qf.validate(); err != nil {
				return err
			}
			in.Name = args[0]
			if qf.q != (client.Quotas{}) {
				in.Quotas = &qf.q
			}
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.Tenant, error) {
				return c.CreateTenant(ctx, in)
			}, func(t *client.Tenant) error { _, err := fmt.Fprintln(a.stdout, t.Name); return err })
		}),
	}
	create.Flags().IntVar(&in.Weight, "weight", 0, "share in fair queueing (0: 1)")
	create.Flags().StringVar(&in.MinRiskLevel, "min-risk", "", "raise every request of the tenant to at least this risk level")
	create.Flags().StringVar(&in.MaxToolRiskLevel, "max-tool-risk", "", "refuse MCP servers and skill runs of the tenant above this risk level")
	create.Flags().BoolVar(&in.Admin, "admin", false, "let the tenant's keys use the admin API")
	qf.register(create.Flags())

	ls := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List tenants",
		Args:    exactArgs(0, "no arguments"),
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.TenantList, error) {
				return c.ListTenants(ctx)
			}, func(l *client.TenantList) error {
				// Usage / quota ("-": no limit).
				return printTable(a.stdout, "NAME\tSOURCE\tADMIN\tWEIGHT\tSANDBOXES\tCPU\tMEMORY MB\tLEASES\tVOLUMES\tVOLUME MB", l.Items, func(tw io.Writer, t client.Tenant) {
					q, u := t.Quotas, client.Usage{}
					if t.Usage != nil {
						u = *t.Usage
					}
					fmt.Fprintf(tw, "%s\t%s\t%v\t%d\t%d/%s\t%s/%s\t%d/%s\t%d/%s\t%d/%s\t%d/%s\n", t.Name, t.Source, t.Admin, t.Weight,
						u.Sandboxes, limit(float64(q.MaxSandboxes)), strconv.FormatFloat(u.CPU, 'f', -1, 64), limit(q.MaxCPU),
						u.MemoryMB, limit(float64(q.MaxMemoryMB)), u.Leases, limit(float64(q.MaxLeases)),
						u.Volumes, limit(float64(q.MaxVolumes)), u.VolumeMB, limit(float64(q.MaxVolumeMB)))
				})
			})
		}),
	}
	get := &cobra.Command{
		Use:   "get NAME",
		Short: "Show a tenant, its quotas and what it holds now",
		Args:  exactArgs(1, "one tenant name"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.Tenant, error) {
				return c.GetTenant(ctx, args[0])
			}, a.printTenant)
		}),
	}
	rm := &cobra.Command{
		Use:     "rm NAME",
		Aliases: []string{"delete"},
		Short:   "Delete a tenant and its keys (refused while it has live sandboxes)",
		Args:    exactArgs(1, "one tenant name"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (struct{}, error) {
				return struct{}{}, c.DeleteTenant(ctx, args[0])
			}, func(struct{}) error { _, err := fmt.Fprintln(a.stdout, args[0]); return err })
		}),
	}
	var qq quotaFlags
	quota := &cobra.Command{
		Use:   "quota NAME [--max-sandboxes N] [--max-cpu N] [--max-memory-mb N] [--max-leases N] [--max-volumes N] [--max-volume-mb N]",
		Short: "Show a tenant's quotas and usage, or change the quotas given",
		Args:  exactArgs(1, "one tenant name"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			if err := qq.validate(); err != nil {
				return err
			}
			p := qq.patch()
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.Tenant, error) {
				if p != nil {
					if _, err := c.UpdateTenant(ctx, args[0], client.UpdateTenantRequest{Quotas: p}, ""); err != nil {
						return nil, err
					}
				}
				return c.GetTenant(ctx, args[0])
			}, a.printTenant)
		}),
	}
	qq.register(quota.Flags())
	cmd.AddCommand(create, ls, get, rm, quota, newTenantKeyCmd(a))
	return cmd
}

// limit renders a quota: "-" for unlimited.
func limit(v float64) string {
	if v == 0 {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func (a *app) printTenant(t *client.Tenant) error {
	q := t.Quotas
	fields := []field{
		{"Name", t.Name}, {"Source", t.Source}, {"Admin", strconv.FormatBool(t.Admin)}, {"Weight", strconv.Itoa(t.Weight)},
		{"Min risk level", t.MinRiskLevel}, {"Max tool risk level", t.MaxToolRiskLevel},
	}
	var u client.Usage
	if t.Usage != nil {
		u = *t.Usage
	}
	// A volume quota of 0 leaves the service's per-tenant limit alone.
	const serviceLimit = "the service's limit"
	for _, r := range []struct {
		name      string
		used, max float64
		none      string
	}{
		{"Sandboxes", float64(u.Sandboxes), float64(q.MaxSandboxes), "unlimited"},
		{"CPU", u.CPU, q.MaxCPU, "unlimited"},
		{"Memory MB", float64(u.MemoryMB), float64(q.MaxMemoryMB), "unlimited"},
		{"Leases", float64(u.Leases), float64(q.MaxLeases), "unlimited"},
		{"Volumes", float64(u.Volumes), float64(q.MaxVolumes), serviceLimit},
		{"Volume MB", float64(u.VolumeMB), float64(q.MaxVolumeMB), serviceLimit},
	} {
		of := r.none
		if r.max != 0 {
			of = limit(r.max)
		}
		fields = append(fields, field{r.name, strconv.FormatFloat(r.used, 'f', -1, 64) + " of " + of})
	}
	fields = append(fields, field{"Created", formatTime(t.CreatedAt)}, field{"Version", t.ResourceVersion})
	return printFields(a.stdout, fields)
}

// newTenantKeyCmd builds "genesis tenant key".
func newTenantKeyCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "key", Aliases: []string{"keys"}, Short: "Create, list and revoke a tenant's API keys"}
	var desc string
	var scopes []string
	create := &cobra.Command{
		Use:   "create TENANT [--description TEXT] [--scope approve]",
		Short: "Create an API key and print it (it is shown only this once)",
		Long: "Create an API key and print it (it is shown only this once). --scope approve makes a person's key\n" +
			"that also decides MCP calls held for approval and approves changed tools (never the agent's key).",
		Args: exactArgs(1, "one tenant name"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.APIKey, error) {
				return c.CreateAPIKey(ctx, args[0], client.CreateAPIKeyRequest{Description: desc, Scopes: scopes})
			}, func(k *client.APIKey) error {
				a.warnf("key %s of tenant %s; store it now, it is not shown again", k.ID, k.Tenant)
				_, err := fmt.Fprintln(a.stdout, k.Key)
				return err
			})
		}),
	}
	create.Flags().StringVar(&desc, "description", "", "what the key is for")
	create.Flags().StringSliceVar(&scopes, "scope", nil, "a scope of the key (approve); repeat for several")
	ls := &cobra.Command{
		Use:     "ls TENANT",
		Aliases: []string{"list"},
		Short:   "List a tenant's keys (never their secrets)",
		Args:    exactArgs(1, "one tenant name"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.APIKeyList, error) {
				return c.ListAPIKeys(ctx, args[0])
			}, func(l *client.APIKeyList) error {
				return printTable(a.stdout, "ID\tPREFIX\tCREATED\tREVOKED\tSCOPES\tDESCRIPTION", l.Items, func(tw io.Writer, k client.APIKey) {
					revoked := "-"
					if k.RevokedAt != nil {
						revoked = formatTime(*k.RevokedAt)
					}
					fmt.Fprintf(tw, "%s\t%s…\t%s\t%s\t%s\t%s\n", k.ID, k.Prefix, formatTime(k.CreatedAt), revoked, orDash(strings.Join(k.Scopes, ",")), orDash(k.Description))
				})
			})
		}),
	}
	revoke := &cobra.Command{
		Use:   "revoke TENANT KEY_ID",
		Short: "Revoke a key; its next request is refused",
		Args:  exactArgs(2, "a tenant name and a key id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (struct{}, error) {
				return struct{}{}, c.RevokeAPIKey(ctx, args[0], args[1])
			}, func(struct{}) error { _, err := fmt.Fprintln(a.stdout, args[1]); return err })
		}),
	}
	cmd.AddCommand(create, ls, revoke)
	return cmd
}
