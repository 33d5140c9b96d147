package ports

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/tenant"
)

// Target is a running sandbox as the proxy needs it: its ports policy and a
// way to dial a port on its loopback. Release ends the attachment.
type Target struct {
	SandboxID string
	Policy    config.PortPolicy
	// Dial connects to 127.0.0.1:port inside the sandbox. A port nobody
	// listens on fails fast with code port_unreachable.
	Dial    func(ctx context.Context, port int) (net.Conn, error)
	Release func()
}

// Sandboxes finds a caller's running sandbox: ErrNotFound when it does not
// exist for tenant, code sandbox_not_running when it is not running.
type Sandboxes interface {
	AttachPorts(ctx context.Context, tenant, sandboxID string) (*Target, error)
}

// Config wires a Proxy.
type Config struct {
	Sandboxes Sandboxes
	Signer    *Signer
	// KeyLive answers nil while the API key keyID of keyTenant may act
	// (tenancy.Service.KeyLive): every use of a link asks it, so a link
	// dies with the key it was made with.
	KeyLive func(ctx context.Context, keyTenant, keyID string) error
	// MaxLinkTTL bounds preview links (default 24 h).
	MaxLinkTTL time.Duration
	// DialTimeout bounds connecting to a port (default 2 s; the agent
	// gives up after 2 s on its side too).
	DialTimeout time.Duration
	// PortHint, if set, says more about a port nothing listens on, such
	// as which job served it and how that ended ("" when it knows
	// nothing); the sandbox's jobs are pointed at otherwise.
	PortHint func(sandboxID string, port int) string
	Now      func() time.Time
	Logger   *slog.Logger
}

// Proxy serves the port routes. It is safe for concurrent use.
type Proxy struct {
	cfg Config

	mu sync.Mutex
	// per sandbox: the HTTP transport (its idle connections) and the live
	// upgraded and TCP connections, closed when the sandbox ends.
	sandboxes map[string]*sandboxConns
}

type sandboxConns struct {
	transport *http.Transport
	live      map[io.Closer]struct{}
}

// New returns a Proxy.
func New(cfg Config) (*Proxy, error) {
	if cfg.Sandboxes == nil || cfg.Signer == nil || cfg.KeyLive == nil {
		return nil, errdefs.Invalid("ports: Sandboxes, Signer and KeyLive are required")
	}
	if cfg.MaxLinkTTL <= 0 {
		cfg.MaxLinkTTL = 24 * time.Hour
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 2 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Proxy{cfg: cfg, sandboxes: make(map[string]*sandboxConns)}, nil
}

// Name is the proxy's hook name.
func (p *Proxy) Name() string { return "ports" }

// SandboxEnding closes everything the proxy holds open into the sandbox.
func (p *Proxy) SandboxEnding(_ context.Context, sandboxID, _ string) {
	p.mu.Lock()
	sc := p.sandboxes[sandboxID]
	delete(p.sandboxes, sandboxID)
	var live []io.Closer
	if sc != nil {
		for c := range sc.live {
			live = append(live, c)
		}
	}
	p.mu.Unlock()
	if sc == nil {
		return
	}
	sc.transport.CloseIdleConnections()
	for _, c := range live {
		c.Close()
	}
}

// ParsePort reads a port path segment.
func ParsePort(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != s {
		return 0, errdefs.WithCode("invalid_port", errdefs.Invalid("port %.12q is not a number in 1-65535", s))
	}
	return n, nil
}

// attach finds the sandbox and checks the port against its policy.
func (p *Proxy) attach(ctx context.Context, tenant, sandboxID string, port int) (*Target, error) {
	t, err := p.cfg.Sandboxes.AttachPorts(ctx, tenant, sandboxID)
	if err != nil {
		return nil, err
	}
	dial, limit := t.Dial, p.cfg.DialTimeout
	t.Dial = func(ctx context.Context, port int) (net.Conn, error) {
		// The deadline bounds the connect only: DialPort's connection
		// outlives the context it was dialled with.
		dctx, cancel := context.WithTimeout(ctx, limit)
		defer cancel()
		return dial(dctx, port)
	}
	if !t.Policy.Allows(port) {
		t.Release()
		return nil, errdefs.WithCode("port_not_allowed", fmt.Errorf(
			"port %d of sandbox %s is not allowed by its profile's ports policy: %w", port, sandboxID, errdefs.ErrPermissionDenied))
	}
	return t, nil
}

// conns returns the per-sandbox state, made on first use.
func (p *Proxy) conns(t *Target) *sandboxConns {
	p.mu.Lock()
	defer p.mu.Unlock()
	sc := p.sandboxes[t.SandboxID]
	if sc == nil {
		sc = &sandboxConns{live: make(map[io.Closer]struct{})}
		sc.transport = &http.Transport{
			// The address is "port.sandbox:80" (see upstreamHost); the
			// target travels in the request context, the port in the host.
			DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
				tgt, _ := ctx.Value(targetKey{}).(*Target)
				if tgt == nil {
					return nil, fmt.Errorf("ports: no target in context: %w", errdefs.ErrInternal)
				}
				host, _, _ := net.SplitHostPort(addr)
				portStr, _, _ := strings.Cut(host, ".")
				port, err := strconv.Atoi(portStr)
				if err != nil {
					return nil, fmt.Errorf("ports: bad upstream address %q: %w", addr, errdefs.ErrInternal)
				}
				return tgt.Dial(ctx, port)
			},
			MaxIdleConnsPerHost:   16,
			IdleConnTimeout:       60 * time.Second,
			ResponseHeaderTimeout: 0, // long polls and slow apps are the app's business
			DisableCompression:    true,
			ForceAttemptHTTP2:     false,
		}
		p.sandboxes[t.SandboxID] = sc
	}
	return sc
}

