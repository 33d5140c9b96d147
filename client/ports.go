package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
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

// ForwardPort accepts connections on ln until ctx ends and carries each
// over its own WebSocket (DialPort) to port on sandbox id's loopback,
// copying both ways. A connection whose dial fails is closed and reported
// to onError (nil: not reported). When ctx ends ForwardPort closes ln;
// then, or when the caller closed ln, it returns nil once the connections
// in progress have ended. An accept that fails otherwise is its error.
func (c *Client) ForwardPort(ctx context.Context, ln net.Listener, sandboxID string, port int, onError func(from net.Addr, err error)) error {
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			ln.Close()
		case <-done:
		}
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		lc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			rc, err := c.DialPort(dctx, sandboxID, port)
			cancel()
			if err != nil {
				if onError != nil {
					onError(lc.RemoteAddr(), err)
				}
				lc.Close()
				return
			}
			joinConns(lc, rc)
		}()
	}
}

// joinConns copies a and b into each other; when one direction ends it
// half-closes where it can, else closes both.
func joinConns(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		buf := make([]byte, 64<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			if cw.CloseWrite() == nil {
				return
			}
		}
		dst.Close()
		src.Close()
	}
	go pipe(a, b)
	go pipe(b, a)
	wg.Wait()
	a.Close()
	b.Close()
}
