package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"genesis.dev/sandbox/client"
)

// envMCPToken is where genesis mcp stdio finds the instance token when
// --token is not given (so it need not show in a process list).
const envMCPToken = "GENESIS_MCP_TOKEN"

// newMCPCmd builds "genesis mcp" and its subcommands.
func newMCPCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Run MCP servers in sandboxes and manage their tools, pins and calls",
		Long: `An MCP server instance is a stdio MCP server run in a sandbox and served to
unmodified MCP clients at its own Streamable HTTP endpoint, under its own
bearer token and a tool policy. See docs/mcp.md.`,
	}
	cmd.AddCommand(newMCPRunCmd(a), newMCPListCmd(a), newMCPGetCmd(a), newMCPRemoveCmd(a), newMCPToolsCmd(a),
		newMCPPinsCmd(a), newMCPApproveCmd(a), newMCPApprovalsCmd(a), newMCPDecideCmd(a), newMCPCallsCmd(a),
		newMCPCatalogCmd(a), newMCPStdioCmd(a), newMCPServeCmd(a))
	return cmd
}

// mcpRunFlags are the flags of genesis mcp run.
type mcpRunFlags struct {
	catalog, profile, lease, cwd, workspace, pinMode, runtime, scope string
	allow, deny, approve, network, tools, env                        []string
	idleTTL, approvalTTL                                             string
	callTimeout, callCeiling, initTimeout                            time.Duration
}

// build checks the flags and arguments (the command after --) and returns
// the request.
func (f *mcpRunFlags) build(cmd *cobra.Command, args []string) (client.MCPCreateRequest, error) {
	var req client.MCPCreateRequest
	if len(args) > 0 && cmd.ArgsLenAtDash() != 0 {
		return req, usageErrorf("the server's command goes after --: genesis mcp run [flags] -- COMMAND [ARGS...]")
	}
	switch {
	case f.catalog != "" && len(args) > 0:
		return req, usageErrorf("give either --catalog or a command after --, not both")
	case f.catalog == "" && len(args) == 0:
		return req, usageErrorf("no server: give --catalog NAME or a command after --")
	case f.catalog != "":
		if f.profile != "" || f.cwd != "" || f.workspace != "" || len(f.network)+len(f.env)+len(f.tools) > 0 {
			return req, usageErrorf("--profile, --cwd, --env, --network, --tool and --workspace go with a command, not --catalog (the entry sets them)")
		}
		req.Catalog = f.catalog
	case f.profile == "" && f.lease == "":
		return req, usageErrorf("--profile is required for a command (or --lease, to run it in a leased sandbox)")
	default:
		env, err := parseKV("env", f.env)
		if err != nil {
			return req, err
		}
		req.Spec = &client.MCPSpec{Command: args, Cwd: f.cwd, Env: env, Profile: f.profile}
		if len(f.network) > 0 && len(f.tools) > 0 {
			return req, usageErrorf("--network and --tool are exclusive (a sandbox has one egress mode)")
		}
		if len(f.network)+len(f.tools) > 0 || f.workspace != "" {
			req.Spec.Permissions = &client.MCPPermissions{Network: f.network, Tools: f.tools, Workspace: f.workspace}
		}
	}
	req.LeaseID = f.lease
	switch f.runtime {
	case "", "runc", "runsc":
		req.Runtime = f.runtime
	default:
		return req, usageErrorf("--runtime must be runc or runsc, not %q", f.runtime)
	}
	if len(f.allow)+len(f.deny)+len(f.approve) > 0 {
		req.Tools = &client.MCPToolRules{Allow: f.allow, Deny: f.deny, Approve: f.approve}
	}
	switch f.scope {
	case "", "dedicated", "ephemeral":
		req.Scope = f.scope
	default:
		return req, usageErrorf("--scope must be dedicated or ephemeral, not %q", f.scope)
	}
	switch f.pinMode {
	case "", "block", "warn":
		req.PinMode = f.pinMode
	default:
		return req, usageErrorf("--pin-mode must be block or warn, not %q", f.pinMode)
	}
	var err error
	if req.IdleTTLSeconds, err = parseSeconds("idle-ttl", f.idleTTL); err != nil {
		return req, err
	}
	if req.ApprovalTTLSeconds, err = parseSeconds("approval-ttl", f.approvalTTL); err != nil {
		return req, err
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
		dst  *int64
	}{{"call-timeout", f.callTimeout, &req.CallTimeoutMS}, {"call-ceiling", f.callCeiling, &req.CallCeilingMS}, {"init-timeout", f.initTimeout, &req.InitTimeoutMS}} {
		if d.v < 0 {
			return req, usageErrorf("--%s must not be negative", d.flag)
		}
		*d.dst = int64((d.v + time.Millisecond - 1) / time.Millisecond)
	}
	return req, nil
}

