package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"genesis.dev/sandbox/client"
)

// newPortForwardCmd builds "genesis port-forward SANDBOX [LOCAL:]REMOTE".
func newPortForwardCmd(a *app) *cobra.Command {
	var address string
	cmd := &cobra.Command{
		Use:   "port-forward SANDBOX [LOCAL:]REMOTE",
		Short: "Forward a local TCP port to a port on a sandbox's loopback, through the service",
		Long: `Listens on ADDRESS:LOCAL (default 127.0.0.1, LOCAL defaults to REMOTE; 0 picks
a free port) and carries each accepted connection over its own WebSocket to
127.0.0.1:REMOTE inside the sandbox. The sandbox needs no network of its own.
Runs until interrupted.`,
		Args: exactArgs(2, "a sandbox id and [LOCAL:]REMOTE"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			local, remote, err := parsePortPair(args[1])
			if err != nil {
				return &usageError{err: err}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", net.JoinHostPort(address, strconv.Itoa(local)))
			if err != nil {
				return err
			}
			defer ln.Close()
			id := args[0]
			// Check once that the port can be reached, so a mistake shows
			// at once rather than at the first connection.
			ctx, cancel := a.callContext(cmd.Context())
			probe, err := c.DialPort(ctx, id, remote)
			cancel()
			if err != nil {
				return err
			}
			probe.Close()
			fmt.Fprintf(a.stdout, "Forwarding from %s -> %s:%d\n", ln.Addr(), id, remote)
			return c.ForwardPort(cmd.Context(), ln, id, remote, func(from net.Addr, err error) {
				a.warnf("connection from %s: %v", from, err)
			})
		}),
	}
	cmd.Flags().StringVar(&address, "address", "127.0.0.1", "local address to listen on")
	return cmd
}

// parsePortPair reads "REMOTE" or "LOCAL:REMOTE".
func parsePortPair(s string) (local, remote int, err error) {
	l, r, both := strings.Cut(s, ":")
	if !both {
		r = l
	}
	remote, err = strconv.Atoi(r)
	if err != nil || remote < 1 || remote > 65535 {
		return 0, 0, fmt.Errorf("remote port %q is not in 1-65535", r)
	}
	local = remote
	if both {
		if local, err = strconv.Atoi(l); err != nil || local < 0 || local > 65535 {
			return 0, 0, fmt.Errorf("local port %q is not in 0-65535", l)
		}
	}
	return local, remote, nil
}

// newPortCmd builds "genesis port" (links and URLs).
func newPortCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "port",
		Short: "Reach ports inside a sandbox: URLs and preview links (see also port-forward)",
	}
	var ttl time.Duration
	link := &cobra.Command{
		Use:   "link SANDBOX PORT",
		Short: "Make a preview link: a URL a person can open in a browser without an API key",
		Args:  exactArgs(2, "a sandbox id and a port"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			port, err := strconv.Atoi(args[1])
			if err != nil {
				return usageErrorf("port %q is not a number", args[1])
			}
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.PortLink, error) {
				return c.CreatePortLink(ctx, args[0], port, ttl)
			}, func(l *client.PortLink) error {
				fmt.Fprintln(a.stdout, l.URL)
				a.warnf("valid until %s, or until the sandbox ends", l.ExpiresAt.Format(time.RFC3339))
				return nil
			})
		}),
	}
	link.Flags().DurationVar(&ttl, "ttl", time.Hour, "how long the link works (whole seconds)")
	url := &cobra.Command{
		Use:   "url SANDBOX PORT",
		Short: "Print the URL of a port through the service (it needs the API key)",
		Args:  exactArgs(2, "a sandbox id and a port"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			port, err := strconv.Atoi(args[1])
			if err != nil || port < 1 || port > 65535 {
				return usageErrorf("port %q is not in 1-65535", args[1])
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, c.PortURL(args[0], port))
			return nil
		}),
	}
	cmd.AddCommand(link, url)
	return cmd
}
