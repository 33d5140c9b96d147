package policy

import (
	"context"

	"genesis.dev/sandbox/internal/sandbox"
)

// TenantCeiling returns the ceiling a tenant has set for itself
// ("": none). It is how the MCP server and skill managers learn a
// tenant's max_tool_risk_level without depending on the tenant store.
type TenantCeiling func(ctx context.Context, tenant string) (sandbox.RiskLevel, error)

// Ceiling is the lower of the operator's ceiling and the tenant's own, and
// which of them it is ("operator" or "tenant"). A nil f is the operator's
// ceiling alone.
func (f TenantCeiling) Ceiling(ctx context.Context, tenant string, operator sandbox.RiskLevel) (sandbox.RiskLevel, string, error) {
	if f == nil {
		return operator, "operator", nil
	}
	t, err := f(ctx, tenant)
	if err != nil {
		return "", "", err
	}
	if t != "" && t.Rank() < operator.Rank() {
		return t, "tenant", nil
	}
	return operator, "operator", nil
}
