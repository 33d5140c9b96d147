package e2b

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"

	"genesis.dev/sandbox/internal/errdefs"
)

// Host-based mode: with e2b.sandbox_domain set, create answers the domain
// and the SDKs (without E2B_SANDBOX_URL) address each port of a sandbox as
// https://{port}-{sandbox id}.{domain}. HostHandler turns such a request
// into the prefix form the adapter serves (E2b-Sandbox-Id and
// E2b-Sandbox-Port from the host name; other ports under /e2b/ports), so
// both modes run the same handlers, behind the same middleware.

// domain is the sandboxes' domain the SDKs get: the host-based mode's, or
// else the service's preview domain, so that getHost(port) names a host of
// this service (a preview origin, opened with a preview link) and never a
// public domain of E2B's (nil: neither is known).
func (a *Adapter) domain() *string {
	d := a.set.SandboxDomain
	if d == "" {
		d = a.previewDomain
	}
	if d == "" {
		return nil
	}
	return &d
}

// hostModeKey marks a request that came through HostHandler: a proxied
// port's root is then the host's root.
type hostModeKey struct{}

// HostTarget parses a host name of the host-based mode: "{port}-{sandbox
// id}.{domain}", the domain as configured (with its port if it has one;
// without one, a port on host is ignored).
func (a *Adapter) HostTarget(host string) (port int, sandboxID string, ok bool) {
	d := strings.ToLower(a.set.SandboxDomain)
	if d == "" {
		return 0, "", false
	}
	host = strings.ToLower(host)
	if _, _, err := net.SplitHostPort(d); err != nil { // the domain has no port
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
	}
	label, found := strings.CutSuffix(host, "."+d)
	if !found || strings.Contains(label, ".") {
		return 0, "", false
	}
	ps, id, found := strings.Cut(label, "-")
	if !found || id == "" {
		return 0, "", false
	}
	p, err := strconv.Atoi(ps)
	if err != nil || p < 1 || p > 65535 {
		return 0, "", false
	}
	return p, id, true
}

// HostHandler serves the host-based listener: a request for
// {port}-{id}.{domain}/path goes to next (the service's own handler) as
// /e2b/path with the sandbox and port in E2b-Sandbox-Id and
// E2b-Sandbox-Port for the agent's and the interpreter's ports, and as
// /e2b/ports/{port}/path for any other port. Any other host is 404.
func (a *Adapter) HostHandler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		port, id, ok := a.HostTarget(r.Host)
		if !ok {
			writeJSON(w, http.StatusNotFound, apiError{Code: http.StatusNotFound,
				Message: fmt.Sprintf("host %q is not {port}-{sandbox id}.%s", r.Host, a.set.SandboxDomain)})
			return
		}
		r2 := r.Clone(context.WithValue(r.Context(), hostModeKey{}, true))
		r2.Header.Set("E2b-Sandbox-Id", id)
		r2.Header.Set("E2b-Sandbox-Port", strconv.Itoa(port))
		path := r.URL.Path
		if port != EnvdPort && port != InterpreterPort {
			path = "/ports/" + strconv.Itoa(port) + path
		}
		r2.URL.Path = Prefix + path
		r2.URL.RawPath = ""
		r2.RequestURI = r2.URL.RequestURI()
		next.ServeHTTP(w, r2)
	})
}

// portTraffic proxies a request to a port of the sandbox that is neither
// the agent's nor the interpreter's (getHost(port)): the caller sent the
// sandbox's traffic token, as E2B's restricted public traffic asks.
func (a *Adapter) portTraffic(w http.ResponseWriter, r *http.Request) {
	port, err := strconv.Atoi(r.PathValue("port"))
	if err != nil || port < 1 || port > 65535 {
		a.writeError(w, r, errdefs.Invalid("port %q is not 1..65535", r.PathValue("port")))
		return
	}
	if a.proxyPort == nil {
		a.writeError(w, r, fmt.Errorf("this service proxies no ports for E2B: %w", errdefs.ErrUnavailable))
		return
	}
	prefix := Prefix + "/ports/" + strconv.Itoa(port)
	if host, _ := r.Context().Value(hostModeKey{}).(bool); host {
		prefix = ""
	}
	tenant, _ := r.Context().Value(tenantKey).(string)
	id, _ := r.Context().Value(sandboxKey).(string)
	a.proxyPort(w, r, tenant, id, port, r.PathValue("path"), prefix)
}
