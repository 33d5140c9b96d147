package httpapi_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/ports"
)

// headerRecorder is a server standing for one inside a sandbox (the
// harness's agents run on this host, so a sandbox's loopback is this
// host's): it answers "ok" and keeps the headers of every request.
type headerRecorder struct {
	mu   sync.Mutex
	seen []http.Header
	uris []string
	port int
}

func newHeaderRecorder(t *testing.T) *headerRecorder {
	t.Helper()
	hr := &headerRecorder{}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hr.mu.Lock()
		hr.seen = append(hr.seen, r.Header.Clone())
		hr.uris = append(hr.uris, r.RequestURI)
		hr.mu.Unlock()
		w.Write([]byte("ok"))
	}))
	t.Cleanup(s.Close)
	_, p, _ := net.SplitHostPort(s.Listener.Addr().String())
	hr.port, _ = strconv.Atoi(p)
	return hr
}

func (hr *headerRecorder) last() (http.Header, string) {
	hr.mu.Lock()
	defer hr.mu.Unlock()
	if len(hr.seen) == 0 {
		return nil, ""
	}
	return hr.seen[len(hr.seen)-1], hr.uris[len(hr.uris)-1]
}

// TestDataPlaneTokensBoundToKeys: a preview link, an E2B access token and
// an OpenSandbox execd token each name the key they were made with and
// are refused (401 token_revoked) once it is revoked through the tenant
// API, while those of another live key of the same tenant keep working;
// once the tenant is deleted, its remaining key's tokens are refused too.
func TestDataPlaneTokensBoundToKeys(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	if resp, body := a.do(req{method: "POST", path: "/v1/tenants", key: keyAdmin, body: `{"name":"acme"}`}); resp.StatusCode != http.StatusCreated {
		t.Fatalf("tenant: %d %s", resp.StatusCode, body)
	}
	newKey := func() client.APIKey {
		resp, body := a.do(req{method: "POST", path: "/v1/tenants/acme/keys", key: keyAdmin, body: `{}`})
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("key: %d %s", resp.StatusCode, body)
		}
		return decodeJSON[client.APIKey](t, body)
	}
	doomed, kept := newKey(), newKey()
	rec := newHeaderRecorder(t)
	sb, _ := a.createHTTP(doomed.Key, client.CreateSandboxRequest{})

	// The tokens of each key.
	type tokens struct{ preview, e2b, osb string }
	var e2bID, osbID string
	{
		resp, body := a.do(req{method: "POST", path: "/e2b/sandboxes", body: `{"templateID":"test","timeout":300}`, header: map[string]string{"X-API-KEY": doomed.Key}})
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("e2b create: %d %s", resp.StatusCode, body)
		}
		e2bID = decodeJSON[struct{ SandboxID string }](t, body).SandboxID
		resp, body = a.do(req{method: "POST", path: "/opensandbox/v1/sandboxes", body: `{"image":{"uri":"test"},"timeout":300,"entrypoint":["x"]}`, header: map[string]string{"OPEN-SANDBOX-API-KEY": doomed.Key}})
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("opensandbox create: %d %s", resp.StatusCode, body)
		}
		osbID = decodeJSON[struct{ ID string }](t, body).ID
	}
	tokensOf := func(k client.APIKey) tokens {
		var out tokens
		resp, body := a.do(req{method: "POST", path: "/v1/sandboxes/" + sb.ID + "/ports/" + strconv.Itoa(rec.port) + "/links", key: k.Key, body: `{"ttl_seconds":600}`})
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("link: %d %s", resp.StatusCode, body)
		}
		out.preview = decodeJSON[client.PortLink](t, body).URL
		resp, body = a.do(req{method: "GET", path: "/e2b/sandboxes/" + e2bID, header: map[string]string{"X-API-KEY": k.Key}})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("e2b get: %d %s", resp.StatusCode, body)
		}
		out.e2b = decodeJSON[struct{ EnvdAccessToken string }](t, body).EnvdAccessToken
		resp, body = a.do(req{method: "GET", path: "/opensandbox/v1/sandboxes/" + osbID + "/endpoints/44772", header: map[string]string{"OPEN-SANDBOX-API-KEY": k.Key}})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("opensandbox endpoint: %d %s", resp.StatusCode, body)
		}
		out.osb = decodeJSON[struct{ Headers map[string]string }](t, body).Headers["X-Genesis-Sandbox-Token"]
		return out
	}
	doomedTok, keptTok := tokensOf(doomed), tokensOf(kept)
	if doomedTok.e2b == keptTok.e2b || doomedTok.osb == keptTok.osb {
		t.Fatal("two keys were given the same token")
	}
	use := func(tok tokens) (preview, e2b, osb *http.Response, bodies [3]string) {
		var b []byte
		preview, b = a.do(previewReq(t, tok.preview, nil))
		bodies[0] = string(b)
		e2b, b = a.do(req{method: "GET", path: "/e2b/health", header: map[string]string{"E2b-Sandbox-Id": e2bID, "X-Access-Token": tok.e2b}})
		bodies[1] = string(b)
		osb, b = a.do(req{method: "GET", path: "/opensandbox/sandboxes/" + osbID + "/execd/ping", header: map[string]string{"X-Genesis-Sandbox-Token": tok.osb}})
		bodies[2] = string(b)
		return
	}
	works := func(what string, tok tokens) {
		t.Helper()
		p, e, o, b := use(tok)
		if p.StatusCode != 200 || e.StatusCode != 204 || o.StatusCode != 200 {
			t.Errorf("%s: preview %d, e2b %d, opensandbox %d: %q", what, p.StatusCode, e.StatusCode, o.StatusCode, b)
		}
	}
	refused := func(what string, tok tokens) {
		t.Helper()
		p, e, o, b := use(tok)
		if p.StatusCode != 401 || problemCode(t, []byte(b[0])) != "token_revoked" {
			t.Errorf("%s: preview link %d %s, want 401 token_revoked", what, p.StatusCode, b[0])
		}
		if e.StatusCode != 401 || !strings.Contains(b[1], `"code":401`) || !strings.Contains(b[1], "revoked") {
			t.Errorf("%s: e2b %d %s, want 401", what, e.StatusCode, b[1])
		}
		if o.StatusCode != 401 || !strings.Contains(b[2], `"code":"TOKEN_REVOKED"`) {
			t.Errorf("%s: opensandbox %d %s, want 401 TOKEN_REVOKED", what, o.StatusCode, b[2])
		}
	}
	works("the tokens of the first key", doomedTok)
	works("the tokens of the second key", keptTok)

	if resp, body := a.do(req{method: "DELETE", path: "/v1/tenants/acme/keys/" + doomed.ID, key: keyAdmin}); resp.StatusCode/100 != 2 {
		t.Fatalf("revoke: %d %s", resp.StatusCode, body)
	}
	refused("the tokens of the revoked key", doomedTok)
	works("the tokens of the live key", keptTok)

	// Old formats fail cleanly: a v1 preview link is link_invalid (404), an
	// E2B or OpenSandbox token of the earlier format 401.
	if resp, body := a.do(req{method: "GET", path: "/v1/previews/v1.eyJ0IjoiYWNtZSJ9.AAAA/"}); resp.StatusCode != 404 || problemCode(t, body) != "link_invalid" {
		t.Errorf("a v1 preview link: %d %s", resp.StatusCode, body)
	}
	if resp, body := a.do(req{method: "GET", path: "/e2b/health", header: map[string]string{"E2b-Sandbox-Id": e2bID, "X-Access-Token": "gst_YWNtZQ.AAAA"}}); resp.StatusCode != 401 || !strings.Contains(string(body), "earlier format") {
		t.Errorf("an E2B token of the earlier format: %d %s", resp.StatusCode, body)
	}
	if resp, body := a.do(req{method: "GET", path: "/opensandbox/sandboxes/" + osbID + "/execd/ping", header: map[string]string{"X-Genesis-Sandbox-Token": "gst_YWNtZQ.AAAA"}}); resp.StatusCode != 401 || !strings.Contains(string(body), "earlier format") {
		t.Errorf("an OpenSandbox token of the earlier format: %d %s", resp.StatusCode, body)
	}

	// The tenant deleted (its sandboxes first): its last key's tokens are
	// refused as revoked, before anything looks for the sandbox.
	for _, d := range []req{
		{method: "DELETE", path: "/v1/sandboxes/" + sb.ID, key: kept.Key},
		{method: "DELETE", path: "/e2b/sandboxes/" + e2bID, header: map[string]string{"X-API-KEY": kept.Key}},
		{method: "DELETE", path: "/opensandbox/v1/sandboxes/" + osbID, header: map[string]string{"OPEN-SANDBOX-API-KEY": kept.Key}},
		{method: "DELETE", path: "/v1/tenants/acme", key: keyAdmin},
	} {
		if resp, body := a.do(d); resp.StatusCode/100 != 2 {
			t.Fatalf("%s %s: %d %s", d.method, d.path, resp.StatusCode, body)
		}
	}
	refused("the tokens of a deleted tenant's key", keptTok)
}

