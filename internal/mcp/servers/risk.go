package servers

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/policy"
	"genesis.dev/sandbox/internal/sandbox"
)

// Source is where a server's code comes from.
type Source string

// Sources, from most to least trusted.
const (
	// SourceBuiltin is shipped with the service (installed in an image at
	// build time).
	SourceBuiltin Source = "builtin"
	// SourceVerified is pinned by digest and reviewed by the operator.
	SourceVerified Source = "verified"
	// SourceRegistry comes from a package registry by name and version.
	SourceRegistry Source = "registry"
	// SourceUnverified is anything else the operator catalogued.
	SourceUnverified Source = "unverified"
	// SourceAdHoc is a command the caller gave (no catalog entry).
	SourceAdHoc Source = "ad-hoc"
)

// sourceRisk is the risk of running code from a source.
var sourceRisk = map[Source]sandbox.RiskLevel{
	SourceBuiltin: sandbox.RiskLow, SourceVerified: sandbox.RiskLow, SourceRegistry: sandbox.RiskMedium,
	SourceUnverified: sandbox.RiskHigh, SourceAdHoc: sandbox.RiskHigh,
}

// Permissions are what a server declares it needs.
type Permissions struct {
	// Network lists the hosts (host or host:port) it must reach; empty:
	// no network at all.
	Network []string `json:"network,omitempty" yaml:"network"`
	// Workspace is none, read or write: what it does with the workspace.
	Workspace string `json:"workspace,omitempty" yaml:"workspace"`
	// Tools names operator tools (network.tools of the service's config)
	// it calls: the sandbox reaches each at http://NAME.tool/ through the
	// egress gateway, which adds the tool's credential; the sandbox never
	// holds the credential. Exclusive with Network.
	Tools []string `json:"tools,omitempty" yaml:"tools"`
	// EnvSecrets names operator secrets (network.secrets of the service's
	// config) it takes as raw environment variables, each "VAR=secret" or
	// "secret" (VAR is then the secret's name in upper case, - as _). Each
	// raises its risk to high, and every call record names them. Only a
	// catalog entry may declare them: a tenant's ad-hoc spec never names
	// the operator's secrets.
	EnvSecrets []string `json:"env_secrets,omitempty" yaml:"env_secrets"`
}

// Validate checks the permissions.
func (p Permissions) Validate() error {
	switch p.Workspace {
	case "", "none", "read", "write":
	default:
		return errdefs.Invalid("permissions.workspace must be none, read or write, got %q", p.Workspace)
	}
	for _, h := range p.Network {
		if h == "" || strings.ContainsAny(h, "/ \t") {
			return errdefs.Invalid("permissions.network entry %q must be a host or host:port", h)
		}
	}
	if len(p.Network) > 0 && len(p.Tools) > 0 {
		return errdefs.Invalid("permissions.network and permissions.tools are exclusive (a sandbox has one egress mode)")
	}
	for _, e := range p.EnvSecrets {
		if _, _, err := ParseEnvSecret(e); err != nil {
			return err
		}
	}
	for _, t := range p.Tools {
		if t == "" || strings.ContainsAny(t, "/ .\t") {
			return errdefs.Invalid("permissions.tools entry %q must be a tool name", t)
		}
	}
	return nil
}

var (
	envVarRE     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
	secretNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
)

// ParseEnvSecret reads one env_secrets entry: "VAR=secret" or "secret".
func ParseEnvSecret(e string) (envVar, secret string, err error) {
	envVar, secret, ok := strings.Cut(e, "=")
	if !ok {
		secret = envVar
		envVar = strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(secret))
	}
	switch {
	case !secretNameRE.MatchString(secret):
		return "", "", errdefs.Invalid("env_secrets entry %q: %q is not a secret name", e, secret)
	case !envVarRE.MatchString(envVar) || strings.HasPrefix(envVar, "GENESIS_"):
		return "", "", errdefs.Invalid("env_secrets entry %q: %q is not a variable name (or uses the reserved prefix GENESIS_)", e, envVar)
	}
	return envVar, secret, nil
}

