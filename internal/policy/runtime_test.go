package policy

import (
	"errors"
	"strings"
	"testing"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

func TestSelect(t *testing.T) {
	t.Parallel()
	both := []sandbox.Runtime{sandbox.RuntimeRunc, sandbox.RuntimeRunsc}
	onlyRunc := []sandbox.Runtime{sandbox.RuntimeRunc}
	onlyRunsc := []sandbox.Runtime{sandbox.RuntimeRunsc}
	prof := ProfileRuntimes{Name: "tool-basic", AllowedRuntimes: both, DefaultRiskLevel: sandbox.RiskLow}
	runcProf := ProfileRuntimes{Name: "trusted-only", AllowedRuntimes: onlyRunc, DefaultRiskLevel: sandbox.RiskTrusted}

	tests := []struct {
		name     string
		req      RuntimeRequest
		prof     ProfileRuntimes
		tenant   TenantPolicy
		healthy  []sandbox.Runtime
		want     sandbox.Runtime
		wantRisk sandbox.RiskLevel
		wantErr  error
		wantCode string
	}{
		{name: "profile default low picks runc", prof: prof, healthy: both, want: "runc", wantRisk: "low"},
		{name: "trusted picks runc", req: RuntimeRequest{RiskLevel: "trusted"}, prof: prof, healthy: both, want: "runc", wantRisk: "trusted"},
		{name: "medium picks runsc", req: RuntimeRequest{RiskLevel: "medium"}, prof: prof, healthy: both, want: "runsc", wantRisk: "medium"},
		{name: "high picks runsc", req: RuntimeRequest{RiskLevel: "high"}, prof: prof, healthy: both, want: "runsc", wantRisk: "high"},
		{name: "untrusted picks runsc", req: RuntimeRequest{RiskLevel: "untrusted"}, prof: prof, healthy: both, want: "runsc", wantRisk: "untrusted"},
		{name: "low uses runsc when runc missing", req: RuntimeRequest{RiskLevel: "low"}, prof: prof, healthy: onlyRunsc, want: "runsc", wantRisk: "low"},
		{name: "high never downgrades when runsc missing", req: RuntimeRequest{RiskLevel: "high"}, prof: prof, healthy: onlyRunc, wantErr: errdefs.ErrFailedPrecondition, wantCode: CodeRuntimeUnavailable},
		{name: "untrusted with nothing healthy", req: RuntimeRequest{RiskLevel: "untrusted"}, prof: prof, healthy: nil, wantErr: errdefs.ErrFailedPrecondition, wantCode: CodeRuntimeUnavailable},
		{name: "explicit runc for high refused", req: RuntimeRequest{RiskLevel: "high", Runtime: "runc"}, prof: prof, healthy: both, wantErr: errdefs.ErrInvalidArgument, wantCode: CodeRuntimeNotAllowed},
		{name: "explicit runsc for low honoured", req: RuntimeRequest{RiskLevel: "low", Runtime: "runsc"}, prof: prof, healthy: both, want: "runsc", wantRisk: "low"},
		{name: "explicit runsc missing", req: RuntimeRequest{Runtime: "runsc"}, prof: prof, healthy: onlyRunc, wantErr: errdefs.ErrFailedPrecondition, wantCode: CodeRuntimeUnavailable},
		{name: "explicit runtime not in profile", req: RuntimeRequest{Runtime: "kata-qemu"}, prof: prof, healthy: both, wantErr: errdefs.ErrInvalidArgument, wantCode: CodeRuntimeNotAllowed},
		{name: "tenant floor raises low to high", req: RuntimeRequest{RiskLevel: "low"}, prof: prof, tenant: TenantPolicy{MinRiskLevel: "high"}, healthy: both, want: "runsc", wantRisk: "high"},
		{name: "tenant floor refuses explicit runc", req: RuntimeRequest{Runtime: "runc"}, prof: prof, tenant: TenantPolicy{MinRiskLevel: "untrusted"}, healthy: both, wantErr: errdefs.ErrInvalidArgument, wantCode: CodeRuntimeNotAllowed},
		{name: "tenant floor below request does not lower it", req: RuntimeRequest{RiskLevel: "high"}, prof: prof, tenant: TenantPolicy{MinRiskLevel: "low"}, healthy: both, want: "runsc", wantRisk: "high"},
		{name: "runc-only profile cannot serve high risk", req: RuntimeRequest{RiskLevel: "high"}, prof: runcProf, healthy: both, wantErr: errdefs.ErrFailedPrecondition, wantCode: CodeRuntimeUnavailable},
		{name: "runc-only profile serves trusted", prof: runcProf, healthy: both, want: "runc", wantRisk: "trusted"},
		{name: "unknown risk", req: RuntimeRequest{RiskLevel: "spicy"}, prof: prof, healthy: both, wantErr: errdefs.ErrInvalidArgument},
		{name: "no default anywhere means medium", prof: ProfileRuntimes{Name: "x", AllowedRuntimes: both}, healthy: both, want: "runsc", wantRisk: "medium"},
		{name: "kata counts as stronger than runsc", req: RuntimeRequest{RiskLevel: "untrusted"}, prof: ProfileRuntimes{Name: "vm", AllowedRuntimes: []sandbox.Runtime{"kata-qemu"}}, healthy: []sandbox.Runtime{"kata-qemu"}, want: "kata-qemu", wantRisk: "untrusted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Select(tt.req, tt.prof, tt.tenant, tt.healthy)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want class %v", err, tt.wantErr)
				}
				if tt.wantCode != "" && errdefs.Code(err) != tt.wantCode {
					t.Fatalf("code = %q, want %q (err %v)", errdefs.Code(err), tt.wantCode, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if got.Runtime != tt.want || got.RiskLevel != tt.wantRisk {
				t.Fatalf("got %s/%s, want %s/%s", got.Runtime, got.RiskLevel, tt.want, tt.wantRisk)
			}
		})
	}
}

