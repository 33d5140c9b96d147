package control

import (
	"context"
	"time"

	"genesis.dev/sandbox/internal/tenant"
)

// auditSystem records an action the service took by itself (for example
// "ttl_expired") on target; err is its outcome. Failures are logged. The
// audit log itself (the API's records, listing, retention) is
// internal/tenancy's.
func (s *Service) auditSystem(ctx context.Context, tenantName, action, target string, err error) {
	r := &tenant.AuditRecord{Time: s.now(), Actor: tenant.ActorSystem, Tenant: tenantName, Action: "system " + action, Target: target, Status: 200}
	if err != nil {
		r.Status, r.Code = 500, "internal"
	}
	wctx, cancel := cleanupCtx(ctx, 10*time.Second)
	defer cancel()
	if werr := s.store.AppendAudit(wctx, r); werr != nil {
		s.log.Error("writing audit record", "action", r.Action, "target", target, "err", werr)
	}
}
