package gateway

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/egress"
)

// recorder keeps every byte read from the client before the destination
// is known, so that they can be replayed to the upstream unchanged.
type recorder struct {
	net.Conn
	buf bytes.Buffer
}

func (r *recorder) Read(p []byte) (int, error) {
	n, err := r.Conn.Read(p)
	r.buf.Write(p[:n])
	return n, err
}

// Write is discarded: nothing may reach the client while peeking.
func (r *recorder) Write(p []byte) (int, error) { return len(p), nil }

// serveHTTP routes a plain HTTP connection by the Host of its first
// request: a tool name goes to the tool proxy, anything else is decided by
// the policy and spliced byte for byte to the upstream on port 80.
func (s *Server) serveHTTP(sb *sandbox, c net.Conn) {
	rec := &recorder{Conn: c}
	br := bufio.NewReader(rec)
	c.SetReadDeadline(time.Now().Add(s.cfg.HeaderTimeout))
	if idleClose(br) {
		return
	}
	req, err := http.ReadRequest(br)
	if err != nil {
		s.deny(sb, c, egress.ProtoHTTP, "", "", s.cfg.Ports.HTTP, egress.ReasonBadRequest, true)
		return
	}
	c.SetReadDeadline(time.Time{})
	host := hostOnly(req.Host)
	if name, ok := egress.CanonicalName(host); ok {
		if _, ok := sb.rules.Load().Tool(name); ok {
			s.serveTool(sb, c, bufio.NewReader(io.MultiReader(bytes.NewReader(rec.buf.Bytes()), c)))
			return
		}
	}
	s.forward(sb, c, egress.ProtoHTTP, host, egress.PortHTTP, false, rec.buf.Bytes(), true)
}

// idleClose reports whether the client sent nothing before it closed or the
// header timeout passed: a connection opened ahead of need (browsers
// preconnect) and never used. It is closed without an answer and is no
// attempt worth an event: a 400 written into it would sit in the socket and
// be read by the client as the answer to the next request it sends there.
func idleClose(br *bufio.Reader) bool {
	_, err := br.Peek(1)
	return err != nil
}

// serveTLS peeks the server name of the ClientHello (the TLS session is
// never terminated) and splices the connection to that name on port 443.
func (s *Server) serveTLS(sb *sandbox, c net.Conn) {
	rec := &recorder{Conn: c}
	c.SetReadDeadline(time.Now().Add(s.cfg.HeaderTimeout))
	name := peekSNI(rec)
	c.SetReadDeadline(time.Time{})
	if name == "" {
		s.deny(sb, c, egress.ProtoTLS, "", "", egress.PortTLS, egress.ReasonNoServerName, false)
		return
	}
	s.forward(sb, c, egress.ProtoTLS, name, egress.PortTLS, false, rec.buf.Bytes(), false)
}

var errPeeked = errors.New("server name peeked")

// peekSNI reads a ClientHello from c and returns its server name ("" when
// there is none or the bytes are not TLS). c must discard writes.
func peekSNI(c net.Conn) string {
	var name string
	tls.Server(c, &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		name = h.ServerName
		return nil, errPeeked
	}}).Handshake()
	return name
}