// parseSeconds reads whole seconds ("300") or a duration ("5m"), rounded
// up to seconds; "" is 0.
func parseSeconds(flag, v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, usageErrorf("--%s must not be negative", flag)
		}
		return n, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, usageErrorf("--%s wants seconds or a duration such as 10m, got %q", flag, v)
	}
	return int64((d + time.Second - 1) / time.Second), nil
}

// newMCPRunCmd builds "genesis mcp run".
func newMCPRunCmd(a *app) *cobra.Command {
	var f mcpRunFlags
	cmd := &cobra.Command{
		Use:   "run [flags] (--catalog NAME | -- COMMAND [ARGS...])",
		Short: "Start an MCP server in a sandbox; prints its id and its endpoint's token",
		Long: `Start a catalogued MCP server (--catalog, see genesis mcp catalog) or a stdio
MCP server command of yours (after --; source ad-hoc, so risk high and runsc)
in a sandbox of its own lease, or in the sandbox of --lease. The answer comes
once the server has initialized.

Prints "ID TOKEN": the token is the endpoint's bearer token and is shown only
now. Point an MCP client at the endpoint printed on stderr with
"Authorization: Bearer TOKEN", or use genesis mcp stdio for stdio-only
clients.

--allow and --deny are tool-name patterns (path.Match, e.g. "read_*"),
applied to tools/list and tools/call alike; --network declares the hosts the
server must reach (an egress allowlist of exactly those; risk medium).`,
		Args: func(_ *cobra.Command, args []string) error { return noEmptyArgs(args) },
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			req, err := f.build(cmd, args)
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			timeout := a.timeout
			if timeout > 0 {
				timeout += f.initTimeout // a slow initialize is not the call being slow
			}
			ctx, cancel := withTimeout(cmd.Context(), timeout)
			defer cancel()
			s, err := c.CreateMCPServer(ctx, req)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return printJSON(a.stdout, s)
			}
			if _, err := fmt.Fprintf(a.stdout, "%s %s\n", s.ID, s.Token); err != nil {
				return err
			}
			a.warnf("endpoint %s (risk %s, runtime %s, network %s); the token is shown only once",
				c.MCPServerURL(s.ID), s.Risk, s.Runtime, s.Network)
			return nil
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&f.catalog, "catalog", "", "catalog entry to run (see genesis mcp catalog)")
	fl.StringVar(&f.profile, "profile", "", "profile of the server's own sandbox, for a command (required without --lease)")
	fl.StringVar(&f.lease, "lease", "", "run in the sandbox of this active lease instead of one of its own")
	fl.StringArrayVar(&f.allow, "allow", nil, "only tools matching PATTERN (repeatable)")
	fl.StringArrayVar(&f.deny, "deny", nil, "never tools matching PATTERN (repeatable)")
	fl.StringArrayVar(&f.approve, "approve", nil, "hold every call of tools matching PATTERN for a decision (genesis mcp approvals; repeatable)")
	fl.StringVar(&f.approvalTTL, "approval-ttl", "", "how long a held call waits for its decision: seconds or a duration (default 5m)")
	fl.StringVar(&f.runtime, "runtime", "", "runsc where the risk would allow runc (never weaker than the risk needs)")
	fl.StringArrayVar(&f.tools, "tool", nil, "operator tool NAME a command calls at http://NAME.tool/, its credential added outside the sandbox (repeatable)")
	fl.StringVar(&f.idleTTL, "idle-ttl", "", "stop the server after this long without requests: seconds or a duration (default: never)")
	fl.StringArrayVar(&f.network, "network", nil, "HOST[:PORT] the server must reach, for a command (repeatable; raises its risk to medium)")
	fl.StringVar(&f.workspace, "workspace", "", "what a command does with the workspace: none, read or write")
	fl.StringVar(&f.cwd, "cwd", "", "working directory of a command in the sandbox")
	fl.StringArrayVar(&f.env, "env", nil, "environment variable KEY=VALUE of a command (repeatable)")
	fl.StringVar(&f.scope, "scope", "", "dedicated (default: one sandbox for the server) or ephemeral (a sandbox of its own for each tools/call)")
	fl.StringVar(&f.pinMode, "pin-mode", "", "what a tool whose definition changed does: block (default) or warn (risk low only)")
	fl.DurationVar(&f.callTimeout, "call-timeout", 0, "cancel a call without answer or progress for this long (0: service default, 60s)")
	fl.DurationVar(&f.callCeiling, "call-ceiling", 0, "cancel a call after this long, progress or not (0: service default, 10m)")
	fl.DurationVar(&f.initTimeout, "init-timeout", 0, "how long the server may take to initialize (0: service default, 30s)")
	return cmd
}

