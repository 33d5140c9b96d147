package ports

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/tenant"
)

// fakeSandboxes stands in for the lifecycle layer: sandbox "sb-1" of tenant
// "t1" runs, its ports are this host's loopback ports. (The real path
// through the agent is tested end to end under Docker.)
type fakeSandboxes struct {
	policy  config.PortPolicy
	running bool
	mu      sync.Mutex
	dials   int
}

func (f *fakeSandboxes) AttachPorts(_ context.Context, tenant, id string) (*Target, error) {
	if tenant != "t1" || id != "sb-1" {
		return nil, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	f.mu.Lock()
	running := f.running
	f.mu.Unlock()
	if !running {
		return nil, errdefs.WithCode("sandbox_not_running", fmt.Errorf("sandbox %s is stopped: %w", id, errdefs.ErrFailedPrecondition))
	}
	return &Target{SandboxID: id, Policy: f.policy, Release: func() {}, Dial: func(ctx context.Context, port int) (net.Conn, error) {
		f.mu.Lock()
		f.dials++
		f.mu.Unlock()
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			return nil, errdefs.WithCode("port_unreachable", fmt.Errorf("port %d: %v: %w", port, err, errdefs.ErrBadGateway))
		}
		return c, nil
	}}, nil
}

func writeErr(w http.ResponseWriter, _ *http.Request, err error) {
	w.Header().Set("X-Code", errdefs.Code(err))
	http.Error(w, err.Error(), errdefs.HTTPStatus(err))
}

type harness struct {
	proxy *Proxy
	sbs   *fakeSandboxes
	keys  *fakeKeys
	now   time.Time
	srv   *httptest.Server
}

// fakeKeys stands in for tenancy.KeyLive: every key is live but those
// revoked here, and the keys of a tenant deleted here.
type fakeKeys struct {
	mu      sync.Mutex
	revoked map[string]bool // "tenant/key" or "tenant/" (deleted)
	asked   []string
}

func (f *fakeKeys) live(_ context.Context, keyTenant, keyID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, keyTenant+"/"+keyID)
	if f.revoked[keyTenant+"/"+keyID] || f.revoked[keyTenant+"/"] {
		return errdefs.WithCode("token_revoked", fmt.Errorf("key %s is revoked: %w", keyID, errdefs.ErrUnauthenticated))
	}
	return nil
}

func (f *fakeKeys) revoke(ref string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.revoked == nil {
		f.revoked = map[string]bool{}
	}
	f.revoked[ref] = true
}

// t1Key is a principal of tenant t1.
var t1Key = tenant.Principal{Tenant: "t1", KeyID: "key_1", KeyTenant: "t1"}

func newHarness(t *testing.T, policy config.PortPolicy) *harness {
	t.Helper()
	h := &harness{sbs: &fakeSandboxes{policy: policy, running: true}, keys: &fakeKeys{}, now: time.Unix(1_800_000_000, 0)}
	signer, err := NewSigner(bytes.Repeat([]byte("k"), 32))
	if err != nil {
		t.Fatal(err)
	}
	h.proxy, err = New(Config{
		Sandboxes: h.sbs, Signer: signer, KeyLive: h.keys.live, MaxLinkTTL: time.Hour,
		Now: func() time.Time { return h.now },
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/s/{id}/ports/{port}/{path...}", func(w http.ResponseWriter, r *http.Request) {
		port, err := ParsePort(r.PathValue("port"))
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		h.proxy.ServeHTTP(w, r, Request{Tenant: r.Header.Get("X-Tenant"), SandboxID: r.PathValue("id"), Port: port,
			Path: r.PathValue("path"), Prefix: "/s/" + r.PathValue("id") + "/ports/" + r.PathValue("port")}, writeErr)
	})
	mux.HandleFunc("GET /s/{id}/tcp/{port}", func(w http.ResponseWriter, r *http.Request) {
		port, _ := ParsePort(r.PathValue("port"))
		h.proxy.ServeTCP(w, r, r.Header.Get("X-Tenant"), r.PathValue("id"), port, writeErr)
	})
	h.srv = httptest.NewServer(mux)
	t.Cleanup(h.srv.Close)
	return h
}

