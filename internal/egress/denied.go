package egress

import (
	"net/netip"
)

// PrefixSet is a list of address ranges.
type PrefixSet []netip.Prefix

// AlwaysDenied are the ranges no tenant rule can open and the gateway never
// dials, whatever a name resolves to: "this network", loopback, link-local
// (with the cloud metadata address 169.254.169.254), the private and shared
// ranges, unique-local IPv6, multicast, reserved and broadcast. The Docker
// bridge gateways and the host's own addresses are added per sandbox by the
// service (Resolved.Deny). Only addresses the operator mapped itself
// (static_hosts, internal endpoints) are exempt.
var AlwaysDenied = PrefixSet{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("240.0.0.0/4"), // reserved, with 255.255.255.255
	netip.MustParsePrefix("::/128"),
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("::ffff:0:0/96"), // IPv4-mapped: checked unmapped instead
	netip.MustParsePrefix("64:ff9b::/96"),  // NAT64 would reach IPv4 ranges above
	netip.MustParsePrefix("fc00::/7"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("ff00::/8"),
}

// Contains reports whether a (unmapped) lies in one of the ranges and which.
func (s PrefixSet) Contains(a netip.Addr) (netip.Prefix, bool) {
	a = a.Unmap()
	for _, p := range s {
		if p.Contains(a) {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

func (s PrefixSet) overlaps(q netip.Prefix) (netip.Prefix, bool) {
	for _, p := range s {
		if p.Overlaps(q) {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// ParsePrefixes parses addresses ("192.0.2.1") and ranges ("192.0.2.0/24").
func ParsePrefixes(list []string) (PrefixSet, error) {
	out := make(PrefixSet, 0, len(list))
	for _, s := range list {
		p, err := parseAddrOrPrefix(s)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func parseAddrOrPrefix(s string) (netip.Prefix, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return p.Masked(), nil
}