// newMCPListCmd builds "genesis mcp ls".
func newMCPListCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List MCP server instances, newest first",
		Args:    exactArgs(0, "no arguments"),
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (client.MCPServerList, error) {
				items, err := c.ListMCPServers(ctx)
				if items == nil {
					items = []client.MCPServer{}
				}
				return client.MCPServerList{Items: items}, err
			}, func(list client.MCPServerList) error {
				now := a.now()
				return printTable(a.stdout, "SERVER\tSTATE\tCATALOG\tRISK\tRUNTIME\tNETWORK\tRESTARTS\tLEASE\tAGE\tCOMMAND", list.Items, func(tw io.Writer, s client.MCPServer) {
					catalog := s.Catalog
					if catalog == "" {
						catalog = "(ad-hoc)"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", s.ID, s.State, catalog, s.Risk, s.Runtime, s.Network,
						s.Restarts, orDash(s.LeaseID), shortDuration(now.Sub(s.CreatedAt)), shellJoin(s.Command))
				})
			})
		}),
	}
}

// newMCPGetCmd builds "genesis mcp get".
func newMCPGetCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "get SERVER",
		Aliases: []string{"show"},
		Short:   "Show one MCP server instance with its risk decision",
		Args:    exactArgs(1, "one MCP server id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			var endpoint string
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.MCPServer, error) {
				s, err := c.GetMCPServer(ctx, args[0])
				if err == nil {
					endpoint = c.MCPServerURL(s.ID)
				}
				return s, err
			}, func(s *client.MCPServer) error {
				return printFields(a.stdout, mcpServerFields(s, endpoint))
			})
		}),
	}
}

// mcpServerFields is the detail view of an instance.
func mcpServerFields(s *client.MCPServer, endpoint string) []field {
	lease := s.LeaseID
	if lease != "" && s.OwnLease {
		lease += " (its own)"
	}
	network := s.Network
	if len(s.Decision.Hosts) > 0 {
		network += ": " + strings.Join(s.Decision.Hosts, ", ")
	}
	var exit, server, ready, idle string
	if s.LastExitCode != nil {
		exit = strconv.Itoa(*s.LastExitCode)
	}
	if s.Server != nil {
		server = strings.TrimSpace(s.Server.Name + " " + s.Server.Version)
	}
	if s.ReadyAt != nil {
		ready = formatTime(*s.ReadyAt)
	}
	if s.IdleTTLSeconds > 0 {
		idle = (time.Duration(s.IdleTTLSeconds) * time.Second).String()
	}
	return []field{
		{"ID", s.ID}, {"State", s.State}, {"Last error", s.LastError}, {"Last exit code", exit},
		{"Restarts", strconv.Itoa(s.Restarts)}, {"Catalog", s.Catalog}, {"Command", shellJoin(s.Command)},
		{"Endpoint", endpoint}, {"Server", server}, {"Protocol", s.ProtocolVersion},
		{"Lease", lease}, {"Sandbox", s.SandboxID}, {"Job", s.JobID}, {"Profile", s.Profile},
		{"Runtime", s.Runtime}, {"Risk", s.Risk}, {"Network", network}, {"Decision", s.Decision.Rule},
		{"Allow", strings.Join(s.Tools.Allow, ", ")}, {"Deny", strings.Join(s.Tools.Deny, ", ")},
		{"Pin mode", s.PinMode}, {"Idle TTL", idle}, {"Created", formatTime(s.CreatedAt)}, {"Ready", ready},
		{"Last used", formatTime(s.LastUsedAt)},
	}
}