// TestCredentialsStayOut: the credentials the service accepts never reach
// a sandbox's server through the port route, a preview link or the E2B
// adapter's port traffic, while an ordinary header and cookie do.
func TestCredentialsStayOut(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	rec := newHeaderRecorder(t)
	sb, _ := a.createHTTP(keyA, client.CreateSandboxRequest{})
	resp, body := a.do(req{method: "POST", path: "/v1/sandboxes/" + sb.ID + "/ports/" + strconv.Itoa(rec.port) + "/links", key: keyA, body: `{"ttl_seconds":600}`})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("link: %d %s", resp.StatusCode, body)
	}
	link := decodeJSON[client.PortLink](t, body)
	resp, body = a.do(req{method: "POST", path: "/e2b/sandboxes", body: `{"templateID":"test","timeout":300}`, header: map[string]string{"X-API-KEY": keyA}})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("e2b create: %d %s", resp.StatusCode, body)
	}
	e2bSb := decodeJSON[struct{ SandboxID, EnvdAccessToken string }](t, body)

	creds := map[string]string{
		"X-API-KEY": keyA, "OPEN-SANDBOX-API-KEY": keyA, "Proxy-Authorization": "Basic " + keyA,
		"X-Genesis-Tenant": "a", "X-Genesis-Sandbox-Token": "gst_v2.secret",
		"Cookie": "genesis_preview=secret; app=kept", "X-Ordinary": "kept",
	}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range creds {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	for _, path := range []struct {
		name string
		r    req
	}{
		{"the port route", req{method: "GET", path: "/v1/sandboxes/" + sb.ID + "/ports/" + strconv.Itoa(rec.port) + "/x", key: keyA,
			header: with(map[string]string{"X-Access-Token": e2bSb.EnvdAccessToken, "E2B-Traffic-Access-Token": e2bSb.EnvdAccessToken})}},
		{"a preview link (token in the query)", previewReq(t, link.URL, with(map[string]string{"Authorization": "Bearer " + keyA,
			"X-Access-Token": e2bSb.EnvdAccessToken, "E2B-Traffic-Access-Token": e2bSb.EnvdAccessToken}))},
		{"a preview link (token in the header)", previewReq(t, link.Origin+"/x", with(map[string]string{"Authorization": "Bearer " + keyA,
			"X-Genesis-Preview-Token": link.Token}))},
		{"a preview link (token in the cookie)", previewReq(t, link.Origin+"/x", with(map[string]string{
			"Cookie": "genesis_preview=" + link.Token + "; app=kept"}))},
		{"E2B port traffic (access token)", req{method: "GET", path: "/e2b/ports/" + strconv.Itoa(rec.port) + "/x",
			header: with(map[string]string{"E2b-Sandbox-Id": e2bSb.SandboxID, "X-Access-Token": e2bSb.EnvdAccessToken, "Authorization": "Bearer " + keyA})}},
		{"E2B port traffic (traffic token)", req{method: "GET", path: "/e2b/ports/" + strconv.Itoa(rec.port) + "/x",
			header: with(map[string]string{"E2b-Sandbox-Id": e2bSb.SandboxID, "E2B-Traffic-Access-Token": e2bSb.EnvdAccessToken, "Authorization": "Bearer " + keyA})}},
	} {
		resp, body := a.do(path.r)
		if resp.StatusCode != 200 || string(body) != "ok" {
			t.Errorf("%s: %d %s", path.name, resp.StatusCode, body)
			continue
		}
		seen, uri := rec.last()
		if strings.Contains(uri, link.Token) || strings.Contains(uri, "genesis_preview_token") {
			t.Errorf("%s: the preview token reached the sandbox in %q", path.name, uri)
		}
		for name, vals := range seen {
			v := strings.Join(vals, " ")
			if strings.Contains(v, keyA) || strings.Contains(v, "secret") || strings.Contains(v, e2bSb.EnvdAccessToken) ||
				strings.Contains(v, link.Token) || strings.HasPrefix(strings.ToLower(name), "x-genesis-") {
				t.Errorf("%s: %s: %q reached the sandbox", path.name, name, v)
			}
		}
		for _, name := range ports.CredentialHeaders() {
			if seen.Get(name) != "" {
				t.Errorf("%s: %s reached the sandbox", path.name, name)
			}
		}
		if seen.Get("X-Ordinary") != "kept" || seen.Get("Cookie") != "app=kept" {
			t.Errorf("%s: the ordinary header and cookie did not arrive: %v", path.name, seen)
		}
	}
}

// previewReq is a request to a preview origin's URL, sent to the test
// server with that origin's Host.
func previewReq(t *testing.T, rawURL string, header map[string]string) req {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return req{method: "GET", path: u.RequestURI(), host: u.Host, header: header}
}