// upstream starts a server on loopback standing for the sandbox's one.
func upstream(t *testing.T, h http.Handler) int {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	_, p, _ := net.SplitHostPort(s.Listener.Addr().String())
	n, _ := strconv.Atoi(p)
	return n
}

func (h *harness) get(t *testing.T, method, path string, body io.Reader, hdr map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, h.srv.URL+path, body)
	req.Header.Set("X-Tenant", "t1")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultTransport.(*http.Transport).Clone().RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestProxyHTTP(t *testing.T) {
	t.Parallel()
	all := config.PortPolicy{Allow: []string{"1-65535"}}
	h := newHarness(t, all)
	var mu sync.Mutex
	var seen http.Header
	var seenPath, seenHost string
	port := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen, seenPath, seenHost = r.Header.Clone(), r.URL.RequestURI(), r.Host
		mu.Unlock()
		switch r.URL.Path {
		case "/dir":
			http.Redirect(w, r, "/dir/", http.StatusMovedPermanently)
		case "/cookie":
			w.Header().Add("Set-Cookie", "a=1; Path=/; Domain=example.test; HttpOnly")
			w.Header().Add("Set-Cookie", "b=2")
		case "/echo":
			sum := sha256.New()
			n, _ := io.Copy(sum, r.Body)
			fmt.Fprintf(w, "%d %x", n, sum.Sum(nil))
		default:
			fmt.Fprint(w, "hello "+r.Method)
		}
	}))
	base := "/s/sb-1/ports/" + strconv.Itoa(port)

	creds := map[string]string{"Connection": "X-Hop", "X-Hop": "1", "X-Ordinary": "kept",
		"Cookie": "genesis_preview=tok; app=1; Genesis_Other=2", "X-Genesis-Tenant": "t2", "X-Genesis-Sandbox-Token": "gst_v2.x.y"}
	for _, name := range CredentialHeaders() {
		creds[name] = "secret-" + name
	}
	resp := h.get(t, "GET", base+"/a/b?x=1", nil, creds)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != "hello GET" {
		t.Fatalf("GET: %d %q", resp.StatusCode, b)
	}
	mu.Lock()
	if seenPath != "/a/b?x=1" || seenHost != "127.0.0.1:"+strconv.Itoa(port) {
		t.Errorf("upstream saw %q host %q", seenPath, seenHost)
	}
	for name, v := range seen {
		if strings.Contains(strings.Join(v, " "), "secret-") || strings.HasPrefix(strings.ToLower(name), "x-genesis-") || name == "X-Hop" {
			t.Errorf("a credential or hop-by-hop header reached the sandbox: %s: %q", name, v)
		}
	}
	if seen.Get("X-Ordinary") != "kept" || seen.Get("Cookie") != "app=1" {
		t.Errorf("an ordinary header or cookie did not reach the sandbox: %v", seen)
	}
	if seen.Get("X-Forwarded-For") == "" || seen.Get("X-Forwarded-Prefix") != base || seen.Get("X-Forwarded-Host") == "" {
		t.Errorf("X-Forwarded-* not set: %v", seen)
	}
	mu.Unlock()

	// A redirect to an absolute path stays under the prefix.
	resp = h.get(t, "GET", base+"/dir", nil, nil)
	if loc := resp.Header.Get("Location"); resp.StatusCode != 301 || loc != base+"/dir/" {
		t.Errorf("redirect: %d Location %q, want %s/dir/", resp.StatusCode, loc, base)
	}

	// Cookies stay under the port's prefix.
	resp = h.get(t, "GET", base+"/cookie", nil, nil)
	if got := resp.Header.Values("Set-Cookie"); len(got) != 2 || got[0] != "a=1; Path="+base+"/; HttpOnly" || got[1] != "b=2; Path="+base+"/" {
		t.Errorf("Set-Cookie through the proxy: %q", got)
	}

	// A streamed body of 32 MiB arrives whole.
	payload := bytes.Repeat([]byte("0123456789abcdef"), 2<<20)
	resp = h.get(t, "POST", base+"/echo", bytes.NewReader(payload), nil)
	b, _ = io.ReadAll(resp.Body)
	if want := fmt.Sprintf("%d %x", len(payload), sha256.Sum256(payload)); string(b) != want {
		t.Errorf("echo: %q, want %q", b, want)
	}
}

