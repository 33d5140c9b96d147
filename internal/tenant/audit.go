package tenant

import "time"

// Actors of records that no API key caused.
const (
	ActorAnonymous = "anonymous" // a request without a valid key
	ActorSystem    = "system"    // the service itself (TTL reaper, lease expiry)
)

// AuditRecord is one entry of the append-only audit log.
type AuditRecord struct {
	// Seq orders records in the order they were stored; it is the paging
	// cursor. Set by the store.
	Seq       int64     `json:"seq"`
	Time      time.Time `json:"time"`
	Actor     string    `json:"actor"`  // key id, ActorAnonymous or ActorSystem
	Tenant    string    `json:"tenant"` // "" when unauthenticated
	Action    string    `json:"action"` // "POST /v1/sandboxes", "system ttl_expired", …
	Target    string    `json:"target,omitempty"`
	Status    int       `json:"status"`
	Code      string    `json:"code,omitempty"` // problem code of a failed call
	RequestID string    `json:"request_id,omitempty"`
	Remote    string    `json:"remote,omitempty"`
}
