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

// newNetCmd builds "genesis net" and its subcommands.
func newNetCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "net",
		Aliases: []string{"network"},
		Short:   "Show and change a sandbox's network policy, and list its egress events",
	}
	cmd.AddCommand(newNetGetCmd(a), newNetSetCmd(a), newNetEventsCmd(a))
	return cmd
}

// policyFlags are the flags that spell a network policy.
type policyFlags struct {
	mode                   string
	allow, endpoints, tool []string
}

func (p *policyFlags) register(f *pflag.FlagSet, modeFlag string) {
	f.StringVar(&p.mode, modeFlag, "", "network mode: none, allowlist, internal-api or tool-proxy")
	f.StringArrayVar(&p.allow, "allow", nil, "allowlist rule HOST[:PORT[,PORT…]] or CIDR[:PORT…] (repeatable; ports default to 80,443)")
	f.StringArrayVar(&p.endpoints, "endpoint", nil, "operator internal endpoint name (repeatable; mode internal-api)")
	f.StringArrayVar(&p.tool, "tool", nil, "operator tool name (repeatable; mode tool-proxy)")
}

// set reports whether any policy flag was given.
func (p *policyFlags) set() bool {
	return p.mode != "" || len(p.allow)+len(p.endpoints)+len(p.tool) > 0
}

// policy builds the policy; the mode defaults from the rules given.
func (p *policyFlags) policy() (client.NetworkPolicy, error) {
	pol := client.NetworkPolicy{Mode: p.mode, Endpoints: p.endpoints, Tools: p.tool}
	if pol.Mode == "" {
		switch {
		case len(p.allow) > 0:
			pol.Mode = client.NetworkAllowlist
		case len(p.endpoints) > 0:
			pol.Mode = client.NetworkInternalAPI
		case len(p.tool) > 0:
			pol.Mode = client.NetworkToolProxy
		default:
			return pol, usageErrorf("give a mode (none, allowlist, internal-api, tool-proxy) or rules")
		}
	}
	for _, a := range p.allow {
		r, err := parseAllow(a)
		if err != nil {
			return pol, err
		}
		pol.Allow = append(pol.Allow, r)
	}
	return pol, nil
}

// parseAllow parses HOST[:PORTS] or CIDR[:PORTS], PORTS comma-separated.
func parseAllow(s string) (client.NetworkRule, error) {
	target, ports := s, ""
	if i := strings.LastIndexByte(s, ':'); i >= 0 && !strings.Contains(s[i:], "/") && strings.Count(s, ":") == 1 || strings.HasPrefix(s, "[") {
		if strings.HasPrefix(s, "[") { // [IPv6/len]:ports
			end := strings.IndexByte(s, ']')
			if end < 0 {
				return client.NetworkRule{}, usageErrorf("--allow %q: missing ']'", s)
			}
			target, ports = s[1:end], strings.TrimPrefix(s[end+1:], ":")
		} else {
			target, ports = s[:i], s[i+1:]
		}
	}
	var r client.NetworkRule
	if strings.Contains(target, "/") {
		r.CIDR = target
	} else {
		r.Host = target
	}
	if target == "" {
		return r, usageErrorf("--allow %q: empty host", s)
	}
	if ports != "" {
		for _, p := range strings.Split(ports, ",") {
			n, err := strconv.Atoi(p)
			if err != nil {
				return r, usageErrorf("--allow %q: port %q is not a number", s, p)
			}
			r.Ports = append(r.Ports, n)
		}
	}
	return r, nil
}

// printNetwork writes the text view of a sandbox's network policy and status.
func printNetwork(w io.Writer, n *client.SandboxNetwork) error {
	fmt.Fprintf(w, "sandbox:  %s\nmode:     %s\nstatus:   %s\n", n.SandboxID, n.Policy.Mode, n.Status)
	if n.StatusReason != "" {
		fmt.Fprintf(w, "reason:   %s\n", n.StatusReason)
	}
	if n.GatewayIP != "" {
		fmt.Fprintf(w, "gateway:  %s\n", n.GatewayIP)
	}
	for _, r := range n.Policy.Allow {
		target := r.Host
		if target == "" {
			target = r.CIDR
		}
		ports := make([]string, len(r.Ports))
		for i, p := range r.Ports {
			ports[i] = strconv.Itoa(p)
		}
		fmt.Fprintf(w, "allow:    %s ports %s\n", target, orDash(strings.Join(ports, ",")))
	}
	for _, e := range n.Policy.Endpoints {
		fmt.Fprintf(w, "endpoint: %s\n", e)
	}
	for _, t := range n.Policy.Tools {
		fmt.Fprintf(w, "tool:     %s (http://%s.tool/)\n", t, t)
	}
	_, err := fmt.Fprintf(w, "version:  %s\n", n.ResourceVersion)
	return err
}

func newNetGetCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "get SANDBOX",
		Short: "Show a sandbox's network policy and enforcement status",
		Args:  exactArgs(1, "SANDBOX"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.SandboxNetwork, error) {
				return c.GetNetwork(ctx, args[0])
			}, func(n *client.SandboxNetwork) error { return printNetwork(a.stdout, n) })
		}),
	}
}

func newNetSetCmd(a *app) *cobra.Command {
	var (
		pf      policyFlags
		ifMatch string
	)
	cmd := &cobra.Command{
		Use:   "set SANDBOX [--mode MODE] [--allow HOST[:PORTS]]… [--endpoint NAME]… [--tool NAME]…",
		Short: "Replace the network policy of a running sandbox (in force when the command returns)",
		Args:  exactArgs(1, "SANDBOX"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			pol, err := pf.policy()
			if err != nil {
				return err
			}
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.SandboxNetwork, error) {
				return c.SetNetwork(ctx, args[0], pol, ifMatch)
			}, func(n *client.SandboxNetwork) error { return printNetwork(a.stdout, n) })
		}),
	}
	pf.register(cmd.Flags(), "mode")
	cmd.Flags().StringVar(&ifMatch, "if-match", "", "only if the policy is still at this version (from net get)")
	return cmd
}

func newNetEventsCmd(a *app) *cobra.Command {
	var (
		cursor string
		limit  int
	)
	cmd := &cobra.Command{
		Use:   "events SANDBOX [--cursor N] [--limit N]",
		Short: "List a sandbox's egress events (allowed and denied lookups and connections)",
		Args:  exactArgs(1, "SANDBOX"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			if limit < 0 {
				return usageErrorf("--limit must not be negative")
			}
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.NetworkEventList, error) {
				return c.NetworkEvents(ctx, args[0], cursor, limit)
			}, func(page *client.NetworkEventList) error {
				if err := printTable(a.stdout, "TIME\tPROTO\tDECISION\tNAME\tADDRESS\tPORT\tUP\tDOWN\tREASON", page.Items, func(tw io.Writer, e client.NetworkEvent) {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", e.Time.Format("15:04:05.000"), e.Proto, e.Decision,
						orDash(e.Name), orDash(e.Address), e.Port, e.BytesUp, e.BytesDown, orDash(e.Reason))
				}); err != nil {
					return err
				}
				_, err := fmt.Fprintf(a.stderr, "next cursor: %s\n", page.NextCursor)
				return err
			})
		}),
	}
	cmd.Flags().StringVar(&cursor, "cursor", "", "list events after this cursor")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many events (server default 100)")
	return cmd
}