func TestProxyRefusals(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.PortPolicy{Allow: []string{"1024-65535"}})
	// A port nobody listens on: 502 port_unreachable, fast.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	start := time.Now()
	resp := h.get(t, "GET", "/s/sb-1/ports/"+strconv.Itoa(closed)+"/", nil, nil)
	if resp.StatusCode != 502 || resp.Header.Get("X-Code") != "port_unreachable" {
		t.Errorf("closed port: %d %s", resp.StatusCode, resp.Header.Get("X-Code"))
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("closed port took %v", d)
	}
	// Outside the policy: 403, and no dial is made.
	h.sbs.mu.Lock()
	before := h.sbs.dials
	h.sbs.mu.Unlock()
	resp = h.get(t, "GET", "/s/sb-1/ports/80/", nil, nil)
	h.sbs.mu.Lock()
	dials := h.sbs.dials - before
	h.sbs.mu.Unlock()
	if resp.StatusCode != 403 || resp.Header.Get("X-Code") != "port_not_allowed" || dials != 0 {
		t.Errorf("port 80: %d %s dials %d", resp.StatusCode, resp.Header.Get("X-Code"), dials)
	}
	// Another tenant's sandbox: 404.
	resp = h.get(t, "GET", "/s/sb-1/ports/8000/", nil, map[string]string{"X-Tenant": "t2"})
	if resp.StatusCode != 404 {
		t.Errorf("foreign sandbox: %d", resp.StatusCode)
	}
	// A stopped sandbox: 409 sandbox_not_running.
	h.sbs.mu.Lock()
	h.sbs.running = false
	h.sbs.mu.Unlock()
	resp = h.get(t, "GET", "/s/sb-1/ports/8000/", nil, nil)
	if resp.StatusCode != 409 || resp.Header.Get("X-Code") != "sandbox_not_running" {
		t.Errorf("stopped sandbox: %d %s", resp.StatusCode, resp.Header.Get("X-Code"))
	}
	for _, bad := range []string{"0", "65536", "-1", "08000", "x"} {
		if _, err := ParsePort(bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("ParsePort(%q) = %v", bad, err)
		}
	}
}

// wsEcho is a WebSocket echo server standing for one inside a sandbox.
func wsEcho(t *testing.T) int {
	return upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			typ, b, err := c.Read(r.Context())
			if err != nil {
				return
			}
			if err := c.Write(r.Context(), typ, append([]byte("echo:"), b...)); err != nil {
				return
			}
		}
	}))
}

