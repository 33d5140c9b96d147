package egress_test

import (
	"testing"

	"genesis.dev/sandbox/internal/egress"
)

func TestPolicyWithin(t *testing.T) {
	t.Parallel()
	allow := func(rules ...egress.Rule) egress.Policy {
		return egress.Policy{Mode: egress.ModeAllowlist, Allow: rules}
	}
	want := allow(egress.Rule{Host: "a.test"}, egress.Rule{Host: "b.test", Ports: []int{8443}})
	for _, tc := range []struct {
		name string
		have egress.Policy
		ok   bool
	}{
		{"no network", egress.Policy{Mode: egress.ModeNone}, true},
		{"the same", want, true},
		{"fewer hosts", allow(egress.Rule{Host: "a.test", Ports: []int{443}}), true},
		{"another host", allow(egress.Rule{Host: "c.test"}), false},
		{"another port", allow(egress.Rule{Host: "b.test"}), false},
		{"a wildcard", allow(egress.Rule{Host: "*.test"}), false},
		{"a CIDR", allow(egress.Rule{CIDR: "10.0.0.0/8"}), false},
		{"another mode", egress.Policy{Mode: egress.ModeToolProxy, Tools: []string{"x"}}, false},
		{"internal-api, even the same", egress.Policy{Mode: egress.ModeInternalAPI, Endpoints: []string{"billing"}}, false},
	} {
		if got := tc.have.Within(want); got != tc.ok {
			t.Errorf("%s: Within = %v, want %v", tc.name, got, tc.ok)
		}
	}
	tools := egress.Policy{Mode: egress.ModeToolProxy, Tools: []string{"echo", "search"}}
	if !(egress.Policy{Mode: egress.ModeToolProxy, Tools: []string{"echo"}}).Within(tools) ||
		(egress.Policy{Mode: egress.ModeToolProxy, Tools: []string{"mail"}}).Within(tools) {
		t.Error("tool-proxy subsets")
	}
	if want.Within(egress.Policy{Mode: egress.ModeNone}) {
		t.Error("an allowlist is within none")
	}
}

func TestPolicyString(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		p    egress.Policy
		want string
	}{
		{egress.Policy{}, "none"},
		{egress.Policy{Mode: egress.ModeNone}, "none"},
		{egress.Policy{Mode: egress.ModeAllowlist, Allow: []egress.Rule{{Host: "a.test"}, {CIDR: "10.1.0.0/16", Ports: []int{22}}}}, "allowlist a.test,10.1.0.0/16"},
		{egress.Policy{Mode: egress.ModeToolProxy, Tools: []string{"echo", "search"}}, "tool-proxy echo,search"},
		{egress.Policy{Mode: egress.ModeInternalAPI, Endpoints: []string{"billing"}}, "internal-api billing"},
	} {
		if got := tc.p.String(); got != tc.want {
			t.Errorf("%#v.String() = %q, want %q", tc.p, got, tc.want)
		}
	}
}
