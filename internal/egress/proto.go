package egress

import (
	"fmt"
	"log/slog"
	"time"
)

// Control API of the gateway (HTTP/1.1 over a Unix socket in a host
// directory bind-mounted into the gateway container).
//
//	PUT    /v1/sandboxes/{id}   SandboxConfig → SandboxStatus   (create or replace; effective at once)
//	DELETE /v1/sandboxes/{id}   → 204 (also when unknown)
//	GET    /v1/sandboxes        → SandboxList
//	GET    /v1/events?after=&limit=  → EventsPage
//	GET    /v1/counters         → Counters
//	GET    /healthz             → Health
//
// Errors are JSON Error bodies with a 4xx/5xx status.
const (
	PathSandboxes = "/v1/sandboxes"
	PathEvents    = "/v1/events"
	PathCounters  = "/v1/counters"
	PathHealth    = "/healthz"
)

// Ports the gateway serves on each sandbox's local address.
const (
	PortDNS   = 53
	PortHTTP  = 80
	PortTLS   = 443
	PortProxy = 3128
)

// SandboxConfig is what the service pushes for one sandbox.
type SandboxConfig struct {
	// LocalIP is the gateway's own address on the sandbox's network; the
	// gateway serves DNS, HTTP, TLS and the CONNECT proxy on it and knows
	// the sandbox by it.
	LocalIP string `json:"local_ip"`
	// Policy is the sandbox's normalized policy.
	Policy Policy `json:"policy"`
	// Resolved is the part of the operator configuration the policy uses.
	Resolved Resolved `json:"resolved"`
}

// Resolved is the operator configuration one sandbox's policy refers to,
// with tool secrets read (see OperatorConfig.Resolve).
type Resolved struct {
	StaticHosts       map[string]string           `json:"static_hosts,omitempty"`
	InternalEndpoints map[string]InternalEndpoint `json:"internal_endpoints,omitempty"`
	Tools             map[string]ResolvedTool     `json:"tools,omitempty"`
	// Deny adds addresses or ranges to the always-denied set (Docker bridge
	// gateways, the host's own addresses).
	Deny []string `json:"deny,omitempty"`
}

// ResolvedTool is a tool with its secret's value. It never prints or logs
// the secret.
type ResolvedTool struct {
	Upstream string `json:"upstream"`
	Type     string `json:"type"`
	Header   string `json:"header,omitempty"`
	Username string `json:"username,omitempty"`
	Secret   string `json:"secret"`
}

// String describes t without its secret.
func (t ResolvedTool) String() string {
	return fmt.Sprintf("tool{upstream=%s type=%s secret=[redacted]}", t.Upstream, t.Type)
}

// GoString describes t without its secret.
func (t ResolvedTool) GoString() string { return t.String() }

// LogValue keeps the secret out of structured logs.
func (t ResolvedTool) LogValue() slog.Value {
	return slog.GroupValue(slog.String("upstream", t.Upstream), slog.String("type", t.Type))
}

// SandboxStatus is the gateway's view of one sandbox.
type SandboxStatus struct {
	ID      string `json:"id"`
	LocalIP string `json:"local_ip"`
	Mode    Mode   `json:"mode"`
	// Listening is true once every listener on LocalIP is up.
	Listening bool `json:"listening"`
}

// SandboxList answers GET /v1/sandboxes.
type SandboxList struct {
	Sandboxes []SandboxStatus `json:"sandboxes"`
}

// Event protocols.
const (
	ProtoDNS     = "dns"
	ProtoHTTP    = "http"
	ProtoTLS     = "tls"
	ProtoConnect = "connect"
	ProtoTool    = "tool"
)

// Decisions.
const (
	DecisionAllow = "allow"
	DecisionDeny  = "deny"
)

// Event is one allowed or denied DNS lookup or connection attempt. Time is
// when the sandbox made it. Allowed connections are recorded when they end,
// with the bytes moved and how long they lasted, so a connection's event
// can come after events of attempts made while it was open.
type Event struct {
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	// DurationMS is how long an allowed connection (or tool request) was
	// open; zero for denials and lookups.
	DurationMS int64  `json:"duration_ms,omitempty"`
	Sandbox    string `json:"sandbox"`
	Name       string `json:"name,omitempty"`
	Address    string `json:"address,omitempty"`
	Port       int    `json:"port,omitempty"`
	Proto      string `json:"proto"`
	Decision   string `json:"decision"`
	Reason     string `json:"reason"`
	BytesUp    int64  `json:"bytes_up"`
	BytesDown  int64  `json:"bytes_down"`
}

// EventsPage answers GET /v1/events?after=N&limit=M: events with seq > N in
// order. Next is the cursor for the following call (the last seq returned,
// or N when there was nothing new). Lost counts events after N that the
// bounded ring already dropped.
type EventsPage struct {
	Events []Event `json:"events"`
	Next   uint64  `json:"next"`
	Lost   uint64  `json:"lost"`
}

// Counters are the gateway's running totals since it started.
type Counters struct {
	DNSAllowed    uint64 `json:"dns_allowed"`
	DNSDenied     uint64 `json:"dns_denied"`
	ConnAllowed   uint64 `json:"conn_allowed"`
	ConnDenied    uint64 `json:"conn_denied"`
	ConnActive    int64  `json:"conn_active"`
	BytesUp       uint64 `json:"bytes_up"`
	BytesDown     uint64 `json:"bytes_down"`
	EventsDropped uint64 `json:"events_dropped"`
	Sandboxes     int    `json:"sandboxes"`
}

// Health answers GET /healthz.
type Health struct {
	Status    string    `json:"status"` // "ok"
	Version   string    `json:"version"`
	Started   time.Time `json:"started"`
	Sandboxes int       `json:"sandboxes"`
	LastSeq   uint64    `json:"last_seq"`
}

// Error is the body of every failed control call.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}
