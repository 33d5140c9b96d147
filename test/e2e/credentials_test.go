package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"genesis.dev/sandbox/client"
)

// credentialsConfig is a service with a profile whose "browser" is the
// test's header-recording server on the CDP and Playwright ports (so the
// browser routes' forwarding is seen from inside the sandbox), and the E2B
// adapter's host-based listener.
func credentialsConfig(domain, listen, cert, key string) string {
	return fmt.Sprintf(`profiles:
  - name: tool-basic
    recipe: tool-basic
    allowed_runtimes: [runc, runsc]
    default_risk_level: low
    resources: {cpu: 0.5, memory_mb: 256, pids: 128}
    network: none
    user: "1000:1000"
  - name: recording-browser
    recipe: tool-basic
    allowed_runtimes: [runc, runsc]
    default_risk_level: low
    resources: {cpu: 0.5, memory_mb: 256, pids: 128}
    network: none
    user: "1000:1000"
    browser: {cdp_port: 9222, playwright_port: 9223, downloads_dir: /workspace/downloads, profile_dir: /workspace/profile,
      action_timeout: 5s, max_action_timeout: 10s, max_actions: 10}
e2b:
  templates: {base: tool-basic}
  sandbox_domain: %q
  listen: %q
  tls_cert_file: %q
  tls_key_file: %q
`, domain, listen, cert, key)
}

// seenRequest is what test/e2e/sandboxserver's headers mode answers.
type seenRequest struct {
	Method    string              `json:"method"`
	Path      string              `json:"path"`
	Headers   map[string][]string `json:"headers"`
	WebSocket bool                `json:"websocket"`
}

