package gateway

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/egress"
	"genesis.dev/sandbox/internal/errdefs"
)

func webOperator(web *upstream) egress.OperatorConfig {
	return egress.OperatorConfig{StaticHosts: map[string]string{"web.test": web.addr.String(), "other.test": web.addr.String()}}
}

func lookupNotFound(err error) bool {
	var de *net.DNSError
	return errors.As(err, &de) && de.IsNotFound
}

func TestAllowlistDNSHTTPAndTLS(t *testing.T) {
	t.Parallel()
	web := startUpstream(t, nil, "web.test", "other.test")
	g := startGateway(t, nil)
	ip := loopbackAddr()
	g.put(t, "sb-allow", ip, webOperator(web), egress.Policy{Mode: egress.ModeAllowlist,
		Allow: []egress.Rule{{Host: "web.test", Ports: []int{80, 443}}}})
	sc := newSandboxClient(ip, web.roots)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// DNS: the allowed name answers the gateway itself, others do not exist.
	addrs, err := sc.resolver.LookupNetIP(ctx, "ip4", "web.test")
	if err != nil || len(addrs) != 1 || addrs[0] != ip {
		t.Fatalf("lookup web.test = %v, %v; want [%s]", addrs, err, ip)
	}
	if _, err := sc.resolver.LookupNetIP(ctx, "ip4", "other.test"); !lookupNotFound(err) {
		t.Fatalf("lookup other.test: %v, want NXDOMAIN", err)
	}
	if _, err := sc.resolver.LookupNetIP(ctx, "ip4", "metadata.google.internal"); !lookupNotFound(err) {
		t.Fatalf("lookup of an unlisted name: %v, want NXDOMAIN", err)
	}

	// HTTP routed by Host, spliced unchanged.
	code, body, _ := get(t, sc.http, "http://web.test/hello")
	if code != 200 || body != "host=web.test path=/hello auth=" {
		t.Fatalf("GET http://web.test/hello = %d %q", code, body)
	}
	// TLS routed by SNI and never terminated: the client verified the
	// upstream's own certificate for web.test.
	code, body, _ = get(t, sc.http, "https://web.test/tls")
	if code != 200 || body != "host=web.test path=/tls auth=" {
		t.Fatalf("GET https://web.test/tls = %d %q", code, body)
	}

	// A name the policy refuses, even when the client connects by hand.
	gwHTTP := netip.AddrPortFrom(ip, egress.PortHTTP)
	if got := rawHTTP(t, gwHTTP, "GET / HTTP/1.1\r\nHost: other.test\r\n\r\n"); !strings.HasPrefix(got, "HTTP/1.1 403") ||
		!strings.Contains(got, egress.ReasonNameNotAllowed) {
		t.Fatalf("Host other.test: %q", firstLine(got))
	}
	if got := rawHTTP(t, gwHTTP, "GET / HTTP/1.1\r\nHost: "+web.addr.String()+"\r\n\r\n"); !strings.Contains(got, egress.ReasonLiteralDenied) {
		t.Fatalf("Host IP literal: %q", firstLine(got))
	}
	// TLS to a refused name: the connection is closed, no handshake.
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", netip.AddrPortFrom(ip, egress.PortTLS).String(),
		&tls.Config{ServerName: "other.test", RootCAs: web.roots})
	if err == nil {
		conn.Close()
		t.Fatal("TLS to other.test was spliced")
	}
	for _, r := range web.requests() {
		if r.Host == "other.test" {
			t.Fatalf("upstream saw a request for other.test")
		}
	}

	// Events: allowed connections with bytes both ways, denials with reasons.
	ev := g.waitEvent(t, "http allow with bytes", func(e egress.Event) bool {
		return e.Proto == egress.ProtoHTTP && e.Decision == egress.DecisionAllow && e.Name == "web.test"
	})
	if ev.Sandbox != "sb-allow" || ev.Address != web.addr.String() || ev.Port != 80 || ev.BytesUp <= 0 || ev.BytesDown <= 0 {
		t.Fatalf("http event = %+v", ev)
	}
	ev = g.waitEvent(t, "tls allow", func(e egress.Event) bool {
		return e.Proto == egress.ProtoTLS && e.Decision == egress.DecisionAllow
	})
	if ev.Name != "web.test" || ev.Port != 443 || ev.BytesUp < 100 || ev.BytesDown < 100 {
		t.Fatalf("tls event = %+v", ev)
	}
	g.waitEvent(t, "dns deny", func(e egress.Event) bool {
		return e.Proto == egress.ProtoDNS && e.Decision == egress.DecisionDeny && e.Name == "other.test" && e.Reason == egress.ReasonNameNotAllowed
	})
	g.waitEvent(t, "tls deny", func(e egress.Event) bool {
		return e.Proto == egress.ProtoTLS && e.Decision == egress.DecisionDeny && e.Name == "other.test"
	})
	c := g.srv.Counters()
	if c.DNSAllowed < 1 || c.DNSDenied < 2 || c.ConnAllowed < 2 || c.ConnDenied < 3 || c.BytesDown == 0 {
		t.Fatalf("counters = %+v", c)
	}
}

