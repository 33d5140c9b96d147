package egress

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"genesis.dev/sandbox/internal/errdefs"
)

// Mode is how a sandbox may reach the network.
type Mode string

// Network modes.
const (
	// ModeNone gives the sandbox no interface but loopback.
	ModeNone Mode = "none"
	// ModeAllowlist allows listed host names (exact or "*.suffix"), and IP
	// literals inside listed CIDRs, on listed ports.
	ModeAllowlist Mode = "allowlist"
	// ModeInternalAPI allows only operator-configured internal endpoints
	// picked by name.
	ModeInternalAPI Mode = "internal-api"
	// ModeToolProxy allows only plain HTTP to http://<tool>.tool/, which
	// the gateway forwards to the operator's upstream with the credential
	// injected.
	ModeToolProxy Mode = "tool-proxy"
)

// Valid reports whether m is a known mode.
func (m Mode) Valid() bool {
	switch m {
	case ModeNone, ModeAllowlist, ModeInternalAPI, ModeToolProxy:
		return true
	}
	return false
}

// Networked reports whether a sandbox in mode m has a network interface
// (and so a gateway) at all.
func (m Mode) Networked() bool { return m.Valid() && m != ModeNone }

// Policy is one sandbox's network policy as it appears on the wire, in
// profiles and in tenant defaults.
type Policy struct {
	Mode Mode `json:"mode" yaml:"mode"`
	// Allow lists the rules of ModeAllowlist.
	Allow []Rule `json:"allow,omitempty" yaml:"allow,omitempty"`
	// Endpoints names operator internal endpoints (ModeInternalAPI).
	Endpoints []string `json:"endpoints,omitempty" yaml:"endpoints,omitempty"`
	// Tools names operator tools (ModeToolProxy).
	Tools []string `json:"tools,omitempty" yaml:"tools,omitempty"`
}

// Rule is one allowlist entry: either Host (an exact name or "*.suffix") or
// CIDR (matched against IP literals only), with the ports it opens.
type Rule struct {
	Host string `json:"host,omitempty" yaml:"host,omitempty"`
	CIDR string `json:"cidr,omitempty" yaml:"cidr,omitempty"`
	// Ports the rule opens; empty means DefaultPorts.
	Ports []int `json:"ports,omitempty" yaml:"ports,omitempty"`
}

// DefaultPorts are the ports a rule without "ports" opens: HTTP and HTTPS.
var DefaultPorts = []int{80, 443}

// maxPortsPerRule bounds one rule's port list.
const maxPortsPerRule = 64

// ToolDomain is the pseudo top-level domain of tool-proxy names: a sandbox
// reaches tool T at http://T.tool/.
const ToolDomain = "tool"

// Problem codes of policy validation (all of class ErrInvalidArgument).
const (
	CodeInvalidPolicy    = "invalid_network_policy"
	CodeTooManyRules     = "network_too_many_rules"
	CodeCIDRTooBroad     = "network_cidr_too_broad"
	CodeCIDRDenied       = "network_cidr_denied"
	CodeUnknownEndpoint  = "unknown_internal_endpoint"
	CodeUnknownTool      = "unknown_tool"
	CodeInvalidOperator  = "invalid_network_config"
	CodeSecretUnreadable = "network_secret_unavailable"
)

func invalid(code, format string, args ...any) error {
	return errdefs.WithCode(code, errdefs.Invalid("network policy: %s", fmt.Sprintf(format, args...)))
}