func TestProxyWebSocketAndEnding(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.PortPolicy{Allow: []string{"1-65535"}})
	port := wsEcho(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := "ws" + strings.TrimPrefix(h.srv.URL, "http") + "/s/sb-1/ports/" + strconv.Itoa(port) + "/ws"
	c, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"X-Tenant": {"t1"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	for i := range 3 {
		msg := fmt.Sprintf("m%d", i)
		if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		_, b, err := c.Read(ctx)
		if err != nil || string(b) != "echo:"+msg {
			t.Fatalf("read %q %v", b, err)
		}
	}
	// The sandbox ends: the upgraded connection is closed by the proxy.
	h.proxy.SandboxEnding(ctx, "sb-1", "deleted")
	if _, _, err := c.Read(ctx); err == nil {
		t.Fatal("read after SandboxEnding succeeded")
	} else if ctx.Err() != nil {
		t.Fatal("connection stayed open after SandboxEnding")
	}
}

func TestServeTCP(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.PortPolicy{Allow: []string{"1-65535"}})
	// A TCP echo server standing for the sandbox's.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	u := "ws" + strings.TrimPrefix(h.srv.URL, "http") + "/s/sb-1/tcp/" + strconv.Itoa(port)
	ws, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"X-Tenant": {"t1"}}})
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(-1)
	nc := websocket.NetConn(ctx, ws, websocket.MessageBinary)
	payload := bytes.Repeat([]byte("tcp-bytes-"), 400_000)
	go nc.Write(payload)
	got := make([]byte, len(payload))
	if _, err := io.ReadFull(nc, got); err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("echo over tcp: %v (equal %v)", err, bytes.Equal(got, payload))
	}
	// Closing the WebSocket closes the connection inside: the echo
	// server's copy ends, and the proxy forgets the connection.
	nc.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		h.proxy.mu.Lock()
		n := len(h.proxy.sandboxes["sb-1"].live)
		h.proxy.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d live connections left after close", n)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// A closed port answers 502 before any upgrade.
	ln2, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := ln2.Addr().(*net.TCPAddr).Port
	ln2.Close()
	_, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(h.srv.URL, "http")+"/s/sb-1/tcp/"+strconv.Itoa(closed),
		&websocket.DialOptions{HTTPHeader: http.Header{"X-Tenant": {"t1"}}})
	if err == nil || resp == nil || resp.StatusCode != 502 {
		t.Fatalf("closed port over tcp: %v %v", resp, err)
	}
}

func TestLinks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.PortPolicy{})
	ctx := context.Background()
	tok, exp, err := h.proxy.NewLink(ctx, t1Key, "sb-1", 8000, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if exp.Sub(h.now) != 10*time.Minute {
		t.Errorf("expires %v", exp)
	}
	if !strings.HasPrefix(tok, "v2.") {
		t.Errorf("token %q does not say its format", tok)
	}
	c, err := h.proxy.VerifyLink(ctx, tok)
	if err != nil || c.SandboxID != "sb-1" || c.Port != 8000 || c.Tenant != "t1" || c.KeyID != "key_1" || c.KeyTenant != "" {
		t.Fatalf("verify: %+v %v", c, err)
	}
	// Tampered: any changed byte fails, with one class for all failures.
	for i := 3; i < len(tok); i += 7 {
		b := []byte(tok)
		b[i] ^= 1
		if _, err := h.proxy.VerifyLink(ctx, string(b)); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("tampered at %d verified: %v", i, err)
		}
	}
	// A token signed with another key.
	other, _ := NewSigner(bytes.Repeat([]byte("o"), 32))
	if _, err := h.proxy.VerifyLink(ctx, other.Sign(c)); errdefs.Code(err) != "link_invalid" {
		t.Errorf("foreign key: %v", err)
	}
	h.now = h.now.Add(10 * time.Minute)
	if _, err := h.proxy.VerifyLink(ctx, tok); errdefs.Code(err) != "link_expired" {
		t.Errorf("expired: %v", err)
	}
	// Refusals when asking.
	if _, _, err := h.proxy.NewLink(ctx, t1Key, "sb-1", 8000, 2*time.Hour); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("ttl over max: %v", err)
	}
	if _, _, err := h.proxy.NewLink(ctx, t1Key, "sb-1", 80, time.Minute); !errors.Is(err, errdefs.ErrPermissionDenied) {
		t.Errorf("port 80: %v", err)
	}
	if _, _, err := h.proxy.NewLink(ctx, tenant.Principal{Tenant: "t2", KeyID: "key_2", KeyTenant: "t2"}, "sb-1", 8000, time.Minute); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("foreign: %v", err)
	}
	if _, _, err := h.proxy.NewLink(ctx, tenant.Principal{Tenant: "t1"}, "sb-1", 8000, time.Minute); err == nil {
		t.Error("a link was made without the key it is made with")
	}
}

