package skills

import (
	"context"
	"testing"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

func TestDecide(t *testing.T) {
	t.Parallel()
	offline := &Revision{Name: "a", Source: SourceTenant}
	online := &Revision{Name: "b", Source: SourceTenant, Manifest: Manifest{Network: []string{"api.example.test", "x.example.test:8443"}}}
	for _, tc := range []struct {
		name    string
		cfg     Config
		rev     *Revision
		code    string
		network string
	}{
		{"an upload runs under runsc offline", Config{Ceiling: sandbox.RiskHigh}, offline, "", "none"},
		{"declared hosts become the allowlist", Config{Ceiling: sandbox.RiskHigh, AllowNetwork: true}, online, "", "allowlist"},
		{"network not allowed", Config{Ceiling: sandbox.RiskHigh}, online, "skill_network_not_allowed", ""},
		{"above the ceiling", Config{Ceiling: sandbox.RiskLow}, offline, "risk_above_ceiling", ""},
		{"above the tenant's ceiling", Config{Ceiling: sandbox.RiskHigh, TenantCeiling: lowTenant}, offline, "risk_above_ceiling", ""},
		{"a tenant ceiling above the operator's does not raise it", Config{Ceiling: sandbox.RiskLow, TenantCeiling: untrustedTenant}, offline, "risk_above_ceiling", ""},
		{"a tenant ceiling that fits", Config{Ceiling: sandbox.RiskHigh, TenantCeiling: untrustedTenant}, offline, "", "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := &Manager{cfg: tc.cfg}
			d, err := m.Decide(context.Background(), "acme", tc.rev)
			if tc.code != "" {
				if errdefs.Code(err) != tc.code {
					t.Fatalf("err %v, want code %s", err, tc.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Runtime != sandbox.RuntimeRunsc || d.Risk != sandbox.RiskMedium || d.Network != tc.network || d.Rule == "" {
				t.Errorf("decision %+v", d)
			}
			if tc.network == "allowlist" {
				p := allowlist(d.Hosts)
				if len(p.Allow) != 2 || p.Allow[0].Host != "api.example.test" || len(p.Allow[0].Ports) != 0 ||
					p.Allow[1].Host != "x.example.test" || p.Allow[1].Ports[0] != 8443 {
					t.Errorf("allowlist %+v", p)
				}
			}
		})
	}
}

func TestCheckRunRequest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		req  RunRequest
		code string
	}{
		{RunRequest{Script: "scripts/a.py"}, ""},
		{RunRequest{Script: ""}, "invalid_argument"},
		{RunRequest{Script: "../a.py"}, "skill_script_outside"},
		{RunRequest{Script: "/etc/passwd"}, "skill_script_outside"},
		{RunRequest{Script: "a/../../b"}, "skill_script_outside"},
		{RunRequest{Script: "./a.py"}, ""},
		{RunRequest{Script: `a\..\..\b`}, "skill_script_outside"},
		{RunRequest{Script: "a.py", Stdin: "x", StdinBase64: "eA=="}, "invalid_argument"},
		{RunRequest{Script: "a.py", StdinBase64: "!"}, "invalid_argument"},
		{RunRequest{Script: "a.py", Files: []InputFile{{Path: "../x"}}}, "invalid_argument"},
		{RunRequest{Script: "a.py", Files: []InputFile{{Path: "x", Content: "a", ContentBase64: "YQ=="}}}, "invalid_argument"},
		{RunRequest{Script: "a.py", Files: []InputFile{{Path: "x", ContentBase64: "!!"}}}, "invalid_argument"},
		{RunRequest{Script: "a.py", Revision: -1}, "invalid_argument"},
	} {
		err := checkRunRequest(&tc.req)
		switch {
		case tc.code == "" && err != nil:
			t.Errorf("checkRunRequest(%+v) = %v, want nil", tc.req, err)
		case tc.code != "" && errdefs.Code(err) != tc.code:
			t.Errorf("checkRunRequest(%+v) = %v (code %q), want %q", tc.req, err, errdefs.Code(err), tc.code)
		}
	}
}

func lowTenant(_ context.Context, tenant string) (sandbox.RiskLevel, error) {
	if tenant != "acme" {
		return "", nil
	}
	return sandbox.RiskLow, nil
}

func untrustedTenant(context.Context, string) (sandbox.RiskLevel, error) {
	return sandbox.RiskUntrusted, nil
}
