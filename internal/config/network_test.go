package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"genesis.dev/sandbox/internal/egress"
)

func TestNetworkConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	load := func(s string) (*Config, error) {
		p := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return Load(p)
	}
	c, err := load(`
network:
  static_hosts: {api.example.com: 203.0.113.5}
  internal_endpoints: {billing: {host: billing.internal, addresses: [10.0.0.5], ports: [8080]}}
  gateway: {subnet_pool: 10.77.0.0/20}
tenants:
  acme: {network: {mode: internal-api, endpoints: [billing]}}
profiles:
  - {name: x, recipe: r, allowed_runtimes: [runc], resources: {cpu: 1, memory_mb: 64, pids: 64},
     network: {mode: allowlist, allow: [{host: "*.example.com", ports: [443]}]}}
  - {name: y, recipe: r, allowed_runtimes: [runc], resources: {cpu: 1, memory_mb: 64, pids: 64}, network: none}
`)
	if err != nil {
		t.Fatal(err)
	}
	x, _ := c.Profile("x")
	y, _ := c.Profile("y")
	if x.Network.Mode != egress.ModeAllowlist || len(x.Network.Allow) != 1 || y.Network.Mode != egress.ModeNone {
		t.Errorf("profile networks = %+v / %+v", x.Network, y.Network)
	}
	if tn := c.Tenants["acme"].Network; tn == nil || tn.Mode != egress.ModeInternalAPI {
		t.Errorf("tenant network = %+v", tn)
	}
	if g := c.Network.Gateway; g.SubnetPool != "10.77.0.0/20" || g.UpstreamNetwork != "genesis-egress" || g.Profile != "tool-basic" || g.HealthInterval <= 0 {
		t.Errorf("gateway defaults not kept under the overlay: %+v", g)
	}
	for in, key := range map[string]string{
		"network: {gateway: {subnet_pool: 10.0.0.0/30}}\n":                            "network.gateway.subnet_pool",
		"network: {gateway: {upstream_network: 'a b'}}\n":                             "network.gateway.upstream_network",
		"network: {gateway: {health_interval: 0s}}\n":                                 "network.gateway.health_interval",
		"network: {tenant_min_prefix: 4}\n":                                           "network.tenant_min_prefix",
		"tenants: {acme: {network: {mode: allowlist, allow: [{cidr: 0.0.0.0/0}]}}}\n": "tenants.acme.network",
		"tenants: {acme: {network: {mode: internal-api, endpoints: [nope]}}}\n":       "tenants.acme.network",
		"tenants: {acme: {network: {mode: allowlist, allwo: []}}}\n":                  "allwo",
		"profiles: [{name: x, recipe: r, allowed_runtimes: [runc], resources: {cpu: 1, memory_mb: 64, pids: 64}, network: {mode: tool-proxy, tools: [gh]}}]\n": "profiles.x.network",
	} {
		if _, err := load(in); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("Load(%q) = %v; want an error naming %s", in, err, key)
		}
	}
}
