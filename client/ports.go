package client

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"
)

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