// Decision is where and how an instance runs, with the inputs and the
// rule that decided.
type Decision struct {
	Source         Source            `json:"source"`
	SourceRisk     sandbox.RiskLevel `json:"source_risk"`
	PermissionRisk sandbox.RiskLevel `json:"permission_risk"`
	Risk           sandbox.RiskLevel `json:"risk"`
	Ceiling        sandbox.RiskLevel `json:"ceiling"`
	// CeilingFrom says whose ceiling it is: operator or tenant (the
	// tenant's max_tool_risk_level, when lower).
	CeilingFrom string `json:"ceiling_from,omitempty"`
	// Rule is the decision in words.
	Rule string `json:"rule"`
	// Isolation is the least runtime the risk allows (runc or runsc); the
	// lease's placement picks a runtime at least this strong.
	Isolation sandbox.Runtime `json:"min_runtime"`
	// Network is none, allowlist (with Hosts) or tool-proxy (with Tools).
	Network string   `json:"network"`
	Hosts   []string `json:"hosts,omitempty"`
	Tools   []string `json:"tools,omitempty"`
	// Secrets is none, gateway (credentials added by the egress gateway
	// outside the sandbox) or env (raw environment variables, declared).
	Secrets string `json:"secrets"`
}

// Decide applies the risk rule. A decision above ceiling is an error
// (risk_above_ceiling), never a relabelled one.
func Decide(src Source, perm Permissions, ceiling sandbox.RiskLevel) (Decision, error) {
	sr, ok := sourceRisk[src]
	if !ok {
		return Decision{}, errdefs.Invalid("unknown source %q (builtin, verified, registry, unverified, ad-hoc)", src)
	}
	if err := perm.Validate(); err != nil {
		return Decision{}, err
	}
	pr, why := sandbox.RiskLow, []string{}
	raise := func(r sandbox.RiskLevel, reason string) {
		if r.Rank() > pr.Rank() {
			pr = r
		}
		why = append(why, reason)
	}
	d := Decision{Source: src, SourceRisk: sr, Network: "none", Secrets: "none", Ceiling: ceiling}
	if len(perm.Network) > 0 {
		raise(sandbox.RiskMedium, "network "+strings.Join(perm.Network, ",")+" → medium")
		d.Network, d.Hosts = "allowlist", slices.Clone(perm.Network)
	}
	if len(perm.Tools) > 0 {
		raise(sandbox.RiskMedium, "tools "+strings.Join(perm.Tools, ",")+" (credentials at the gateway) → medium")
		d.Network, d.Tools, d.Secrets = "tool-proxy", slices.Clone(perm.Tools), "gateway"
	}
	if perm.Workspace == "write" {
		raise(sandbox.RiskLow, "workspace write → low")
	}
	if len(perm.EnvSecrets) > 0 {
		raise(sandbox.RiskHigh, "env secrets "+strings.Join(perm.EnvSecrets, ",")+" → high")
		if d.Secrets == "gateway" {
			d.Secrets = "gateway+env"
		} else {
			d.Secrets = "env"
		}
	}
	d.PermissionRisk = pr
	d.Risk = sr
	if pr.Rank() > sr.Rank() {
		d.Risk = pr
	}
	if len(why) == 0 {
		why = append(why, "no permissions → low")
	}
	d.Isolation = sandbox.RuntimeRunc
	if policy.MinIsolation(d.Risk) > sandbox.RuntimeRunc.Isolation() {
		d.Isolation = sandbox.RuntimeRunsc
	}
	d.Rule = fmt.Sprintf("risk = max(source %s → %s, permissions: %s) = %s → runtime %s or stronger, network %s, secrets %s",
		src, sr, strings.Join(why, "; "), d.Risk, d.Isolation, d.Network, d.Secrets)
	if ceiling != "" && d.Risk.Rank() > ceiling.Rank() {
		return d, errdefs.WithCode("risk_above_ceiling", fmt.Errorf(
			"the server's risk is %s (%s), above the ceiling %s; it is refused, not relabelled: %w",
			d.Risk, d.Rule, ceiling, errdefs.ErrPermissionDenied))
	}
	return d, nil
}
