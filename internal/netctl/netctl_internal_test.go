package netctl

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/egress"
)

// A sandbox's /28 is picked from a start its id decides, skips subnets in
// use, and the search is bounded.
func TestSubnetCandidates(t *testing.T) {
	t.Parallel()
	pool := netip.MustParsePrefix("10.231.0.0/16")
	a := subnetCandidates(pool, "sbx_a", nil)
	if len(a) != maxSubnetAttempts {
		t.Fatalf("%d candidates in a /16; want %d", len(a), maxSubnetAttempts)
	}
	if b := subnetCandidates(pool, "sbx_a", nil); !slices.Equal(a, b) {
		t.Errorf("candidates of one id differ between calls: %v, %v", a[:2], b[:2])
	}
	if b := subnetCandidates(pool, "sbx_b", nil); b[0] == a[0] {
		t.Errorf("two ids start at the same subnet %v", a[0])
	}
	for _, p := range a {
		if p.Bits() != config.SandboxPrefixBits || !pool.Contains(p.Addr()) || p.Masked() != p {
			t.Fatalf("candidate %v is not a /%d of %v", p, config.SandboxPrefixBits, pool)
		}
	}
	taken := []netip.Prefix{a[0], netip.MustParsePrefix(a[1].Addr().String() + "/24")}
	for _, p := range subnetCandidates(pool, "sbx_a", taken) {
		if p.Overlaps(taken[0]) || p.Overlaps(taken[1]) {
			t.Errorf("candidate %v overlaps a subnet in use", p)
		}
	}
	small := netip.MustParsePrefix("10.9.0.0/26") // four /28s
	if got := subnetCandidates(small, "sbx_a", []netip.Prefix{netip.MustParsePrefix("10.9.0.16/28")}); len(got) != 3 {
		t.Errorf("candidates of a /26 with one /28 taken: %v; want the other 3", got)
	}
	if got := subnetCandidates(small, "sbx_a", []netip.Prefix{small}); len(got) != 0 {
		t.Errorf("candidates of a full pool: %v; want none", got)
	}
}

// The gateway sits at base+2 and sandboxes get addresses from the upper
// half of their /28.
func TestSubnetPlan(t *testing.T) {
	t.Parallel()
	gw, dynamic := subnetPlan(netip.MustParsePrefix("10.231.7.48/28"))
	if gw != "10.231.7.50" || dynamic != "10.231.7.56/29" {
		t.Errorf("plan of 10.231.7.48/28 = %s, %s; want 10.231.7.50, 10.231.7.56/29", gw, dynamic)
	}
}

// A networked sandbox's environment points at the gateway's proxy, keeps
// loopback and tools off it, names each tool's URL, and holds no secret.
func TestNetworkEnv(t *testing.T) {
	t.Parallel()
	env := networkEnv("10.231.0.2", egress.Policy{Mode: egress.ModeToolProxy, Tools: []string{"search-api"}})
	want := []string{
		"HTTP_PROXY=http://10.231.0.2:3128", "https_proxy=http://10.231.0.2:3128",
		"NO_PROXY=localhost,127.0.0.1,::1,.tool",
		"GENESIS_TOOL_SEARCH_API_URL=http://search-api.tool/",
	}
	for _, w := range want {
		if !slices.Contains(env, w) {
			t.Errorf("env %q lacks %q", env, w)
		}
	}
	for _, e := range env {
		if strings.Contains(strings.ToLower(e), "secret") || strings.Contains(strings.ToLower(e), "token") {
			t.Errorf("env entry %q looks like a credential", e)
		}
	}
}
