package client

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"
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

// PortURL is the absolute URL of port's root of sandbox id through the
// service (see PortPath).
func (c *Client) PortURL(sandboxID string, port int) string {
	return c.baseURL + PortPath(sandboxID, port)
}

// CreatePortLink asks for a preview link to port of sandbox id, valid for
// ttl (whole seconds).
func (c *Client) CreatePortLink(ctx context.Context, sandboxID string, port int, ttl time.Duration) (*PortLink, error) {
	var out PortLink
	err := c.do(ctx, request{
		method: http.MethodPost, path: PortPath(sandboxID, port) + "links", auth: true,
		body: CreatePortLinkRequest{TTLSeconds: int64(ttl / time.Second)},
	}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// DialPort opens a TCP connection to port on sandbox id's loopback,
// carried over a WebSocket through the service (GET
// /v1/sandboxes/{id}/ports/{port}/tcp). The sandbox needs no network of
// its own. A port nobody listens on fails with an APIError of status 502
// and code port_unreachable.
func (c *Client) DialPort(ctx context.Context, sandboxID string, port int) (net.Conn, error) {
	if err := ValidateBaseURL(c.baseURL); err != nil {
		return nil, err
	}
	u := c.baseURL + PortPath(sandboxID, port) + "tcp"
	u = "ws" + strings.TrimPrefix(u, "http")
	h := http.Header{}
	h.Set("Authorization", "Bearer "+c.apiKey)
	if c.userAgent != "" {
		h.Set("User-Agent", c.userAgent)
	}
	ws, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{
		HTTPClient:      c.http,
		HTTPHeader:      h,
		CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
			return nil, newAPIError(resp.StatusCode, resp.Header, body)
		}
		return nil, fmt.Errorf("dial port %d of sandbox %s: %w", port, sandboxID, err)
	}
	ws.SetReadLimit(-1)
	// The connection outlives ctx (which bounds only the dial).
	return websocket.NetConn(context.WithoutCancel(ctx), ws, websocket.MessageBinary), nil
}