func TestConnectProxyAndIPLiterals(t *testing.T) {
	t.Parallel()
	web := startUpstream(t, nil, "web.test")
	g := startGateway(t, nil)
	ip := loopbackAddr()
	op := webOperator(web)
	g.put(t, "sb-proxy", ip, op, egress.Policy{Mode: egress.ModeAllowlist, Allow: []egress.Rule{{Host: "web.test"}}})
	pc := proxyClient(ip, web.roots)

	if code, body, _ := get(t, pc, "https://web.test/via-connect"); code != 200 || body != "host=web.test path=/via-connect auth=" {
		t.Fatalf("CONNECT web.test:443 = %d %q", code, body)
	}
	if code, body, _ := get(t, pc, "http://web.test/via-proxy"); code != 200 || body != "host=web.test path=/via-proxy auth=" {
		t.Fatalf("proxied GET = %d %q", code, body)
	}
	// A body goes through the proxy streamed, with its framing: fixed
	// length and chunked.
	for want, body := range map[string]io.Reader{
		"payload-123": strings.NewReader("payload-123"),                                        // Content-Length
		"chunked-456": io.MultiReader(strings.NewReader("chunked-"), strings.NewReader("456")), // unknown length: chunked
	} {
		resp, err := pc.Post("http://web.test/post", "text/plain", body)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "host=web.test path=/post auth= body="+want {
			t.Fatalf("proxied POST = %d %q", resp.StatusCode, b)
		}
	}
	proxy := netip.AddrPortFrom(ip, egress.PortProxy)
	if got := rawHTTP(t, proxy, "CONNECT other.test:443 HTTP/1.1\r\nHost: other.test:443\r\n\r\n"); !strings.HasPrefix(got, "HTTP/1.1 403") {
		t.Fatalf("CONNECT other.test: %q", firstLine(got))
	}
	if got := rawHTTP(t, proxy, "CONNECT web.test:22 HTTP/1.1\r\nHost: web.test:22\r\n\r\n"); !strings.Contains(got, egress.ReasonPortNotAllowed) {
		t.Fatalf("CONNECT web.test:22: %q", got)
	}
	// The IP literal of an allowed name is refused without a CIDR rule...
	literal := netip.AddrPortFrom(web.addr, 443).String()
	if got := rawHTTP(t, proxy, "CONNECT "+literal+" HTTP/1.1\r\nHost: "+literal+"\r\n\r\n"); !strings.Contains(got, egress.ReasonLiteralDenied) {
		t.Fatalf("CONNECT %s without cidr rule: %q", literal, firstLine(got))
	}
	// ...and allowed once one covers it (the operator mapped this address,
	// so a single-address rule may name it).
	g.put(t, "sb-proxy", ip, op, egress.Policy{Mode: egress.ModeAllowlist, Allow: []egress.Rule{
		{Host: "web.test"}, {CIDR: web.addr.String() + "/32", Ports: []int{443}}}})
	c, err := net.DialTimeout("tcp", proxy.String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "CONNECT "+literal+" HTTP/1.1\r\nHost: "+literal+"\r\n\r\n")
	br := bufio.NewReader(c)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT %s with cidr rule: %v %v", literal, resp, err)
	}
	tc := tls.Client(bufConn{c, br}, &tls.Config{ServerName: "web.test", RootCAs: web.roots})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("TLS through the literal tunnel: %v", err)
	}
	tc.Close()
	g.waitEvent(t, "connect allow", func(e egress.Event) bool {
		return e.Proto == egress.ProtoConnect && e.Decision == egress.DecisionAllow && e.Name == "web.test" && e.BytesDown > 0
	})
	g.waitEvent(t, "literal deny", func(e egress.Event) bool {
		return e.Proto == egress.ProtoConnect && e.Reason == egress.ReasonLiteralDenied && e.Address == web.addr.String()
	})
}

