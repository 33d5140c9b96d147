package api

import "time"

// AcquireLeaseRequest is the body of POST /v1/leases.
type AcquireLeaseRequest struct {
	Profile   string `json:"profile"`
	RiskLevel string `json:"risk_level,omitempty"`
	Runtime   string `json:"runtime,omitempty"`
	// TTLSeconds is the lease length; nil takes the profile's default.
	TTLSeconds *int64 `json:"ttl_seconds,omitempty"`
	Holder     string `json:"holder,omitempty"`
	// WaitSeconds is how long to wait for capacity when no warm sandbox is
	// free and the host is full (0: answer 503 at once).
	WaitSeconds int64             `json:"wait_seconds,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	Resources   *Resources        `json:"resources,omitempty"`
	// Network is the network policy; nil takes the tenant's or profile's
	// default. A warm sandbox is handed out only when it runs this policy.
	Network *NetworkPolicy `json:"network,omitempty"`
	// MCP starts these MCP servers in the leased sandbox (lease_id is the
	// lease's); they stop when the lease ends. One that cannot start
	// fails the acquire, and the lease is released.
	MCP []MCPCreateRequest `json:"mcp,omitempty"`
	// SnapshotID, if set, starts the lease's sandbox from a snapshot (its
	// profile and runtime): a member of a pool fed from that snapshot when
	// one is idle, else a new sandbox made from it (see
	// CreateSandboxRequest.SnapshotID).
	SnapshotID string `json:"snapshot_id,omitempty"`
	// Volumes are the tenant's named volumes to mount; a lease that asks
	// for any is served by a new sandbox, never a warm one.
	Volumes []VolumeMount `json:"volumes,omitempty"`
}

// Lease is a time-bounded claim on a sandbox.
type Lease struct {
	LeaseID         string            `json:"lease_id"`
	SandboxID       string            `json:"sandbox_id"`
	State           string            `json:"state"` // active | released | expired
	Warm            bool              `json:"warm"`
	Profile         string            `json:"profile"`
	Runtime         string            `json:"runtime"`
	Holder          string            `json:"holder,omitempty"`
	Metadata        map[string]string `json:"metadata"`
	TTLSeconds      int64             `json:"ttl_seconds"`
	ResourceVersion string            `json:"resource_version"`
	CreatedAt       time.Time         `json:"created_at"`
	RenewedAt       time.Time         `json:"renewed_at"`
	ExpiresAt       time.Time         `json:"expires_at"`
	EndedAt         *time.Time        `json:"ended_at,omitempty"`
	EndReason       string            `json:"end_reason,omitempty"`
	// Reserved is the workload the lease's sandbox is reserved to
	// (Sandbox.Reserved): the own lease of an MCP server that holds
	// operator secrets. It can be renewed and released (which ends the
	// server); nothing reaches inside its sandbox.
	Reserved string `json:"reserved,omitempty"`
	// Sandbox is the leased sandbox (in the answer to an acquire).
	Sandbox *Sandbox `json:"sandbox,omitempty"`
	// MCPServers are the servers started with the lease (in the answer to
	// an acquire with mcp), each with its endpoint and token.
	MCPServers []MCPServer `json:"mcp_servers,omitempty"`
}

// LeaseList is the body of GET /v1/leases.
type LeaseList struct {
	Items []Lease `json:"items"`
}

// RenewLeaseRequest is the body of POST /v1/leases/{id}/renew.
type RenewLeaseRequest struct {
	// TTLSeconds extends the lease this long from now; nil: the lease's own
	// length.
	TTLSeconds *int64 `json:"ttl_seconds,omitempty"`
}

// Pool is a warm pool of one profile under one runtime.
type Pool struct {
	Name     string `json:"name"`
	Profile  string `json:"profile"`
	Runtime  string `json:"runtime"`
	MinIdle  int    `json:"min_idle"`
	MaxTotal int    `json:"max_total"`
	// Counts are the live sandboxes of this profile and runtime on this
	// instance by state; "idle" ones are the warm members.
	Counts   map[string]int `json:"counts"`
	Total    int            `json:"total"`
	Starting int64          `json:"starting"`
	Hits     int64          `json:"hits"`
	Misses   int64          `json:"misses"`
	Made     int64          `json:"made"`
	Replaced int64          `json:"replaced"`
	// Recycled counts released sandboxes reset and returned to the pool
	// (profile lease.on_release: reset); ResetFailed the resets that
	// failed, whose sandboxes were destroyed instead.
	Recycled    int64 `json:"recycled"`
	ResetFailed int64 `json:"reset_failed"`
	// RefillRate is sandboxes made per second during the last refill run.
	RefillRate float64 `json:"refill_rate"`
	Draining   bool    `json:"draining"`
	LastError  string  `json:"last_error,omitempty"`
	// SnapshotID is the snapshot the pool's members are made from (""
	// for the profile's image); a lease names it to take one.
	SnapshotID string `json:"snapshot_id,omitempty"`
	// State is ready (min_idle members idle), filling, failing (the last
	// member could not be made for a reason other than host capacity:
	// LastError says why) or draining.
	State string `json:"state"`
}

// PoolList is the body of GET /v1/pools and POST /v1/pools/{name}/drain.
type PoolList struct {
	Items    []Pool `json:"items"`
	Draining bool   `json:"draining"` // the whole service drains
}
