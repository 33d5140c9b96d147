package main

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/mcp"
	"genesis.dev/sandbox/internal/mcp/servers"
	"genesis.dev/sandbox/internal/tenant"
)

// mcpCatalog is the configured catalog as the manager takes it.
func mcpCatalog(c config.MCP) []servers.Entry {
	var out []servers.Entry
	for _, e := range c.Catalog {
		out = append(out, servers.Entry{
			Name: e.Name, Description: e.Description, Source: servers.Source(e.Source), Profile: e.Profile,
			Command: e.Command, Cwd: e.Cwd, Env: e.Env,
			Permissions: servers.Permissions{Network: e.Permissions.Network, Workspace: e.Permissions.Workspace, Tools: e.Permissions.Tools},
			Tools:       mcp.Rules{Allow: e.Tools.Allow, Deny: e.Tools.Deny},
		})
	}
	return out
}

// mcpAudit stores each MCP call as an audit record: action "mcp
// tools/call", target "instance/tool", the decision and outcome in code,
// the session as actor.
func mcpAudit(ctl *control.Service, log *slog.Logger) func(string, string, mcp.CallRecord) {
	return func(tn, instance string, rec mcp.CallRecord) {
		status := http.StatusOK
		code := ""
		switch {
		case rec.Decision != "allowed":
			status, code = http.StatusForbidden, "mcp_"+rec.Decision+": "+rec.Rule
		case rec.Outcome == mcp.OutcomeTimeout:
			status, code = http.StatusGatewayTimeout, "mcp_timeout"
		case rec.Outcome == mcp.OutcomeCancelled:
			status, code = 499, "mcp_cancelled"
		case rec.Outcome == mcp.OutcomeError:
			status, code = http.StatusBadGateway, "mcp_error"
		case rec.Outcome == mcp.OutcomeToolError:
			code = "mcp_tool_error"
		}
		target := instance + "/" + rec.Tool
		if rec.ArgsDigest != "" {
			target += " args=" + rec.ArgsDigest
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := ctl.RecordAudit(ctx, &tenant.AuditRecord{
			Time: rec.Time, Actor: "mcp-session:" + rec.Session, Tenant: tn, Action: "mcp " + rec.Method,
			Target: target, Status: status, Code: code,
		})
		if err != nil {
			log.Warn("recording an MCP call in the audit log", "instance", instance, "err", err)
		}
	}
}
