package ports

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// The origin model. Content from inside a sandbox is never a document of
// the API's or the console's origin: every preview (one sandbox × one
// port) is served on a host of its own, "{port}-{sandbox}.{domain}", so
// its scripts, cookies, storage and service workers belong to it alone.
// The default domain is "localhost": browsers resolve every *.localhost
// name to the loopback address, so a single machine needs no DNS set-up.
// A production deployment names a wildcard domain of its own (a site apart
// from the API's), with wildcard DNS and TLS or a terminator in front.

// sandboxPrefix is the prefix of every sandbox id; a preview host's label
// leaves it out, so that the label is a plain DNS label.
const sandboxPrefix = "sbx"

// Origins builds and recognises preview hosts from a URL template such as
// "http://*.localhost:8080", where "*" stands for "{port}-{sandbox}".
type Origins struct {
	scheme string // http or https
	domain string // lowercase host name after "*." (no port)
	port   string // the template's port, "" when it has none
}

// ParseOrigins reads a preview URL template: a scheme (http or https), a
// host "*.DOMAIN" and an optional port; nothing else.
func ParseOrigins(template string) (*Origins, error) {
	bad := func(why string) (*Origins, error) {
		return nil, errdefs.WithCode("invalid_preview_url", fmt.Errorf("preview URL template %q: %s: %w", template, why, errdefs.ErrInvalidArgument))
	}
	u, err := url.Parse(template)
	if err != nil {
		return bad("not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return bad("the scheme must be http or https")
	}
	if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return bad("only a scheme, a host and a port are allowed")
	}
	host := strings.ToLower(u.Hostname())
	domain, ok := strings.CutPrefix(host, "*.")
	if !ok || domain == "" || strings.Contains(domain, "*") {
		return bad(`the host must be "*." followed by a domain, e.g. http://*.localhost:8080`)
	}
	for _, l := range strings.Split(domain, ".") {
		if !dnsLabel(l) {
			return bad(fmt.Sprintf("%q is not a DNS label", l))
		}
	}
	port := u.Port()
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return bad("the port must be 1-65535")
		}
	}
	return &Origins{scheme: u.Scheme, domain: domain, port: port}, nil
}

func dnsLabel(l string) bool {
	if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for _, c := range l {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// Host is the host (with the template's port) of a sandbox port's origin.
func (o *Origins) Host(sandboxID string, port int) string {
	label := strconv.Itoa(port) + "-" + strings.TrimPrefix(sandboxID, sandboxPrefix+"_")
	h := label + "." + o.domain
	if o.port != "" {
		h += ":" + o.port
	}
	return h
}

// URL is the root URL of a sandbox port's origin, without a trailing slash.
func (o *Origins) URL(sandboxID string, port int) string {
	return o.scheme + "://" + o.Host(sandboxID, port)
}

// Secure reports whether preview origins are served over https.
func (o *Origins) Secure() bool { return o.scheme == "https" }

// Domain is the domain with the template's port ("localhost:8080"): the
// sandboxes' domain an E2B SDK builds "{port}-{sandbox}.{domain}" from.
func (o *Origins) Domain() string {
	if o.port != "" {
		return o.domain + ":" + o.port
	}
	return o.domain
}

// Match reads a request's Host as a preview host: "{port}-{sandbox}.{domain}",
// the sandbox with or without its "sbx_" prefix (E2B's getHost form keeps
// it), any port. ok is false for every other host, the API's own included.
func (o *Origins) Match(host string) (sandboxID string, port int, ok bool) {
	host = strings.ToLower(host)
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	label, found := strings.CutSuffix(host, "."+o.domain)
	if !found || strings.Contains(label, ".") {
		return "", 0, false
	}
	ps, id, found := strings.Cut(label, "-")
	if !found {
		return "", 0, false
	}
	p, err := strconv.Atoi(ps)
	if err != nil || p < 1 || p > 65535 || strconv.Itoa(p) != ps {
		return "", 0, false
	}
	if !strings.HasPrefix(id, sandboxPrefix+"_") {
		id = sandboxPrefix + "_" + id
	}
	if !sandbox.ValidID(sandboxPrefix, id) {
		return "", 0, false
	}
	return id, p, true
}
