package httpapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"runtime/debug"
	"strings"
	"time"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/apiwire"
	"genesis.dev/sandbox/internal/artifacts"
	"genesis.dev/sandbox/internal/auth"
	"genesis.dev/sandbox/internal/browser"
	"genesis.dev/sandbox/internal/changes"
	"genesis.dev/sandbox/internal/compat/e2b"
	"genesis.dev/sandbox/internal/compat/opensandbox"
	"genesis.dev/sandbox/internal/console"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/desktop"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/files"
	"genesis.dev/sandbox/internal/interactive"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/mcp/servers"
	"genesis.dev/sandbox/internal/mcpserve"
	"genesis.dev/sandbox/internal/ports"
	"genesis.dev/sandbox/internal/replay"
	"genesis.dev/sandbox/internal/skills"
	"genesis.dev/sandbox/internal/slowlog"
	"genesis.dev/sandbox/internal/snapshots"
	"genesis.dev/sandbox/internal/tenancy"
	"genesis.dev/sandbox/internal/tenant"
	"genesis.dev/sandbox/internal/tickets"
	"genesis.dev/sandbox/internal/trace"
	"genesis.dev/sandbox/internal/volumes"
)

// Config wires a Server.
type Config struct {
	Control *control.Service
	// Tenancy serves the tenant, key and audit routes and checks keys.
	Tenancy *tenancy.Service
	// Jobs serves exec, jobs, sessions and code contexts.
	Jobs *jobs.Manager
	// Artifacts serves the artifacts of jobs.
	Artifacts *artifacts.Keeper
	// Files serves the file routes.
	Files *files.Gateway
	// Terminals serves the terminal WebSocket.
	Terminals *interactive.Terminals
	// Keys maps API keys given in the config or on the command line to
	// tenant names. Keys created through the admin API live in the store.
	Keys map[string]string
	// ApproverKeys are keys given in the config with the scope approve
	// (tenant.ScopeApprove), mapped to their tenants.
	ApproverKeys map[string]string
	MaxBodyBytes int64
	// KeepAlive is the interval of SSE keepalive comments (default 15 s).
	KeepAlive time.Duration
	// Ports, when set, serves the port routes (proxy, TCP, preview links).
	Ports *ports.Proxy
	// Previews places each preview on an origin of its own (required with
	// Ports).
	Previews *ports.Origins
	// PublicURL is the service's base URL as callers reach it, without a
	// trailing slash: every URL handed back starts with it (never with a
	// request's Host).
	PublicURL string
	// MCP, when set, serves the MCP server routes.
	MCP *servers.Manager
	// Skills, when set, serves the skill routes and the skills MCP server.
	Skills *skills.Manager
	// MCPServe, when set, serves the service's own sandbox tools as an MCP
	// server at /v1/mcp/sandbox.
	MCPServe *mcpserve.Server
	// Browser, when set, serves the browser routes (needs Ports).
	Browser *browser.Manager
	// Desktop, when set, serves the desktop (computer-use) routes.
	Desktop *desktop.Manager
	// Trace, when set, serves the trace routes.
	Trace *trace.Store
	// Services, when set, reports the profile services on GET sandbox.
	Services *jobs.Services
	// Snapshots, when set, serves pause, hibernation, snapshots, forks and
	// rollbacks.
	Snapshots *snapshots.Manager
	// Changes, when set, serves a sandbox's diff and patch.
	Changes *changes.Service
	// Volumes, when set, serves named volumes; nil answers their routes
	// 501 volumes_unsupported.
	Volumes *volumes.Manager
	Logger  *slog.Logger
	// E2B, when set, is served under /e2b; New binds it to this server
	// (the key check).
	E2B *e2b.Adapter
	// OpenSandbox, when set, is served under /opensandbox; New binds it
	// to this server (the key check and the audit record's error code).
	OpenSandbox *opensandbox.Adapter
	// Metrics is the instrumentation served at /metrics; nil means a new
	// NewMetrics(MetricsConfig{}). Give the same Metrics to the jobs
	// manager (jobs.Config.Metrics) for its exec latencies.
	Metrics *Metrics
	// ServerTiming, a diagnosis for benchmarks, adds a Server-Timing
	// header to the answer of a synchronous exec: where its time went
	// inside the service (serverTiming). Off by default.
	ServerTiming bool
	// SlowLog, when set, logs the slow requests; ExecTimeout, an exec's
	// default time limit, is the wait it allows one.
	SlowLog     *slowlog.Log
	ExecTimeout time.Duration
}