// newMCPRemoveCmd builds "genesis mcp rm".
func newMCPRemoveCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "rm SERVER...",
		Aliases: []string{"delete", "stop"},
		Short:   "Stop MCP server instances (and release their own leases)",
		Args: func(cmd *cobra.Command, args []string) error {
			if err := minArgs(1, "at least one MCP server id")(cmd, args); err != nil {
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
				err := c.DeleteMCPServer(ctx, id)
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

// newMCPToolsCmd builds "genesis mcp tools".
func newMCPToolsCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "tools SERVER",
		Short: "List an MCP server's tools as its clients see them (the tool policy applied)",
		Args:  exactArgs(1, "one MCP server id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (client.MCPToolList, error) {
				items, err := c.MCPServerTools(ctx, args[0])
				if items == nil {
					items = []client.MCPTool{}
				}
				return client.MCPToolList{Items: items}, err
			}, func(list client.MCPToolList) error {
				return printTable(a.stdout, "TOOL\tDESCRIPTION", list.Items, func(tw io.Writer, t client.MCPTool) {
					desc := t.Title
					if desc == "" {
						desc = t.Description
					}
					fmt.Fprintf(tw, "%s\t%s\n", t.Name, orDash(firstLine(desc, 80)))
				})
			})
		}),
	}
}

// firstLine is the first line of s, cut to at most n runes.
func firstLine(s string, n int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// newMCPPinsCmd builds "genesis mcp pins".
func newMCPPinsCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "pins SERVER",
		Short: "List an MCP server's tool pins and the definitions that changed since",
		Long: `Each tool listed so far is pinned: the SHA-256 of its canonical definition at
its first tools/list. A tool whose definition changed since shows the new hash;
BLOCKED ones are hidden and refused until "genesis mcp approve SERVER TOOL HASH".`,
		Args: exactArgs(1, "one MCP server id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (client.MCPPinList, error) {
				items, err := c.MCPServerPins(ctx, args[0])
				if items == nil {
					items = []client.MCPPin{}
				}
				return client.MCPPinList{Items: items}, err
			}, func(list client.MCPPinList) error {
				return printTable(a.stdout, "TOOL\tPINNED\tHASH\tCHANGED TO\tBLOCKED", list.Items, func(tw io.Writer, p client.MCPPin) {
					changed, blocked := "-", "-"
					if p.Changed != nil {
						changed, blocked = p.Changed.Hash, strconv.FormatBool(p.Changed.Blocked)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Tool, formatTime(p.PinnedAt), p.Hash, changed, blocked)
				})
			})
		}),
	}
}

// newMCPApproveCmd builds "genesis mcp approve".
func newMCPApproveCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "approve SERVER TOOL HASH",
		Short: "Approve a tool's changed definition (HASH from genesis mcp pins) so it is listed and callable again",
		Args:  exactArgs(3, "an MCP server id, a tool name and the changed definition's hash"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.MCPPin, error) {
				return c.ApproveMCPPin(ctx, args[0], args[1], args[2])
			}, func(p *client.MCPPin) error {
				_, err := fmt.Fprintf(a.stdout, "%s %s\n", p.Tool, p.Hash)
				return err
			})
		}),
	}
}

// newMCPApprovalsCmd builds "genesis mcp approvals".
func newMCPApprovalsCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "approvals SERVER",
		Short: "List an MCP server's calls held for a decision (tools matched by --approve), newest first",
		Args:  exactArgs(1, "one MCP server id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (client.MCPApprovalList, error) {
				items, err := c.MCPServerApprovals(ctx, args[0])
				if items == nil {
					items = []client.MCPApproval{}
				}
				return client.MCPApprovalList{Items: items}, err
			}, func(list client.MCPApprovalList) error {
				return printTable(a.stdout, "APPROVAL\tSTATE\tTOOL\tARGS DIGEST\tEXPIRES\tARGUMENTS", list.Items, func(tw io.Writer, ap client.MCPApproval) {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", ap.ID, ap.State, ap.Tool, ap.ArgsDigest, formatTime(ap.ExpiresAt),
						orDash(firstLine(string(ap.Arguments), 60)))
				})
			})
		}),
	}
}

