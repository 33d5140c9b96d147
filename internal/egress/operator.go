package egress

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"strings"

	"genesis.dev/sandbox/internal/errdefs"
)

// OperatorConfig is the operator's network configuration (config key
// "network"). Tenants pick from what it defines; they cannot add to it.
type OperatorConfig struct {
	// UpstreamNetworks are extra Docker networks the gateway joins to reach
	// upstreams (tests put their stand-in for the internet there).
	UpstreamNetworks []string `json:"upstream_networks,omitempty" yaml:"upstream_networks"`
	// StaticHosts maps names to addresses before any DNS lookup. Meant for
	// testing and split-horizon set-ups: these addresses bypass the
	// always-denied check for the name they are mapped from.
	StaticHosts map[string]string `json:"static_hosts,omitempty" yaml:"static_hosts"`
	// InternalEndpoints are the services internal-api sandboxes may reach.
	InternalEndpoints map[string]InternalEndpoint `json:"internal_endpoints,omitempty" yaml:"internal_endpoints"`
	// Tools are the upstreams tool-proxy sandboxes reach as http://<name>.tool/.
	Tools map[string]Tool `json:"tools,omitempty" yaml:"tools"`
	// Secrets are where credentials come from; tools refer to them by name.
	Secrets map[string]SecretSource `json:"secrets,omitempty" yaml:"secrets"`
	// MaxRules caps the rules of one policy (default 256).
	MaxRules int `json:"max_rules,omitempty" yaml:"max_rules"`
	// TenantMinPrefix is the broadest IPv4 prefix length a tenant CIDR may
	// have (default 16; IPv6 adds 32). Never below 8.
	TenantMinPrefix int `json:"tenant_min_prefix,omitempty" yaml:"tenant_min_prefix"`
}

// InternalEndpoint is an operator-run service: the name sandboxes use, where
// it really is, and on which ports.
type InternalEndpoint struct {
	Host      string   `json:"host" yaml:"host"`
	Addresses []string `json:"addresses" yaml:"addresses"`
	Ports     []int    `json:"ports,omitempty" yaml:"ports"`
}

// Tool is an upstream reached through the tool proxy with a credential.
type Tool struct {
	// Upstream is an absolute http or https URL; the sandbox's request path
	// is appended to its path.
	Upstream   string     `json:"upstream" yaml:"upstream"`
	Credential Credential `json:"credential" yaml:"credential"`
}

// Credential kinds.
const (
	CredentialBearer = "bearer" // Authorization: Bearer <secret>
	CredentialHeader = "header" // <Header>: <secret>
	CredentialBasic  = "basic"  // Authorization: Basic base64(<Username>:<secret>)
)

// Credential says how the tool proxy injects a secret.
type Credential struct {
	Type     string `json:"type" yaml:"type"`
	Header   string `json:"header,omitempty" yaml:"header"`
	Username string `json:"username,omitempty" yaml:"username"`
	// Secret names an entry of OperatorConfig.Secrets.
	Secret string `json:"secret" yaml:"secret"`
}

// SecretSource is where a secret's value is read: exactly one of an
// environment variable of the service or a file.
type SecretSource struct {
	Env  string `json:"env,omitempty" yaml:"env"`
	File string `json:"file,omitempty" yaml:"file"`
}

// Defaults of OperatorConfig.
const (
	DefaultMaxRules        = 256
	DefaultTenantMinPrefix = 16
)

// WithDefaults fills zero limits with their defaults.
func (c OperatorConfig) WithDefaults() OperatorConfig {
	if c.MaxRules == 0 {
		c.MaxRules = DefaultMaxRules
	}
	if c.TenantMinPrefix == 0 {
		c.TenantMinPrefix = DefaultTenantMinPrefix
	}
	return c
}

