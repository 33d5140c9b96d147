package servers

import (
	"errors"
	"strings"
	"testing"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

func TestParseEnvSecret(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][2]string{"TOKEN=github": {"TOKEN", "github"}, "github-token": {"GITHUB_TOKEN", "github-token"}, "a.b": {"A_B", "a.b"}} {
		v, name, err := ParseEnvSecret(in)
		if err != nil || v != want[0] || name != want[1] {
			t.Errorf("ParseEnvSecret(%q) = %q %q %v, want %v", in, v, name, err, want)
		}
	}
	for _, in := range []string{"", "=x", "X=", "1X=x", "GENESIS_AGENT=x", "X=a/b", "X Y=z"} {
		if _, _, err := ParseEnvSecret(in); err == nil {
			t.Errorf("ParseEnvSecret(%q) succeeded", in)
		}
	}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		src     Source
		perm    Permissions
		ceiling sandbox.RiskLevel
		risk    sandbox.RiskLevel
		runtime sandbox.Runtime
		network string
		err     error
		code    string
	}{
		{"builtin, nothing asked", SourceBuiltin, Permissions{}, sandbox.RiskHigh, sandbox.RiskLow, sandbox.RuntimeRunc, "none", nil, ""},
		{"verified", SourceVerified, Permissions{Workspace: "write"}, sandbox.RiskHigh, sandbox.RiskLow, sandbox.RuntimeRunc, "none", nil, ""},
		{"registry", SourceRegistry, Permissions{}, sandbox.RiskHigh, sandbox.RiskMedium, sandbox.RuntimeRunsc, "none", nil, ""},
		{"builtin asking for network is medium", SourceBuiltin, Permissions{Network: []string{"api.example:443"}}, sandbox.RiskHigh,
			sandbox.RiskMedium, sandbox.RuntimeRunsc, "allowlist", nil, ""},
		{"unverified", SourceUnverified, Permissions{Network: []string{"api.example"}}, sandbox.RiskHigh, sandbox.RiskHigh, sandbox.RuntimeRunsc, "allowlist", nil, ""},
		{"tools through the gateway", SourceVerified, Permissions{Tools: []string{"echo"}}, sandbox.RiskHigh, sandbox.RiskMedium, sandbox.RuntimeRunsc, "tool-proxy", nil, ""},
		{"network and tools", SourceVerified, Permissions{Tools: []string{"echo"}, Network: []string{"a.example"}}, sandbox.RiskHigh, "", "", "", errdefs.ErrInvalidArgument, ""},
		{"ad-hoc", SourceAdHoc, Permissions{}, sandbox.RiskHigh, sandbox.RiskHigh, sandbox.RuntimeRunsc, "none", nil, ""},
		{"above the ceiling is refused", SourceAdHoc, Permissions{}, sandbox.RiskMedium, sandbox.RiskHigh, sandbox.RuntimeRunsc, "none",
			errdefs.ErrPermissionDenied, "risk_above_ceiling"},
		{"unknown source", Source("somewhere"), Permissions{}, sandbox.RiskHigh, "", "", "", errdefs.ErrInvalidArgument, ""},
		{"bad workspace", SourceBuiltin, Permissions{Workspace: "all"}, sandbox.RiskHigh, "", "", "", errdefs.ErrInvalidArgument, ""},
		{"bad host", SourceBuiltin, Permissions{Network: []string{"http://x/"}}, sandbox.RiskHigh, "", "", "", errdefs.ErrInvalidArgument, ""},
		{"env secrets are high", SourceBuiltin, Permissions{EnvSecrets: []string{"TOKEN=github"}}, sandbox.RiskHigh, sandbox.RiskHigh, sandbox.RuntimeRunsc, "none", nil, ""},
		{"env secrets above a medium ceiling", SourceBuiltin, Permissions{EnvSecrets: []string{"github"}}, sandbox.RiskMedium, "", "", "",
			errdefs.ErrPermissionDenied, "risk_above_ceiling"},
		{"bad env secret", SourceBuiltin, Permissions{EnvSecrets: []string{"GENESIS_X=github"}}, sandbox.RiskHigh, "", "", "", errdefs.ErrInvalidArgument, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Decide(tc.src, tc.perm, tc.ceiling)
			if tc.err != nil {
				if !errors.Is(err, tc.err) || tc.code != "" && errdefs.Code(err) != tc.code {
					t.Fatalf("err %v (code %s), want %v %s", err, errdefs.Code(err), tc.err, tc.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Risk != tc.risk || d.Isolation != tc.runtime || d.Network != tc.network {
				t.Fatalf("decision %+v, want risk %s runtime %s network %s", d, tc.risk, tc.runtime, tc.network)
			}
			if !strings.Contains(d.Rule, string(tc.src)) || !strings.Contains(d.Rule, string(d.Risk)) {
				t.Fatalf("rule %q does not say its inputs", d.Rule)
			}
			switch p := networkPolicy(d); {
			case tc.network == "allowlist":
				if p.Mode != "allowlist" || len(p.Allow) != len(tc.perm.Network) {
					t.Fatalf("egress policy %+v", p)
				}
			case tc.network == "tool-proxy":
				if p.Mode != "tool-proxy" || len(p.Tools) != 1 || d.Secrets != "gateway" {
					t.Fatalf("egress policy %+v, secrets %s", p, d.Secrets)
				}
			case p.Mode != "none":
				t.Fatalf("a server that asked for no network gets %+v", networkPolicy(d))
			}
		})
	}
}