func TestSelectNeverPicksWeakerThanRisk(t *testing.T) {
	t.Parallel()
	all := []sandbox.Runtime{"runc", "runsc", "kata-qemu"}
	subsets := [][]sandbox.Runtime{nil, {"runc"}, {"runsc"}, {"runc", "runsc"}, all}
	for _, risk := range sandbox.RiskLevels {
		for _, healthy := range subsets {
			for _, allowed := range subsets[1:] {
				d, err := Select(RuntimeRequest{RiskLevel: risk}, ProfileRuntimes{Name: "p", AllowedRuntimes: allowed}, TenantPolicy{}, healthy)
				if err != nil {
					continue
				}
				if d.Runtime.Isolation() < MinIsolation(risk) {
					t.Fatalf("risk %s got %s", risk, d.Runtime)
				}
			}
		}
	}
}

// TestGVisorHint: a refusal caused by runsc's absence (Docker Desktop has
// only runc) says how to get gVisor; other refusals do not.
func TestGVisorHint(t *testing.T) {
	t.Parallel()
	onlyRunc := []sandbox.Runtime{sandbox.RuntimeRunc}
	prof := ProfileRuntimes{Name: "tool-basic", AllowedRuntimes: []sandbox.Runtime{"runc", "runsc"}, DefaultRiskLevel: sandbox.RiskLow}
	cases := []struct {
		name string
		req  RuntimeRequest
		prof ProfileRuntimes
		hint bool
	}{
		{name: "medium without runsc", req: RuntimeRequest{RiskLevel: "medium"}, prof: prof, hint: true},
		{name: "untrusted without runsc", req: RuntimeRequest{RiskLevel: "untrusted"}, prof: prof, hint: true},
		{name: "explicit runsc", req: RuntimeRequest{RiskLevel: "low", Runtime: "runsc"}, prof: prof, hint: true},
		{name: "profile without runsc", req: RuntimeRequest{RiskLevel: "high"}, prof: ProfileRuntimes{Name: "trusted-only", AllowedRuntimes: onlyRunc}},
		{name: "only kata missing", req: RuntimeRequest{RiskLevel: "high"}, prof: ProfileRuntimes{Name: "vm", AllowedRuntimes: []sandbox.Runtime{"kata-qemu"}}},
	}
	for _, c := range cases {
		_, err := Select(c.req, c.prof, TenantPolicy{}, onlyRunc)
		if errdefs.Code(err) != CodeRuntimeUnavailable {
			t.Fatalf("%s: err = %v, want %s", c.name, err, CodeRuntimeUnavailable)
		}
		if got := strings.Contains(err.Error(), "docs/operations.md#getting-gvisor"); got != c.hint {
			t.Errorf("%s: hint shown = %v, want %v: %v", c.name, got, c.hint, err)
		}
	}
}

// TestSelectRefusalSaysHow: a runtime refused for the risk level says where
// that level came from (the profile's default, the tenant's floor) and which
// levels may use the runtime, unless the tenant's floor leaves none.
func TestSelectRefusalSaysHow(t *testing.T) {
	t.Parallel()
	both := []sandbox.Runtime{sandbox.RuntimeRunc, sandbox.RuntimeRunsc}
	medium := ProfileRuntimes{Name: "code-python-basic", AllowedRuntimes: both, DefaultRiskLevel: sandbox.RiskMedium}
	tests := []struct {
		name   string
		req    RuntimeRequest
		tenant TenantPolicy
		want   []string
		absent string
	}{
		{name: "profile default", req: RuntimeRequest{Runtime: "runc"},
			want: []string{"risk level medium (profile code-python-basic's default)", "ask for risk_level trusted or low", "--risk"}},
		{name: "asked", req: RuntimeRequest{Runtime: "runc", RiskLevel: "high"},
			want: []string{"risk level high needs", "ask for risk_level trusted or low"}, absent: "default"},
		{name: "tenant floor leaves low", req: RuntimeRequest{Runtime: "runc", RiskLevel: "trusted"}, tenant: TenantPolicy{MinRiskLevel: "medium"},
			want: []string{"risk level medium (the tenant's floor)"}, absent: "ask for"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Select(tc.req, medium, tc.tenant, both)
			if errdefs.Code(err) != CodeRuntimeNotAllowed {
				t.Fatalf("err %v, want %s", err, CodeRuntimeNotAllowed)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
			if tc.absent != "" && strings.Contains(err.Error(), tc.absent) {
				t.Errorf("%q says %q", err, tc.absent)
			}
		})
	}
}