// Normalize validates p against the operator configuration op and returns
// its canonical form: host names lower-cased without a trailing dot, CIDRs
// masked, port lists sorted and defaulted, names de-duplicated. An empty
// mode means ModeNone. Every failure is of class ErrInvalidArgument with one
// of the Code* problem codes; p itself is never changed.
func (p Policy) Normalize(op OperatorConfig) (Policy, error) {
	op = op.WithDefaults()
	out := Policy{Mode: p.Mode}
	if out.Mode == "" {
		out.Mode = ModeNone
	}
	if !out.Mode.Valid() {
		return Policy{}, invalid(CodeInvalidPolicy, "unknown mode %q (want none, allowlist, internal-api or tool-proxy)", p.Mode)
	}
	if out.Mode != ModeAllowlist && len(p.Allow) > 0 {
		return Policy{}, invalid(CodeInvalidPolicy, "allow rules need mode allowlist, not %q", out.Mode)
	}
	if out.Mode != ModeInternalAPI && len(p.Endpoints) > 0 {
		return Policy{}, invalid(CodeInvalidPolicy, "endpoints need mode internal-api, not %q", out.Mode)
	}
	if out.Mode != ModeToolProxy && len(p.Tools) > 0 {
		return Policy{}, invalid(CodeInvalidPolicy, "tools need mode tool-proxy, not %q", out.Mode)
	}
	if n := len(p.Allow) + len(p.Endpoints) + len(p.Tools); n > op.MaxRules {
		return Policy{}, invalid(CodeTooManyRules, "%d rules exceed the limit of %d", n, op.MaxRules)
	}
	switch out.Mode {
	case ModeAllowlist:
		seen := map[string]bool{}
		for i, r := range p.Allow {
			nr, err := r.normalize(op)
			if err != nil {
				return Policy{}, fmt.Errorf("allow[%d]: %w", i, err)
			}
			key := nr.Host + "|" + nr.CIDR + "|" + fmt.Sprint(nr.Ports)
			if !seen[key] {
				seen[key] = true
				out.Allow = append(out.Allow, nr)
			}
		}
	case ModeInternalAPI:
		if len(p.Endpoints) == 0 {
			return Policy{}, invalid(CodeInvalidPolicy, "mode internal-api needs at least one endpoint")
		}
		for _, name := range p.Endpoints {
			if _, ok := op.InternalEndpoints[name]; !ok {
				return Policy{}, invalid(CodeUnknownEndpoint, "unknown internal endpoint %q (known: %s)", name, keys(op.InternalEndpoints))
			}
		}
		out.Endpoints = sortedUnique(p.Endpoints)
	case ModeToolProxy:
		if len(p.Tools) == 0 {
			return Policy{}, invalid(CodeInvalidPolicy, "mode tool-proxy needs at least one tool")
		}
		for _, name := range p.Tools {
			if _, ok := op.Tools[name]; !ok {
				return Policy{}, invalid(CodeUnknownTool, "unknown tool %q (known: %s)", name, keys(op.Tools))
			}
		}
		out.Tools = sortedUnique(p.Tools)
	}
	return out, nil
}

// Validate reports whether p is acceptable under op (see Normalize).
func (p Policy) Validate(op OperatorConfig) error {
	_, err := p.Normalize(op)
	return err
}

func (r Rule) normalize(op OperatorConfig) (Rule, error) {
	var out Rule
	switch {
	case r.Host != "" && r.CIDR != "":
		return Rule{}, invalid(CodeInvalidPolicy, "a rule has either host or cidr, not both")
	case r.Host != "":
		h, err := normalizeHostPattern(r.Host)
		if err != nil {
			return Rule{}, err
		}
		out.Host = h
	case r.CIDR != "":
		pfx, err := tenantCIDR(r.CIDR, op)
		if err != nil {
			return Rule{}, err
		}
		out.CIDR = pfx.String()
	default:
		return Rule{}, invalid(CodeInvalidPolicy, "a rule needs host or cidr")
	}
	ports, err := normalizePorts(r.Ports)
	if err != nil {
		return Rule{}, err
	}
	out.Ports = ports
	return out, nil
}

func normalizePorts(ports []int) ([]int, error) {
	if len(ports) == 0 {
		return slices.Clone(DefaultPorts), nil
	}
	if len(ports) > maxPortsPerRule {
		return nil, invalid(CodeTooManyRules, "%d ports in one rule exceed the limit of %d", len(ports), maxPortsPerRule)
	}
	for _, p := range ports {
		if p < 1 || p > 65535 {
			return nil, invalid(CodeInvalidPolicy, "port %d is outside 1-65535", p)
		}
	}
	return sortedUnique(ports), nil
}