// track registers a live connection of sandbox id until the returned
// func is called.
func (p *Proxy) track(id string, c io.Closer) func() {
	p.mu.Lock()
	sc := p.sandboxes[id]
	if sc != nil {
		sc.live[c] = struct{}{}
	}
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		if sc != nil {
			delete(sc.live, c)
		}
		p.mu.Unlock()
	}
}

type targetKey struct{}

// upstreamHost names the upstream of one port: each (sandbox, port) gets
// its own transport pool entry.
func upstreamHost(port int) string { return strconv.Itoa(port) + ".sandbox" }

// Request is one proxied request as the HTTP layer parsed it.
type Request struct {
	Tenant    string
	SandboxID string
	Port      int
	// Path is the path inside the sandbox's server, without the prefix
	// ("" or "a/b"); the query is taken from the request.
	Path string
	// Prefix is the URL path the caller used for the port's root (for
	// X-Forwarded-Prefix and for rewriting redirects), without a
	// trailing slash.
	Prefix string
	// StripOrigin drops the caller's Origin header: for servers that refuse
	// a WebSocket with a foreign Origin (Chromium's DevTools) while the
	// service has already authenticated the caller.
	StripOrigin bool
	// ModifyResponse, if set, runs on the sandbox server's response after
	// the proxy's own rewrites (redirects, cookies).
	ModifyResponse func(*http.Response) error
	// OwnOrigin says the request came to the port's own origin (a preview
	// host, "{port}-{sandbox}.{domain}"). Otherwise it came to the API's
	// origin, where nothing of the sandbox may act as a document of that
	// origin: see guardAPIOrigin.
	OwnOrigin bool
}

// ErrorWriter answers a request with err (problem+json at the HTTP layer).
type ErrorWriter func(w http.ResponseWriter, r *http.Request, err error)