// TestResolvedAddressesAreChecked: a name the policy allows but whose DNS
// answer points at loopback (here: the test's own upstream) is refused; the
// gateway never dials it.
func TestResolvedAddressesAreChecked(t *testing.T) {
	t.Parallel()
	web := startUpstream(t, nil, "rebind.example")
	g := startGateway(t, func(c *Config) {
		c.Resolver = fakeResolver{"rebind.example": {web.addr}}
	})
	ip := loopbackAddr()
	g.put(t, "sb-rebind", ip, egress.OperatorConfig{}, egress.Policy{Mode: egress.ModeAllowlist, Allow: []egress.Rule{{Host: "rebind.example"}}})
	got := rawHTTP(t, netip.AddrPortFrom(ip, egress.PortHTTP), "GET / HTTP/1.1\r\nHost: rebind.example\r\n\r\n")
	if !strings.Contains(got, egress.ReasonAddressDenied) {
		t.Fatalf("rebinding to loopback: %q", firstLine(got))
	}
	if n := len(web.requests()); n != 0 {
		t.Fatalf("upstream got %d requests", n)
	}
}

type fakeResolver map[string][]netip.Addr

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func TestPolicyUpdateAppliesImmediately(t *testing.T) {
	t.Parallel()
	web := startUpstream(t, nil, "web.test", "other.test")
	g := startGateway(t, nil)
	ip := loopbackAddr()
	op := webOperator(web)
	g.put(t, "sb-upd", ip, op, egress.Policy{Mode: egress.ModeAllowlist, Allow: []egress.Rule{{Host: "web.test"}}})
	sc := newSandboxClient(ip, web.roots)
	if code, _, _ := get(t, sc.http, "http://web.test/"); code != 200 {
		t.Fatalf("before update: %d", code)
	}
	// A kept-alive connection to web.test, open across the update.
	kept, err := net.DialTimeout("tcp", netip.AddrPortFrom(ip, egress.PortHTTP).String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()
	kept.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(kept)
	if err := oneRequest(kept, br, "/", false); err != nil {
		t.Fatalf("kept-alive request: %v", err)
	}
	g.put(t, "sb-upd", ip, op, egress.Policy{Mode: egress.ModeAllowlist, Allow: []egress.Rule{{Host: "other.test"}}})
	// The update cut it: the next read ends instead of waiting.
	if _, err := br.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("connection to web.test still open after the update: %v", err)
	}
	// No waiting: the very next lookup and connection see the new policy.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := sc.resolver.LookupNetIP(ctx, "ip4", "web.test"); !lookupNotFound(err) {
		t.Fatalf("web.test after update: %v", err)
	}
	if code, _, _ := get(t, sc.http, "http://other.test/"); code != 200 {
		t.Fatalf("other.test after update: %d", code)
	}
	if got := rawHTTP(t, netip.AddrPortFrom(ip, egress.PortHTTP), "GET / HTTP/1.1\r\nHost: web.test\r\n\r\n"); !strings.HasPrefix(got, "HTTP/1.1 403") {
		t.Fatalf("web.test after update: %q", firstLine(got))
	}
}

