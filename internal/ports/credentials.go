package ports

import (
	"net/http"
	"slices"
	"strings"
)

// credentialHeaders are the request headers in which the service accepts
// a credential of its own: API keys (Authorization, and the compatibility
// adapters' X-API-KEY and OPEN-SANDBOX-API-KEY), the E2B adapter's access
// and traffic tokens, and a proxy's. Every header whose name starts with
// X-Genesis- is the service's too (credentialPrefix), such as the
// OpenSandbox adapter's X-Genesis-Sandbox-Token and the act-as
// X-Genesis-Tenant.
var credentialHeaders = []string{
	"Authorization",
	"Proxy-Authorization",
	"X-API-KEY",
	"OPEN-SANDBOX-API-KEY",
	"X-Access-Token",
	"E2B-Traffic-Access-Token",
}

// CredentialHeaders lists the headers StripCredentials removes by name
// (besides every X-Genesis-* header), for tests and docs.
func CredentialHeaders() []string { return slices.Clone(credentialHeaders) }

// credentialPrefix starts the name of every header of the service's own
// (lower case).
const credentialPrefix = "x-genesis-"

// cookiePrefix starts the name of every cookie the service sets (lower
// case, compared without regard to case).
const cookiePrefix = "genesis_"

// StripCredentials removes from h, a request about to be forwarded into a
// sandbox, every credential the service accepts: the headers above, every
// X-Genesis-* header and the service's own cookies (genesis_*) from the
// Cookie header, whose other cookies stay. It is the one list every path
// that forwards a request into a sandbox applies: the port proxy's
// ServeHTTP, which the port and preview routes, the browser's CDP and
// Playwright routes and the E2B adapter's port traffic all go through.
func StripCredentials(h http.Header) {
	for name := range h {
		l := strings.ToLower(name)
		if strings.HasPrefix(l, credentialPrefix) || slices.ContainsFunc(credentialHeaders, func(c string) bool { return strings.EqualFold(c, l) }) {
			delete(h, name) // whatever its spelling
		}
	}
	stripServiceCookies(h)
}

// stripServiceCookies drops the genesis_* cookies from every Cookie header
// of h and joins what is left into one (as HTTP/1.1 sends it), or none.
func stripServiceCookies(h http.Header) {
	vals := h.Values("Cookie")
	if len(vals) == 0 {
		return
	}
	var keep []string
	dropped := false
	for _, v := range vals {
		for _, part := range strings.Split(v, ";") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			name, _, _ := strings.Cut(part, "=")
			if strings.HasPrefix(strings.ToLower(strings.TrimSpace(name)), cookiePrefix) {
				dropped = true
				continue
			}
			keep = append(keep, part)
		}
	}
	if !dropped && len(vals) == 1 {
		return // unchanged, byte for byte
	}
	h.Del("Cookie")
	if len(keep) > 0 {
		h.Set("Cookie", strings.Join(keep, "; "))
	}
}
