package api

import (
	"net/url"
	"strconv"
	"time"
)

// Endpoint is a named port a sandbox's profile declares, with the URL that
// reaches it through the service.
type Endpoint struct {
	Name     string `json:"name"`
	Port     int    `json:"port"`
	Protocol string `json:"protocol"` // http | websocket | tcp
	// URL is the HTTP(S) URL of the port's root through the service (it
	// needs the API key); for tcp endpoints it is the WebSocket URL that
	// carries the bytes.
	URL string `json:"url"`
}

// CreatePortLinkRequest is the body of POST
// /v1/sandboxes/{id}/ports/{port}/links.
type CreatePortLinkRequest struct {
	TTLSeconds int64 `json:"ttl_seconds"`
}

// PortLink is a preview link: a URL a person can open in a browser without
// an API key, scoped to one port of one sandbox, until ExpiresAt or until
// the sandbox ends.
type PortLink struct {
	// URL opens the port on its own origin with the link's token in the
	// query: a browser trades it for a cookie of that origin; a program may
	// keep sending it (or the Token in the X-Genesis-Preview-Token header).
	URL string `json:"url"`
	// Origin is the port's own origin, "{scheme}://{port}-{sandbox}.{domain}".
	Origin string `json:"origin"`
	// Token is the link's token alone.
	Token     string    `json:"token"`
	SandboxID string    `json:"sandbox_id"`
	Port      int       `json:"port"`
	ExpiresAt time.Time `json:"expires_at"`
}

// PortPath is the path (under the base URL) that reaches port's root of
// sandbox id through the service's HTTP proxy; requests to it need the API
// key like any other.
func PortPath(sandboxID string, port int) string {
	return "/v1/sandboxes/" + url.PathEscape(sandboxID) + "/ports/" + strconv.Itoa(port) + "/"
}