// TestCredentialsNeverReachTheSandbox: under runc and runsc, a server
// inside the sandbox records the headers it receives through every path
// the service forwards a request into a sandbox by: the port route (HTTP
// and WebSocket), a preview origin (HTTP and WebSocket), the E2B adapter's
// port traffic (header and host mode) and the browser routes (CDP over
// HTTP and WebSocket, Playwright, with the API key and through a browser
// link). Every credential the service accepts is sent on each, and none
// arrives: Authorization, Proxy-Authorization, X-API-KEY,
// OPEN-SANDBOX-API-KEY, the E2B access and traffic tokens, X-Genesis-*
// and the service's genesis_* cookies; an ordinary header and cookie do.
func TestCredentialsNeverReachTheSandbox(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, certFile, keyFile := writeWildcardCert(t, dir, "e2b.test")
	hostAddr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	_, hostPort, _ := net.SplitHostPort(hostAddr)
	domain := "e2b.test:" + hostPort
	e := newEnv(t, credentialsConfig(domain, hostAddr, certFile, keyFile))
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	c := svc.client()
	key := e.apiKey
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "recording-browser", Runtime: rt, RiskLevel: "low"})
			id := sb.ID
			uploadSandboxServer(t, c, id)
			for _, port := range []string{"8001", "9222", "9223"} {
				startJob(t, c, id, client.ExecRequest{Command: []string{"/workspace/sbserver", "headers", "-addr", "127.0.0.1:" + port}})
			}
			for _, port := range []string{"8001", "9222", "9223"} {
				eventually(t, 30*time.Second, "the recording server on port "+port, func() (bool, string) {
					code, _, body := apiGet(t, svc, "/v1/sandboxes/"+id+"/ports/"+port+"/", key)
					return code == 200, fmt.Sprintf("%d %.200s", code, body)
				})
			}
			code, body := e2bCall(t, svc.url(), key, "GET", "/e2b/sandboxes/"+id, "")
			var d struct{ EnvdAccessToken string }
			if code != 200 || json.Unmarshal([]byte(body), &d) != nil || d.EnvdAccessToken == "" {
				t.Fatalf("E2B get: %d %s", code, body)
			}
			e2bToken := d.EnvdAccessToken
			link, err := c.CreatePortLink(callCtx(t), id, 8001, 30*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			blink, err := c.CreateBrowserLink(callCtx(t), id, 30*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			browserLink := strings.TrimPrefix(blink.CDPURL, svc.url())

			// Every credential the service accepts, with values that must
			// not appear inside the sandbox; the header a path needs to be
			// authenticated is set over these.
			secrets := []string{key, e2bToken, link.Token, "secret-"}
			sent := func(auth map[string]string) http.Header {
				h := http.Header{}
				h.Set("Authorization", "Bearer "+key)
				h.Set("Proxy-Authorization", "Basic secret-proxy")
				h.Set("X-API-KEY", key)
				h.Set("OPEN-SANDBOX-API-KEY", key)
				h.Set("X-Access-Token", e2bToken)
				h.Set("E2B-Traffic-Access-Token", e2bToken)
				h.Set("X-Genesis-Tenant", "default") // the key's own tenant: no act-as
				h.Set("X-Genesis-Sandbox-Token", "gst_v2.secret-token")
				h.Set("X-Genesis-Anything", "secret-anything")
				h.Set("X-Genesis-Preview-Token", link.Token)
				h.Set("Cookie", "genesis_preview=secret-cookie; app=kept; genesis_session=secret-session")
				h.Set("X-Ordinary", "kept")
				for k, v := range auth {
					h.Set(k, v)
				}
				return h
			}
			e2bAuth := map[string]string{"E2b-Sandbox-Id": id}
			host := "8001-" + id + "." + domain
			// A preview origin is reached at the service's address with its
			// own Host (previewClient); the token travels in the query, and
			// in X-Genesis-Preview-Token as set above.
			inQuery := "?app=1&genesis_preview_token=" + url.QueryEscape(link.Token)
			paths := []struct {
				name, url string
				ws        bool
				auth      map[string]string
				client    *http.Client
			}{
				{name: "port route", url: svc.url() + "/v1/sandboxes/" + id + "/ports/8001/seen?app=1"},
				{name: "port route, WebSocket", url: svc.url() + "/v1/sandboxes/" + id + "/ports/8001/ws?app=1", ws: true},
				{name: "preview origin", url: link.Origin + "/seen" + inQuery, client: previewClient(svc)},
				{name: "preview origin, WebSocket", url: link.Origin + "/ws" + inQuery, ws: true, client: previewWSClient(svc)},
				{name: "E2B port traffic", url: svc.url() + "/e2b/ports/8001/seen", auth: e2bAuth},
				{name: "E2B port traffic, WebSocket", url: svc.url() + "/e2b/ports/8001/ws", ws: true, auth: e2bAuth},
				{name: "E2B host mode", url: "https://" + host + "/seen", client: hostModeClient(hostAddr)},
				{name: "browser CDP", url: svc.url() + "/v1/sandboxes/" + id + "/browser/json/version"},
				{name: "browser CDP WebSocket", url: svc.url() + "/v1/sandboxes/" + id + "/browser/devtools/browser/x", ws: true},
				{name: "browser Playwright", url: svc.url() + "/v1/sandboxes/" + id + "/browser/playwright", ws: true},
				{name: "browser link CDP", url: svc.url() + browserLink + "/json/version"},
				{name: "browser link Playwright", url: svc.url() + browserLink + "/playwright", ws: true},
			}
			for _, p := range paths {
				t.Run(strings.ReplaceAll(p.name, " ", "-"), func(t *testing.T) {
					h := sent(p.auth)
					var seen seenRequest
					if p.ws {
						seen = wsSeen(t, p.client, p.url, h)
					} else {
						seen = httpSeen(t, p.client, p.url, h)
					}
					if seen.Method == "" || seen.WebSocket != p.ws {
						t.Fatalf("the sandbox's server saw %+v", seen)
					}
					if strings.Contains(p.url, "app=1") && (!strings.Contains(seen.Path, "app=1") || strings.Contains(seen.Path, "genesis_preview_token")) {
						t.Errorf("the query reached the sandbox as %q: want app=1 and no preview token", seen.Path)
					}
					got := http.Header(seen.Headers)
					for name, vals := range got {
						v := strings.Join(vals, "; ")
						if strings.HasPrefix(strings.ToLower(name), "x-genesis-") {
							t.Errorf("%s: %q reached the sandbox", name, v)
						}
						for _, s := range secrets {
							if strings.Contains(v, s) {
								t.Errorf("%s: %q reached the sandbox (it holds a credential)", name, v)
							}
						}
					}
					for _, name := range []string{"Authorization", "Proxy-Authorization", "X-API-KEY", "OPEN-SANDBOX-API-KEY", "X-Access-Token", "E2B-Traffic-Access-Token"} {
						if got.Get(name) != "" {
							t.Errorf("%s reached the sandbox", name)
						}
					}
					if got.Get("X-Ordinary") != "kept" || got.Get("Cookie") != "app=kept" {
						t.Errorf("the ordinary header and cookie did not arrive as sent: X-Ordinary %q, Cookie %q", got.Get("X-Ordinary"), got.Get("Cookie"))
					}
				})
			}
		})
	}
}

// hostModeClient reaches the E2B host-based listener at addr whatever the
// URL's host (the test's wildcard names resolve nowhere).
func hostModeClient(addr string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the test's own listener
	}}
}

// httpSeen sends a GET with h and decodes the headers server's answer.
func httpSeen(t *testing.T, hc *http.Client, url string, h http.Header) seenRequest {
	t.Helper()
	if hc == nil {
		hc = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(callCtx(t), "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var seen seenRequest
	if resp.StatusCode != 200 || json.Unmarshal(b, &seen) != nil {
		t.Fatalf("GET %s: %d %.300s", url, resp.StatusCode, b)
	}
	return seen
}

// previewWSClient is previewClient for a WebSocket's handshake (whose
// client must have no timeout of its own: the context bounds it).
func previewWSClient(svc *service) *http.Client {
	hc := previewClient(svc)
	hc.Timeout = 0
	return hc
}

// wsSeen opens a WebSocket with h (through hc, when not nil) and decodes
// the headers server's first message.
func wsSeen(t *testing.T, hc *http.Client, url string, h http.Header) seenRequest {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http"), &websocket.DialOptions{HTTPHeader: h, HTTPClient: hc})
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("WebSocket %s: %d %v", url, status, err)
	}
	defer ws.CloseNow()
	_, b, err := ws.Read(ctx)
	var seen seenRequest
	if err != nil || json.Unmarshal(b, &seen) != nil {
		t.Fatalf("WebSocket %s: first message %q %v", url, b, err)
	}
	return seen
}