// normalizeHostPattern checks an allowlist host: a DNS name, or "*." and a
// name of at least two labels. It refuses IP literals (use cidr), wildcards
// anywhere but the leading label, and the reserved tool domain.
func normalizeHostPattern(s string) (string, error) {
	h := strings.ToLower(strings.TrimSuffix(s, "."))
	name, wild := strings.CutPrefix(h, "*.")
	if _, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
		return "", invalid(CodeInvalidPolicy, "host %q is an IP address; use a cidr rule", s)
	}
	if err := checkDomain(name); err != nil {
		return "", invalid(CodeInvalidPolicy, "host %q: %v", s, err)
	}
	if wild && !strings.Contains(name, ".") {
		return "", invalid(CodeInvalidPolicy, "host %q: a wildcard needs a suffix of at least two labels", s)
	}
	if name == ToolDomain || strings.HasSuffix(name, "."+ToolDomain) {
		return "", invalid(CodeInvalidPolicy, "host %q: the .%s domain is reserved for tool-proxy", s, ToolDomain)
	}
	return h, nil
}

// checkDomain reports why name (lower case, no trailing dot) is not a valid
// DNS host name: labels of 1-63 letters, digits and inner hyphens (or
// underscores), 253 characters in all, and a last label that is not all
// digits.
func checkDomain(name string) error {
	if name == "" {
		return fmt.Errorf("empty name")
	}
	if len(name) > 253 {
		return fmt.Errorf("longer than 253 characters")
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" {
			return fmt.Errorf("empty label")
		}
		if len(l) > 63 {
			return fmt.Errorf("label longer than 63 characters")
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return fmt.Errorf("label %q starts or ends with a hyphen", l)
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				if c == '*' {
					return fmt.Errorf("a wildcard is allowed only as a leading \"*.\"")
				}
				return fmt.Errorf("invalid character %q", c)
			}
		}
	}
	last := labels[len(labels)-1]
	if strings.Trim(last, "0123456789") == "" {
		return fmt.Errorf("the last label is numeric")
	}
	return nil
}

// CanonicalName lower-cases a host name and drops its trailing dot; it
// returns ok false when the result is not a valid host name.
func CanonicalName(s string) (string, bool) {
	h := strings.ToLower(strings.TrimSuffix(s, "."))
	return h, checkDomain(h) == nil
}

// tenantCIDR parses a tenant CIDR rule and refuses what a tenant may not
// open: the whole address space, prefixes broader than the operator minimum
// and anything overlapping the always-denied set, except a single address
// the operator mapped itself (static_hosts, internal endpoints).
func tenantCIDR(s string, op OperatorConfig) (netip.Prefix, error) {
	pfx, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil {
		if a, aerr := netip.ParseAddr(strings.TrimSpace(s)); aerr == nil {
			pfx = netip.PrefixFrom(a, a.BitLen())
		} else {
			return netip.Prefix{}, invalid(CodeInvalidPolicy, "cidr %q: %v", s, err)
		}
	}
	pfx = netip.PrefixFrom(pfx.Addr().Unmap(), pfx.Bits()-unmapShift(pfx)).Masked()
	if pfx.Bits() == 0 {
		return netip.Prefix{}, invalid(CodeCIDRTooBroad, "cidr %q would open the whole address space", s)
	}
	min := op.TenantMinPrefix
	if pfx.Addr().Is6() {
		min += 32 // a /16 for IPv4 corresponds to a /48 site for IPv6
	}
	if pfx.Bits() < min {
		return netip.Prefix{}, invalid(CodeCIDRTooBroad, "cidr %q is broader than the allowed /%d", s, min)
	}
	if pfx.IsSingleIP() && op.staticExempt(pfx.Addr()) {
		return pfx, nil
	}
	if d, ok := AlwaysDenied.overlaps(pfx); ok {
		return netip.Prefix{}, invalid(CodeCIDRDenied, "cidr %q overlaps the always-denied range %s", s, d)
	}
	return pfx, nil
}

func unmapShift(p netip.Prefix) int {
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		return 96
	}
	return 0
}

func sortedUnique[T interface{ ~int | ~string }](in []T) []T {
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}

func keys[V any](m map[string]V) string {
	if len(m) == 0 {
		return "none configured"
	}
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return strings.Join(ks, ", ")
}
