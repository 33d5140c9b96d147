package egress

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"genesis.dev/sandbox/internal/errdefs"
)

// Reasons recorded with every decision.
const (
	ReasonAllowed         = "allowed"
	ReasonNameNotAllowed  = "name_not_allowed"
	ReasonPortNotAllowed  = "port_not_allowed"
	ReasonLiteralDenied   = "ip_literal_not_allowed"
	ReasonAddressDenied   = "address_denied"
	ReasonNoAddress       = "no_address"
	ReasonModeNone        = "mode_none"
	ReasonUnknownSandbox  = "unknown_sandbox"
	ReasonBadRequest      = "bad_request"
	ReasonUpstreamFailed  = "upstream_failed"
	ReasonNoServerName    = "no_server_name"
	ReasonUnsupportedType = "unsupported_query"
)

// Decision is the verdict on one lookup or connection attempt.
type Decision struct {
	Allow  bool
	Reason string
	// Addrs are the addresses that may be dialled (connections only): the
	// resolved addresses minus the denied ones.
	Addrs []netip.Addr
}

func deny(reason string) Decision { return Decision{Reason: reason} }

// Rules is one sandbox's configuration compiled for fast decisions. It is
// immutable; a policy update compiles a new Rules.
type Rules struct {
	mode      Mode
	hosts     []hostRule
	cidrs     []cidrRule
	endpoints map[string]endpointRule // by host name
	tools     map[string]ResolvedTool // by "<tool>.tool"
	static    map[string]netip.Addr
	staticIPs map[netip.Addr]bool
	deny      PrefixSet
}

type hostRule struct {
	pattern string
	ports   []int
}

type cidrRule struct {
	prefix netip.Prefix
	ports  []int
}

type endpointRule struct {
	addrs []netip.Addr
	ports []int
}

