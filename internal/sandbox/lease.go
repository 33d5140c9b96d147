package sandbox

import "time"

// LeaseState is the state of a lease record.
type LeaseState string

// Lease states. A lease is active from its claim until it is released or
// reaped after its expiry; both end states are final.
const (
	LeaseActive   LeaseState = "active"
	LeaseReleased LeaseState = "released"
	LeaseExpired  LeaseState = "expired"
)

// Final reports whether no further change leaves s.
func (s LeaseState) Final() bool { return s == LeaseReleased || s == LeaseExpired }

// Lease is a time-bounded claim on one sandbox by a holder. At most one
// active lease exists per sandbox (the store enforces it).
type Lease struct {
	ID        string            `json:"id"`
	Tenant    string            `json:"tenant"`
	SandboxID string            `json:"sandbox_id"`
	Profile   string            `json:"profile"`
	Runtime   Runtime           `json:"runtime"`
	Holder    string            `json:"holder,omitempty"`
	State     LeaseState        `json:"state"`
	Warm      bool              `json:"warm"` // served from a warm pool
	Metadata  map[string]string `json:"metadata,omitempty"`
	// Reserved is the reservation of the lease's sandbox (Sandbox.Reserved)
	// when the lease was taken for a service workload of its own.
	Reserved string `json:"reserved,omitempty"`
	// TTLSeconds is the lease length asked for; every renew extends the
	// expiry by it unless the renew names its own.
	TTLSeconds      int64      `json:"ttl_seconds"`
	ResourceVersion int64      `json:"resourceVersion"`
	CreatedAt       time.Time  `json:"created_at"`
	RenewedAt       time.Time  `json:"renewed_at"`
	ExpiresAt       time.Time  `json:"expires_at"`
	EndedAt         *time.Time `json:"ended_at,omitempty"`
	EndReason       string     `json:"end_reason,omitempty"`
}

// Expired reports whether an active lease has run past its expiry at now.
func (l *Lease) Expired(now time.Time) bool {
	return l.State == LeaseActive && !now.Before(l.ExpiresAt)
}

// Effective returns the state as a reader should see it at now: an active
// lease past its expiry is expired even before the reaper has recorded it.
func (l *Lease) Effective(now time.Time) LeaseState {
	if l.Expired(now) {
		return LeaseExpired
	}
	return l.State
}