// newMCPDecideCmd builds "genesis mcp decide".
func newMCPDecideCmd(a *app) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "decide SERVER APPROVAL (approve|deny) ARGS_DIGEST [--reason TEXT]",
		Short: "Approve or deny a held call; ARGS_DIGEST (from genesis mcp approvals) binds the decision to its arguments",
		Args:  exactArgs(4, "an MCP server id, an approval id, approve or deny, and the call's argument digest"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			if args[2] != "approve" && args[2] != "deny" {
				return usageErrorf("the decision must be approve or deny, not %q", args[2])
			}
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.MCPApproval, error) {
				return c.DecideMCPApproval(ctx, args[0], args[1], client.MCPApprovalDecision{Decision: args[2], ArgsDigest: args[3], Reason: reason})
			}, func(ap *client.MCPApproval) error {
				_, err := fmt.Fprintf(a.stdout, "%s %s\n", ap.ID, ap.State)
				return err
			})
		}),
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded in the audit log; a denied call's client sees it)")
	return cmd
}

// newMCPCallsCmd builds "genesis mcp calls".
func newMCPCallsCmd(a *app) *cobra.Command {
	var (
		cursor string
		limit  int
	)
	cmd := &cobra.Command{
		Use:   "calls SERVER [--cursor C] [--limit N]",
		Short: "Show an MCP server's call records (tools/call, resources/read, prompts/get), oldest first",
		Args:  exactArgs(1, "one MCP server id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			if limit < 1 || limit > 1000 {
				return usageErrorf("--limit must be between 1 and 1000")
			}
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (client.MCPCallPage, error) {
				items, next, err := c.MCPServerCalls(ctx, args[0], cursor, limit)
				if items == nil {
					items = []client.MCPCallRecord{}
				}
				return client.MCPCallPage{Items: items, NextCursor: next}, err
			}, func(page client.MCPCallPage) error {
				err := printTable(a.stdout, "SEQ\tTIME\tMETHOD\tTOOL\tDECISION\tOUTCOME\tMS\tCLIENT\tRULE", page.Items, func(tw io.Writer, r client.MCPCallRecord) {
					outcome := r.Outcome
					if r.Error != "" {
						outcome += ": " + firstLine(r.Error, 60)
					}
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.Seq, formatTime(r.Time), r.Method, orDash(r.Tool), r.Decision,
						outcome, r.DurationMS, orDash(r.Client), orDash(r.Rule))
				})
				if err == nil && page.NextCursor != "" {
					a.warnf("more records: --cursor %s", page.NextCursor)
				}
				return err
			})
		}),
	}
	cmd.Flags().StringVar(&cursor, "cursor", "", "continue after this cursor (printed when more records follow)")
	cmd.Flags().IntVar(&limit, "limit", 100, "records per page (1-1000)")
	return cmd
}