// ServeHTTP proxies r to the port: any method, WebSocket upgrades passed
// through, bodies streamed both ways, hop-by-hop headers dropped,
// X-Forwarded-* set. No credential of the service's reaches the sandbox
// (StripCredentials). Failures before the sandbox's server answered go to fail.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request, pr Request, fail ErrorWriter) {
	if !pr.OwnOrigin && r.Header.Get("Service-Worker") != "" {
		fail(w, r, errdefs.WithCode("service_worker_refused", fmt.Errorf(
			"a sandbox's script cannot be a service worker of the service's own origin; open the port through a preview link, which has an origin of its own: %w", errdefs.ErrPermissionDenied)))
		return
	}
	t, err := p.attach(r.Context(), pr.Tenant, pr.SandboxID, pr.Port)
	if err != nil {
		fail(w, r, err)
		return
	}
	defer t.Release()
	sc := p.conns(t)
	upstream := &url.URL{Scheme: "http", Host: upstreamHost(pr.Port)}
	rp := &httputil.ReverseProxy{
		Rewrite: func(out *httputil.ProxyRequest) {
			out.Out.URL.Scheme = upstream.Scheme
			out.Out.URL.Host = upstream.Host
			out.Out.URL.Path = "/" + pr.Path
			out.Out.URL.RawPath = ""
			out.Out.Host = "127.0.0.1:" + strconv.Itoa(pr.Port)
			out.SetXForwarded()
			out.Out.Header.Set("X-Forwarded-Prefix", pr.Prefix)
			StripCredentials(out.Out.Header)
			if pr.StripOrigin {
				out.Out.Header.Del("Origin")
			}
			out.Out = out.Out.WithContext(context.WithValue(out.Out.Context(), targetKey{}, t))
		},
		Transport:     sc.transport,
		FlushInterval: -1, // stream: never hold a response body back
		ModifyResponse: func(resp *http.Response) error {
			rewriteLocation(resp, pr)
			scopeCookies(resp, pr)
			if !pr.OwnOrigin {
				guardAPIOrigin(resp.Header)
			}
			if pr.ModifyResponse != nil {
				if err := pr.ModifyResponse(resp); err != nil {
					return err
				}
			}
			if resp.StatusCode == http.StatusSwitchingProtocols {
				// The upgraded connection is closed when the sandbox ends.
				if c, ok := resp.Body.(io.Closer); ok {
					untrack := p.track(t.SandboxID, c)
					resp.Body = &closeHook{ReadWriteCloser: resp.Body.(io.ReadWriteCloser), after: untrack}
				}
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			fail(w, r, p.upstreamError(pr, err))
		},
		ErrorLog: slog.NewLogLogger(p.cfg.Logger.Handler(), slog.LevelDebug),
	}
	rp.ServeHTTP(w, r)
}

// APIOriginCSP is the Content-Security-Policy of every response of a
// sandbox's server that reaches a browser on the API's own origin (the
// authenticated port routes, the E2B and OpenSandbox path forms, the
// browser's CDP JSON): "sandbox" without allow-same-origin gives such a
// document an opaque origin of its own, so its scripts cannot read the
// console's storage, register a service worker, or call the API with the
// origin's cookies; popups it opens stay sandboxed.
const APIOriginCSP = "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads"

// guardAPIOrigin makes a sandbox server's response harmless on the API's
// origin: the sandboxing CSP, no MIME sniffing, and none of the headers
// that act on the whole origin (a service worker's wider scope, wiping the
// origin's storage).
func guardAPIOrigin(h http.Header) {
	h.Add("Content-Security-Policy", APIOriginCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Del("Service-Worker-Allowed")
	h.Del("Clear-Site-Data")
}

// closeHook runs after once the wrapped connection is closed.
type closeHook struct {
	io.ReadWriteCloser
	once  sync.Once
	after func()
}

func (c *closeHook) Close() error {
	err := c.ReadWriteCloser.Close()
	c.once.Do(c.after)
	return err
}

// upstreamError classes a failure to reach or read the port. A port nobody
// listens on says what may have served it, or where to look.
func (p *Proxy) upstreamError(pr Request, err error) error {
	if errdefs.Code(err) == agentproto.CodePortUnreachable {
		hint := ""
		if p.cfg.PortHint != nil {
			hint = p.cfg.PortHint(pr.SandboxID, pr.Port)
		}
		if hint == "" {
			hint = fmt.Sprintf("start a server on it, or see which of the sandbox's jobs ended (genesis job ls %s)", pr.SandboxID)
		}
		return fmt.Errorf("%w; %s", err, hint)
	}
	if errors.Is(err, errdefs.ErrBadGateway) {
		return err
	}
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("port %d of sandbox %s: %w", pr.Port, pr.SandboxID, err)
	}
	if c := errdefs.Code(err); c != "internal" {
		return err
	}
	return errdefs.WithCode("upstream_failed", fmt.Errorf("port %d of sandbox %s: %v: %w", pr.Port, pr.SandboxID, err, errdefs.ErrBadGateway))
}

// rewriteLocation turns a redirect to an absolute path of the sandbox's
// server ("/dir/") into the same path under the caller's prefix, so that
// following it stays on the proxied port.
func rewriteLocation(resp *http.Response, pr Request) {
	loc := resp.Header.Get("Location")
	if loc == "" {
		return
	}
	u, err := url.Parse(loc)
	if err != nil {
		return
	}
	switch {
	case u.Scheme == "" && u.Host == "" && strings.HasPrefix(u.Path, "/"):
	case (u.Scheme == "http" || u.Scheme == "https") && isLoopbackHost(u.Host, pr.Port):
		u.Scheme, u.Host = "", ""
	default:
		return
	}
	u.Path = pr.Prefix + u.Path
	u.RawPath = ""
	resp.Header.Set("Location", u.String())
}

