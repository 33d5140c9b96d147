package egress

import "testing"

func TestPolicyEqual(t *testing.T) {
	a := Policy{Mode: ModeAllowlist, Allow: []Rule{{Host: "a.example.com", Ports: []int{443}}}}
	for _, c := range []struct {
		p, q Policy
		want bool
	}{
		{Policy{Mode: ModeNone}, Policy{Mode: ModeNone, Tools: []string{}}, true},
		{a, Policy{Mode: ModeAllowlist, Allow: []Rule{{Host: "a.example.com", Ports: []int{443}}}}, true},
		{a, Policy{Mode: ModeAllowlist, Allow: []Rule{{Host: "a.example.com", Ports: []int{80}}}}, false},
		{a, Policy{Mode: ModeAllowlist}, false},
		{Policy{Mode: ModeNone}, Policy{Mode: ModeToolProxy}, false},
		{Policy{Mode: ModeToolProxy, Tools: []string{"x"}}, Policy{Mode: ModeToolProxy, Tools: []string{"y"}}, false},
	} {
		if got := c.p.Equal(c.q); got != c.want {
			t.Errorf("%+v.Equal(%+v) = %v, want %v", c.p, c.q, got, c.want)
		}
	}
}
