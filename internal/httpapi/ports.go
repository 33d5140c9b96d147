package httpapi

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/ports"
)

// Port routes. Every port inside a sandbox is reached through its agent,
// so a sandbox with network mode none serves them too:
//
//	ANY  /v1/sandboxes/{id}/ports/{port}/{path...}  HTTP reverse proxy to 127.0.0.1:{port}
//	GET  /v1/sandboxes/{id}/ports/{port}/tcp        WebSocket carrying raw TCP bytes
//	POST /v1/sandboxes/{id}/ports/{port}/links      a preview link {ttl_seconds} → {url}
//	ANY  /v1/previews/{token}/{path...}             what a preview link opens (no API key)
//
// The two names tcp and links directly under a port are the service's own;
// a sandbox server's own /tcp or /links is reached through a preview link,
// which forwards every path.
func (s *Server) portRoutes() {
	if s.ports == nil {
		return
	}
	s.handleAny("/v1/sandboxes/{id}/ports/{port}/{path...}", true, s.proxyPort)
	s.handle("GET", "/v1/sandboxes/{id}/ports/{port}/tcp", true, s.portTCP)
	s.handle("POST", "/v1/sandboxes/{id}/ports/{port}/links", true, s.createPortLink)
	s.handleAny("/v1/previews/{token}/{path...}", false, s.preview)
}

// anyMethods are the methods a route registered with handleAny lists.
var anyMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// handleAny registers a route for every method (Routes lists the common
// ones) to a sandbox's own server: its requests are not audited, only
// what the service itself does (such as making a preview link).
func (s *Server) handleAny(pattern string, auth bool, h func(http.ResponseWriter, *http.Request)) {
	for _, m := range anyMethods {
		s.routes = append(s.routes, Route{Method: m, Pattern: pattern, Auth: auth, Unaudited: true})
	}
	s.unaudited[pattern] = true
	var handler http.Handler = http.HandlerFunc(h)
	if auth {
		handler = s.authenticate(handler)
	}
	s.mux.Handle(pattern, s.metrics.instrument(pattern, handler))
}

func (s *Server) portOf(w http.ResponseWriter, r *http.Request) (int, bool) {
	port, err := ports.ParsePort(r.PathValue("port"))
	if err != nil {
		s.writeProblem(w, r, err)
		return 0, false
	}
	return port, true
}

func (s *Server) proxyPort(w http.ResponseWriter, r *http.Request) {
	port, ok := s.portOf(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	s.ports.ServeHTTP(w, r, ports.Request{
		Tenant: tenantOf(r), SandboxID: id, Port: port, Path: r.PathValue("path"),
		Prefix: "/v1/sandboxes/" + url.PathEscape(id) + "/ports/" + strconv.Itoa(port),
	}, s.writeProblem)
}

func (s *Server) portTCP(w http.ResponseWriter, r *http.Request) {
	port, ok := s.portOf(w, r)
	if !ok {
		return
	}
	if !isWebSocketUpgrade(r) {
		s.writeProblem(w, r, errdefs.WithCode("websocket_required",
			invalidArg("this endpoint speaks WebSocket only (Connection: Upgrade, Upgrade: websocket)")))
		return
	}
	s.ports.ServeTCP(w, r, tenantOf(r), r.PathValue("id"), port, s.writeProblem)
}

func (s *Server) createPortLink(w http.ResponseWriter, r *http.Request) {
	port, ok := s.portOf(w, r)
	if !ok {
		return
	}
	serveBody(s, http.StatusCreated, func(r *http.Request, req *api.CreatePortLinkRequest) (api.PortLink, error) {
		id := r.PathValue("id")
		token, exp, err := s.ports.NewLink(r.Context(), principalOf(r), id, port, time.Duration(req.TTLSeconds)*time.Second)
		if err != nil {
			return api.PortLink{}, err
		}
		return api.PortLink{
			URL: s.previewURL(id, port, "/", "", token), Origin: s.origins.URL(id, port), Token: token, SandboxID: id, Port: port, ExpiresAt: exp.UTC(),
		}, nil
	})(w, r)
}

// preview serves a preview link of the first form, /v1/previews/{token}/…
// on the API's origin: it sends the caller on to the same path on the
// port's own origin (307 keeps the method and body), so old links keep
// working while nothing of the sandbox is ever served on the API's origin.
func (s *Server) preview(w http.ResponseWriter, r *http.Request) {
	token := r.PathValue("token")
	c, err := s.ports.VerifyLink(r.Context(), token)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	http.Redirect(w, r, s.previewURL(c.SandboxID, c.Port, r.PathValue("path"), r.URL.RawQuery, token), http.StatusTemporaryRedirect)
}

// endpointURL is the URL of a sandbox port through the service's API
// origin (for programs, with the API key; a browser opens a preview link).
func (s *Server) endpointURL(sandboxID string, port int, protocol string) string {
	u := s.publicURL + api.PortPath(sandboxID, port)
	if protocol == "tcp" {
		u = "ws" + strings.TrimPrefix(u, "http") + "tcp"
	}
	return u
}

// endpoints lists the named ports of a sandbox's profile with their URLs
// (nil when it declares none).
func (s *Server) endpoints(sandboxID, profile string) []api.Endpoint {
	p, ok := s.ctl.ProfileConfig(profile)
	if !ok || len(p.Endpoints) == 0 {
		return nil
	}
	out := make([]api.Endpoint, 0, len(p.Endpoints))
	for _, e := range p.Endpoints {
		proto := e.Protocol
		if proto == "" {
			proto = "http"
		}
		out = append(out, api.Endpoint{Name: e.Name, Port: e.Port, Protocol: proto, URL: s.endpointURL(sandboxID, e.Port, proto)})
	}
	return out
}
