package gateway

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/egress"
	"genesis.dev/sandbox/internal/egress/egressclient"
)

// Every test gets its own loopback addresses (127.0.0.0/8 is all on lo), so
// the gateway and the stand-in upstreams use the real ports 53, 80, 443 and
// 3128 without colliding.
var (
	addrBase = mrand.IntN(150) + 100
	addrNext atomic.Uint32
)

// needPrivilegedPorts skips t when it cannot bind ports below 1024 (make
// test runs as root; in CI it must).
func needPrivilegedPorts(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("the gateway tests bind ports 53, 80, 443 and 3128 on loopback and need root")
	}
	t.Skip("the gateway tests bind ports 53, 80, 443 and 3128 on loopback and need root (make test runs them as root)")
}

func loopbackAddr() netip.Addr {
	n := addrNext.Add(1)
	return netip.AddrFrom4([4]byte{127, byte(addrBase), byte(n >> 8), byte(n)})
}

// gw is a gateway running in-process for one test.
type gw struct {
	srv    *Server
	client *egressclient.Client
}

func startGateway(t testing.TB, mutate func(*Config)) *gw {
	t.Helper()
	needPrivilegedPorts(t)
	cfg := Config{ControlSocket: filepath.Join(t.TempDir(), "control.sock"), Version: "test", DialTimeout: 5 * time.Second}
	if mutate != nil {
		mutate(&cfg)
	}
	srv, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway Run: %v", err)
		}
	})
	c := egressclient.Dial(cfg.ControlSocket)
	t.Cleanup(c.Close)
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if _, err := c.WaitReady(wctx, 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	return &gw{srv: srv, client: c}
}

// put pushes a policy for sandbox id on ip, resolved against op.
func (g *gw) put(t testing.TB, id string, ip netip.Addr, op egress.OperatorConfig, p egress.Policy) {
	t.Helper()
	np, err := p.Normalize(op)
	if err != nil {
		t.Fatal(err)
	}
	res, err := op.Resolve(np, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := g.client.PutSandbox(ctx, id, egress.SandboxConfig{LocalIP: ip.String(), Policy: np, Resolved: res})
	if err != nil {
		t.Fatal(err)
	}
	if !st.Listening || st.LocalIP != ip.String() {
		t.Fatalf("PutSandbox = %+v", st)
	}
}

// waitEvent polls the gateway's events until one satisfies match.
func (g *gw) waitEvent(t *testing.T, what string, match func(egress.Event) bool) egress.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var seen []egress.Event
	for {
		p, err := g.client.Events(ctx, 0, 10000)
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		for _, e := range p.Events {
			if match(e) {
				return e
			}
		}
		seen = p.Events
		select {
		case <-ctx.Done():
			t.Fatalf("no event %s; have %+v", what, seen)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// sandboxClient is what code in a sandbox does: resolve through the
// gateway's DNS and connect to the answer.
type sandboxClient struct {
	resolver *net.Resolver
	http     *http.Client
}

func newSandboxClient(gateway netip.Addr, roots *x509.CertPool) *sandboxClient {
	d := &net.Dialer{Timeout: 5 * time.Second}
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, netip.AddrPortFrom(gateway, egress.PortDNS).String())
	}}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			ips, err := r.LookupNetIP(ctx, "ip4", host)
			if err != nil {
				return nil, err
			}
			return d.DialContext(ctx, network, net.JoinHostPort(ips[0].String(), port))
		},
		TLSClientConfig:   &tls.Config{RootCAs: roots},
		DisableKeepAlives: true,
	}
	return &sandboxClient{resolver: r, http: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
}

// proxyClient is a client that honours HTTP(S)_PROXY pointing at the
// gateway's CONNECT proxy.
func proxyClient(gateway netip.Addr, roots *x509.CertPool) *http.Client {
	u := &url.URL{Scheme: "http", Host: netip.AddrPortFrom(gateway, egress.PortProxy).String()}
	tr := &http.Transport{
		Proxy:             http.ProxyURL(u),
		TLSClientConfig:   &tls.Config{RootCAs: roots},
		DisableKeepAlives: true,
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func get(t *testing.T, c *http.Client, url string, hdr ...string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error(), nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// upstream is a stand-in for a server on the internet: HTTP on :80 and
// HTTPS (a certificate for names, trusted by roots) on :443 of its own
// loopback address. It answers "host=<Host> path=<path> auth=<Authorization>"
// (and " body=<body>" when there is one) unless handler is set.
type upstream struct {
	addr  netip.Addr
	roots *x509.CertPool
	cert  []byte // DER of the self-signed certificate behind roots
	mu    sync.Mutex
	seen  []*http.Request
}

func startUpstream(t testing.TB, handler http.HandlerFunc, names ...string) *upstream {
	t.Helper()
	u := &upstream{addr: loopbackAddr()}
	cert, roots := selfSigned(t, names...)
	u.roots, u.cert = roots, cert.Certificate[0]
	if handler == nil {
		handler = func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "host=%s path=%s auth=%s", r.Host, r.URL.Path, r.Header.Get("Authorization"))
			if len(body) > 0 {
				fmt.Fprintf(w, " body=%s", body)
			}
		}
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.seen = append(u.seen, r.Clone(context.Background()))
		u.mu.Unlock()
		handler(w, r)
	})
	for _, port := range []int{80, 443} {
		l, err := net.Listen("tcp", netip.AddrPortFrom(u.addr, uint16(port)).String())
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: h}
		if port == 443 {
			l = tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{cert}})
		}
		go srv.Serve(l)
		t.Cleanup(func() { srv.Close() })
	}
	return u
}

func (u *upstream) requests() []*http.Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]*http.Request(nil), u.seen...)
}

func selfSigned(t testing.TB, names ...string) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "genesis test upstream"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: names, IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// rawHTTP sends one raw request to addr and returns the status line and
// the whole answer.
func rawHTTP(t *testing.T, addr netip.AddrPort, req string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr.String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, req)
	b, _ := io.ReadAll(c)
	return string(b)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\r\n")
	return line
}

// bufConn reads through a bufio.Reader that already holds some of c's bytes.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (b bufConn) Read(p []byte) (int, error) { return b.r.Read(p) }
