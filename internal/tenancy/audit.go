package tenancy

import (
	"context"
	"time"

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

// ListAudit returns audit records matching f.
func (s *Service) ListAudit(ctx context.Context, f AuditFilter) ([]*tenant.AuditRecord, error) {
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
