package tenancy

import (
	"context"
	"fmt"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/tenant"
)

// AuditFilter selects audit records for ListAudit (the store's filter,
// named here so the API layer does not depend on the store package).
type AuditFilter = store.AuditFilter

// auditPruneEvery is how often records past audit.retention are deleted.
const auditPruneEvery = time.Hour

// auditWriteTimeout bounds writing one audit record, which runs even when
// the request that caused it has ended.
const auditWriteTimeout = 10 * time.Second

// RecordAudit appends r to the audit log (Time set to now when zero). It
// keeps going when ctx has ended: a record of a canceled request still
// counts.
func (s *Service) RecordAudit(ctx context.Context, r *tenant.AuditRecord) error {
	if r.Time.IsZero() {
		r.Time = s.now()
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditWriteTimeout)
	defer cancel()
	return s.store.AppendAudit(wctx, r)
}

// ListAudit returns the audit records matching f that p may read: a
// tenant's key reads only its own tenant's (f.Tenant empty means its own;
// another tenant is permission denied, code admin_required), an admin key
// every tenant's and the records of unauthenticated calls.
func (s *Service) ListAudit(ctx context.Context, p tenant.Principal, f AuditFilter) ([]*tenant.AuditRecord, error) {
	if !p.Admin {
		if f.Tenant != "" && f.Tenant != p.Tenant {
			return nil, errdefs.WithCode("admin_required", fmt.Errorf("only an admin key may read another tenant's audit records: %w", errdefs.ErrPermissionDenied))
		}
		f.Tenant = p.Tenant
	}
	return s.store.ListAudit(ctx, f)
}

// pruneAudit deletes audit records older than the retention.
func (s *Service) pruneAudit(ctx context.Context) {
	n, err := s.store.PruneAudit(ctx, s.now().Add(-s.cfg.Audit.Retention))
	if err != nil {
		s.log.Warn("pruning audit records", "err", err)
		return
	}
	if n > 0 {
		s.log.Info("audit records past retention deleted", "count", n, "retention", s.cfg.Audit.Retention)
	}
}
