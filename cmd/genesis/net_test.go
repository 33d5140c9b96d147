package main

import (
	"reflect"
	"testing"

	"genesis.dev/sandbox/client"
)

func TestParseAllow(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]client.NetworkRule{
		"api.example.com":     {Host: "api.example.com"},
		"api.example.com:443": {Host: "api.example.com", Ports: []int{443}},
		"*.pypi.org:80,443":   {Host: "*.pypi.org", Ports: []int{80, 443}},
		"203.0.113.0/24:443":  {CIDR: "203.0.113.0/24", Ports: []int{443}},
		"203.0.113.7/32":      {CIDR: "203.0.113.7/32"},
		"[2001:db8::/48]:443": {CIDR: "2001:db8::/48", Ports: []int{443}},
	} {
		got, err := parseAllow(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("parseAllow(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"host:https", ":443", "[2001:db8::/48:443"} {
		if _, err := parseAllow(bad); err == nil {
			t.Errorf("parseAllow(%q) succeeded", bad)
		}
	}
	pf := policyFlags{allow: []string{"a.example.com"}}
	if pol, err := pf.policy(); err != nil || pol.Mode != client.NetworkAllowlist {
		t.Errorf("mode from rules = %+v, %v", pol, err)
	}
	if _, err := (&policyFlags{}).policy(); err == nil {
		t.Error("empty policy flags accepted")
	}
}