// Compile checks the shape of a sandbox configuration pushed by the service
// (which validated the policy against the operator limits) and compiles it.
// own are the gateway's own addresses, always denied as destinations.
func Compile(cfg SandboxConfig, own []netip.Addr) (*Rules, error) {
	bad := func(format string, args ...any) error {
		return errdefs.WithCode(CodeInvalidPolicy, fmt.Errorf("sandbox config: %s: %w", fmt.Sprintf(format, args...), errdefs.ErrInvalidArgument))
	}
	p, res := cfg.Policy, cfg.Resolved
	if !p.Mode.Valid() {
		return nil, bad("unknown mode %q", p.Mode)
	}
	r := &Rules{mode: p.Mode, endpoints: map[string]endpointRule{}, tools: map[string]ResolvedTool{},
		static: map[string]netip.Addr{}, staticIPs: map[netip.Addr]bool{}}
	for name, ip := range res.StaticHosts {
		a, err := netip.ParseAddr(ip)
		if err != nil {
			return nil, bad("static host %q: %v", name, err)
		}
		r.static[strings.ToLower(name)] = a.Unmap()
		r.staticIPs[a.Unmap()] = true
	}
	extra, err := ParsePrefixes(res.Deny)
	if err != nil {
		return nil, bad("deny: %v", err)
	}
	r.deny = slices.Concat(AlwaysDenied, extra)
	for _, a := range own {
		r.deny = append(r.deny, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	for i, rule := range p.Allow {
		ports := rule.Ports
		if len(ports) == 0 {
			ports = DefaultPorts
		}
		switch {
		case rule.Host != "":
			h, err := normalizeHostPattern(rule.Host)
			if err != nil {
				return nil, bad("allow[%d]: %v", i, err)
			}
			r.hosts = append(r.hosts, hostRule{pattern: h, ports: ports})
		case rule.CIDR != "":
			pfx, err := parseAddrOrPrefix(rule.CIDR)
			if err != nil {
				return nil, bad("allow[%d]: %v", i, err)
			}
			r.cidrs = append(r.cidrs, cidrRule{prefix: pfx, ports: ports})
		default:
			return nil, bad("allow[%d]: needs host or cidr", i)
		}
	}
	for _, name := range p.Endpoints {
		e, ok := res.InternalEndpoints[name]
		if !ok {
			return nil, bad("endpoint %q is not in the resolved configuration", name)
		}
		er := endpointRule{ports: e.Ports}
		if len(er.ports) == 0 {
			er.ports = DefaultPorts
		}
		for _, s := range e.Addresses {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return nil, bad("endpoint %q: %v", name, err)
			}
			er.addrs = append(er.addrs, a.Unmap())
		}
		r.endpoints[strings.ToLower(e.Host)] = er
	}
	for _, name := range p.Tools {
		t, ok := res.Tools[name]
		if !ok {
			return nil, bad("tool %q is not in the resolved configuration", name)
		}
		r.tools[name+"."+ToolDomain] = t
	}
	return r, nil
}

// Mode is the compiled policy's mode.
func (r *Rules) Mode() Mode { return r.mode }

// Tool returns the tool served under host name ("<tool>.tool").
func (r *Rules) Tool(name string) (ResolvedTool, bool) {
	t, ok := r.tools[name]
	return t, ok
}

// MatchHost reports whether name (canonical) matches pattern: equal to an
// exact pattern, or for "*.suffix" ending in ".suffix" with at least one
// more label (the bare suffix itself does not match).
func MatchHost(pattern, name string) bool {
	if suffix, ok := strings.CutPrefix(pattern, "*."); ok {
		return len(name) > len(suffix)+1 && strings.HasSuffix(name, suffix) && name[len(name)-len(suffix)-1] == '.'
	}
	return pattern == name
}

// AllowName is the DNS-stage decision: may the sandbox resolve name at all
// (on some port)? name must be canonical (see CanonicalName).
func (r *Rules) AllowName(name string) Decision {
	switch r.mode {
	case ModeAllowlist:
		for _, h := range r.hosts {
			if MatchHost(h.pattern, name) {
				return Decision{Allow: true, Reason: ReasonAllowed}
			}
		}
	case ModeInternalAPI:
		if _, ok := r.endpoints[name]; ok {
			return Decision{Allow: true, Reason: ReasonAllowed}
		}
	case ModeToolProxy:
		if _, ok := r.tools[name]; ok {
			return Decision{Allow: true, Reason: ReasonAllowed}
		}
	case ModeNone:
		return deny(ReasonModeNone)
	}
	return deny(ReasonNameNotAllowed)
}

// Fixed returns the operator-mapped addresses of name, if any: an internal
// endpoint of the policy, or a static host. The gateway uses them instead
// of DNS.
func (r *Rules) Fixed(name string) ([]netip.Addr, bool) {
	if e, ok := r.endpoints[name]; ok {
		return e.addrs, true
	}
	if a, ok := r.static[name]; ok {
		return []netip.Addr{a}, true
	}
	return nil, false
}

// Decide is the connection-stage decision for name:port (name canonical;
// empty for an IP literal, which is then addrs[0]) whose name resolved to
// addrs. It applies the policy (DecidePort), then removes every address in
// the always-denied set, the sandbox's extra deny list and the gateway's own
// addresses, except addresses the operator mapped to this very name (static
// hosts, internal endpoints). Tool-proxy names are decided by AllowName;
// their upstream's addresses by FilterUpstream.
func (r *Rules) Decide(name string, port int, addrs []netip.Addr) Decision {
	if name == "" {
		if r.mode == ModeNone {
			return deny(ReasonModeNone)
		}
		return r.decideLiteral(port, addrs)
	}
	if d := r.DecidePort(name, port); !d.Allow {
		return d
	}
	return r.filter(name, addrs)
}

// DecidePort is the policy stage of Decide for a name, before any lookup:
// is name allowed on port? The gateway asks it first so that a name the
// policy refuses is never resolved.
func (r *Rules) DecidePort(name string, port int) Decision {
	switch r.mode {
	case ModeNone:
		return deny(ReasonModeNone)
	case ModeAllowlist:
		matched := false
		for _, h := range r.hosts {
			if MatchHost(h.pattern, name) {
				matched = true
				if slices.Contains(h.ports, port) {
					return Decision{Allow: true, Reason: ReasonAllowed}
				}
			}
		}
		if matched {
			return deny(ReasonPortNotAllowed)
		}
	case ModeInternalAPI:
		if e, ok := r.endpoints[name]; ok {
			if slices.Contains(e.ports, port) {
				return Decision{Allow: true, Reason: ReasonAllowed}
			}
			return deny(ReasonPortNotAllowed)
		}
	}
	return deny(ReasonNameNotAllowed)
}

func (r *Rules) decideLiteral(port int, addrs []netip.Addr) Decision {
	if len(addrs) != 1 || !addrs[0].IsValid() {
		return deny(ReasonNoAddress)
	}
	a := addrs[0].Unmap()
	portDenied := false
	switch r.mode {
	case ModeAllowlist:
		for _, c := range r.cidrs {
			if c.prefix.Contains(a) {
				if slices.Contains(c.ports, port) {
					return r.filterLiteral(a)
				}
				portDenied = true
			}
		}
	case ModeInternalAPI:
		for _, e := range r.endpoints {
			if slices.Contains(e.addrs, a) {
				if slices.Contains(e.ports, port) {
					return Decision{Allow: true, Reason: ReasonAllowed, Addrs: []netip.Addr{a}}
				}
				portDenied = true
			}
		}
	}
	if portDenied {
		return deny(ReasonPortNotAllowed)
	}
	return deny(ReasonLiteralDenied)
}

// filterLiteral applies the deny set to an IP literal a CIDR rule allowed;
// only static-host addresses are exempt.
func (r *Rules) filterLiteral(a netip.Addr) Decision {
	if _, denied := r.deny.Contains(a); denied && !r.staticIPs[a] {
		return deny(ReasonAddressDenied)
	}
	return Decision{Allow: true, Reason: ReasonAllowed, Addrs: []netip.Addr{a}}
}

// filter keeps the addresses of name that are not denied.
func (r *Rules) filter(name string, addrs []netip.Addr) Decision {
	if len(addrs) == 0 {
		return deny(ReasonNoAddress)
	}
	exempt, _ := r.Fixed(name)
	var ok []netip.Addr
	for _, a := range addrs {
		a = a.Unmap()
		if _, denied := r.deny.Contains(a); denied && !slices.Contains(exempt, a) {
			continue
		}
		ok = append(ok, a)
	}
	if len(ok) == 0 {
		return deny(ReasonAddressDenied)
	}
	return Decision{Allow: true, Reason: ReasonAllowed, Addrs: ok}
}

// FilterUpstream applies the deny set to the addresses a tool's upstream
// host resolved to (static-host addresses of that host are exempt).
func (r *Rules) FilterUpstream(host string, addrs []netip.Addr) Decision {
	return r.filter(host, addrs)
}