// scopeCookies confines the cookies a sandbox's server sets to where it
// is served: under a prefix on the API's origin (the port routes), a
// cookie with Path=/ would otherwise go with every request to that origin,
// the console's and other sandboxes' too; on a preview's own origin the
// prefix is empty. A Domain attribute is dropped, so that no preview's
// cookie reaches a sibling preview host under the preview domain.
func scopeCookies(resp *http.Response, pr Request) {
	vals := resp.Header.Values("Set-Cookie")
	if len(vals) == 0 {
		return
	}
	out := make([]string, 0, len(vals))
	for _, v := range vals {
		c, err := http.ParseSetCookie(v)
		if err != nil {
			continue // not a cookie a browser would keep either
		}
		p := c.Path
		if !strings.HasPrefix(p, "/") {
			p = "/"
		}
		c.Path, c.Domain = pr.Prefix+p, ""
		out = append(out, c.String())
	}
	resp.Header.Del("Set-Cookie")
	for _, v := range out {
		resp.Header.Add("Set-Cookie", v)
	}
}

func isLoopbackHost(hostport string, port int) bool {
	h, p, err := net.SplitHostPort(hostport)
	if err != nil {
		h, p = hostport, "80"
	}
	return (h == "127.0.0.1" || h == "localhost" || h == "::1") && p == strconv.Itoa(port)
}

// TCP WebSocket limits.
const (
	tcpCopyBuffer = 256 << 10
	tcpPingEvery  = 30 * time.Second
)

// ServeTCP upgrades r to a WebSocket and joins it to a new TCP connection
// to the port: binary messages carry the bytes each way. The WebSocket
// closes with 1000 when the sandbox side ends the connection, and the TCP
// connection is closed when the WebSocket ends.
func (p *Proxy) ServeTCP(w http.ResponseWriter, r *http.Request, tenant, sandboxID string, port int, fail ErrorWriter) {
	t, err := p.attach(r.Context(), tenant, sandboxID, port)
	if err != nil {
		fail(w, r, err)
		return
	}
	defer t.Release()
	p.conns(t)
	// Dial before the upgrade, so a closed port is a plain 502 answer.
	up, err := t.Dial(r.Context(), port)
	if err != nil {
		fail(w, r, p.upstreamError(Request{SandboxID: sandboxID, Port: port}, err))
		return
	}
	defer up.Close()
	untrack := p.track(sandboxID, up)
	defer untrack()
	// The default origin check stays: the API key never travels in a
	// cookie, so a page of another origin has no ambient authority anyway.
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return // Accept answered the client
	}
	ws.SetReadLimit(-1) // a message is bytes of a stream; NetConn reads in parts
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	nc := websocket.NetConn(ctx, ws, websocket.MessageBinary)
	untrackWS := p.track(sandboxID, nc)
	defer untrackWS()
	Join(nc, up)
	ws.Close(websocket.StatusNormalClosure, "")
}

// Join copies a and b into each other until both directions end, passing
// each direction's end on as a half close where the connection has one,
// then closes both.
func Join(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		buf := make([]byte, tcpCopyBuffer)
		_, err := io.CopyBuffer(dst, src, buf)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok && err == nil {
			cw.CloseWrite()
		} else {
			// No half close (a WebSocket): the whole connection ends.
			dst.Close()
			src.Close()
		}
	}
	go pipe(a, b)
	go pipe(b, a)
	wg.Wait()
	a.Close()
	b.Close()
}

// NewLink signs a preview link to a port of a sandbox of by.Tenant, made
// with by's key and valid for ttl (at most MaxLinkTTL). It checks that the
// sandbox runs and the port is allowed now; the link, its key and the
// sandbox are checked again on every use.
func (p *Proxy) NewLink(ctx context.Context, by tenant.Principal, sandboxID string, port int, ttl time.Duration) (token string, expires time.Time, err error) {
	if ttl <= 0 || ttl > p.cfg.MaxLinkTTL {
		return "", time.Time{}, errdefs.WithCode("invalid_ttl", fmt.Errorf(
			"ttl_seconds must be between 1 and %d: %w", int64(p.cfg.MaxLinkTTL/time.Second), errdefs.ErrInvalidArgument))
	}
	if err := issuerOK(by); err != nil {
		return "", time.Time{}, err
	}
	t, err := p.attach(ctx, by.Tenant, sandboxID, port)
	if err != nil {
		return "", time.Time{}, err
	}
	t.Release()
	expires = p.cfg.Now().Add(ttl).Truncate(time.Second)
	token = p.cfg.Signer.Sign(claimsBy(by, LinkClaims{SandboxID: sandboxID, Port: port, Expires: expires.Unix()}))
	return token, expires, nil
}