// newMCPCatalogCmd builds "genesis mcp catalog".
func newMCPCatalogCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "catalog",
		Short: "List the MCP servers genesis mcp run --catalog can start (the operator's and your tenant's)",
		Args:  exactArgs(0, "no arguments"),
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (client.MCPCatalog, error) {
				items, err := c.MCPCatalog(ctx)
				if items == nil {
					items = []client.MCPCatalogEntry{}
				}
				return client.MCPCatalog{Items: items}, err
			}, func(cat client.MCPCatalog) error {
				return printTable(a.stdout, "NAME\tOWNER\tSOURCE\tPROFILE\tNETWORK\tCOMMAND\tDESCRIPTION", cat.Items, func(tw io.Writer, e client.MCPCatalogEntry) {
					network := "none"
					if len(e.Permissions.Network) > 0 {
						network = strings.Join(e.Permissions.Network, ",")
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Name, orDash(e.Owner), e.Source, orDash(e.Profile), network, shellJoin(e.Command),
						orDash(firstLine(e.Description, 60)))
				})
			})
		}),
	}
	add := &cobra.Command{
		Use:   "add FILE",
		Short: "Add an entry to your tenant's own catalog from a JSON file (- for stdin)",
		Long: `FILE holds one entry as POST /v1/mcp/catalog takes it: name, command, and
optionally description, source (registry, unverified — the default — or
ad-hoc), profile, cwd, env, permissions, tools and pins. The entry is your
tenant's alone; genesis mcp run --catalog NAME starts it.`,
		Args: exactArgs(1, "one file"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			var data []byte
			var err error
			if args[0] == "-" {
				data, err = io.ReadAll(a.stdin)
			} else {
				data, err = os.ReadFile(args[0])
			}
			if err != nil {
				return err
			}
			var req client.AddMCPCatalogEntryRequest
			dec := json.NewDecoder(bytes.NewReader(data))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&req); err != nil {
				return usageErrorf("%s is not a catalog entry: %v", args[0], err)
			}
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (*client.MCPCatalogEntry, error) {
				return c.AddMCPCatalogEntry(ctx, req)
			}, func(e *client.MCPCatalogEntry) error { _, err := fmt.Fprintln(a.stdout, e.Name); return err })
		}),
	}
	rm := &cobra.Command{
		Use:     "rm NAME",
		Aliases: []string{"delete"},
		Short:   "Remove an entry of your tenant's own catalog (running instances are unaffected)",
		Args:    exactArgs(1, "one entry name"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return callAndPrint(a, cmd, func(ctx context.Context, c *client.Client) (struct{}, error) {
				return struct{}{}, c.DeleteMCPCatalogEntry(ctx, args[0])
			}, func(struct{}) error { _, err := fmt.Fprintln(a.stdout, args[0]); return err })
		}),
	}
	cmd.AddCommand(add, rm)
	return cmd
}

// newMCPStdioCmd builds "genesis mcp stdio".
func newMCPStdioCmd(a *app) *cobra.Command {
	var token string
	cmd := &cobra.Command{
		Use:   "stdio SERVER [--token TOKEN]",
		Short: "Bridge a stdio-only MCP client to an MCP server's endpoint",
		Long: `Reads JSON-RPC messages, one per line, from stdin and writes the answers and
the server's messages to stdout, speaking Streamable HTTP to the instance's
endpoint with its token (--token, default $GENESIS_MCP_TOKEN). Configure a
stdio-only MCP client to run "genesis mcp stdio SERVER" as its server. Ends
when stdin ends (after the answers still due) or the endpoint goes away.`,
		Args: exactArgs(1, "one MCP server id"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			if token == "" {
				token = a.getenv(envMCPToken)
			}
			if token == "" {
				return usageErrorf("--token is required (or $%s): the token genesis mcp run printed", envMCPToken)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			local := &sdk.IOTransport{Reader: io.NopCloser(a.stdin), Writer: nopWriteCloser{a.stdout}}
			return a.bridgeMCP(cmd.Context(), local, c.MCPServerURL(args[0]), token,
				"the endpoint answered 401: the server is gone, or the token is not the one genesis mcp run printed for it")
		}),
	}
	cmd.Flags().StringVar(&token, "token", "", "the instance's token (gmcp_…; default $"+envMCPToken+")")
	return cmd
}

// newMCPServeCmd builds "genesis mcp serve".
func newMCPServeCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "serve",
		Short: "Serve the service's own sandbox tools to a stdio-only MCP client",
		Long: `Bridges a stdio-only MCP client to the service's own MCP server of sandbox
tools (/v1/mcp/sandbox: create_sandbox, exec, run_code, files, jobs) with the
API key (--api-key or $GENESIS_API_KEY). Configure the client's server command
as "genesis mcp serve" with GENESIS_URL and GENESIS_API_KEY in its environment.
The session ends when stdin ends, and the sandboxes it created without keep end
with it. See docs/mcp-server.md.`,
		Args: exactArgs(0, "no arguments"),
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			key := a.key()
			if key == "" {
				return usageErrorf("an API key is required: --api-key or $%s", client.EnvAPIKey)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			local := &sdk.IOTransport{Reader: io.NopCloser(a.stdin), Writer: nopWriteCloser{a.stdout}}
			return a.bridgeMCP(cmd.Context(), local, c.SandboxMCPURL(), key, "the service answered 401: the API key is not valid")
		}),
	}
}

