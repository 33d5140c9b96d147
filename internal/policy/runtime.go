package policy

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// Problem codes returned by Select.
const (
	CodeRuntimeUnavailable = "runtime_unavailable"
	CodeRuntimeNotAllowed  = "runtime_not_allowed"
)

// GVisorHint ends every refusal caused by gVisor's absence (Docker
// Desktop, say, has only runc; a cluster may lack the RuntimeClass): it
// says where to learn how to get it, for either driver.
const GVisorHint = "gVisor (runsc) is not available where this service runs sandboxes (the Docker engine's runtimes, " +
	"or the Kubernetes RuntimeClass of kubernetes.runtime_classes); to run medium, high and untrusted work, " +
	"install it there: see docs/operations.md#getting-gvisor"

// MinIsolation is the minimum runtime isolation (see sandbox.Runtime.Isolation)
// each risk level needs: trusted and low work may use runc; medium, high and
// untrusted work needs gVisor or stronger.
func MinIsolation(r sandbox.RiskLevel) int {
	switch r {
	case sandbox.RiskTrusted, sandbox.RiskLow:
		return sandbox.RuntimeRunc.Isolation()
	default:
		return sandbox.RuntimeRunsc.Isolation()
	}
}

// RuntimeRequest is what the caller asked for.
type RuntimeRequest struct {
	RiskLevel sandbox.RiskLevel // "" means the profile default
	Runtime   sandbox.Runtime   // "" means let the policy choose
}

// TenantPolicy is the operator's per-tenant floor.
type TenantPolicy struct {
	// MinRiskLevel raises every request of the tenant to at least this level.
	MinRiskLevel sandbox.RiskLevel
}

// ProfileRuntimes is the part of a profile the decision needs.
type ProfileRuntimes struct {
	Name             string
	AllowedRuntimes  []sandbox.Runtime // in order of preference
	DefaultRiskLevel sandbox.RiskLevel
}

// Decision is the outcome of Select.
type Decision struct {
	Runtime   sandbox.Runtime
	RiskLevel sandbox.RiskLevel // effective risk after the tenant floor
	Reason    string
}

// Select picks the runtime for a request. healthy lists the runtimes the probe
// found able to start containers. It returns errors of class
// ErrInvalidArgument (code runtime_not_allowed) when the request contradicts
// the profile or the risk level, and ErrFailedPrecondition (code
// runtime_unavailable) when the needed runtime is not usable on this host.
func Select(req RuntimeRequest, prof ProfileRuntimes, tenant TenantPolicy, healthy []sandbox.Runtime) (Decision, error) {
	risk := req.RiskLevel
	if risk == "" {
		risk = prof.DefaultRiskLevel
	}
	if risk == "" {
		risk = sandbox.RiskMedium
	}
	if risk.Rank() < 0 {
		return Decision{}, errdefs.Invalid("unknown risk_level %q", risk)
	}
	if tenant.MinRiskLevel.Rank() > risk.Rank() {
		risk = tenant.MinRiskLevel
	}
	need := MinIsolation(risk)
	strongEnough := func(r sandbox.Runtime) bool { return r.Isolation() >= need }

	if req.Runtime != "" {
		if !slices.Contains(prof.AllowedRuntimes, req.Runtime) {
			return Decision{}, errdefs.WithCode(CodeRuntimeNotAllowed, fmt.Errorf(
				"profile %s does not allow runtime %q (allowed: %s): %w",
				prof.Name, req.Runtime, join(prof.AllowedRuntimes), errdefs.ErrInvalidArgument))
		}
		if !strongEnough(req.Runtime) {
			return Decision{}, errdefs.WithCode(CodeRuntimeNotAllowed, fmt.Errorf(
				"risk level %s%s needs isolation of runsc or stronger; runtime %q is weaker and is never used for it%s: %w",
				risk, riskSource(req, prof, tenant, risk), req.Runtime, lowerRisks(req.Runtime, tenant), errdefs.ErrInvalidArgument))
		}
		if !slices.Contains(healthy, req.Runtime) {
			return Decision{}, errdefs.WithCode(CodeRuntimeUnavailable, errdefs.Mark(fmt.Errorf(
				"runtime %q is not available on this host (healthy: %s)%s",
				req.Runtime, join(healthy), gvisorHint([]sandbox.Runtime{req.Runtime})), errdefs.ErrFailedPrecondition))
		}
		return Decision{Runtime: req.Runtime, RiskLevel: risk, Reason: "requested"}, nil
	}

	var candidates []sandbox.Runtime
	for _, r := range prof.AllowedRuntimes {
		if strongEnough(r) {
			candidates = append(candidates, r)
		}
	}
	if len(candidates) == 0 {
		return Decision{}, errdefs.WithCode(CodeRuntimeUnavailable, fmt.Errorf(
			"profile %s allows only %s, but risk level %s needs runsc or stronger: %w",
			prof.Name, join(prof.AllowedRuntimes), risk, errdefs.ErrFailedPrecondition))
	}
	// Prefer the weakest sufficient runtime (the fastest), in profile order.
	slices.SortStableFunc(candidates, func(a, b sandbox.Runtime) int { return a.Isolation() - b.Isolation() })
	for _, r := range candidates {
		if slices.Contains(healthy, r) {
			return Decision{Runtime: r, RiskLevel: risk, Reason: fmt.Sprintf("risk %s needs isolation ≥ %d", risk, need)}, nil
		}
	}
	return Decision{}, errdefs.WithCode(CodeRuntimeUnavailable, fmt.Errorf(
		"risk level %s on profile %s needs one of %s, none of which is available on this host (healthy: %s); it is never downgraded%s: %w",
		risk, prof.Name, join(candidates), join(healthy), gvisorHint(candidates), errdefs.ErrFailedPrecondition))
}