func TestToolProxyInjectsCredential(t *testing.T) {
	t.Parallel()
	const secret = "tok-3f9c1a-never-in-sandbox"
	tools := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Debug-Auth", r.Header.Get("Authorization")) // a careless upstream
		w.Header().Set("X-Seen-Path", r.URL.Path)
		w.Write([]byte("ok " + r.Header.Get("X-Sandbox")))
	}, "tools.test")
	g := startGateway(t, func(c *Config) { c.UpstreamTLS = &tls.Config{RootCAs: tools.roots} })
	ip := loopbackAddr()
	secretFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	op := egress.OperatorConfig{
		StaticHosts: map[string]string{"tools.test": tools.addr.String()},
		Tools: map[string]egress.Tool{
			"gh":    {Upstream: "https://tools.test/api/", Credential: egress.Credential{Type: egress.CredentialBearer, Secret: "tok"}},
			"plain": {Upstream: "http://tools.test/v2", Credential: egress.Credential{Type: egress.CredentialHeader, Header: "X-Api-Key", Secret: "tok"}},
		},
		Secrets: map[string]egress.SecretSource{"tok": {File: secretFile}},
	}
	if err := op.Validate(); err != nil {
		t.Fatal(err)
	}
	g.put(t, "sb-tool", ip, op, egress.Policy{Mode: egress.ModeToolProxy, Tools: []string{"gh", "plain"}})
	sc := newSandboxClient(ip, nil)

	code, body, hdr := get(t, sc.http, "http://gh.tool/repos/x/../y?q=1", "Authorization", "Bearer sandbox-made-up", "X-Sandbox", "hi")
	if code != 200 || body != "ok hi" {
		t.Fatalf("GET http://gh.tool/ = %d %q", code, body)
	}
	if hdr.Get("X-Seen-Path") != "/api/repos/y" {
		t.Fatalf("upstream path %q, want /api/repos/y", hdr.Get("X-Seen-Path"))
	}
	for k, vs := range hdr {
		for _, v := range vs {
			if strings.Contains(v, secret) {
				t.Fatalf("the secret reached the sandbox in header %s", k)
			}
		}
	}
	if code, _, _ := get(t, sc.http, "http://plain.tool/items", "X-Api-Key", "sandbox-made-up"); code != 200 {
		t.Fatalf("GET http://plain.tool/items = %d", code)
	}
	// Through the proxy as well (clients with HTTP_PROXY set).
	if code, body, _ := get(t, proxyClient(ip, nil), "http://gh.tool/p", "X-Sandbox", "proxied"); code != 200 || body != "ok proxied" {
		t.Fatalf("proxied tool call = %d %q", code, body)
	}
	reqs := tools.requests()
	if len(reqs) != 3 {
		t.Fatalf("upstream saw %d requests", len(reqs))
	}
	if a := reqs[0].Header.Get("Authorization"); a != "Bearer "+secret {
		t.Fatalf("upstream Authorization %q, want the injected bearer", a)
	}
	if k := reqs[1].Header.Get("X-Api-Key"); k != secret || reqs[1].URL.Path != "/v2/items" || reqs[1].Header.Get("Authorization") != "" {
		t.Fatalf("header tool: key %q path %q auth %q", k, reqs[1].URL.Path, reqs[1].Header.Get("Authorization"))
	}
	if a := reqs[2].Header.Get("Authorization"); a != "Bearer "+secret {
		t.Fatalf("proxied: upstream Authorization %q", a)
	}
	// Other tools and direct names are refused.
	sc2 := newSandboxClient(ip, tools.roots)
	if code, _, _ := get(t, sc2.http, "http://gitlab.tool/"); code != 0 {
		t.Fatalf("unknown tool answered %d", code)
	}
	if got := rawHTTP(t, netip.AddrPortFrom(ip, egress.PortHTTP), "GET / HTTP/1.1\r\nHost: tools.test\r\n\r\n"); !strings.HasPrefix(got, "HTTP/1.1 403") {
		t.Fatalf("direct upstream name: %q", firstLine(got))
	}
	ev := g.waitEvent(t, "tool event", func(e egress.Event) bool {
		return e.Proto == egress.ProtoTool && e.Decision == egress.DecisionAllow && e.Name == "gh.tool"
	})
	if ev.Address != tools.addr.String() || ev.Port != 443 || ev.BytesDown == 0 {
		t.Fatalf("tool event = %+v", ev)
	}
}