// MaxLinkTTL is the longest life of a link.
func (p *Proxy) MaxLinkTTL() time.Duration { return p.cfg.MaxLinkTTL }

// VerifyLink checks a preview-link token now, and that the key it was made
// with is live; a scoped link (NewScopedLink) is not one.
func (p *Proxy) VerifyLink(ctx context.Context, token string) (LinkClaims, error) {
	c, err := p.verify(ctx, token)
	if err == nil && c.Scope != "" {
		return LinkClaims{}, errdefs.WithCode("link_invalid", fmt.Errorf("preview link is not valid: %w", errdefs.ErrNotFound))
	}
	return c, err
}

// issuerOK refuses to make a link without the key it is made with (it
// could never be checked).
func issuerOK(by tenant.Principal) error {
	if by.Tenant == "" || by.KeyID == "" {
		return fmt.Errorf("ports: a link needs the tenant and key it is made by: %w", errdefs.ErrInternal)
	}
	return nil
}

// verify checks token's MAC and expiry, then its key.
func (p *Proxy) verify(ctx context.Context, token string) (LinkClaims, error) {
	c, err := p.cfg.Signer.Verify(token, p.cfg.Now())
	if err != nil {
		return LinkClaims{}, err
	}
	if err := p.cfg.KeyLive(ctx, c.IssuerTenant(), c.KeyID); err != nil {
		return LinkClaims{}, err
	}
	return c, nil
}

// NewScopedLink signs a link to another route of a sandbox of by.Tenant
// that the caller has checked (scope names the route and its rights, e.g.
// "display:observer"), made with by's key and valid for ttl (at most
// MaxLinkTTL).
func (p *Proxy) NewScopedLink(by tenant.Principal, sandboxID, scope string, ttl time.Duration) (token string, expires time.Time, err error) {
	if ttl <= 0 || ttl > p.cfg.MaxLinkTTL {
		return "", time.Time{}, errdefs.WithCode("invalid_ttl", fmt.Errorf(
			"ttl_seconds must be between 1 and %d: %w", int64(p.cfg.MaxLinkTTL/time.Second), errdefs.ErrInvalidArgument))
	}
	if scope == "" {
		return "", time.Time{}, errdefs.Invalid("ports: a scoped link needs a scope")
	}
	if err := issuerOK(by); err != nil {
		return "", time.Time{}, err
	}
	expires = p.cfg.Now().Add(ttl).Truncate(time.Second)
	return p.cfg.Signer.Sign(claimsBy(by, LinkClaims{SandboxID: sandboxID, Scope: scope, Expires: expires.Unix()})), expires, nil
}

// VerifyScopedLink checks a scoped link token now, and that the key it was
// made with is live, and returns its claims and the part of its scope
// after prefix; a token of another scope, or a port link, is link_invalid.
func (p *Proxy) VerifyScopedLink(ctx context.Context, token, prefix string) (LinkClaims, string, error) {
	c, err := p.verify(ctx, token)
	if err != nil {
		return LinkClaims{}, "", err
	}
	rest, ok := strings.CutPrefix(c.Scope, prefix)
	if !ok || c.Scope == "" {
		return LinkClaims{}, "", errdefs.WithCode("link_invalid", fmt.Errorf("link is not valid here: %w", errdefs.ErrNotFound))
	}
	return c, rest, nil
}

// Attacher is the lifecycle layer as the proxy uses it (control.Service).
type Attacher interface {
	Attach(ctx context.Context, tenant, id string, o control.AttachOptions) (*control.Attachment, error)
}

// FromControl adapts the lifecycle layer's Attach to Sandboxes: the policy
// is the sandbox profile's, and a port is dialled through the agent.
func FromControl(a Attacher) Sandboxes { return controlSandboxes{a} }

type controlSandboxes struct{ a Attacher }

func (c controlSandboxes) AttachPorts(ctx context.Context, tenant, id string) (*Target, error) {
	at, err := c.a.Attach(ctx, tenant, id, control.AttachOptions{})
	if err != nil {
		return nil, err
	}
	t := &Target{SandboxID: at.Sandbox.ID, Release: at.Release, Dial: at.Agent.DialPort}
	if at.Profile != nil {
		t.Policy = at.Profile.Ports
	}
	return t, nil
}