// gvisorHint is GVisorHint, after "; ", when runsc is among the runtimes
// that were needed but missing.
func gvisorHint(missing []sandbox.Runtime) string {
	if slices.Contains(missing, sandbox.RuntimeRunsc) {
		return "; " + GVisorHint
	}
	return ""
}

// Allowed returns, for a profile, which runtimes each risk level may use on
// this host: a summary for GET /v1/capabilities.
func Allowed(prof ProfileRuntimes, risk sandbox.RiskLevel, healthy []sandbox.Runtime) []sandbox.Runtime {
	var out []sandbox.Runtime
	for _, r := range prof.AllowedRuntimes {
		if r.Isolation() >= MinIsolation(risk) && slices.Contains(healthy, r) {
			out = append(out, r)
		}
	}
	return out
}

func join(rs []sandbox.Runtime) string {
	if len(rs) == 0 {
		return "none"
	}
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}

// RiskPolicy maps each risk level to the runtimes a probe found (their names)
// (healthy or not) that it may use by their isolation, weakest first, for
// GET /v1/capabilities. A level no found runtime isolates enough maps to an
// empty list: nothing on this host runs it.
func RiskPolicy(found []string) map[string][]string {
	rts := make([]sandbox.Runtime, len(found))
	for i, r := range found {
		rts[i] = sandbox.Runtime(r)
	}
	slices.SortStableFunc(rts, func(a, b sandbox.Runtime) int {
		return cmp.Or(cmp.Compare(a.Isolation(), b.Isolation()), strings.Compare(string(a), string(b)))
	})
	out := map[string][]string{}
	for _, r := range sandbox.RiskLevels {
		out[string(r)] = []string{}
		for _, rt := range rts {
			if rt.Isolation() > 0 && rt.Isolation() >= MinIsolation(r) {
				out[string(r)] = append(out[string(r)], string(rt))
			}
		}
	}
	return out
}

// riskSource says where an effective risk level the request did not name
// came from: the profile's default or the tenant's floor.
func riskSource(req RuntimeRequest, prof ProfileRuntimes, tenant TenantPolicy, risk sandbox.RiskLevel) string {
	switch {
	case req.RiskLevel == risk:
		return ""
	case tenant.MinRiskLevel == risk:
		return " (the tenant's floor)"
	case prof.DefaultRiskLevel == risk:
		return fmt.Sprintf(" (profile %s's default)", prof.Name)
	}
	return " (the default)"
}

// lowerRisks names the risk levels that may use runtime r, when the tenant's
// floor leaves any: the way to ask for it.
func lowerRisks(r sandbox.Runtime, tenant TenantPolicy) string {
	var ok []string
	for _, l := range sandbox.RiskLevels {
		if r.Isolation() >= MinIsolation(l) && l.Rank() >= tenant.MinRiskLevel.Rank() {
			ok = append(ok, string(l))
		}
	}
	if len(ok) == 0 {
		return ""
	}
	return fmt.Sprintf("; ask for risk_level %s to use it (genesis sandbox create --risk)", strings.Join(ok, " or "))
}