// Server is the HTTP API.
type Server struct {
	ctl       *control.Service
	tenancy   *tenancy.Service
	auth      *auth.Authenticator
	maxBody   int64
	log       *slog.Logger
	mux       *http.ServeMux
	routes    []Route
	metrics   edgeMetrics
	keepalive time.Duration
	terms     *interactive.Terminals
	files     *files.Gateway
	ports     *ports.Proxy
	origins   *ports.Origins
	publicURL string
	services  *jobs.Services
	// unaudited are route patterns whose mutating requests are not
	// audited: traffic proxied to a sandbox's own server.
	unaudited map[string]bool
	jobs      *jobs.Manager
	arts      *artifacts.Keeper
	mcp       *servers.Manager
	skills    *skills.Manager
	browser   *browser.Manager
	tickets   tickets.Table
	desktop   *desktop.Manager
	viewer    *console.Viewer
	trace     *trace.Store
	replay    *replay.Replayer
	e2b       *e2b.Adapter
	osb       *opensandbox.Adapter
	snaps     *snapshots.Manager
	changes   *changes.Service
	vols      *volumes.Manager
	mcpServe  *mcpserve.Server
	// serverTiming: see Config.ServerTiming.
	serverTiming bool
	slow         *slowlog.Log
	execTimeout  time.Duration
}

// Route is one served method and path pattern.
type Route struct {
	Method  string
	Pattern string
	Auth    bool
	// Unaudited routes carry traffic to a sandbox's own server; their
	// mutating requests are not audit records.
	Unaudited bool
}

// New builds the server and its routes.
func New(cfg Config) (*Server, error) {
	if cfg.Control == nil || cfg.Tenancy == nil {
		return nil, fmt.Errorf("httpapi: nil control or tenancy: %w", errdefs.ErrInvalidArgument)
	}
	if cfg.Jobs == nil || cfg.Artifacts == nil {
		return nil, fmt.Errorf("httpapi: nil jobs manager or artifact keeper: %w", errdefs.ErrInvalidArgument)
	}
	if cfg.Files == nil {
		return nil, fmt.Errorf("httpapi: nil file gateway: %w", errdefs.ErrInvalidArgument)
	}
	if cfg.Terminals == nil {
		return nil, fmt.Errorf("httpapi: nil terminals: %w", errdefs.ErrInvalidArgument)
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = 15 * time.Second
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(MetricsConfig{})
	}
	if cfg.Ports != nil && cfg.Previews == nil {
		return nil, errdefs.Invalid("httpapi: the port routes need preview origins")
	}
	if cfg.PublicURL == "" {
		return nil, errdefs.Invalid("httpapi: no public URL")
	}
	s := &Server{ctl: cfg.Control, tenancy: cfg.Tenancy, maxBody: cfg.MaxBodyBytes, log: cfg.Logger, mux: http.NewServeMux(), metrics: edgeMetrics{cfg.Metrics}, keepalive: cfg.KeepAlive,
		ports: cfg.Ports, origins: cfg.Previews, publicURL: strings.TrimRight(cfg.PublicURL, "/"), services: cfg.Services, unaudited: map[string]bool{},
		serverTiming: cfg.ServerTiming, slow: cfg.SlowLog, execTimeout: cfg.ExecTimeout}
	var err error
	if s.auth, err = auth.New(auth.Config{Tenants: cfg.Tenancy, Keys: cfg.Keys, ApproverKeys: cfg.ApproverKeys, Logger: cfg.Logger}); err != nil {
		return nil, err
	}
	s.terms, s.files, s.jobs, s.arts, s.mcp = cfg.Terminals, cfg.Files, cfg.Jobs, cfg.Artifacts, cfg.MCP
	s.skills = cfg.Skills
	s.desktop = cfg.Desktop
	s.viewer = console.NewViewer()
	s.trace = cfg.Trace
	if s.trace != nil {
		rc := replay.Config{Traces: cfg.Trace, Sandboxes: cfg.Control, Jobs: cfg.Jobs, Artifacts: cfg.Artifacts}
		if cfg.Desktop != nil {
			rc.Computer = cfg.Desktop
		}
		if cfg.Browser != nil && cfg.Ports != nil {
			rc.Browser = cfg.Browser
		}
		if s.replay, err = replay.New(rc); err != nil {
			return nil, err
		}
	}
	s.snaps = cfg.Snapshots
	s.changes = cfg.Changes
	s.vols = cfg.Volumes
	s.mcpServe = cfg.MCPServe
	if cfg.Ports != nil {
		s.browser = cfg.Browser
	}
	if cfg.E2B != nil {
		s.e2b = cfg.E2B
		s.e2b.Bind(e2b.Edge{Authenticate: s.principalOfKey})
	}
	if cfg.OpenSandbox != nil {
		s.osb = cfg.OpenSandbox
		s.osb.Bind(opensandbox.Edge{Authenticate: s.principalOfKey, NoteError: func(r *http.Request, code string) {
			if ae := auditOf(r); ae != nil {
				ae.code = code
			}
		}})
	}
	s.routesInit()
	return s, nil
}

