package api

import "time"

// Network modes.
const (
	NetworkNone        = "none"
	NetworkAllowlist   = "allowlist"
	NetworkInternalAPI = "internal-api"
	NetworkToolProxy   = "tool-proxy"
)

// NetworkPolicy is a sandbox's network policy.
type NetworkPolicy struct {
	Mode string `json:"mode"`
	// Allow lists the rules of mode allowlist.
	Allow []NetworkRule `json:"allow,omitempty"`
	// Endpoints names operator internal endpoints (mode internal-api).
	Endpoints []string `json:"endpoints,omitempty"`
	// Tools names operator tools (mode tool-proxy).
	Tools []string `json:"tools,omitempty"`
}

// NetworkRule is one allowlist entry: a host (exact or "*.suffix") or a
// CIDR (for IP literals), with ports (default 80 and 443).
type NetworkRule struct {
	Host  string `json:"host,omitempty"`
	CIDR  string `json:"cidr,omitempty"`
	Ports []int  `json:"ports,omitempty"`
}

// NetworkSummary is the network part of a Sandbox.
type NetworkSummary struct {
	Mode         string `json:"mode"`
	Status       string `json:"status"`
	StatusReason string `json:"status_reason,omitempty"`
}

// SandboxNetwork is the body of GET and PUT /v1/sandboxes/{id}/network.
// Status is none, pending, active, enforcement_down or removed.
type SandboxNetwork struct {
	SandboxID       string        `json:"sandbox_id"`
	Policy          NetworkPolicy `json:"policy"`
	Status          string        `json:"status"`
	StatusReason    string        `json:"status_reason,omitempty"`
	GatewayIP       string        `json:"gateway_ip,omitempty"`
	ResourceVersion string        `json:"resource_version"`
	UpdatedAt       time.Time     `json:"updated_at"`
}

// NetworkEvent is one allowed or denied DNS lookup or connection attempt,
// at Time. An allowed connection is listed once it has ended, with the bytes
// it moved and DurationMS, how long it was open.
type NetworkEvent struct {
	Cursor     int64     `json:"cursor"`
	Time       time.Time `json:"time"`
	DurationMS int64     `json:"duration_ms,omitempty"`
	Name       string    `json:"name,omitempty"`
	Address    string    `json:"address,omitempty"`
	Port       int       `json:"port,omitempty"`
	Proto      string    `json:"proto"`
	Decision   string    `json:"decision"`
	Reason     string    `json:"reason,omitempty"`
	BytesUp    int64     `json:"bytes_up"`
	BytesDown  int64     `json:"bytes_down"`
}

// NetworkEventList is the body of GET /v1/sandboxes/{id}/network/events.
// NextCursor resumes after the last event (it equals the request's cursor
// when there were none).
type NetworkEventList struct {
	Items      []NetworkEvent `json:"items"`
	NextCursor string         `json:"next_cursor"`
}

// NetworkCapabilities says which network modes this host can enforce now.
type NetworkCapabilities struct {
	Modes     map[string]bool `json:"modes"`
	Gateway   string          `json:"gateway"` // running | idle | down | unavailable
	Reason    string          `json:"reason,omitempty"`
	Tools     []string        `json:"tools"`
	Endpoints []string        `json:"endpoints"`
}