// namePattern is the shape of endpoint, tool and secret names.
var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// headerName is an HTTP header field name (RFC 9110 token).
var headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// Validate checks the operator configuration and names the first offending
// key (class ErrInvalidArgument, code invalid_network_config).
func (c OperatorConfig) Validate() error {
	bad := func(key, format string, args ...any) error {
		return errdefs.WithCode(CodeInvalidOperator,
			fmt.Errorf("config: network.%s: %s: %w", key, fmt.Sprintf(format, args...), errdefs.ErrInvalidArgument))
	}
	c = c.WithDefaults()
	if c.MaxRules < 1 || c.MaxRules > 10000 {
		return bad("max_rules", "must be in [1, 10000], got %d", c.MaxRules)
	}
	if c.TenantMinPrefix < 8 || c.TenantMinPrefix > 32 {
		return bad("tenant_min_prefix", "must be in [8, 32], got %d", c.TenantMinPrefix)
	}
	for name, ip := range c.StaticHosts {
		if h, ok := CanonicalName(name); !ok || h != name {
			return bad("static_hosts."+name, "not a lower-case host name")
		}
		if _, err := netip.ParseAddr(ip); err != nil {
			return bad("static_hosts."+name, "%q is not an IP address", ip)
		}
	}
	for name, e := range c.InternalEndpoints {
		key := "internal_endpoints." + name
		if !namePattern.MatchString(name) {
			return bad(key, "names are lowercase letters, digits and dashes")
		}
		if h, ok := CanonicalName(e.Host); !ok || h != e.Host {
			return bad(key+".host", "%q is not a lower-case host name", e.Host)
		}
		if len(e.Addresses) == 0 {
			return bad(key+".addresses", "must list at least one address")
		}
		for _, a := range e.Addresses {
			if _, err := netip.ParseAddr(a); err != nil {
				return bad(key+".addresses", "%q is not an IP address", a)
			}
		}
		for _, p := range e.Ports {
			if p < 1 || p > 65535 {
				return bad(key+".ports", "port %d is outside 1-65535", p)
			}
		}
	}
	for name, t := range c.Tools {
		key := "tools." + name
		if !namePattern.MatchString(name) {
			return bad(key, "names are lowercase letters, digits and dashes")
		}
		u, err := url.Parse(t.Upstream)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return bad(key+".upstream", "must be an absolute http or https URL without credentials, query or fragment")
		}
		cr := t.Credential
		switch cr.Type {
		case CredentialBearer, CredentialBasic:
		case CredentialHeader:
			if !headerName.MatchString(cr.Header) {
				return bad(key+".credential.header", "type header needs a valid header name")
			}
		default:
			return bad(key+".credential.type", "must be bearer, header or basic, got %q", cr.Type)
		}
		if cr.Type == CredentialBasic && (cr.Username == "" || strings.Contains(cr.Username, ":")) {
			return bad(key+".credential.username", "type basic needs a username without ':'")
		}
		if _, ok := c.Secrets[cr.Secret]; !ok {
			return bad(key+".credential.secret", "unknown secret %q", cr.Secret)
		}
	}
	for name, s := range c.Secrets {
		if !namePattern.MatchString(name) {
			return bad("secrets."+name, "names are lowercase letters, digits and dashes")
		}
		if (s.Env == "") == (s.File == "") {
			return bad("secrets."+name, "needs exactly one of env or file")
		}
	}
	return nil
}

// staticExempt reports whether a is the address of a static_hosts entry.
func (c OperatorConfig) staticExempt(a netip.Addr) bool {
	for _, s := range c.StaticHosts {
		if b, err := netip.ParseAddr(s); err == nil && b.Unmap() == a.Unmap() {
			return true
		}
	}
	return false
}

// Resolve builds the per-sandbox configuration the gateway needs for policy
// p (already normalized): the static host map, the internal endpoints and
// tools p names (tools with their secret values read through read, or
// ReadSecret when read is nil), and the extra denied addresses deny (the
// Docker bridge gateways and the host's own addresses, which the gateway
// cannot see from its container). Nothing p does not name is included.
func (c OperatorConfig) Resolve(p Policy, deny []string, read func(SecretSource) (string, error)) (Resolved, error) {
	if read == nil {
		read = ReadSecret
	}
	if _, err := ParsePrefixes(deny); err != nil {
		return Resolved{}, fmt.Errorf("network: deny list: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	r := Resolved{StaticHosts: c.StaticHosts, Deny: deny}
	for _, name := range p.Endpoints {
		e, ok := c.InternalEndpoints[name]
		if !ok {
			return Resolved{}, invalid(CodeUnknownEndpoint, "unknown internal endpoint %q", name)
		}
		if r.InternalEndpoints == nil {
			r.InternalEndpoints = map[string]InternalEndpoint{}
		}
		r.InternalEndpoints[name] = e
	}
	for _, name := range p.Tools {
		t, ok := c.Tools[name]
		if !ok {
			return Resolved{}, invalid(CodeUnknownTool, "unknown tool %q", name)
		}
		src, ok := c.Secrets[t.Credential.Secret]
		if !ok {
			return Resolved{}, invalid(CodeUnknownTool, "tool %q: unknown secret %q", name, t.Credential.Secret)
		}
		v, err := read(src)
		if err != nil {
			return Resolved{}, errdefs.WithCode(CodeSecretUnreadable,
				fmt.Errorf("network: tool %q: secret %q: %v: %w", name, t.Credential.Secret, err, errdefs.ErrUnavailable))
		}
		if r.Tools == nil {
			r.Tools = map[string]ResolvedTool{}
		}
		r.Tools[name] = ResolvedTool{Upstream: t.Upstream, Type: t.Credential.Type, Header: t.Credential.Header,
			Username: t.Credential.Username, Secret: v}
	}
	return r, nil
}

// ReadSecret reads a secret from the service's environment or a file (one
// trailing newline dropped). An empty value is an error.
func ReadSecret(s SecretSource) (string, error) {
	var v string
	switch {
	case s.Env != "":
		v = os.Getenv(s.Env)
		if v == "" {
			return "", fmt.Errorf("environment variable %s is not set", s.Env)
		}
	case s.File != "":
		b, err := os.ReadFile(s.File)
		if err != nil {
			return "", err
		}
		v = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		if v == "" {
			return "", fmt.Errorf("file %s is empty", s.File)
		}
	default:
		return "", fmt.Errorf("no source")
	}
	return v, nil
}

// HostAddresses lists this host's interface addresses that the
// always-denied set does not already cover (typically its public
// addresses), for the deny list the service passes to Resolve: the gateway,
// in its own container, cannot see the host's interfaces. The Docker bridge
// gateways are host interfaces in private ranges, already denied.
func HostAddresses() ([]string, error) {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("network: host addresses: %w", err)
	}
	var out []string
	for _, a := range as {
		p, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		if _, denied := AlwaysDenied.Contains(p.Addr()); !denied {
			out = append(out, p.Addr().Unmap().String())
		}
	}
	return out, nil
}