// E2BHostHandler serves the E2B host-based listener
// ({port}-{sandbox}.{domain}): each request is turned into its /e2b form
// and served by Handler, with every middleware of the main listener.
func (s *Server) E2BHostHandler() http.Handler {
	if s.e2b == nil {
		return http.NotFoundHandler()
	}
	return s.e2b.HostHandler(s.handler(apiOnly))
}

// Routes lists every route served (for the OpenAPI coverage test).
func (s *Server) Routes() []Route { return s.routes }

func (s *Server) handle(method, pattern string, auth bool, h func(http.ResponseWriter, *http.Request)) {
	s.routes = append(s.routes, Route{Method: method, Pattern: pattern, Auth: auth})
	route := method + " " + pattern
	var handler http.Handler = http.HandlerFunc(h)
	if auth {
		handler = s.authenticate(handler)
	}
	s.mux.Handle(route, s.metrics.instrument(route, handler))
}

func (s *Server) routesInit() {
	s.handle("GET", "/healthz", false, s.healthz)
	s.handle("GET", "/readyz", false, s.readyz)
	s.handle("GET", "/metrics", false, s.serveMetrics)
	s.handle("GET", "/v1/capabilities", true, s.capabilities)
	s.handle("GET", "/v1/whoami", true, s.whoami)
	s.handle("GET", "/v1/profiles", true, serveGet(s, http.StatusOK, s.profiles))
	s.handle("GET", "/v1/images", true, s.images)
	s.handle("POST", "/v1/sandboxes", true, s.createSandbox)
	s.handle("GET", "/v1/sandboxes", true, serveGet(s, http.StatusOK, s.listSandboxes))
	s.handle("GET", "/v1/sandboxes/{id}", true, serveHeaded(s, http.StatusOK, s.getSandbox))
	s.handle("PATCH", "/v1/sandboxes/{id}", true, s.patchSandbox)
	s.handle("DELETE", "/v1/sandboxes/{id}", true, serveNoContent(s, s.deleteSandbox))
	s.handle("POST", "/v1/sandboxes/{id}/renew", true, serveBodyHeaded(s, http.StatusOK, s.renewSandbox))
	s.handle("POST", "/v1/sandboxes/{id}/exec", true, s.exec)
	s.handle("GET", "/v1/sandboxes/{id}/jobs", true, serveGet(s, http.StatusOK, s.listSandboxJobs))
	s.handle("GET", "/v1/jobs/{id}", true, serveGet(s, http.StatusOK, s.getJob))
	s.handle("GET", "/v1/jobs/{id}/logs", true, s.jobLogs)
	s.handle("POST", "/v1/jobs/{id}/cancel", true, serveGet(s, http.StatusAccepted, s.cancelJob))
	s.sessionRoutes()
	s.fileRoutes()
	s.artifactRoutes()
	s.networkRoutes()
	s.terminalRoutes()
	s.tenantRoutes()
	s.handle("GET", "/v1/audit", true, s.listAudit)
	s.leaseRoutes()
	s.portRoutes()
	s.stdinRoutes()
	s.mcpRoutes()
	s.skillRoutes()
	s.mcpServeRoutes()
	s.browserRoutes()
	s.desktopRoutes()
	s.traceRoutes()
	s.snapshotRoutes()
	s.changeRoutes()
	s.volumeRoutes()
	s.e2bRoutes()
	s.openSandboxRoutes()
}

// openSandboxRoutes mounts the OpenSandbox adapter: its lifecycle routes
// authenticate with its own OPEN-SANDBOX-API-KEY check (audited as our own
// routes), its execd routes with a sandbox's token (not audited, as the
// traffic into a sandbox is not; the jobs they start are recorded).
func (s *Server) openSandboxRoutes() {
	if s.osb == nil {
		return
	}
	for _, rt := range s.osb.Routes() {
		s.handle(rt.Method, rt.Pattern, false, rt.Handler)
		if rt.Execd {
			s.routes[len(s.routes)-1].Unaudited = true
			s.unaudited[rt.Method+" "+rt.Pattern] = true
		}
	}
}

