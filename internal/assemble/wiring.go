package assemble

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"genesis.dev/sandbox/internal/compat/e2b"
	"genesis.dev/sandbox/internal/compat/opensandbox"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/egress"
	"genesis.dev/sandbox/internal/mcp"
	"genesis.dev/sandbox/internal/mcp/servers"
	"genesis.dev/sandbox/internal/ports"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/skills"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/tenancy"
	"genesis.dev/sandbox/internal/tenant"
)

// What the parts are given beyond each other: the settings in the shape
// each package takes them, and the small adapters between packages.

// portProxy builds the port proxy with the preview-link key of the data
// dir (made on first start).
func portProxy(ctl *control.Service, keyLive func(ctx context.Context, keyTenant, keyID string) error, set *config.Config, hint func(string, int) string, now func() time.Time, log *slog.Logger) (*ports.Proxy, error) {
	keyFile := set.Ports.LinkKeyFile
	if !filepath.IsAbs(keyFile) {
		keyFile = filepath.Join(set.DataDir, keyFile)
	}
	key, err := ports.LoadOrCreateKey(keyFile)
	if err != nil {
		return nil, err
	}
	signer, err := ports.NewSigner(key)
	if err != nil {
		return nil, err
	}
	return ports.New(ports.Config{
		Sandboxes: ports.FromControl(ctl), Signer: signer, KeyLive: keyLive, MaxLinkTTL: set.Ports.MaxLinkTTL, DialTimeout: set.Ports.DialTimeout,
		PortHint: hint, Now: now, Logger: log,
	})
}

// buildAdapters builds the compatibility adapters the settings enable.
// Their per-sandbox tokens are keyed by a file of the data dir, so that
// they survive a restart (and instances sharing a store accept each
// other's when they share the file).
func (s *Stack) buildAdapters(set *config.Config, log *slog.Logger) error {
	if !set.E2B.Enabled && !set.OpenSandbox.Enabled {
		return nil
	}
	tokenKey, err := ports.LoadOrCreateKey(filepath.Join(set.DataDir, "keys", "compat-token.key"))
	if err != nil {
		return err
	}
	if set.E2B.Enabled {
		var a *e2b.Adapter
		a, err = e2b.New(e2b.Config{Control: s.Control, KeyLive: s.Tenancy.KeyLive, Jobs: s.Jobs, Files: s.Files, Settings: set.E2B, MaxJobTimeoutMS: set.Limits.MaxExecTimeoutMS,
			TokenKey: tokenKey, PreviewDomain: s.Previews.Domain(), Snapshots: s.Snapshots, Logger: log,
			ProxyPort: func(w http.ResponseWriter, r *http.Request, tenant, sandboxID string, port int, path, prefix string) {
				// The host-based form (no prefix) is the port's own origin.
				s.Ports.ServeHTTP(w, r, ports.Request{Tenant: tenant, SandboxID: sandboxID, Port: port, Path: path, Prefix: prefix, OwnOrigin: prefix == ""}, a.WriteError)
			}})
		if err != nil {
			return err
		}
		s.E2B = a
	}
	if set.OpenSandbox.Enabled {
		oc := opensandbox.Config{Control: s.Control, KeyLive: s.Tenancy.KeyLive, Jobs: s.Jobs, Files: s.Files, Settings: set.OpenSandbox, MaxJobTimeoutMS: set.Limits.MaxExecTimeoutMS,
			TokenKey: tokenKey, Preview: s.openPreview, Snapshots: s.Snapshots, Logger: log}
		if s.Volumes != nil {
			oc.Volumes = s.Volumes
		}
		if u, err := url.Parse(set.PublicBaseURL()); err == nil {
			oc.PublicHost = u.Host
		}
		if s.OpenSandbox, err = opensandbox.New(oc); err != nil {
			return err
		}
	}
	return nil
}

// openPreview makes a preview link of a sandbox port of by's tenant, with
// by's key, for the OpenSandbox endpoint of a port: the port's origin host
// and the token, valid for the longest link time.
func (s *Stack) openPreview(ctx context.Context, by tenant.Principal, sandboxID string, port int) (host, token string, err error) {
	token, _, err = s.Ports.NewLink(ctx, by, sandboxID, port, s.Ports.MaxLinkTTL())
	if err != nil {
		return "", "", err
	}
	return s.Previews.Host(sandboxID, port), token, nil
}

// mcpCatalog is the configured catalog as the manager takes it.
func mcpCatalog(c config.MCP) []servers.Entry {
	var out []servers.Entry
	for _, e := range c.Catalog {
		out = append(out, servers.Entry{
			Name: e.Name, Description: e.Description, Source: servers.Source(e.Source), Profile: e.Profile,
			Command: e.Command, Cwd: e.Cwd, Env: e.Env, Transport: e.Transport, Port: e.Port, Path: e.Path,
			Permissions: servers.Permissions{Network: e.Permissions.Network, Workspace: e.Permissions.Workspace, Tools: e.Permissions.Tools,
				EnvSecrets: e.Permissions.EnvSecrets},
			Tools: mcp.Rules{Allow: e.Tools.Allow, Deny: e.Tools.Deny, Approve: e.Tools.Approve},
			Pins:  catalogPins(e.Pins),
		})
	}
	return out
}