// nopWriteCloser is an io.WriteCloser whose Close does nothing (stdout
// stays open).
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// statelessMCPProtocol is the first protocol revision that carries its
// version in every message; a session of an older one sends the version
// negotiated at initialize as a header.
const statelessMCPProtocol = "2026-07-28"

// bridgeMCP copies JSON-RPC messages between local (a stdio client) and
// the Streamable HTTP endpoint until local ends (and the answers still due
// have come) or the endpoint's connection fails.
//
// The HTTP side is the SDK's client transport used as a bare connection:
// it keeps the session id, turns each message into a POST and reads the
// answer streams (resuming a broken one by Last-Event-ID). Server messages
// outside a request's stream (the standalone GET stream) are not relayed:
// the service's proxy sends none today.
func (a *app) bridgeMCP(ctx context.Context, local sdk.Transport, endpoint, token, refusedMsg string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	base := a.http
	if base == nil {
		base = http.DefaultClient
	}
	rt := &mcpAuthTransport{base: base.Transport, token: token, endpoint: endpoint}
	if rt.base == nil {
		rt.base = http.DefaultTransport
	}
	hc := &http.Client{Transport: rt, CheckRedirect: base.CheckRedirect, Jar: base.Jar}
	remote, err := (&sdk.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc}).Connect(ctx)
	if err != nil {
		return err
	}
	in, err := local.Connect(ctx)
	if err != nil {
		remote.Close()
		return err
	}
	defer in.Close()

	b := &mcpBridge{pending: map[any]bool{}, changed: make(chan struct{}, 1), setVersion: rt.setVersion,
		explain: func(err error) string {
			switch {
			case rt.refused():
				return refusedMsg
			case isUnreachable(err):
				return fmt.Sprintf("cannot reach the Genesis service at %s: %v", a.baseURL(), dialCause(err))
			}
			return ""
		}}
	downDone := make(chan error, 1)
	go func() { downDone <- b.down(ctx, remote, in) }()
	upDone := make(chan error, 1)
	go func() {
		err := b.up(ctx, in, remote)
		b.writes.Wait()
		upDone <- err
	}()
	var upErr, downErr error
	downEnded := false
	select {
	case upErr = <-upDone:
		// stdin ended: wait for the answers still due, unless the
		// endpoint goes away first.
		for upErr == nil && !downEnded && b.due() > 0 {
			select {
			case downErr = <-downDone:
				downEnded = true
			case <-b.changed:
			case <-ctx.Done():
				upErr = ctx.Err()
			}
		}
	case downErr = <-downDone:
		// The endpoint went away: stop reading stdin, and let the calls
		// being sent answer their errors.
		downEnded = true
		cancel()
		<-upDone
	}
	_ = remote.Close() // ends the session (DELETE)
	if !downEnded {
		cancel()
		downErr = <-downDone
	}
	switch {
	case rt.refused():
		return errors.New(refusedMsg)
	case upErr != nil && !errors.Is(upErr, context.Canceled):
		return upErr
	case downErr != nil && !errors.Is(downErr, context.Canceled) && !errors.Is(downErr, io.EOF):
		return fmt.Errorf("the endpoint's connection ended: %w", downErr)
	}
	return nil
}

// mcpBridge is the state of one stdio bridge: the calls whose answers are
// still due.
type mcpBridge struct {
	writes  sync.WaitGroup
	mu      sync.Mutex
	pending map[any]bool // ids of calls sent and not answered
	initID  any          // id of the initialize call, until its answer
	initRes chan struct{}
	changed chan struct{}
	// setVersion takes the protocol version the initialize answer gave.
	setVersion func(string)
	// explain is what to tell the client of a call the endpoint did not
	// take (a refused key, a service that cannot be reached); empty: the
	// transport's own error.
	explain func(error) string
}

func (b *mcpBridge) due() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending)
}