// TestLinksBoundToKeys: a link is refused (401 token_revoked) once the key
// it was made with is revoked or that key's tenant is deleted, while a
// link of another key keeps working; a token of the earlier format, or one
// that names no key, is link_invalid.
func TestLinksBoundToKeys(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.PortPolicy{})
	ctx := context.Background()
	keep, _, err := h.proxy.NewLink(ctx, tenant.Principal{Tenant: "t1", KeyID: "key_keep", KeyTenant: "t1"}, "sb-1", 8000, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	doomed, _, err := h.proxy.NewLink(ctx, t1Key, "sb-1", 8000, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// An admin key acting for t1: the link names the admin's key.
	admin := tenant.Principal{Tenant: "t1", KeyID: "key_admin", KeyTenant: "admin", Admin: true}
	adminTok, _, err := h.proxy.NewScopedLink(admin, "sb-1", "display:observer", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if c, _, err := h.proxy.VerifyScopedLink(ctx, adminTok, "display:"); err != nil || c.Tenant != "t1" || c.IssuerTenant() != "admin" {
		t.Fatalf("the admin's link: %+v %v", c, err)
	}
	h.keys.mu.Lock()
	if got := h.keys.asked[len(h.keys.asked)-1]; got != "admin/key_admin" {
		t.Errorf("the admin's link asked about key %q", got)
	}
	h.keys.mu.Unlock()

	h.keys.revoke("t1/key_1")
	if _, err := h.proxy.VerifyLink(ctx, doomed); errdefs.Code(err) != "token_revoked" || errdefs.HTTPStatus(err) != http.StatusUnauthorized {
		t.Errorf("a link of a revoked key: %v (%d)", err, errdefs.HTTPStatus(err))
	}
	if _, err := h.proxy.VerifyLink(ctx, keep); err != nil {
		t.Errorf("a link of a live key of the same tenant: %v", err)
	}
	h.keys.revoke("admin/")
	if _, _, err := h.proxy.VerifyScopedLink(ctx, adminTok, "display:"); errdefs.Code(err) != "token_revoked" {
		t.Errorf("a link of a deleted tenant's key: %v", err)
	}
	if _, err := h.proxy.VerifyLink(ctx, keep); err != nil {
		t.Errorf("a link of a live key after another tenant went: %v", err)
	}

	// The earlier format (v1, no key) and a well-signed v2 that names no
	// key: link_invalid, a 404, never a 500.
	claims, _ := json.Marshal(map[string]any{"t": "t1", "s": "sb-1", "p": 8000, "e": h.now.Add(time.Hour).Unix()})
	signer, _ := NewSigner(bytes.Repeat([]byte("k"), 32))
	for name, payload := range map[string]string{"v1": "v1." + base64.RawURLEncoding.EncodeToString(claims), "v2 without a key": "v2." + base64.RawURLEncoding.EncodeToString(claims)} {
		tok := payload + "." + base64.RawURLEncoding.EncodeToString(signer.mac(payload))
		if _, err := h.proxy.VerifyLink(ctx, tok); errdefs.Code(err) != "link_invalid" || errdefs.HTTPStatus(err) != http.StatusNotFound {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestLoadOrCreateKey(t *testing.T) {
	t.Parallel()
	p := t.TempDir() + "/keys/link.key"
	k1, err := LoadOrCreateKey(p)
	if err != nil || len(k1) < MinLinkKeyBytes {
		t.Fatalf("%q %v", k1, err)
	}
	k2, err := LoadOrCreateKey(p)
	if err != nil || !bytes.Equal(k1, k2) {
		t.Fatalf("second load %q %v", k2, err)
	}
}

func TestPortPolicy(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		p    config.PortPolicy
		port int
		want bool
	}{
		{config.PortPolicy{}, 8000, true},
		{config.PortPolicy{}, 1023, false},
		{config.PortPolicy{}, 65535, true},
		{config.PortPolicy{Allow: []string{"9222", "5900-5910"}}, 5905, true},
		{config.PortPolicy{Allow: []string{"9222", "5900-5910"}}, 8000, false},
		{config.PortPolicy{Disabled: true}, 8000, false},
		{config.PortPolicy{}, 0, false},
	} {
		if got := c.p.Allows(c.port); got != c.want {
			t.Errorf("%+v.Allows(%d) = %v", c.p, c.port, got)
		}
	}
}

// TestServeTCPPeerThatNeverReads: a WebSocket peer that reads nothing
// stops the sandbox side's writes through flow control; what piles up is
// bounded by the socket and stream windows, not by the service's memory.
func TestServeTCPPeerThatNeverReads(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.PortPolicy{Allow: []string{"1-65535"}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var written atomic.Int64
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Write(buf)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	u := "ws" + strings.TrimPrefix(h.srv.URL, "http") + "/s/sb-1/tcp/" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ws, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"X-Tenant": {"t1"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	// Wait until the writer is stuck: no progress over half a second.
	last := int64(-1)
	for {
		time.Sleep(500 * time.Millisecond)
		n := written.Load()
		if n == last {
			break
		}
		last = n
		if ctx.Err() != nil {
			t.Fatalf("the sandbox side kept writing: %d bytes", n)
		}
	}
	// Kernel socket buffers on both hops plus one copy step in the proxy.
	if last > 64<<20 {
		t.Errorf("%d MiB went out to a peer that reads nothing; want it bounded by the buffers", last>>20)
	}
	t.Logf("stalled after %d KiB", last>>10)
}

// TestScopedLinks: a scoped link opens only its own scope, never a port,
// and a port link is never a scoped one.
func TestScopedLinks(t *testing.T) {
	t.Parallel()
	signer, err := NewSigner(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	keys := &fakeKeys{}
	p, err := New(Config{Sandboxes: &fakeSandboxes{}, Signer: signer, KeyLive: keys.live, MaxLinkTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	by := tenant.Principal{Tenant: "a", KeyID: "key_a", KeyTenant: "a"}
	tok, _, err := p.NewScopedLink(by, "sbx_1", "display:observer", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.VerifyLink(ctx, tok); errdefs.Code(err) != "link_invalid" {
		t.Errorf("a scoped link opened a port: %v", err)
	}
	c, role, err := p.VerifyScopedLink(ctx, tok, "display:")
	if err != nil || role != "observer" || c.SandboxID != "sbx_1" || c.Tenant != "a" || c.KeyID != "key_a" {
		t.Errorf("VerifyScopedLink = %+v %q %v", c, role, err)
	}
	if _, _, err := p.VerifyScopedLink(ctx, tok, "other:"); errdefs.Code(err) != "link_invalid" {
		t.Errorf("a scoped link opened another scope: %v", err)
	}
	portTok := signer.Sign(LinkClaims{Tenant: "a", KeyID: "key_a", SandboxID: "sbx_1", Port: 5901, Expires: time.Now().Add(time.Minute).Unix()})
	if _, _, err := p.VerifyScopedLink(ctx, portTok, "display:"); errdefs.Code(err) != "link_invalid" {
		t.Errorf("a port link opened the display: %v", err)
	}
	if _, _, err := p.NewScopedLink(by, "sbx_1", "display:observer", 2*time.Hour); errdefs.Code(err) != "invalid_ttl" {
		t.Errorf("a link longer than MaxLinkTTL: %v", err)
	}
}

// TestClosedPortSaysWhy: the 502 of a port nobody listens on carries what
// the PortHint knows of the job that served it, else where to look.
func TestClosedPortSaysWhy(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.PortPolicy{Allow: []string{"1024-65535"}})
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	body := func() string {
		resp := h.get(t, "GET", "/s/sb-1/ports/"+strconv.Itoa(closed)+"/", nil, nil)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 502 || resp.Header.Get("X-Code") != "port_unreachable" {
			t.Errorf("closed port: %d %s", resp.StatusCode, resp.Header.Get("X-Code"))
		}
		return string(b)
	}
	if b := body(); !strings.Contains(b, "genesis job ls sb-1") {
		t.Errorf("without a hint the answer %q does not point at the sandbox's jobs", b)
	}
	h.proxy.cfg.PortHint = func(sandboxID string, port int) string {
		if sandboxID == "sb-1" && port == closed {
			return "job_x exited (exit_reason timeout)"
		}
		return ""
	}
	if b := body(); !strings.Contains(b, "; job_x exited (exit_reason timeout)") {
		t.Errorf("the answer %q does not carry the hint", b)
	}
}
