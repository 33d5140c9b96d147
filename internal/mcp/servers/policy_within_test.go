package servers

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
	} {
		if got := policyWithin(tc.have, want); got != tc.ok {
			t.Errorf("%s: policyWithin = %v, want %v", tc.name, got, tc.ok)
		}
	}
	tools := egress.Policy{Mode: egress.ModeToolProxy, Tools: []string{"echo", "search"}}
	if !policyWithin(egress.Policy{Mode: egress.ModeToolProxy, Tools: []string{"echo"}}, tools) ||
		policyWithin(egress.Policy{Mode: egress.ModeToolProxy, Tools: []string{"mail"}}, tools) {
		t.Error("tool-proxy subsets")
	}
	if policyWithin(want, egress.Policy{Mode: egress.ModeNone}) {
		t.Error("an allowlist is within none")
	}
}