// e2bRoutes mounts the E2B adapter: its control-plane routes authenticate
// with the adapter's own X-API-KEY check (audited as our own routes), its
// sandbox-traffic routes with a sandbox's access token (not audited, as
// the traffic proxied into a sandbox is not; the jobs they start are
// recorded as every job is).
func (s *Server) e2bRoutes() {
	if s.e2b == nil {
		return
	}
	for _, rt := range s.e2b.Routes() {
		if rt.Method == "ANY" { // a port of the sandbox: unaudited, as /v1's port proxy
			s.handleAny(rt.Pattern, false, rt.Handler)
			continue
		}
		s.handle(rt.Method, rt.Pattern, false, rt.Handler)
		if rt.SandboxTraffic {
			s.routes[len(s.routes)-1].Unaudited = true
			s.unaudited[rt.Method+" "+rt.Pattern] = true
		}
	}
}

type ctxKey int

const (
	requestIDKey ctxKey = iota
	principalKey
	auditKey
)

var requestIDRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// Handler returns the root handler with request ids, panic recovery and
// access logging: the API, the console, and the previews by their Host.
func (s *Server) Handler() http.Handler { return s.handler(apiAndPreviews) }

// hostRoutes says which hosts a root handler serves.
type hostRoutes int

const (
	apiAndPreviews hostRoutes = iota // the main listener: preview hosts get previews, any other host the API
	apiOnly                          // the E2B host-based listener: its own host scheme, never previews
	previewsOnly                     // the preview listener: previews, 404 for any other host
)

func (s *Server) handler(hosts hostRoutes) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rid := r.Header.Get(api.HeaderRequestID)
		if !requestIDRE.MatchString(rid) {
			var b [8]byte
			_, _ = rand.Read(b[:])
			rid = "req_" + hex.EncodeToString(b[:])
		}
		w.Header().Set(api.HeaderRequestID, rid)
		r = r.WithContext(context.WithValue(r.Context(), requestIDKey, rid))
		start := time.Now()
		var q *slowlog.Request // nil with the slow request log and Server-Timing off: nothing to note
		if s.slow.On() || s.serverTiming {
			q = s.slow.Begin(start)
			r = r.WithContext(slowlog.With(r.Context(), q))
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK, q: q}
		var previewID string
		var previewPort int
		preview := false
		if hosts != apiOnly {
			previewID, previewPort, preview = s.previewTarget(r)
		}
		pattern := ""
		if !preview {
			_, pattern = s.mux.Handler(r)
			r.Body = q.Body(r.Body) // a large upload is allowed its time (slowlog.TransferRate)
		}
		defer func() { // runs last: the audit record's time is the request's
			s.slow.End(q, r, sw.status, rid, preview || s.unaudited[pattern] || slowlog.Streamed(r, sw.Header()))
		}()
		if !preview && mutating(r.Method) && !s.unaudited[pattern] {
			ae := &auditEntry{pattern: pattern}
			r = r.WithContext(context.WithValue(r.Context(), auditKey, ae))
			// Deferred before the recovery, so it runs after: after a panic's problem.
			defer s.recordAudit(r, pattern, ae, sw)
		}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("panic in handler", "request_id", rid, "panic", v, "stack", string(debug.Stack()))
				if !sw.wrote {
					s.writeProblem(sw, r, fmt.Errorf("panic: %v: %w", v, errdefs.ErrInternal))
				}
			}
			s.log.Debug("request", "request_id", rid, "method", r.Method, "path", r.URL.Path,
				"status", sw.status, "duration_ms", time.Since(start).Milliseconds())
		}()
		switch {
		case preview:
			s.metrics.instrument("preview", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				s.servePreview(w, r, previewID, previewPort)
			})).ServeHTTP(sw, r)
			return
		case hosts == previewsOnly:
			s.writeProblem(sw, r, errdefs.WithCode("route_not_found", fmt.Errorf("host %.100q is not a preview host ({port}-{sandbox}.%s): %w", r.Host, s.origins.Domain(), errdefs.ErrNotFound)))
			return
		case pattern == "":
			if allow := s.allowed(r); len(allow) > 0 {
				sw.Header().Set("Allow", strings.Join(allow, ", "))
				s.writeProblem(sw, r, errdefs.Mark(fmt.Errorf("%s does not take %s; it takes %s", r.URL.Path, r.Method, strings.Join(allow, ", ")), errdefs.ErrMethodNotAllowed))
				return
			}
			s.writeProblem(sw, r, errdefs.WithCode("route_not_found", errdefs.Mark(fmt.Errorf("no route %s %s", r.Method, r.URL.Path), errdefs.ErrNotFound)))
			return
		}
		s.mux.ServeHTTP(sw, r)
	})
}

