package store

import (
	"context"
	"time"

	"genesis.dev/sandbox/internal/tenant"
)

// Audit is the append-only audit log.
type Audit interface {
	// AppendAudit stores r and sets r.Seq. Seq grows in the order records
	// become visible, so a reader paging by Seq never misses one that
	// appears later.
	AppendAudit(ctx context.Context, r *tenant.AuditRecord) error
	// ListAudit returns records matching f in Seq order, at most f.Limit.
	ListAudit(ctx context.Context, f AuditFilter) ([]*tenant.AuditRecord, error)
	// PruneAudit deletes records older than before and returns how many.
	PruneAudit(ctx context.Context, before time.Time) (int64, error)
}

// AuditFilter selects audit records. Zero fields match everything.
type AuditFilter struct {
	Tenant string
	// Action matches the whole action ("POST /v1/sandboxes") or, if it has
	// no space, its method ("DELETE").
	Action string
	Target string
	Since  time.Time // inclusive
	Until  time.Time // exclusive
	// Status matches one status code; StatusClass (e.g. 4 for 4xx) a class.
	Status      int
	StatusClass int
	// Code matches the problem code of failed calls.
	Code string
	// AfterSeq returns only records with a greater Seq (the cursor).
	AfterSeq int64
	// BeforeSeq, if not 0, returns only records with a smaller Seq (the
	// cursor of newest-first pages).
	BeforeSeq int64
	// Newest lists the newest records first (default: oldest first).
	Newest bool
	Limit  int
}
