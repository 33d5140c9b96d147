package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"genesis.dev/sandbox/client"
)

// previewClient reaches the service's preview hosts ("{port}-{sandbox}.localhost")
// the way a browser does, with no DNS: every connection goes to the
// service's own loopback address, the Host header names the preview.
func previewClient(svc *service) *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second}
	return &http.Client{
		Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, svc.addr)
		}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       callTimeout,
	}
}

// previewDo sends one request to a preview URL (see previewClient).
func previewDo(t *testing.T, svc *service, method, rawURL string, hdr http.Header) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := previewClient(svc).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, rawURL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// probeResult is what the hostile page of sandboxserver's origins mode
// found out.
type probeResult struct {
	Origin string `json:"origin"`
	APIKey string `json:"apiKey"`
	Cookie string `json:"cookie"`
	SW     string `json:"sw"`
	Clear  string `json:"clear"`
}

// runProbe waits for the probe page in the current tab of ctx to finish
// and returns what it found.
func runProbe(t *testing.T, ctx context.Context) probeResult {
	t.Helper()
	var text string
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		if text, err = chromedp.Run(ctx, chromedp.Evaluate[string](`(document.getElementById('out')||document.body).textContent`)); err != nil {
			t.Fatalf("reading the probe: %v", err)
		}
		if rest, ok := strings.CutPrefix(text, "done "); ok {
			var r probeResult
			if err := json.Unmarshal([]byte(rest), &r); err != nil {
				t.Fatalf("probe said %q: %v", text, err)
			}
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("the probe did not finish: %q", text)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestPreviewOrigins checks the origin model in headless Chromium, under
// runc and runsc: a hostile page in a sandbox, opened through its preview
// link, runs on an origin of its own ({port}-{sandbox}.localhost): it
// cannot read the console's API key from sessionStorage, its service
// worker (served with Service-Worker-Allowed: /) controls only its own
// origin and never the console, and the cookie it tosses over the whole
// domain opens no other preview. The same page reached through the API's
// own origin (the authenticated port route) runs sandboxed, with an opaque
// origin: no storage, no service worker, no cookies. A link of the first
// form (/v1/previews/{token}/) sends the browser on to the port's origin.
func TestPreviewOrigins(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	c := svc.client()
	ctx, cancel := chromiumContext(t)
	defer cancel()
	// The console's tab first: the API key in its sessionStorage, as after
	// a sign-in (a key the service does not know, the console itself would
	// drop).
	consoleURL := svc.url() + "/console/"
	secret := e.apiKey
	if err := chromedp.Do(ctx, chromedp.Navigate(consoleURL)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](`sessionStorage.setItem('genesis.apiKey', '`+secret+`')`)); err != nil {
		t.Fatal(err)
	}
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt, RiskLevel: "low"})
			other := e.createSandbox(t, client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt, RiskLevel: "low"})
			for _, id := range []string{sb.ID, other.ID} {
				uploadSandboxServer(t, c, id)
				startJob(t, c, id, client.ExecRequest{Command: []string{"/workspace/sbserver", "origins", "-addr", "127.0.0.1:8002"}, Background: true})
				eventually(t, 30*time.Second, "the probe page serves", func() (bool, string) {
					code, _, body := apiGet(t, svc, client.PortPath(id, 8002)+"x", e.apiKey)
					return code == 200, fmt.Sprintf("%d %.100s", code, body)
				})
			}
			cctx, ccancel := context.WithTimeout(context.Background(), callTimeout)
			defer ccancel()
			link, err := c.CreatePortLink(cctx, sb.ID, 8002, 10*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			u, err := url.Parse(link.URL)
			if err != nil {
				t.Fatal(err)
			}
			wantHost := "8002-" + strings.TrimPrefix(sb.ID, "sbx_") + ".localhost"
			if u.Hostname() != wantHost || link.Origin != "http://"+wantHost+":"+u.Port() || link.Token == "" {
				t.Fatalf("preview link %+v: want the origin http://%s:PORT", link, wantHost)
			}

			t.Run("preview origin", func(t *testing.T) {
				// Opened in the console's own tab.
				tab := ctx
				if err := chromedp.Do(tab, chromedp.Navigate(link.URL)); err != nil {
					t.Fatal(err)
				}
				r := runProbe(t, tab)
				loc, err := chromedp.Run(tab, chromedp.Location())
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(loc, "genesis_preview_token") || !strings.HasPrefix(loc, link.Origin+"/") {
					t.Errorf("after the navigation the tab is at %s; want %s/ without the token", loc, link.Origin)
				}
				if r.Origin != link.Origin {
					t.Errorf("the page's origin is %q, want %q", r.Origin, link.Origin)
				}
				if r.APIKey != "" {
					t.Errorf("the preview page read %q from sessionStorage", r.APIKey)
				}
				if r.SW != "registered "+link.Origin+"/" {
					t.Errorf("service worker on its own origin: %q, want registered for %s/", r.SW, link.Origin)
				}
				// Its own origin is its own: once active, the worker answers
				// there (which shows the browser does run such workers).
				if _, err := chromedp.Run(tab, chromedp.Evaluate[int](`navigator.serviceWorker.ready.then(() => 1)`, chromedp.EvalAwaitPromise)); err != nil {
					t.Fatal(err)
				}
				if err := chromedp.Do(tab, chromedp.Navigate(link.Origin+"/anything")); err != nil {
					t.Fatal(err)
				}
				text, err := chromedp.Run(tab, chromedp.Text("body"))
				if err != nil {
					t.Fatal(err)
				}
				if text != "HIJACKED" {
					t.Errorf("the page's worker on its own origin answered %q, want HIJACKED", text)
				}
				// The other sandbox's preview ignores the tossed cookie and
				// still needs (and takes) its own link.
				code, _, body := previewDo(t, svc, "GET", "http://8002-"+strings.TrimPrefix(other.ID, "sbx_")+".localhost:"+u.Port()+"/x",
					http.Header{"Cookie": {"genesis_preview=" + link.Token}})
				if code != http.StatusNotFound || !strings.Contains(body, "link_invalid") {
					t.Errorf("another sandbox's preview with this link's cookie: %d %.200s; want 404 link_invalid", code, body)
				}
			})

			t.Run("api origin", func(t *testing.T) {
				// In the console's own tab, whose sessionStorage holds the
				// key: the page must not reach it.
				tab := ctx
				defer chromedp.Call(tab, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{}})
				if _, err := chromedp.Call(tab, network.Enable, network.EnableParams{}); err != nil {
					t.Fatal(err)
				}
				if _, err := chromedp.Call(tab, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
					Headers: network.Headers{"Authorization": "Bearer " + e.apiKey}}); err != nil {
					t.Fatal(err)
				}
				if err := chromedp.Do(tab, chromedp.Navigate(svc.url()+client.PortPath(sb.ID, 8002))); err != nil {
					t.Fatal(err)
				}
				r := runProbe(t, tab)
				if r.Origin != "null" || !strings.HasPrefix(r.APIKey, "error") || !strings.HasPrefix(r.SW, "error") || !strings.HasPrefix(r.Cookie, "error") || r.Clear == `"storage"` {
					t.Errorf("the page on the API's origin ran as %+v; want an opaque origin with no storage, cookies or service worker", r)
				}
				// The worker script itself is refused as a worker there.
				req, _ := http.NewRequest("GET", svc.url()+client.PortPath(sb.ID, 8002)+"sw.js", nil)
				req.Header.Set("Authorization", "Bearer "+e.apiKey)
				req.Header.Set("Service-Worker", "script")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "service_worker_refused") {
					t.Errorf("a worker script through the API's origin: %d %.200s", resp.StatusCode, b)
				}
				code, hdr, _ := apiGet(t, svc, client.PortPath(sb.ID, 8002)+"sw.js", e.apiKey)
				if code != 200 || hdr.Get("Service-Worker-Allowed") != "" || !strings.Contains(strings.Join(hdr.Values("Content-Security-Policy"), ","), "sandbox") {
					t.Errorf("sw.js through the API's origin: %d %v", code, hdr)
				}
				code, hdr, _ = apiGet(t, svc, client.PortPath(sb.ID, 8002)+"clear", e.apiKey)
				if code != 200 || hdr.Get("Clear-Site-Data") != "" {
					t.Errorf("the page through the API's origin: %d, Clear-Site-Data %q", code, hdr.Get("Clear-Site-Data"))
				}
			})

			// Back in the console: its key is where it was.
			if err := chromedp.Do(ctx, chromedp.Navigate(consoleURL)); err != nil {
				t.Fatal(err)
			}
			if key, err := chromedp.Run(ctx, chromedp.Evaluate[string](`sessionStorage.getItem('genesis.apiKey') || ''`)); err != nil || key != secret {
				t.Errorf("the console's key after the sandbox's pages: %q %v", key, err)
			}

			t.Run("first-form link", func(t *testing.T) {
				// (previewDo follows no redirect and resolves no name.)
				code, hdr, _ := previewDo(t, svc, "GET", svc.url()+"/v1/previews/"+link.Token+"/x?a=1", nil)
				loc := hdr.Get("Location")
				if code != http.StatusTemporaryRedirect || !strings.HasPrefix(loc, link.Origin+"/x?a=1&genesis_preview_token=") {
					t.Errorf("/v1/previews/{token}/x: %d Location %q; want 307 to %s/x", code, loc, link.Origin)
				}
				// Programs may keep the token in a header.
				code, _, body := previewDo(t, svc, "GET", link.Origin+"/y", http.Header{"X-Genesis-Preview-Token": {link.Token}})
				if code != 200 || body != `path /y cookie ""` {
					t.Errorf("preview with the token header: %d %q (the sandbox must not see the token)", code, body)
				}
				code, _, body = previewDo(t, svc, "GET", link.Origin+"/y", nil)
				if code != http.StatusUnauthorized || !strings.Contains(body, "link_required") {
					t.Errorf("preview with no token: %d %.200s", code, body)
				}
				// A preview host serves the sandbox and nothing of the API.
				code, _, body = previewDo(t, svc, "GET", link.Origin+"/v1/whoami", http.Header{"Authorization": {"Bearer " + e.apiKey}, "X-Genesis-Preview-Token": {link.Token}})
				if code != 200 || !strings.HasPrefix(body, "path /v1/whoami") {
					t.Errorf("/v1/whoami on a preview host: %d %.200s; want the sandbox's own answer", code, body)
				}
			})
		})
	}

	// After all of it the console's tab is the console's: no sandbox's
	// worker controls it and its key is where it was.
	if err := chromedp.Do(ctx, chromedp.Navigate(consoleURL)); err != nil {
		t.Fatal(err)
	}
	controlled, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!navigator.serviceWorker.controller`))
	if err != nil {
		t.Fatal(err)
	}
	key, err := chromedp.Run(ctx, chromedp.Evaluate[string](`sessionStorage.getItem('genesis.apiKey') || ''`))
	if err != nil {
		t.Fatal(err)
	}
	if controlled || key != secret {
		t.Errorf("the console's tab: controlled by a service worker %v, key %q", controlled, key)
	}
	regs, err := chromedp.Run(ctx, chromedp.Evaluate[int](`navigator.serviceWorker.getRegistrations().then(r => r.length)`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if regs != 0 {
		t.Errorf("%d service workers registered on the API's origin", regs)
	}
}
