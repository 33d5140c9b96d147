package probe

import (
	"context"

	"genesis.dev/sandbox/internal/diskquota"
	"genesis.dev/sandbox/internal/driver"
)

// DiskQuotaStatus says whether per-sandbox workspace quotas are enforced.
type DiskQuotaStatus struct {
	Enforced bool
	Method   string
	Reason   string // why not, when not enforced
}

// DiskQuota reports whether this host enforces workspace quotas: it needs
// loop-mounted ext4 on the service's host and a driver that bind-mounts
// host directories (the probe says so).
func (p *Prober) DiskQuota(ctx context.Context) DiskQuotaStatus {
	st := DiskQuotaStatus{Method: diskquota.Method}
	q, ok := p.boxes.(driver.QuotaReporter)
	if !ok {
		st.Reason = "driver " + p.driver.Name() + " has no workspace quotas"
		return st
	}
	if ok, why := q.QuotaAvailable(); !ok {
		st.Reason = why
		return st
	}
	if f := p.Result(ctx).DiskQuota; !f.Supported {
		st.Reason = "driver " + p.driver.Name() + " cannot bind a quota-limited workspace"
		if f.Reason != "" {
			st.Reason += ": " + f.Reason
		}
		return st
	}
	st.Enforced = true
	return st
}