func TestControlAPIErrorsAndDelete(t *testing.T) {
	t.Parallel()
	g := startGateway(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ip := loopbackAddr()
	good := egress.SandboxConfig{LocalIP: ip.String(), Policy: egress.Policy{Mode: egress.ModeAllowlist, Allow: []egress.Rule{{Host: "a.example"}}}}
	cases := []struct {
		id   string
		cfg  egress.SandboxConfig
		code string
	}{
		{"sb-1", egress.SandboxConfig{LocalIP: "nope", Policy: good.Policy}, "invalid_local_ip"},
		{"sb-1", egress.SandboxConfig{LocalIP: ip.String(), Policy: egress.Policy{Mode: "open"}}, egress.CodeInvalidPolicy},
		{"sb-1", egress.SandboxConfig{LocalIP: ip.String(), Policy: egress.Policy{Mode: egress.ModeToolProxy, Tools: []string{"x"}}}, egress.CodeInvalidPolicy},
		{"bad id!", good, "invalid_argument"},
	}
	for _, c := range cases {
		if _, err := g.client.PutSandbox(ctx, c.id, c.cfg); !errors.Is(err, errdefs.ErrInvalidArgument) || errdefs.Code(err) != c.code {
			t.Errorf("PutSandbox(%s, %+v) = %v (code %q), want %s", c.id, c.cfg, err, errdefs.Code(err), c.code)
		}
	}
	if l, _ := g.client.ListSandboxes(ctx); len(l) != 0 {
		t.Fatalf("refused puts left sandboxes: %+v", l)
	}
	if _, err := g.client.PutSandbox(ctx, "sb-1", good); err != nil {
		t.Fatal(err)
	}
	if _, err := g.client.PutSandbox(ctx, "sb-2", good); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("second sandbox on the same address: %v", err)
	}
	dns := netip.AddrPortFrom(ip, egress.PortDNS).String()
	if c, err := net.DialTimeout("tcp", dns, 2*time.Second); err != nil {
		t.Fatalf("DNS over TCP not served: %v", err)
	} else {
		c.Close()
	}
	if err := g.client.DeleteSandbox(ctx, "sb-1"); err != nil {
		t.Fatal(err)
	}
	if err := g.client.DeleteSandbox(ctx, "sb-1"); err != nil {
		t.Fatalf("delete is not idempotent: %v", err)
	}
	if c, err := net.DialTimeout("tcp", dns, 2*time.Second); err == nil {
		c.Close()
		t.Fatal("deleted sandbox's address still served")
	}
	// The address is free again for another sandbox.
	if _, err := g.client.PutSandbox(ctx, "sb-2", good); err != nil {
		t.Fatalf("re-use after delete: %v", err)
	}
	// An address on no interface is refused after the bind timeout.
	g2 := startGateway(t, func(c *Config) { c.BindTimeout = 200 * time.Millisecond })
	if _, err := g2.client.PutSandbox(ctx, "sb-x", egress.SandboxConfig{LocalIP: "192.0.2.77", Policy: good.Policy}); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("unassigned address: %v", err)
	}
}

