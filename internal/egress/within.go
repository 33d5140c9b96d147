package egress

import (
	"cmp"
	"slices"
	"strings"
)

// Within reports whether a sandbox with policy p reaches nothing that want
// does not allow. No network is within anything. An allowlist is within
// an allowlist with a rule for each of its hosts (written the same, a
// wildcard included) and ports; one with a CIDR rule is not. A tool-proxy
// policy is within one that lists each of its tools. An internal-api
// policy is never judged within another: the answer errs towards refusing.
func (p Policy) Within(want Policy) bool {
	if p.Mode == ModeNone || p.Mode == "" {
		return true
	}
	if p.Mode != want.Mode {
		return false
	}
	switch p.Mode {
	case ModeAllowlist:
		for _, r := range p.Allow {
			if r.CIDR != "" {
				return false
			}
			for _, port := range r.ports() {
				if !slices.ContainsFunc(want.Allow, func(w Rule) bool {
					return w.Host == r.Host && slices.Contains(w.ports(), port)
				}) {
					return false
				}
			}
		}
		return true
	case ModeToolProxy:
		for _, t := range p.Tools {
			if !slices.Contains(want.Tools, t) {
				return false
			}
		}
		return true
	}
	return false
}

// String is the policy in a few words, for messages: "none", "allowlist"
// with its hosts (or CIDRs), "internal-api" with its endpoints,
// "tool-proxy" with its tools.
func (p Policy) String() string {
	switch p.Mode {
	case ModeAllowlist:
		var hosts []string
		for _, r := range p.Allow {
			hosts = append(hosts, cmp.Or(r.Host, r.CIDR))
		}
		return "allowlist " + strings.Join(hosts, ",")
	case ModeToolProxy:
		return "tool-proxy " + strings.Join(p.Tools, ",")
	case ModeInternalAPI:
		return "internal-api " + strings.Join(p.Endpoints, ",")
	case "":
		return "none"
	}
	return string(p.Mode)
}

// ports are the ports r opens.
func (r Rule) ports() []int {
	if len(r.Ports) == 0 {
		return DefaultPorts
	}
	return r.Ports
}