// serveProxy is the proxy for clients that honour HTTP(S)_PROXY: CONNECT
// host:port (checked against the policy; IP literals only under a CIDR
// rule) and absolute-form plain HTTP requests (one request per connection;
// tool names go to the tool proxy).
func (s *Server) serveProxy(sb *sandbox, c net.Conn) {
	br := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(s.cfg.HeaderTimeout))
	if idleClose(br) {
		return
	}
	req, err := http.ReadRequest(br)
	if err != nil {
		s.deny(sb, c, egress.ProtoConnect, "", "", s.cfg.Ports.Proxy, egress.ReasonBadRequest, true)
		return
	}
	c.SetReadDeadline(time.Time{})
	if req.Method == http.MethodConnect {
		host, portStr, err := net.SplitHostPort(req.Host)
		port, perr := strconv.Atoi(portStr)
		if err != nil || perr != nil || port < 1 || port > 65535 {
			s.deny(sb, c, egress.ProtoConnect, req.Host, "", 0, egress.ReasonBadRequest, true)
			return
		}
		var pending []byte
		if n := br.Buffered(); n > 0 { // the client may send its first bytes eagerly
			pending, _ = br.Peek(n)
			pending = bytes.Clone(pending)
		}
		s.forward(sb, c, egress.ProtoConnect, host, port, true, pending, true)
		return
	}
	if req.URL == nil || req.URL.Scheme != "http" || req.URL.Host == "" {
		s.deny(sb, c, egress.ProtoHTTP, req.Host, "", 0, egress.ReasonBadRequest, true)
		return
	}
	host, port := hostOnly(req.URL.Host), egress.PortHTTP
	if p := req.URL.Port(); p != "" {
		if port, err = strconv.Atoi(p); err != nil || port < 1 || port > 65535 {
			s.deny(sb, c, egress.ProtoHTTP, req.URL.Host, "", 0, egress.ReasonBadRequest, true)
			return
		}
	}
	if name, ok := egress.CanonicalName(host); ok && port == egress.PortHTTP {
		if _, ok := sb.rules.Load().Tool(name); ok {
			s.serveTool(sb, c, bufio.NewReader(io.MultiReader(requestReader(req), br)))
			return
		}
	}
	// Rewrite the head to origin form, one request per connection (a proxy
	// client may send its next request for another host on the same
	// connection); the body follows unchanged, streamed.
	first := originHead(req)
	if n := br.Buffered(); n > 0 {
		b, _ := br.Peek(n)
		first = append(first, b...)
	}
	s.forward(sb, c, egress.ProtoHTTP, host, port, true, first, true)
}

// originHead is the head of a proxy request rewritten for the origin:
// origin-form target, no proxy headers, Connection: close, the body's
// framing kept as it came.
func originHead(req *http.Request) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", req.Method, req.URL.RequestURI(), req.URL.Host)
	h := req.Header.Clone()
	for _, f := range h["Connection"] {
		for _, name := range strings.Split(f, ",") {
			h.Del(strings.TrimSpace(name))
		}
	}
	for _, name := range []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authorization", "Te", "Upgrade",
		"Transfer-Encoding", "Content-Length"} {
		h.Del(name)
	}
	h.Set("Connection", "close")
	switch {
	case len(req.TransferEncoding) > 0:
		h.Set("Transfer-Encoding", strings.Join(req.TransferEncoding, ", "))
	case req.ContentLength > 0:
		h.Set("Content-Length", strconv.FormatInt(req.ContentLength, 10))
	}
	h.Write(&b)
	b.WriteString("\r\n")
	return b.Bytes()
}

// requestReader serializes req back to the wire (used to hand a proxy
// request for a tool to the tool proxy's request loop).
func requestReader(req *http.Request) io.Reader {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(req.Write(pw)) }()
	return pr
}

