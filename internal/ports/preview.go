package ports

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/errdefs"
)

// Previews. Each sandbox port a preview link opens is served on an origin
// of its own, "{port}-{sandbox}.{domain}" (ports.Origins), never on the
// API's: its pages' scripts, cookies, storage and service workers cannot
// reach the console or another sandbox's preview. A link is that origin's
// URL with the link token in the query; a browser's navigation trades the
// token for an HttpOnly cookie of that origin alone and is sent on to the
// same URL without it, so the address bar, history and Referer never carry
// it. Programs may send the token on every request instead, in the query
// or in the X-Genesis-Preview-Token header. A preview host serves the
// sandbox's port and nothing else of the service.
const (
	PreviewQuery  = "genesis_preview_token"
	PreviewCookie = "genesis_preview"
	PreviewHeader = api.HeaderPreviewToken
)

// LinkURL is the URL a preview link of token opens: the port's origin,
// path and query, with the token added to the query.
func (o *Origins) LinkURL(sandboxID string, port int, path, rawQuery, token string) string {
	q := rawQuery
	if q != "" {
		q += "&"
	}
	q += PreviewQuery + "=" + url.QueryEscape(token)
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	return o.URL(sandboxID, port) + (&url.URL{Path: path}).EscapedPath() + "?" + q
}

// ServePreview serves a request that came to the preview host of o for
// sandboxID's port: the link token of this sandbox port (query, header or
// cookie) or a problem written by fail, then the port.
func (p *Proxy) ServePreview(w http.ResponseWriter, r *http.Request, o *Origins, sandboxID string, port int, fail ErrorWriter) {
	fromQuery := r.URL.Query().Get(PreviewQuery)
	var candidates []string
	if fromQuery != "" {
		candidates = append(candidates, fromQuery)
	}
	if h := r.Header.Get(PreviewHeader); h != "" {
		candidates = append(candidates, h)
	}
	for _, c := range r.CookiesNamed(PreviewCookie) {
		candidates = append(candidates, c.Value)
	}
	if len(candidates) == 0 {
		fail(w, r, errdefs.WithCode("link_required", fmt.Errorf(
			"this is the preview origin of port %d of sandbox %s; open it with a preview link (genesis port link %s %d, or POST /v1/sandboxes/%s/ports/%d/links): %w",
			port, sandboxID, sandboxID, port, sandboxID, port, errdefs.ErrUnauthenticated)))
		return
	}
	var claims LinkClaims
	var token string
	var err error
	// A cookie another origin of the domain tossed in beside ours is
	// skipped: only a token of this very sandbox port opens it.
	for _, c := range candidates {
		claims, err = p.VerifyLink(r.Context(), c)
		if err == nil && (claims.SandboxID != sandboxID || claims.Port != port) {
			err = errdefs.WithCode("link_invalid", fmt.Errorf("preview link is not valid for this origin: %w", errdefs.ErrNotFound))
		}
		if err == nil {
			token = c
			break
		}
	}
	if err != nil {
		fail(w, r, err)
		return
	}
	cookie := &http.Cookie{Name: PreviewCookie, Value: token, Path: "/", HttpOnly: true, Secure: o.Secure(),
		SameSite: http.SameSiteLaxMode, Expires: time.Unix(claims.Expires, 0)}
	r2 := r.Clone(r.Context())
	if fromQuery != "" {
		r2.URL.RawQuery = withoutQueryParam(r.URL.RawQuery, PreviewQuery)
		if (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.Header.Get("Sec-Fetch-Mode") == "navigate" {
			// A browser's navigation: keep the token in a cookie of this
			// origin and drop it from the address bar.
			http.SetCookie(w, cookie)
			w.Header().Set("Cache-Control", "no-store")
			w.Header().Set("Referrer-Policy", "no-referrer")
			loc := r2.URL.EscapedPath()
			if r2.URL.RawQuery != "" {
				loc += "?" + r2.URL.RawQuery
			}
			http.Redirect(w, r, loc, http.StatusSeeOther)
			return
		}
	}
	r2.Header.Del(PreviewHeader)
	dropCookie(r2.Header, PreviewCookie)
	var setCookie func(*http.Response) error
	if fromQuery != "" {
		setCookie = func(resp *http.Response) error {
			resp.Header.Add("Set-Cookie", cookie.String())
			return nil
		}
	}
	p.ServeHTTP(w, r2, Request{
		Tenant: claims.Tenant, SandboxID: sandboxID, Port: port, Path: strings.TrimPrefix(r2.URL.Path, "/"),
		OwnOrigin: true, ModifyResponse: setCookie,
	}, fail)
}

// withoutQueryParam is a raw query without the parameter called name,
// every other parameter kept as it was, in its order.
func withoutQueryParam(raw, name string) string {
	var keep []string
	for _, part := range strings.Split(raw, "&") {
		k, _, _ := strings.Cut(part, "=")
		if dk, err := url.QueryUnescape(k); part == "" || (err == nil && dk == name) {
			continue
		}
		keep = append(keep, part)
	}
	return strings.Join(keep, "&")
}

// dropCookie removes every cookie called name from a request's Cookie
// headers, keeping the others.
func dropCookie(h http.Header, name string) {
	vals := h.Values("Cookie")
	if len(vals) == 0 {
		return
	}
	var keep []string
	for _, line := range vals {
		for _, part := range strings.Split(line, ";") {
			part = strings.TrimSpace(part)
			if n, _, _ := strings.Cut(part, "="); part != "" && strings.TrimSpace(n) != name {
				keep = append(keep, part)
			}
		}
	}
	h.Del("Cookie")
	if len(keep) > 0 {
		h.Set("Cookie", strings.Join(keep, "; "))
	}
}
