package config

import (
	"fmt"
	"net/netip"
	"path"
	"regexp"
	"time"

	"go.yaml.in/yaml/v3"

	"genesis.dev/sandbox/internal/egress"
)

// Network is the operator's network configuration: what tenants may pick
// from (egress.OperatorConfig, inline) and how the service runs the egress
// gateway.
type Network struct {
	egress.OperatorConfig `yaml:",inline"`
	Gateway               Gateway `yaml:"gateway"`
}

// Gateway configures the egress gateway container and the sandbox networks.
type Gateway struct {
	// Profile names the profile whose image the gateway container runs (the
	// static gateway binary is mounted into it; nothing is pulled).
	Profile string `yaml:"profile"`
	// Image, if set, is the image instead of the profile's.
	Image string `yaml:"image"`
	// UpstreamNetwork is the NAT bridge through which the gateway reaches
	// upstreams; made if missing.
	UpstreamNetwork string `yaml:"upstream_network"`
	// SubnetPool is the IPv4 range sandbox networks are carved from, one
	// /28 each.
	SubnetPool string `yaml:"subnet_pool"`
	// UpstreamCA is a PEM file of extra CAs the gateway trusts for https
	// tool upstreams (mounted read-only into the gateway).
	UpstreamCA string `yaml:"upstream_ca"`
	// HealthInterval is how often the gateway is checked.
	HealthInterval time.Duration `yaml:"health_interval"`
	// EventsInterval is how often egress events are pulled into the store.
	EventsInterval time.Duration `yaml:"events_interval"`
	// RestartBackoff is the first wait before a dead gateway is restarted;
	// it doubles on each failed restart up to a minute.
	RestartBackoff time.Duration `yaml:"restart_backoff"`
}

// networkName is the shape of a Docker network name.
var networkName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$`)

// SandboxPrefixBits is the size of each sandbox network.
const SandboxPrefixBits = 28

func (n Network) validate(v *problems) {
	bad := func(key, format string, args ...any) { v.add("network."+key, format, args...) }
	if err := n.OperatorConfig.Validate(); err != nil {
		v.wrap("network", err)
	}
	g := n.Gateway
	if g.Profile == "" && g.Image == "" {
		bad("gateway", "needs profile or image")
	}
	if !networkName.MatchString(g.UpstreamNetwork) {
		bad("gateway.upstream_network", "%q is not a valid network name", g.UpstreamNetwork)
	}
	for i, u := range n.UpstreamNetworks {
		if !networkName.MatchString(u) {
			bad(fmt.Sprintf("upstream_networks[%d]", i), "%q is not a valid network name", u)
		}
	}
	p, err := netip.ParsePrefix(g.SubnetPool)
	if err != nil || !p.Addr().Is4() || p.Masked() != p || p.Bits() > SandboxPrefixBits-2 {
		bad("gateway.subnet_pool", "%q must be an IPv4 prefix of /%d or broader", g.SubnetPool, SandboxPrefixBits-2)
	}
	if g.UpstreamCA != "" && !path.IsAbs(g.UpstreamCA) {
		bad("gateway.upstream_ca", "must be an absolute path")
	}
	for key, v := range map[string]time.Duration{"gateway.health_interval": g.HealthInterval,
		"gateway.events_interval": g.EventsInterval, "gateway.restart_backoff": g.RestartBackoff} {
		if v <= 0 {
			bad(key, "must be a positive duration, got %v", v)
		}
	}
}

// NetworkPolicy is a network policy in the config file: a mode name alone
// ("none", "allowlist" …) or a full policy mapping.
type NetworkPolicy struct {
	egress.Policy `yaml:",inline"`
}

// UnmarshalYAML accepts a mode name or a policy mapping.
func (p *NetworkPolicy) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		p.Policy = egress.Policy{Mode: egress.Mode(n.Value)}
		return nil
	}
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			switch k := n.Content[i].Value; k {
			case "mode", "allow", "endpoints", "tools":
			default:
				return fmt.Errorf("line %d: unknown network policy key %q", n.Content[i].Line, k)
			}
		}
	}
	var pol egress.Policy
	if err := n.Decode(&pol); err != nil {
		return err
	}
	p.Policy = pol
	return nil
}
