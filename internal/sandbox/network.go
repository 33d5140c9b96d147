package sandbox

import (
	"time"

	"genesis.dev/sandbox/internal/egress"
)

// NetworkStatus says whether a sandbox's network policy is enforced.
type NetworkStatus string

// Network statuses.
const (
	// NetworkNone: the sandbox has no interface but loopback; nothing to enforce.
	NetworkNone NetworkStatus = "none"
	// NetworkPending: the record exists, the plumbing is being made.
	NetworkPending NetworkStatus = "pending"
	// NetworkActive: the gateway enforces the policy.
	NetworkActive NetworkStatus = "active"
	// NetworkEnforcementDown: the gateway is not answering. The sandbox has
	// no route anywhere (its network is internal) until the gateway is back
	// and the policy pushed again.
	NetworkEnforcementDown NetworkStatus = "enforcement_down"
	// NetworkRemoved: the sandbox is gone and so is its network.
	NetworkRemoved NetworkStatus = "removed"
)

// Network is the persistent network state of one networked sandbox.
type Network struct {
	SandboxID string        `json:"sandbox_id"`
	Tenant    string        `json:"tenant"`
	Policy    egress.Policy `json:"policy"`
	Status    NetworkStatus `json:"status"`
	// StatusReason explains a status other than active.
	StatusReason string `json:"status_reason,omitempty"`
	// GatewayIP is the gateway's address on the sandbox's own network: its
	// DNS server and proxy.
	GatewayIP       string    `json:"gateway_ip,omitempty"`
	ResourceVersion int64     `json:"resourceVersion"`
	UpdatedAt       time.Time `json:"updated_at"`
}

// NetworkSummary is the part of a sandbox's network state shown with the
// sandbox itself.
type NetworkSummary struct {
	Mode         egress.Mode   `json:"mode"`
	Status       NetworkStatus `json:"status"`
	StatusReason string        `json:"status_reason,omitempty"`
}

// NetworkEvent is one allowed or denied DNS lookup or connection attempt of
// a sandbox, as recorded by the service. Cursor orders a sandbox's events
// and resumes a listing.
type NetworkEvent struct {
	Cursor    int64     `json:"cursor"`
	SandboxID string    `json:"sandbox_id"`
	Time      time.Time `json:"time"`
	// DurationMS is how long an allowed connection was open (Time is
	// when it was made); zero for lookups and denials.
	DurationMS int64  `json:"duration_ms,omitempty"`
	Name       string `json:"name,omitempty"`
	Address    string `json:"address,omitempty"`
	Port       int    `json:"port,omitempty"`
	Proto      string `json:"proto"`
	Decision   string `json:"decision"`
	Reason     string `json:"reason,omitempty"`
	BytesUp    int64  `json:"bytes_up"`
	BytesDown  int64  `json:"bytes_down"`
}