// forward decides host:port for sb, dials the upstream by a checked
// address, replays first and splices the connection both ways. literal
// allows an IP address as host (CONNECT and proxy requests); httpDenial
// answers a denial with an HTTP 403 instead of closing.
func (s *Server) forward(sb *sandbox, c net.Conn, proto, host string, port int, literal bool, first []byte, httpDenial bool) {
	start := s.cfg.Now().UTC()
	rules := sb.rules.Load()
	name, addrs := "", []netip.Addr(nil)
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		if !literal {
			s.deny(sb, c, proto, host, a.String(), port, egress.ReasonLiteralDenied, httpDenial)
			return
		}
		addrs = []netip.Addr{a}
	} else {
		var ok bool
		if name, ok = egress.CanonicalName(host); !ok {
			s.deny(sb, c, proto, truncate(host, 255), "", port, egress.ReasonNameNotAllowed, httpDenial)
			return
		}
		if d := rules.DecidePort(name, port); !d.Allow {
			s.deny(sb, c, proto, name, "", port, d.Reason, httpDenial) // no lookup for a name the policy refuses
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.DialTimeout)
		addrs = s.resolve(ctx, rules, name)
		cancel()
	}
	d := rules.Decide(name, port, addrs)
	if !d.Allow {
		addr := ""
		if len(addrs) > 0 {
			addr = addrs[0].String()
		}
		s.deny(sb, c, proto, name, addr, port, d.Reason, httpDenial)
		return
	}
	up, addr, err := s.dial(d.Addrs, port)
	if err != nil {
		s.log.Info("upstream dial failed", "sandbox", sb.id, "name", name, "port", port, "err", err)
		s.deny(sb, c, proto, name, addr.String(), port, egress.ReasonUpstreamFailed, httpDenial)
		return
	}
	if !sb.track(up) {
		up.Close()
		return
	}
	defer sb.untrack(up)
	defer up.Close()
	if proto == egress.ProtoConnect {
		if _, err := io.WriteString(c, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
			return
		}
	}
	sb.routed(c, &route{name: name, port: port, addr: addr})
	s.counters.connActive.Add(1)
	upN, downN := splice(c, up, first)
	s.counters.connActive.Add(-1)
	s.record(egress.Event{Time: start, DurationMS: s.cfg.Now().Sub(start).Milliseconds(), Sandbox: sb.id, Name: name, Address: addr.String(),
		Port: port, Proto: proto, Decision: egress.DecisionAllow, Reason: egress.ReasonAllowed, BytesUp: upN, BytesDown: downN})
}

// resolve returns the addresses of name: the operator's mapping when there
// is one, else the gateway's resolver. Failures give no addresses.
func (s *Server) resolve(ctx context.Context, rules *egress.Rules, name string) []netip.Addr {
	if a, ok := rules.Fixed(name); ok {
		return a
	}
	a, err := s.cfg.Resolver.LookupNetIP(ctx, "ip", name)
	if err != nil {
		return nil
	}
	return a
}

// dial connects to the first reachable address of addrs on port.
func (s *Server) dial(addrs []netip.Addr, port int) (net.Conn, netip.Addr, error) {
	d := net.Dialer{Timeout: s.cfg.DialTimeout}
	var last error
	for _, a := range addrs {
		c, err := d.Dial("tcp", netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return c, a, nil
		}
		last = err
	}
	if len(addrs) == 0 {
		return nil, netip.Addr{}, fmt.Errorf("no address")
	}
	return nil, addrs[0], last
}

// deny records a denied attempt and tells the client: an HTTP 403 naming
// the reason, or just a closed connection.
func (s *Server) deny(sb *sandbox, c net.Conn, proto, name, addr string, port int, reason string, httpDenial bool) {
	s.record(egress.Event{Sandbox: sb.id, Name: name, Address: addr, Port: port, Proto: proto,
		Decision: egress.DecisionDeny, Reason: reason})
	if httpDenial {
		status := http.StatusForbidden
		if reason == egress.ReasonUpstreamFailed {
			status = http.StatusBadGateway
		} else if reason == egress.ReasonBadRequest {
			status = http.StatusBadRequest
		}
		body := "genesis egress: " + reason + "\n"
		fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nX-Genesis-Egress-Reason: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
			status, http.StatusText(status), reason, len(body), body)
	}
}

// splice copies client→upstream (after first) and upstream→client until
// both directions end, half-closing each side as its source finishes, and
// returns the bytes moved each way. An error in either direction (not a
// clean end) closes both connections, so that neither copy can hang on a
// peer that went away.
func splice(client, upstream net.Conn, first []byte) (up, down int64) {
	var wg sync.WaitGroup
	wg.Go(func() {
		if len(first) > 0 {
			n, err := upstream.Write(first)
			up += int64(n)
			if err != nil {
				client.Close()
				upstream.Close()
				return
			}
		}
		n, err := io.Copy(upstream, client)
		up += n
		if err != nil {
			client.Close()
			upstream.Close()
			return
		}
		closeWrite(upstream)
	})
	n, err := io.Copy(client, upstream)
	down = n
	if err != nil {
		client.Close()
		upstream.Close()
	} else {
		closeWrite(client)
	}
	wg.Wait()
	return up, down
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}

// hostOnly drops a port from a Host value.
func hostOnly(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		return host
	}
	return strings.Trim(h, "[]")
}