func (b *mcpBridge) signal() {
	select {
	case b.changed <- struct{}{}:
	default:
	}
}

// up copies local's messages to the endpoint. initialize is sent alone
// and its answer awaited (the session id and protocol version come with
// it); notifications and answers are sent in order; other calls are sent
// concurrently, so a long call does not hold up the next.
func (b *mcpBridge) up(ctx context.Context, in, remote sdk.Connection) error {
	for {
		msg, err := in.Read(ctx)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		req, isCall := msg.(*jsonrpc.Request)
		if !isCall || !req.IsCall() {
			if err := remote.Write(ctx, msg); err != nil {
				return err
			}
			continue
		}
		id := req.ID.Raw()
		b.mu.Lock()
		b.pending[id] = true
		var wait chan struct{}
		if req.Method == "initialize" {
			wait = make(chan struct{})
			b.initID, b.initRes = id, wait
		}
		b.mu.Unlock()
		if wait != nil {
			if err := b.send(ctx, in, remote, req); err != nil {
				return err
			}
			select {
			case <-wait:
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		b.writes.Add(1)
		go func() {
			defer b.writes.Done()
			_ = b.send(ctx, in, remote, req)
		}()
	}
}

// send writes a call; one the endpoint refuses is answered to local with
// the error, so the client does not wait for it.
func (b *mcpBridge) send(ctx context.Context, in, remote sdk.Connection, req *jsonrpc.Request) error {
	err := remote.Write(ctx, req)
	if err == nil {
		return nil
	}
	var je *jsonrpc.Error
	if msg := b.explain(err); msg != "" {
		je = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg}
	} else if !errors.As(err, &je) {
		je = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	b.answered(req.ID.Raw(), nil)
	// Answered even when the bridge is ending (ctx done), so the client
	// hears of it.
	_ = in.Write(context.WithoutCancel(ctx), &jsonrpc.Response{ID: req.ID, Error: je})
	return err
}

// answered forgets a due call; res is its answer, if any. The answer to
// initialize gives the protocol version, before anything else is sent.
func (b *mcpBridge) answered(id any, res *jsonrpc.Response) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.pending, id)
	if b.initRes != nil && id == b.initID {
		if res != nil && res.Error == nil {
			var r struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			if json.Unmarshal(res.Result, &r) == nil && r.ProtocolVersion != "" {
				b.setVersion(r.ProtocolVersion)
			}
		}
		close(b.initRes)
		b.initRes = nil
	}
	b.signal()
}

// down copies the endpoint's messages to local.
func (b *mcpBridge) down(ctx context.Context, remote, in sdk.Connection) error {
	for {
		msg, err := remote.Read(ctx)
		if err != nil {
			b.mu.Lock()
			if b.initRes != nil { // no answer to initialize is coming
				close(b.initRes)
				b.initRes = nil
			}
			b.mu.Unlock()
			b.signal()
			return err
		}
		if resp, ok := msg.(*jsonrpc.Response); ok {
			b.answered(resp.ID.Raw(), resp)
		}
		if err := in.Write(ctx, msg); err != nil {
			return err
		}
	}
}

// mcpAuthTransport adds the instance token to requests to the endpoint
// (and to no other host), and the negotiated protocol version to those of
// a session that lack it.
type mcpAuthTransport struct {
	base     http.RoundTripper
	token    string
	endpoint string

	mu      sync.Mutex
	version string
	status  int // the last status 401, if any
}

func (t *mcpAuthTransport) setVersion(v string) {
	t.mu.Lock()
	t.version = v
	t.mu.Unlock()
}

func (t *mcpAuthTransport) refused() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.status == http.StatusUnauthorized
}

func (t *mcpAuthTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.String() != t.endpoint {
		return t.base.RoundTrip(r) // a redirect elsewhere never gets the token
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	t.mu.Lock()
	v := t.version
	t.mu.Unlock()
	if v != "" && v < statelessMCPProtocol && r.Header.Get("Mcp-Protocol-Version") == "" {
		r.Header.Set("Mcp-Protocol-Version", v)
	}
	resp, err := t.base.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		t.mu.Lock()
		t.status = resp.StatusCode
		t.mu.Unlock()
	}
	return resp, err
}
