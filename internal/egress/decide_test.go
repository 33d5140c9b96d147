package egress

import (
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
)

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}

func compile(t *testing.T, p Policy, deny ...string) *Rules {
	t.Helper()
	op := testOperator()
	op.MaxRules = 0 // the default
	np, err := p.Normalize(op)
	if err != nil {
		t.Fatal(err)
	}
	res, err := op.Resolve(np, deny, func(SecretSource) (string, error) { return "tok", nil })
	if err != nil {
		t.Fatal(err)
	}
	r, err := Compile(SandboxConfig{LocalIP: "192.0.2.1", Policy: np, Resolved: res}, addrs("198.51.100.1"))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestDecide(t *testing.T) {
	t.Parallel()
	allow := compile(t, Policy{Mode: ModeAllowlist, Allow: []Rule{
		{Host: "api.example.com", Ports: []int{443}},
		{Host: "*.pypi.org"},
		{Host: "web.test"},
		{Host: "rebind.example.com"},
		{CIDR: "203.0.113.0/24", Ports: []int{443}},
		{CIDR: "172.30.0.5"},
	}}, "203.0.113.99")
	internal := compile(t, Policy{Mode: ModeInternalAPI, Endpoints: []string{"billing"}})
	tool := compile(t, Policy{Mode: ModeToolProxy, Tools: []string{"github"}})
	none := compile(t, Policy{Mode: ModeNone})

	cases := []struct {
		name   string
		r      *Rules
		host   string
		port   int
		addrs  []netip.Addr
		reason string
		dial   []netip.Addr
	}{
		{"exact allowed", allow, "api.example.com", 443, addrs("93.184.216.34"), ReasonAllowed, addrs("93.184.216.34")},
		{"exact wrong port", allow, "api.example.com", 80, addrs("93.184.216.34"), ReasonPortNotAllowed, nil},
		{"other name", allow, "evil.example.com", 443, addrs("93.184.216.34"), ReasonNameNotAllowed, nil},
		{"wildcard sub", allow, "files.pypi.org", 443, addrs("151.101.0.223"), ReasonAllowed, addrs("151.101.0.223")},
		{"wildcard deep", allow, "a.b.pypi.org", 80, addrs("151.101.0.223"), ReasonAllowed, addrs("151.101.0.223")},
		{"wildcard bare", allow, "pypi.org", 443, addrs("151.101.0.223"), ReasonNameNotAllowed, nil},
		{"wildcard lookalike", allow, "evilpypi.org", 443, addrs("151.101.0.223"), ReasonNameNotAllowed, nil},
		{"wildcard default ports only", allow, "files.pypi.org", 22, addrs("151.101.0.223"), ReasonPortNotAllowed, nil},
		{"rebinding to metadata", allow, "rebind.example.com", 443, addrs("169.254.169.254"), ReasonAddressDenied, nil},
		{"rebinding to loopback", allow, "rebind.example.com", 443, addrs("127.0.0.1", "::1"), ReasonAddressDenied, nil},
		{"rebinding to private", allow, "rebind.example.com", 443, addrs("10.0.0.8"), ReasonAddressDenied, nil},
		{"rebinding to cgnat", allow, "rebind.example.com", 443, addrs("100.64.1.1"), ReasonAddressDenied, nil},
		{"rebinding to ula", allow, "rebind.example.com", 443, addrs("fd12::1"), ReasonAddressDenied, nil},
		{"rebinding to link-local v6", allow, "rebind.example.com", 443, addrs("fe80::1"), ReasonAddressDenied, nil},
		{"rebinding mapped", allow, "rebind.example.com", 443, addrs("::ffff:169.254.169.254"), ReasonAddressDenied, nil},
		{"rebinding to gateway itself", allow, "rebind.example.com", 443, addrs("198.51.100.1"), ReasonAddressDenied, nil},
		{"rebinding to extra deny", allow, "rebind.example.com", 443, addrs("203.0.113.99"), ReasonAddressDenied, nil},
		{"mixed keeps public", allow, "rebind.example.com", 443, addrs("10.0.0.8", "93.184.216.34"), ReasonAllowed, addrs("93.184.216.34")},
		{"static host exempt", allow, "web.test", 80, addrs("172.30.0.5"), ReasonAllowed, addrs("172.30.0.5")},
		{"static host other addr", allow, "web.test", 80, addrs("172.30.0.6"), ReasonAddressDenied, nil},
		{"static addr under other name", allow, "rebind.example.com", 443, addrs("172.30.0.5"), ReasonAddressDenied, nil},
		{"no addresses", allow, "api.example.com", 443, nil, ReasonNoAddress, nil},
		{"literal in cidr", allow, "", 443, addrs("203.0.113.7"), ReasonAllowed, addrs("203.0.113.7")},
		{"literal in cidr wrong port", allow, "", 80, addrs("203.0.113.7"), ReasonPortNotAllowed, nil},
		{"literal outside cidr", allow, "", 443, addrs("93.184.216.34"), ReasonLiteralDenied, nil},
		{"literal in cidr but extra-denied", allow, "", 443, addrs("203.0.113.99"), ReasonAddressDenied, nil},
		{"literal static host", allow, "", 80, addrs("172.30.0.5"), ReasonAllowed, addrs("172.30.0.5")},
		{"literal metadata", allow, "", 80, addrs("169.254.169.254"), ReasonLiteralDenied, nil},
		{"endpoint", internal, "billing.internal", 8443, addrs("10.1.2.3"), ReasonAllowed, addrs("10.1.2.3")},
		{"endpoint wrong port", internal, "billing.internal", 443, addrs("10.1.2.3"), ReasonPortNotAllowed, nil},
		{"endpoint literal", internal, "", 8443, addrs("10.1.2.3"), ReasonAllowed, addrs("10.1.2.3")},
		{"internal other name", internal, "api.example.com", 443, addrs("93.184.216.34"), ReasonNameNotAllowed, nil},
		{"internal other literal", internal, "", 443, addrs("10.1.2.4"), ReasonLiteralDenied, nil},
		{"tool mode no direct", tool, "api.example.com", 443, addrs("93.184.216.34"), ReasonNameNotAllowed, nil},
		{"tool mode no literal", tool, "", 443, addrs("93.184.216.34"), ReasonLiteralDenied, nil},
		{"none", none, "api.example.com", 443, addrs("93.184.216.34"), ReasonModeNone, nil},
	}
	for _, c := range cases {
		d := c.r.Decide(c.host, c.port, c.addrs)
		if d.Reason != c.reason || d.Allow != (c.reason == ReasonAllowed) || !equalAddrs(d.Addrs, c.dial) {
			t.Errorf("%s: Decide(%q, %d, %v) = %+v, want %s dialling %v", c.name, c.host, c.port, c.addrs, d, c.reason, c.dial)
		}
	}

	names := []struct {
		r    *Rules
		name string
		ok   bool
	}{
		{allow, "api.example.com", true}, {allow, "x.pypi.org", true}, {allow, "pypi.org", false},
		{allow, "example.com", false}, {internal, "billing.internal", true}, {internal, "web.test", false},
		{tool, "github.tool", true}, {tool, "gitlab.tool", false}, {tool, "api.github.example", false},
		{none, "api.example.com", false},
	}
	for _, n := range names {
		if d := n.r.AllowName(n.name); d.Allow != n.ok {
			t.Errorf("AllowName(%q) in %s = %+v, want allow=%v", n.name, n.r.Mode(), d, n.ok)
		}
	}
	if a, ok := internal.Fixed("billing.internal"); !ok || !equalAddrs(a, addrs("10.1.2.3")) {
		t.Errorf("Fixed(billing.internal) = %v %v", a, ok)
	}
	if d := tool.FilterUpstream("web.test", addrs("172.30.0.5")); !d.Allow {
		t.Errorf("static upstream refused: %+v", d)
	}
	if d := tool.FilterUpstream("api.github.example", addrs("127.0.0.1")); d.Allow {
		t.Errorf("loopback upstream allowed: %+v", d)
	}
}

func equalAddrs(a, b []netip.Addr) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// matchHostReference is MatchHost written label by label.
func matchHostReference(pattern, name string) bool {
	if !strings.HasPrefix(pattern, "*.") {
		return pattern == name
	}
	want := strings.Split(pattern[2:], ".")
	got := strings.Split(name, ".")
	if len(got) <= len(want) {
		return false
	}
	if strings.Join(got[:len(got)-len(want)], ".") == "" {
		return false
	}
	tail := got[len(got)-len(want):]
	for i := range want {
		if want[i] != tail[i] {
			return false
		}
	}
	return true
}

func FuzzMatchHost(f *testing.F) {
	for _, s := range [][2]string{
		{"*.pypi.org", "files.pypi.org"}, {"*.pypi.org", "pypi.org"}, {"*.pypi.org", "evilpypi.org"},
		{"api.example.com", "api.example.com"}, {"*.a.b", ".a.b"}, {"*.b", "a..b"}, {"*.", "x."},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		if got, want := MatchHost(pattern, name), matchHostReference(pattern, name); got != want {
			t.Fatalf("MatchHost(%q, %q) = %v, reference says %v", pattern, name, got, want)
		}
		if MatchHost(pattern, name) && strings.HasPrefix(pattern, "*.") && !strings.HasSuffix(name, pattern[1:]) {
			t.Fatalf("MatchHost(%q, %q) matched a name outside the suffix", pattern, name)
		}
	})
}

// TestMatchHostProperties checks the matcher on random names built from a
// small alphabet, so that near-misses (shared suffixes, extra dots) are
// frequent.
func TestMatchHostProperties(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	label := func() string { return []string{"a", "b", "ab", "pypi", "org", "x-y"}[rng.IntN(6)] }
	name := func(n int) string {
		ls := make([]string, n)
		for i := range ls {
			ls[i] = label()
		}
		return strings.Join(ls, ".")
	}
	for range 20000 {
		suffix := name(1 + rng.IntN(3))
		n := name(1 + rng.IntN(5))
		pattern := "*." + suffix
		if got, want := MatchHost(pattern, n), matchHostReference(pattern, n); got != want {
			t.Fatalf("MatchHost(%q, %q) = %v, reference %v", pattern, n, got, want)
		}
		if !MatchHost(pattern, label()+"."+suffix) {
			t.Fatalf("%q does not match a direct child", pattern)
		}
		if MatchHost(pattern, suffix) {
			t.Fatalf("%q matches its bare suffix", pattern)
		}
		if MatchHost(suffix, n) != (suffix == n) {
			t.Fatalf("exact pattern %q vs %q", suffix, n)
		}
	}
}