// catalogPins are an entry's configured pins, by tool name.
func catalogPins(pins map[string]string) []mcp.Pin {
	var out []mcp.Pin
	for _, tool := range slices.Sorted(maps.Keys(pins)) {
		out = append(out, mcp.Pin{Tool: tool, Hash: pins[tool]})
	}
	return out
}

// operatorSecret reads an operator secret (network.secrets) by name.
func operatorSecret(c config.Network) func(string) (string, error) {
	return func(name string) (string, error) {
		src, ok := c.Secrets[name]
		if !ok {
			return "", fmt.Errorf("no secret %q in network.secrets", name)
		}
		return egress.ReadSecret(src)
	}
}

// mcpAudit stores each MCP call as an audit record: action "mcp
// tools/call", target "instance/tool", the decision and outcome in code,
// the session as actor.
func mcpAudit(audit *tenancy.Service, log *slog.Logger) func(string, string, mcp.CallRecord) {
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
		if len(rec.Secrets) > 0 {
			target += " secrets=" + strings.Join(rec.Secrets, ",")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := audit.RecordAudit(ctx, &tenant.AuditRecord{
			Time: rec.Time, Actor: "mcp-session:" + rec.Session, Tenant: tn, Action: "mcp " + rec.Method,
			Target: target, Status: status, Code: code,
		})
		if err != nil {
			log.Warn("recording an MCP call in the audit log", "instance", instance, "err", err)
		}
	}
}

// skillLimits are the configured archive limits, defaults filled in.
func skillLimits(c config.Skills) skills.Limits {
	l := skills.DefaultLimits
	if c.MaxArchiveBytes > 0 {
		l.MaxArchiveBytes = c.MaxArchiveBytes
	}
	if c.MaxTotalBytes > 0 {
		l.MaxTotalBytes = c.MaxTotalBytes
	}
	if c.MaxFiles > 0 {
		l.MaxFiles = c.MaxFiles
	}
	return l
}

// skillsAudit records what the skills MCP server runs: action
// "skills-mcp run_skill_script", target "skill@revision/script job=…", the
// refusal's code if it was refused.
func skillsAudit(audit *tenancy.Service, log *slog.Logger) func(context.Context, string, string, string, string) {
	return func(ctx context.Context, tn, action, target, code string) {
		status := http.StatusOK
		if code != "" {
			status = http.StatusBadRequest
		}
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := audit.RecordAudit(actx, &tenant.AuditRecord{Time: time.Now().UTC(), Actor: "skills-mcp", Tenant: tn, Action: action,
			Target: target, Status: status, Code: code}); err != nil {
			log.Warn("recording a skills MCP run in the audit log", "target", target, "err", err)
		}
	}
}

// mcpServeAudit records the tool calls of the service's own MCP server in
// the audit log.
func mcpServeAudit(audit *tenancy.Service, log *slog.Logger) func(context.Context, *tenant.AuditRecord) {
	return func(ctx context.Context, rec *tenant.AuditRecord) {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := audit.RecordAudit(actx, rec); err != nil {
			log.Warn("recording an MCP tool call in the audit log", "action", rec.Action, "target", rec.Target, "err", err)
		}
	}
}

// mcpCatalogStore keeps the tenants' own MCP catalog entries in the store.
type mcpCatalogStore struct{ st store.MCPCatalog }

func (c mcpCatalogStore) CreateEntry(ctx context.Context, tenant, name string, at time.Time, doc []byte) error {
	return c.st.CreateMCPCatalogEntry(ctx, &store.MCPCatalogEntry{Tenant: tenant, Name: name, CreatedAt: at, Doc: doc})
}

func (c mcpCatalogStore) GetEntry(ctx context.Context, tenant, name string) ([]byte, error) {
	e, err := c.st.GetMCPCatalogEntry(ctx, tenant, name)
	if err != nil {
		return nil, err
	}
	return e.Doc, nil
}

func (c mcpCatalogStore) ListEntries(ctx context.Context, tenant string) ([][]byte, error) {
	list, err := c.st.ListMCPCatalogEntries(ctx, tenant)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(list))
	for i, e := range list {
		out[i] = e.Doc
	}
	return out, nil
}

func (c mcpCatalogStore) DeleteEntry(ctx context.Context, tenant, name string) error {
	return c.st.DeleteMCPCatalogEntry(ctx, tenant, name)
}

// mcpNetworkEvents pages a sandbox's egress events for the MCP call log.
func mcpNetworkEvents(ctl *control.Service) func(ctx context.Context, tenant, sandboxID string, cursor int64, limit int) ([]sandbox.NetworkEvent, int64, error) {
	return func(ctx context.Context, tenant, sandboxID string, cursor int64, limit int) ([]sandbox.NetworkEvent, int64, error) {
		p, err := ctl.ListNetworkEvents(ctx, tenant, sandboxID, cursor, limit)
		return p.Events, p.Next, err
	}
}

// mcpDialPort connects to a port inside a sandbox through its agent, for
// MCP servers of transport http (in a sandbox reserved to the server, if
// it holds operator secrets).
func mcpDialPort(ctl *control.Service) func(ctx context.Context, tenant, sandboxID, reservation string, port int) (net.Conn, error) {
	return func(ctx context.Context, tenant, sandboxID, reservation string, port int) (net.Conn, error) {
		at, err := ctl.Attach(ctx, tenant, sandboxID, control.AttachOptions{Reservation: reservation})
		if err != nil {
			return nil, err
		}
		defer at.Release()
		return at.Agent.DialPort(ctx, port)
	}
}
