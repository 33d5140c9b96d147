package config

import (
	"fmt"
	"strings"

	"genesis.dev/sandbox/internal/sandbox"
)

// MCP configures MCP server instances (POST /v1/mcp/servers).
type MCP struct {
	// MaxRiskLevel is the ceiling: an instance whose risk is above it is
	// refused, never relabelled (default high).
	MaxRiskLevel sandbox.RiskLevel `yaml:"max_risk_level"`
	// AllowedOrigins are the browser origins the endpoints accept; a
	// request with any other Origin header is refused.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// Catalog lists the servers a request may name by "catalog".
	Catalog []MCPEntry `yaml:"catalog"`
}

// MCPEntry is one catalogued MCP server.
type MCPEntry struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// Source is builtin, verified, registry, unverified or ad-hoc: it
	// sets the server's least risk.
	Source  string            `yaml:"source"`
	Profile string            `yaml:"profile"`
	Command []string          `yaml:"command"`
	Cwd     string            `yaml:"cwd"`
	Env     map[string]string `yaml:"env"`
	// Transport is stdio (the default) or http: the server serves
	// Streamable HTTP on Port at Path (default /mcp) in its sandbox.
	Transport   string         `yaml:"transport"`
	Port        int            `yaml:"port"`
	Path        string         `yaml:"path"`
	Permissions MCPPermissions `yaml:"permissions"`
	Tools       MCPToolRules   `yaml:"tools"`
	// Pins are the reviewed hashes of its tools' definitions (tool →
	// sha256:…, as GET /v1/mcp/servers/{id}/pins shows them): a server
	// whose tool differs from its pin is blocked from the first
	// tools/list, not only after a change.
	Pins map[string]string `yaml:"pins"`
}

// MCPPermissions are what a catalogued server declares it needs.
type MCPPermissions struct {
	// Network lists the hosts it must reach (an egress allowlist of
	// exactly those); empty: no network.
	Network []string `yaml:"network"`
	// Workspace is none, read or write.
	Workspace string `yaml:"workspace"`
	// Tools names operator tools (network.tools) it calls through the
	// egress gateway, which holds their credentials.
	Tools []string `yaml:"tools"`
	// EnvSecrets are operator secrets (network.secrets) the server takes
	// as raw environment variables, "VAR=secret" or "secret": risk high,
	// named in every call record.
	EnvSecrets []string `yaml:"env_secrets"`
}

// MCPToolRules are path.Match patterns of tool names.
type MCPToolRules struct {
	Allow []string `yaml:"allow"`
	Deny  []string `yaml:"deny"`
	// Approve are tools whose every call waits for a person's decision.
	Approve []string `yaml:"approve"`
}

func (c *Config) validateMCP(v *problems) {
	bad := v.add
	if r := c.MCP.MaxRiskLevel; r != "" && r.Rank() < 0 {
		bad("mcp.max_risk_level", "unknown risk level %q", r)
	}
	seen := map[string]bool{}
	for i, e := range c.MCP.Catalog {
		key := fmt.Sprintf("mcp.catalog[%d]", i)
		switch {
		case !profileName.MatchString(e.Name):
			bad(key+".name", "%q is not a valid name (lowercase letters, digits, dashes)", e.Name)
		case seen[e.Name]:
			bad(key, "duplicate catalog entry %q", e.Name)
		}
		seen[e.Name] = true
		if len(e.Command) == 0 {
			bad(key+".command", "is required")
		}
		for _, es := range e.Permissions.EnvSecrets {
			_, name, _ := strings.Cut(es, "=")
			if !strings.Contains(es, "=") {
				name = es
			}
			if _, ok := c.Network.Secrets[name]; !ok {
				bad(key+".permissions.env_secrets", "no secret %q in network.secrets", name)
			}
		}
		for tool, h := range e.Pins {
			if !strings.HasPrefix(h, "sha256:") || len(h) != len("sha256:")+64 {
				bad(key+".pins."+tool, "must be sha256:<64 hex digits>, got %q", h)
			}
		}
		switch e.Source {
		case "builtin", "verified", "registry", "unverified", "ad-hoc":
		default:
			bad(key+".source", "must be builtin, verified, registry, unverified or ad-hoc, got %q", e.Source)
		}
	}
}