func TestConnectionCapPerSandbox(t *testing.T) {
	t.Parallel()
	web := startUpstream(t, nil, "web.test")
	g := startGateway(t, func(c *Config) { c.MaxConnsPerSandbox = 2 })
	ip := loopbackAddr()
	g.put(t, "sb-cap", ip, webOperator(web), egress.Policy{Mode: egress.ModeAllowlist, Allow: []egress.Rule{{Host: "web.test"}}})
	addr := netip.AddrPortFrom(ip, egress.PortHTTP).String()
	var held []net.Conn
	for range 2 {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	// The third is closed at once; poll until the gateway has seen the
	// first two (accept is asynchronous).
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err = c.Read(make([]byte, 1))
		c.Close()
		if errors.Is(err, io.EOF) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("third connection not refused: %v", err)
		}
	}
	held[0].Close()
	deadline = time.Now().Add(10 * time.Second)
	for {
		if got := rawHTTP(t, netip.AddrPortFrom(ip, egress.PortHTTP), "GET / HTTP/1.1\r\nHost: web.test\r\nConnection: close\r\n\r\n"); strings.HasPrefix(got, "HTTP/1.1 200") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no room after a connection closed")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestConnectionEventTimes: an allowed connection's event is stamped with
// when the sandbox opened it and says how long it was open, though it is
// recorded only when the connection ends (the MCP call log joins events to
// calls by the time they were made).
func TestConnectionEventTimes(t *testing.T) {
	t.Parallel()
	var clock atomic.Int64
	opened := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock.Store(opened.UnixNano())
	web := startUpstream(t, nil, "web.test")
	g := startGateway(t, func(c *Config) { c.Now = func() time.Time { return time.Unix(0, clock.Load()) } })
	ip := loopbackAddr()
	g.put(t, "sb-times", ip, webOperator(web), egress.Policy{Mode: egress.ModeAllowlist, Allow: []egress.Rule{{Host: "web.test"}}})

	c, err := net.DialTimeout("tcp", netip.AddrPortFrom(ip, egress.PortHTTP).String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET /held HTTP/1.1\r\nHost: web.test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("response %v %v", resp, err)
	}
	resp.Body.Close()
	// The connection stays open (keep-alive) while the clock moves on.
	clock.Add(int64(7 * time.Second))
	c.Close()
	ev := g.waitEvent(t, "the held connection's event", func(e egress.Event) bool {
		return e.Sandbox == "sb-times" && e.Proto == egress.ProtoHTTP && e.Decision == egress.DecisionAllow
	})
	if !ev.Time.Equal(opened) || ev.DurationMS != 7000 {
		t.Fatalf("event at %s lasting %d ms; want %s lasting 7000 ms", ev.Time, ev.DurationMS, opened)
	}
}

// TestIdleConnectionsClosedSilently: a connection to the proxy or HTTP
// port that sends nothing until the header timeout (a browser's preconnect)
// is closed without an answer and without an event; one that sends garbage
// gets the 400 and its event.
func TestIdleConnectionsClosedSilently(t *testing.T) {
	t.Parallel()
	web := startUpstream(t, nil, "web.test")
	g := startGateway(t, func(c *Config) { c.HeaderTimeout = 300 * time.Millisecond })
	ip := loopbackAddr()
	g.put(t, "sb-idle", ip, webOperator(web), egress.Policy{Mode: egress.ModeAllowlist, Allow: []egress.Rule{{Host: "web.test"}}})
	for _, port := range []uint16{egress.PortHTTP, uint16(g.srv.cfg.Ports.Proxy)} {
		c, err := net.DialTimeout("tcp", netip.AddrPortFrom(ip, port).String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		b, err := io.ReadAll(c) // until the gateway closes it
		c.Close()
		if err != nil || len(b) != 0 {
			t.Errorf("port %d: an idle connection got %q (%v); want it closed without an answer", port, b, err)
		}
	}
	if got := rawHTTP(t, netip.AddrPortFrom(ip, uint16(g.srv.cfg.Ports.Proxy)), "NOT HTTP\r\n\r\n"); !strings.HasPrefix(got, "HTTP/1.1 400") {
		t.Errorf("garbage to the proxy port: %q", firstLine(got))
	}
	g.waitEvent(t, "the garbage's bad_request event", func(e egress.Event) bool {
		return e.Sandbox == "sb-idle" && e.Reason == egress.ReasonBadRequest
	})
	p, err := g.client.Events(context.Background(), 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range p.Events {
		if e.Sandbox == "sb-idle" && e.Reason == egress.ReasonBadRequest {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d bad_request events, want the garbage's only: %+v", n, p.Events)
	}
}