// routeMethods are the methods a route can have.
var routeMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// allowed lists the methods served at r's path, for the Allow header of
// a 405: none when the path is no route at all.
func (s *Server) allowed(r *http.Request) []string {
	var out []string
	for _, m := range routeMethods {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "" {
			out = append(out, m)
		}
	}
	return out
}

type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
	q      *slowlog.Request // counts the bytes written; nil: nothing counts
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	n, err := w.ResponseWriter.Write(b)
	w.q.Moved(n)
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func requestID(r *http.Request) string {
	id, _ := r.Context().Value(requestIDKey).(string)
	return id
}

// principalOf returns who makes the (authenticated) request.
func principalOf(r *http.Request) tenant.Principal {
	p, _ := r.Context().Value(principalKey).(tenant.Principal)
	return p
}

// tenantOf returns the tenant of the authenticated request.
func tenantOf(r *http.Request) string { return principalOf(r).Tenant }

// authenticate resolves the bearer key (auth.Authenticator: a revocation
// takes effect on the next request).
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Get("Authorization")
		token, ok := strings.CutPrefix(h, "Bearer ")
		if !ok || token == "" {
			s.writeProblem(w, r, errdefs.WithCode("unauthenticated", errdefs.Mark(errors.New("no API key: send the header Authorization: Bearer <api key>"), errdefs.ErrUnauthenticated)))
			return
		}
		p, err := s.auth.Key(r.Context(), token)
		if err == nil {
			// An admin key acts for another tenant with X-Genesis-Tenant;
			// the audit records the admin's key as the actor.
			p, err = s.auth.ActAs(r.Context(), p, r.Header.Get(api.HeaderActAs))
		}
		if err != nil {
			s.writeProblem(w, r, err)
			return
		}
		if ae := auditOf(r); ae != nil {
			ae.principal = p
		}
		slowlog.Of(r.Context()).SetTenant(p.Tenant)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey, p)))
	})
}

// principalOfKey answers who holds an API key (for the compat adapters,
// which read keys from their own headers).
func (s *Server) principalOfKey(ctx context.Context, key string) (tenant.Principal, error) {
	p, err := s.auth.Key(ctx, key)
	if ae, _ := ctx.Value(auditKey).(*auditEntry); ae != nil && err == nil {
		ae.principal = p
	}
	slowlog.Of(ctx).SetTenant(p.Tenant)
	return p, err
}

// adminOnly refuses callers whose tenant is not an admin tenant with 403
// and code "admin_required".
func (s *Server) adminOnly(h func(http.ResponseWriter, *http.Request)) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		if !principalOf(r).Admin {
			s.writeProblem(w, r, errdefs.WithCode("admin_required", errdefs.Mark(errors.New(
				"this needs an admin key: the service's --admin-key (GENESIS_ADMIN_KEY) or a key of an admin tenant"), errdefs.ErrPermissionDenied)))
			return
		}
		h(w, r)
	}
}

// decode reads a JSON body strictly: size-capped, unknown fields refused,
// exactly one value.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) error {
	// The body must be JSON whatever Content-Type says (curl -d sends a form
	// type by default); multipart bodies are refused explicitly.
	if ct := r.Header.Get("Content-Type"); strings.HasPrefix(ct, "multipart/") {
		return errdefs.WithCode("unsupported_media_type", errdefs.Invalid("Content-Type must be application/json, got %q", ct))
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return fmt.Errorf("request body is larger than %d bytes: %w", s.maxBody, errdefs.ErrTooLarge)
		}
		return fmt.Errorf("reading request body: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return errdefs.Invalid("request body is empty; a JSON object is required")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return apiwire.DecodeError(err, v)
	}
	// Decoder.More is false before a stray '}' or ']', so check the rest.
	if len(bytes.TrimSpace(body[dec.InputOffset():])) != 0 {
		return fmt.Errorf("malformed JSON body: unexpected data after the JSON value: %w", errdefs.ErrInvalidArgument)
	}
	return nil
}
