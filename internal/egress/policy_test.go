package egress

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"genesis.dev/sandbox/internal/errdefs"
)

func testOperator() OperatorConfig {
	return OperatorConfig{
		StaticHosts: map[string]string{"web.test": "172.30.0.5"},
		InternalEndpoints: map[string]InternalEndpoint{
			"billing": {Host: "billing.internal", Addresses: []string{"10.1.2.3"}, Ports: []int{8443}},
		},
		Tools: map[string]Tool{
			"github": {Upstream: "https://api.github.example/", Credential: Credential{Type: CredentialBearer, Secret: "gh"}},
		},
		Secrets:  map[string]SecretSource{"gh": {Env: "GH_TOKEN"}},
		MaxRules: 4,
	}
}

func TestNormalizeAccepts(t *testing.T) {
	t.Parallel()
	op := testOperator()
	cases := []struct {
		in   Policy
		want Policy
	}{
		{Policy{}, Policy{Mode: ModeNone}},
		{Policy{Mode: ModeAllowlist, Allow: []Rule{{Host: "API.Example.com."}}},
			Policy{Mode: ModeAllowlist, Allow: []Rule{{Host: "api.example.com", Ports: []int{80, 443}}}}},
		{Policy{Mode: ModeAllowlist, Allow: []Rule{{Host: "*.pypi.org", Ports: []int{443, 443, 80}}}},
			Policy{Mode: ModeAllowlist, Allow: []Rule{{Host: "*.pypi.org", Ports: []int{80, 443}}}}},
		{Policy{Mode: ModeAllowlist, Allow: []Rule{{CIDR: "203.0.113.7/24", Ports: []int{443}}}},
			Policy{Mode: ModeAllowlist, Allow: []Rule{{CIDR: "203.0.113.0/24", Ports: []int{443}}}}},
		{Policy{Mode: ModeAllowlist, Allow: []Rule{{CIDR: "198.51.100.9"}}},
			Policy{Mode: ModeAllowlist, Allow: []Rule{{CIDR: "198.51.100.9/32", Ports: []int{80, 443}}}}},
		// A single address the operator mapped in static_hosts may be named.
		{Policy{Mode: ModeAllowlist, Allow: []Rule{{CIDR: "172.30.0.5/32"}}},
			Policy{Mode: ModeAllowlist, Allow: []Rule{{CIDR: "172.30.0.5/32", Ports: []int{80, 443}}}}},
		{Policy{Mode: ModeAllowlist, Allow: []Rule{{CIDR: "2001:db8::/48", Ports: []int{443}}}},
			Policy{Mode: ModeAllowlist, Allow: []Rule{{CIDR: "2001:db8::/48", Ports: []int{443}}}}},
		{Policy{Mode: ModeInternalAPI, Endpoints: []string{"billing", "billing"}},
			Policy{Mode: ModeInternalAPI, Endpoints: []string{"billing"}}},
		{Policy{Mode: ModeToolProxy, Tools: []string{"github"}}, Policy{Mode: ModeToolProxy, Tools: []string{"github"}}},
	}
	for _, c := range cases {
		got, err := c.in.Normalize(op)
		if err != nil {
			t.Errorf("Normalize(%+v): %v", c.in, err)
			continue
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("Normalize(%+v) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

func TestNormalizeRefuses(t *testing.T) {
	t.Parallel()
	op := testOperator()
	many := make([]Rule, 5)
	for i := range many {
		many[i] = Rule{Host: fmt.Sprintf("h%d.example.com", i)}
	}
	cases := []struct {
		name string
		in   Policy
		code string
	}{
		{"unknown mode", Policy{Mode: "open"}, CodeInvalidPolicy},
		{"rules in wrong mode", Policy{Mode: ModeNone, Allow: []Rule{{Host: "a.example.com"}}}, CodeInvalidPolicy},
		{"tools in allowlist", Policy{Mode: ModeAllowlist, Tools: []string{"github"}}, CodeInvalidPolicy},
		{"empty rule", Policy{Mode: ModeAllowlist, Allow: []Rule{{}}}, CodeInvalidPolicy},
		{"host and cidr", Policy{Mode: ModeAllowlist, Allow: []Rule{{Host: "a.com", CIDR: "203.0.113.0/24"}}}, CodeInvalidPolicy},
		{"inner wildcard", Policy{Mode: ModeAllowlist, Allow: []Rule{{Host: "api.*.example.com"}}}, CodeInvalidPolicy},
		{"trailing wildcard", Policy{Mode: ModeAllowlist, Allow: []Rule{{Host: "example.*"}}}, CodeInvalidPolicy},
		{"bare wildcard", Policy{Mode: ModeAllowlist, Allow: []Rule{{Host: "*"}}}, CodeInvalidPolicy},
		{"wildcard tld", Policy{Mode: ModeAllowlist, Allow: []Rule{{Host: "*.com"}}}, CodeInvalidPolicy},
		{"partial wildcard", Policy{Mode: ModeAllowlist, Allow: []Rule{{Host: "*foo.example.com"}}}, CodeInvalidPolicy},
		{"underscore ok but space not", Policy{Mode: ModeAllowlist, Allow: []Rule{{Host: "a b.com"}}}, CodeInvalidPolicy},
		{"hyphen edge", Policy{Mode: ModeAllowlist, Allow: []Rule{{Host: "-a.com"}}}, CodeInvalidPolicy},
		{"empty label", Policy{Mode: ModeAllowlist, Allow: []Rule{{Host: "a..com"}}}, CodeInvalidPolicy},
		{"long label", Policy{Mode: ModeAllowlist, Allow: []Rule{{Host: fmt.Sprintf("%064d.com", 0)}}}, CodeInvalidPolicy},
		{"ip as host", Policy{Mode: ModeAllowlist, Allow: []Rule{{Host: "203.0.113.1"}}}, CodeInvalidPolicy},
		{"ipv6 as host", Policy{Mode: ModeAllowlist, Allow: []Rule{{Host: "[2001:db8::1]"}}}, CodeInvalidPolicy},
		{"tool domain", Policy{Mode: ModeAllowlist, Allow: []Rule{{Host: "github.tool"}}}, CodeInvalidPolicy},
		{"port zero", Policy{Mode: ModeAllowlist, Allow: []Rule{{Host: "a.com", Ports: []int{0}}}}, CodeInvalidPolicy},
		{"port high", Policy{Mode: ModeAllowlist, Allow: []Rule{{Host: "a.com", Ports: []int{65536}}}}, CodeInvalidPolicy},
		{"bad cidr", Policy{Mode: ModeAllowlist, Allow: []Rule{{CIDR: "203.0.113.0/33"}}}, CodeInvalidPolicy},
		{"everything", Policy{Mode: ModeAllowlist, Allow: []Rule{{CIDR: "0.0.0.0/0"}}}, CodeCIDRTooBroad},
		{"everything v6", Policy{Mode: ModeAllowlist, Allow: []Rule{{CIDR: "::/0"}}}, CodeCIDRTooBroad},
		{"too broad", Policy{Mode: ModeAllowlist, Allow: []Rule{{CIDR: "8.0.0.0/8"}}}, CodeCIDRTooBroad},
		{"too broad v6", Policy{Mode: ModeAllowlist, Allow: []Rule{{CIDR: "2001:db8::/32"}}}, CodeCIDRTooBroad},
		{"metadata", Policy{Mode: ModeAllowlist, Allow: []Rule{{CIDR: "169.254.169.254/32"}}}, CodeCIDRDenied},
		{"private", Policy{Mode: ModeAllowlist, Allow: []Rule{{CIDR: "10.1.0.0/16"}}}, CodeCIDRDenied},
		{"loopback", Policy{Mode: ModeAllowlist, Allow: []Rule{{CIDR: "127.0.0.1"}}}, CodeCIDRDenied},
		{"mapped loopback", Policy{Mode: ModeAllowlist, Allow: []Rule{{CIDR: "::ffff:127.0.0.1/128"}}}, CodeCIDRDenied},
		{"ula", Policy{Mode: ModeAllowlist, Allow: []Rule{{CIDR: "fd00::/48"}}}, CodeCIDRDenied},
		{"neighbour of static host", Policy{Mode: ModeAllowlist, Allow: []Rule{{CIDR: "172.30.0.0/24"}}}, CodeCIDRDenied},
		{"too many rules", Policy{Mode: ModeAllowlist, Allow: many}, CodeTooManyRules},
		{"too many ports", Policy{Mode: ModeAllowlist, Allow: []Rule{{Host: "a.com", Ports: seq(1, 65)}}}, CodeTooManyRules},
		{"unknown endpoint", Policy{Mode: ModeInternalAPI, Endpoints: []string{"payroll"}}, CodeUnknownEndpoint},
		{"no endpoint", Policy{Mode: ModeInternalAPI}, CodeInvalidPolicy},
		{"unknown tool", Policy{Mode: ModeToolProxy, Tools: []string{"gitlab"}}, CodeUnknownTool},
	}
	for _, c := range cases {
		_, err := c.in.Normalize(op)
		if !errors.Is(err, errdefs.ErrInvalidArgument) || errdefs.Code(err) != c.code {
			t.Errorf("%s: err = %v (code %q), want invalid argument with code %q", c.name, err, errdefs.Code(err), c.code)
		}
	}
}

func seq(from, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = from + i
	}
	return out
}

func TestOperatorValidate(t *testing.T) {
	t.Parallel()
	if err := testOperator().Validate(); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
	mutate := map[string]func(*OperatorConfig){
		"min prefix":       func(c *OperatorConfig) { c.TenantMinPrefix = 4 },
		"static ip":        func(c *OperatorConfig) { c.StaticHosts = map[string]string{"a.test": "nope"} },
		"static name":      func(c *OperatorConfig) { c.StaticHosts = map[string]string{"A.test": "192.0.2.1"} },
		"endpoint no addr": func(c *OperatorConfig) { c.InternalEndpoints["x"] = InternalEndpoint{Host: "x.internal"} },
		"endpoint name": func(c *OperatorConfig) {
			c.InternalEndpoints["X Y"] = InternalEndpoint{Host: "x.internal", Addresses: []string{"10.0.0.1"}}
		},
		"tool scheme": func(c *OperatorConfig) {
			c.Tools["t"] = Tool{Upstream: "ftp://x", Credential: Credential{Type: "bearer", Secret: "gh"}}
		},
		"tool userinfo": func(c *OperatorConfig) {
			c.Tools["t"] = Tool{Upstream: "https://u:p@x/", Credential: Credential{Type: "bearer", Secret: "gh"}}
		},
		"cred type": func(c *OperatorConfig) {
			c.Tools["t"] = Tool{Upstream: "https://x/", Credential: Credential{Type: "oauth", Secret: "gh"}}
		},
		"cred header": func(c *OperatorConfig) {
			c.Tools["t"] = Tool{Upstream: "https://x/", Credential: Credential{Type: "header", Secret: "gh"}}
		},
		"basic user": func(c *OperatorConfig) {
			c.Tools["t"] = Tool{Upstream: "https://x/", Credential: Credential{Type: "basic", Secret: "gh"}}
		},
		"cred secret": func(c *OperatorConfig) {
			c.Tools["t"] = Tool{Upstream: "https://x/", Credential: Credential{Type: "bearer", Secret: "nope"}}
		},
		"secret both": func(c *OperatorConfig) { c.Secrets["gh"] = SecretSource{Env: "A", File: "/b"} },
		"secret none": func(c *OperatorConfig) { c.Secrets["gh"] = SecretSource{} },
		"max rules":   func(c *OperatorConfig) { c.MaxRules = -1 },
	}
	for name, m := range mutate {
		c := testOperator()
		m(&c)
		if err := c.Validate(); !errors.Is(err, errdefs.ErrInvalidArgument) || errdefs.Code(err) != CodeInvalidOperator {
			t.Errorf("%s: Validate = %v, want invalid_network_config", name, err)
		}
	}
}

func TestResolveIncludesOnlyNamedAndNeverPrintsSecret(t *testing.T) {
	t.Parallel()
	op := testOperator()
	op.Tools["other"] = Tool{Upstream: "https://other.example/", Credential: Credential{Type: CredentialBearer, Secret: "gh"}}
	read := func(s SecretSource) (string, error) { return "s3cr3t-" + s.Env, nil }
	r, err := op.Resolve(Policy{Mode: ModeToolProxy, Tools: []string{"github"}}, []string{"172.17.0.1"}, read)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Tools) != 1 || r.Tools["github"].Secret != "s3cr3t-GH_TOKEN" || len(r.InternalEndpoints) != 0 {
		t.Fatalf("Resolve = %+v", r)
	}
	for _, s := range []string{fmt.Sprint(r), fmt.Sprintf("%+v", r), fmt.Sprintf("%#v", r.Tools["github"])} {
		if strings.Contains(s, "s3cr3t") {
			t.Fatalf("secret printed: %s", s)
		}
	}
	if _, err := op.Resolve(Policy{Mode: ModeToolProxy, Tools: []string{"github"}}, nil,
		func(SecretSource) (string, error) { return "", errors.New("unset") }); errdefs.Code(err) != CodeSecretUnreadable {
		t.Fatalf("unreadable secret: %v", err)
	}
	if _, err := op.Resolve(Policy{Mode: ModeNone}, []string{"not-an-ip"}, read); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("bad deny list: %v", err)
	}
}

func TestReadSecret(t *testing.T) {
	t.Setenv("GENESIS_TEST_SECRET", "tok")
	if v, err := ReadSecret(SecretSource{Env: "GENESIS_TEST_SECRET"}); err != nil || v != "tok" {
		t.Fatalf("env: %q %v", v, err)
	}
	f := t.TempDir() + "/s"
	if err := writeFile(f, "file-tok\n"); err != nil {
		t.Fatal(err)
	}
	if v, err := ReadSecret(SecretSource{File: f}); err != nil || v != "file-tok" {
		t.Fatalf("file: %q %v", v, err)
	}
	if _, err := ReadSecret(SecretSource{Env: "GENESIS_TEST_UNSET_SECRET"}); err == nil {
		t.Fatal("unset env accepted")
	}
}

func TestHostAddressesAreNotAlreadyDenied(t *testing.T) {
	t.Parallel()
	list, err := HostAddresses()
	if err != nil {
		t.Fatal(err)
	}
	set, err := ParsePrefixes(list)
	if err != nil {
		t.Fatalf("HostAddresses gave unparsable %v: %v", list, err)
	}
	for _, p := range set {
		if _, denied := AlwaysDenied.Contains(p.Addr()); denied {
			t.Errorf("%s is already always denied", p)
		}
	}
}
