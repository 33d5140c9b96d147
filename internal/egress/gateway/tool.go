package gateway

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"genesis.dev/sandbox/internal/egress"
)

// toolIdle is how long a kept-alive tool-proxy connection may sit idle.
const toolIdle = 60 * time.Second

type rulesKey struct{}

// hopHeaders are connection-level headers never forwarded.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// toolTransport dials tool upstreams through the gateway's resolver and
// the sandbox's deny set (carried in the request context).
func (s *Server) toolTransport() *http.Transport {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			rules, _ := ctx.Value(rulesKey{}).(*egress.Rules)
			if rules == nil {
				return nil, errors.New("no sandbox rules")
			}
			host, portStr, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			port, _ := strconv.Atoi(portStr)
			var addrs []netip.Addr
			if a, err := netip.ParseAddr(host); err == nil {
				addrs = []netip.Addr{a}
			} else {
				addrs = s.resolve(ctx, rules, strings.ToLower(host))
			}
			d := rules.FilterUpstream(strings.ToLower(host), addrs)
			if !d.Allow {
				return nil, fmt.Errorf("tool upstream %s: %s", host, d.Reason)
			}
			c, _, err := s.dial(d.Addrs, port)
			return c, err
		},
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
	}
	if s.cfg.UpstreamTLS != nil {
		tr.TLSClientConfig = s.cfg.UpstreamTLS.Clone()
	}
	return tr
}

// serveTool runs the tool proxy on one client connection: each request to
// http://<tool>.tool/... goes to the tool's upstream with the credential
// injected and every credential the sandbox sent removed. The policy is
// looked up again for every request.
func (s *Server) serveTool(sb *sandbox, c net.Conn, br *bufio.Reader) {
	for {
		c.SetReadDeadline(time.Now().Add(toolIdle))
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		c.SetReadDeadline(time.Time{})
		if !s.toolRequest(sb, c, req) {
			return
		}
	}
}

// toolRequest forwards one request and reports whether the connection may
// carry another.
func (s *Server) toolRequest(sb *sandbox, c net.Conn, req *http.Request) bool {
	start := s.cfg.Now().UTC()
	rules := sb.rules.Load()
	name, _ := egress.CanonicalName(hostOnly(req.Host))
	if req.URL.IsAbs() {
		name, _ = egress.CanonicalName(req.URL.Hostname())
	}
	t, ok := rules.Tool(name)
	if !ok {
		reason := egress.ReasonNameNotAllowed
		if rules.Mode() == egress.ModeNone {
			reason = egress.ReasonModeNone
		}
		s.deny(sb, c, egress.ProtoTool, name, "", egress.PortHTTP, reason, true)
		return false
	}
	out, err := toolUpstreamRequest(req, t)
	if err != nil {
		s.deny(sb, c, egress.ProtoTool, name, "", egress.PortHTTP, egress.ReasonBadRequest, true)
		return false
	}
	body := &countingReader{r: req.Body}
	if req.Body != nil && req.Body != http.NoBody {
		out.Body = body
	}
	var remote string
	ctx := context.WithValue(context.Background(), rulesKey{}, rules)
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
		if ap, err := netip.ParseAddrPort(i.Conn.RemoteAddr().String()); err == nil {
			remote = ap.Addr().String()
		}
	}})
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.counters.connActive.Add(1)
	defer s.counters.connActive.Add(-1)
	resp, err := s.tool.RoundTrip(out.WithContext(ctx))
	if err != nil {
		s.log.Info("tool upstream failed", "sandbox", sb.id, "tool", name, "err", err)
		s.deny(sb, c, egress.ProtoTool, name, remote, upstreamPort(out.URL), egress.ReasonUpstreamFailed, true)
		return false
	}
	defer resp.Body.Close()
	for _, h := range hopHeaders {
		resp.Header.Del(h)
	}
	for k, vs := range resp.Header { // an upstream echoing the secret must not hand it over
		for _, v := range vs {
			if strings.Contains(v, t.Secret) {
				resp.Header.Del(k)
				break
			}
		}
	}
	resp.Close = req.Close
	cw := &countingWriter{w: c}
	err = resp.Write(cw)
	s.record(egress.Event{Time: start, DurationMS: s.cfg.Now().Sub(start).Milliseconds(), Sandbox: sb.id, Name: name, Address: remote,
		Port: upstreamPort(out.URL), Proto: egress.ProtoTool,
		Decision: egress.DecisionAllow, Reason: egress.ReasonAllowed, BytesUp: body.n, BytesDown: cw.n})
	return err == nil && !req.Close
}

// toolUpstreamRequest builds the upstream request: the tool's URL with the
// sandbox's (cleaned) path and query appended, the sandbox's headers minus
// hop-by-hop and credential headers, and the tool's credential.
func toolUpstreamRequest(req *http.Request, t egress.ResolvedTool) (*http.Request, error) {
	base, err := url.Parse(t.Upstream)
	if err != nil {
		return nil, err
	}
	target := *base
	p := path.Clean("/" + req.URL.Path)
	if strings.HasSuffix(req.URL.Path, "/") && p != "/" {
		p += "/"
	}
	target.Path = strings.TrimSuffix(base.Path, "/") + p
	target.RawPath = ""
	target.RawQuery = req.URL.RawQuery
	out, err := http.NewRequest(req.Method, target.String(), http.NoBody)
	if err != nil {
		return nil, err
	}
	out.Header = req.Header.Clone()
	for _, f := range req.Header["Connection"] {
		for _, h := range strings.Split(f, ",") {
			out.Header.Del(strings.TrimSpace(h))
		}
	}
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	out.Header.Del("Authorization")
	if _, ok := out.Header["User-Agent"]; !ok {
		out.Header["User-Agent"] = []string{""}
	}
	out.ContentLength = req.ContentLength
	switch t.Type {
	case egress.CredentialBearer:
		out.Header.Set("Authorization", "Bearer "+t.Secret)
	case egress.CredentialHeader:
		out.Header.Set(t.Header, t.Secret)
	case egress.CredentialBasic:
		out.SetBasicAuth(t.Username, t.Secret)
	default:
		return nil, fmt.Errorf("unknown credential type %q", t.Type)
	}
	return out, nil
}

func upstreamPort(u *url.URL) int {
	if p, err := strconv.Atoi(u.Port()); err == nil {
		return p
	}
	if u.Scheme == "https" {
		return 443
	}
	return 80
}

type countingReader struct {
	r io.ReadCloser
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) Close() error { return c.r.Close() }

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
