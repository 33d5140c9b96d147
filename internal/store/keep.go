package store

import (
	"time"

	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/tenant"
)

// The field-keeping rules of the Update methods: what fn may change and what
// the store keeps or sets. Every implementation applies them, after fn and
// before it writes, to next (fn's result) and cur (the stored record), so
// that every store keeps the same fields.

// NextSandbox keeps ID, Tenant, CreatedAt and Instance of cur (a sandbox
// changes hands only by ClaimSandbox and ReturnSandbox, and stays with the
// service instance that made it), sets ResourceVersion to cur's + 1 and
// UpdatedAt to now, and normalizes next.
func NextSandbox(cur, next *sandbox.Sandbox, now time.Time) {
	next.ID, next.Tenant, next.CreatedAt, next.Instance = cur.ID, cur.Tenant, cur.CreatedAt, cur.Instance
	next.Reserved = cur.Reserved
	next.ResourceVersion = cur.ResourceVersion + 1
	next.UpdatedAt = now.UTC()
	NormalizeSandbox(next)
}

// NextJob keeps ID, Tenant, SandboxID, CreatedAt and Mode (how a job runs
// is fixed when it is created) of cur and normalizes next: times in UTC, an
// empty command as nil.
func NextJob(cur, next *sandbox.Job) {
	next.ID, next.Tenant, next.SandboxID, next.CreatedAt = cur.ID, cur.Tenant, cur.SandboxID, cur.CreatedAt
	next.Mode = cur.Mode
	next.StartedAt, next.FinishedAt = UTCPtr(next.StartedAt), UTCPtr(next.FinishedAt)
	if len(next.Command) == 0 {
		next.Command = nil
	}
}

// NextSession keeps ID, Tenant, SandboxID and CreatedAt of cur.
func NextSession(cur, next *sandbox.Session) {
	next.ID, next.Tenant, next.SandboxID, next.CreatedAt = cur.ID, cur.Tenant, cur.SandboxID, cur.CreatedAt
}

// NextLease keeps ID, Tenant, SandboxID and CreatedAt of cur, sets
// ResourceVersion to cur's + 1 and normalizes next.
func NextLease(cur, next *sandbox.Lease) {
	next.ID, next.Tenant, next.SandboxID, next.CreatedAt = cur.ID, cur.Tenant, cur.SandboxID, cur.CreatedAt
	next.Reserved = cur.Reserved
	next.ResourceVersion = cur.ResourceVersion + 1
	NormalizeLease(next)
}

// NextNetwork keeps SandboxID and Tenant of cur, sets ResourceVersion to
// cur's + 1 and UpdatedAt to now.
func NextNetwork(cur, next *sandbox.Network, now time.Time) {
	next.SandboxID, next.Tenant = cur.SandboxID, cur.Tenant
	next.ResourceVersion, next.UpdatedAt = cur.ResourceVersion+1, now.UTC()
}

// NextTenant keeps Name, Source and CreatedAt of cur, sets ResourceVersion
// to cur's + 1 and UpdatedAt to now.
func NextTenant(cur, next *tenant.Tenant, now time.Time) {
	next.Name, next.Source, next.CreatedAt = cur.Name, cur.Source, cur.CreatedAt
	next.ResourceVersion, next.UpdatedAt = cur.ResourceVersion+1, now.UTC()
}
