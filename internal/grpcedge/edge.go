package grpcedge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"runtime/debug"
	"strings"
	"time"

	"connectrpc.com/connect"
	connectv2 "connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connecthttp"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect/v2"

	"genesis.dev/sandbox/gen/genesis/sandbox/v1/sandboxv1connect"
	"genesis.dev/sandbox/internal/auth"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/slowlog"
	"genesis.dev/sandbox/internal/tenancy"
	"genesis.dev/sandbox/internal/tenant"
)

// DefaultMaxMessageBytes bounds a received message (and each message of a
// stream) when Config.MaxMessageBytes is 0.
const DefaultMaxMessageBytes = 8 << 20

// compressMinBytes is the smallest answer the edge compresses for a
// client that accepts compression.
const compressMinBytes = 1 << 10

// Config is what the edge serves over. Control, Jobs, Tenancy and Auth
// are required.
type Config struct {
	Control *control.Service
	Jobs    *jobs.Manager
	// Tenancy checks the tenant an admin key acts for and records the
	// audit log.
	Tenancy *tenancy.Service
	// Auth resolves an API key (the bearer token of the authorization
	// metadata) to who holds it, and an admin key acting for another
	// tenant: the same key check as every edge's (internal/auth), built
	// from the same keys, so the edges accept exactly the same keys.
	Auth *auth.Authenticator
	// MaxMessageBytes bounds a received message (0: DefaultMaxMessageBytes).
	MaxMessageBytes int
	Workloads       Workloads // files, artifacts, snapshots (workloads.go)
	// PublicURL is the base URL callers reach the service at, for the
	// URLs of a sandbox's endpoints (as the HTTP API's).
	PublicURL string
	// Metrics counts and times every call of the edge's services (nil:
	// none); internal/metrics' Metrics is one.
	Metrics RPCObserver
	// SlowLog, when set, logs the unary calls that were slow (slow.go);
	// ExecTimeout is the limit of an exec that names none, which such a
	// call is allowed.
	SlowLog     *slowlog.Log
	ExecTimeout time.Duration
	Logger      *slog.Logger
}

// Edge is the gRPC/Connect edge: its handler serves the services of
// genesis.sandbox.v1, gRPC health and server reflection.
type Edge struct {
	ctl     *control.Service
	jobs    *jobs.Manager
	tenancy tenants
	ready   func(context.Context) bool // the instance is ready (/readyz)
	auth    keyChecker
	log     *slog.Logger
	mux     *http.ServeMux
	names   []string
	served  []service
	wl      Workloads
	metrics RPCObserver
	slow    *slowlog.Log
	// execTimeout is the limit of an exec that names none (slow.go).
	execTimeout time.Duration
	publicURL   string
	// maxMessageBytes bounds a received message, on either transport.
	maxMessageBytes int
}

// RPCObserver records one call of the edge: its service's full name, its
// method, the gRPC code it answered with ("ok" for none, else connect's
// lower-case name such as "not_found") and its duration.
type RPCObserver interface {
	ObserveRPC(service, method, code string, d time.Duration)
}

// tenants is what the edge asks of tenancy: the audit log.
type tenants interface {
	RecordAudit(ctx context.Context, r *tenant.AuditRecord) error
}

// keyChecker is what the edge asks of auth.
type keyChecker interface {
	Key(ctx context.Context, key string) (tenant.Principal, error)
	ActAs(ctx context.Context, p tenant.Principal, as string) (tenant.Principal, error)
}

// service is one service of the edge: its name and the connect handler
// its generated New…Handler made.
type service struct {
	name    string
	impl    any // the handler set, for the test that every RPC is served
	path    string
	handler http.Handler
}

// New builds the edge. It has no side effects.
func New(cfg Config) (*Edge, error) {
	if cfg.Control == nil || cfg.Jobs == nil || cfg.Tenancy == nil || cfg.Auth == nil {
		return nil, errors.New("grpcedge: Control, Jobs, Tenancy and Auth are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	e := &Edge{ctl: cfg.Control, jobs: cfg.Jobs, tenancy: cfg.Tenancy, auth: cfg.Auth, log: cfg.Logger, wl: cfg.Workloads, metrics: cfg.Metrics, slow: cfg.SlowLog, execTimeout: cfg.ExecTimeout, publicURL: strings.TrimSuffix(cfg.PublicURL, "/"),
		ready: func(ctx context.Context) bool { ok, _ := cfg.Control.Readiness(ctx); return ok }}
	e.build(cfg.MaxMessageBytes)
	return e, nil
}

// build makes the edge's handlers: its services behind the interceptor,
// health and reflection.
func (e *Edge) build(maxMessageBytes int) {
	e.mux = http.NewServeMux()
	e.maxMessageBytes = maxMessageBytes
	e.served = e.services(e.handlerOptions())
	for _, s := range e.served {
		e.mux.Handle(s.path, s.handler)
		e.names = append(e.names, s.name)
	}
	// Health: every service serves while the instance is ready (as
	// /readyz), the empty name is the whole server.
	hp, hh := grpchealth.NewHandler(&healthChecker{edge: e}, connect.WithReadMaxBytes(maxMessageBytes), connect.WithCompressMinBytes(compressMinBytes))
	e.mux.Handle(hp, hh)
	// Reflection lists the services above and health (not itself, as
	// grpc-go's does not); descriptors come from the generated packages'
	// registrations.
	refl := connectv2.NewServer()
	grpcreflect.Register(refl, grpcreflect.WithNamer(grpcreflect.NamerFunc(func() []string {
		return append(e.Names(), grpchealth.HealthV1ServiceName)
	})))
	connecthttp.Mount(e.mux, refl)
}

// handlerOptions are the options of the edge's connect handlers: the
// interceptor, the message bound, compression of large answers only, the
// strict JSON codec, panics recovered.
func (e *Edge) handlerOptions() []connect.HandlerOption {
	return []connect.HandlerOption{
		connect.WithInterceptors(&interceptor{edge: e}),
		connect.WithReadMaxBytes(e.maxMessageBytes),
		// A client that accepts gzip (grpc-java, grpcio and Go's HTTP
		// client do by default) would have every answer compressed, a
		// compressor's reset costing more than a small answer's bytes:
		// only messages of 1 KiB and more are.
		connect.WithCompressMinBytes(compressMinBytes),
		connect.WithCodec(strictJSON{name: "json"}),
		connect.WithCodec(strictJSON{name: "json; charset=utf-8"}),
		connect.WithRecover(func(ctx context.Context, spec connect.Spec, _ http.Header, v any) error {
			return e.recovered(ctx, spec.Procedure, v)
		}),
	}
}

// recovered is the answer to a handler's panic v, as the HTTP API's root
// handler's: logged with the stack, answered as an internal error.
func (e *Edge) recovered(ctx context.Context, procedure string, v any) error {
	e.log.Error("panic in handler", "procedure", procedure, "request_id", requestIDOf(ctx), "panic", v, "stack", string(debug.Stack()))
	return connect.NewError(connect.CodeInternal, errors.New("internal error"))
}

// services lists the services of the edge, one line each: a new service
// is a file of handlers and one line here.
func (e *Edge) services(opts []connect.HandlerOption) []service {
	return []service{
		serve[sandboxv1connect.SandboxServiceHandler](sandboxv1connect.SandboxServiceName, &sandboxService{edge: e}, sandboxv1connect.NewSandboxServiceHandler, opts),
		serve[sandboxv1connect.ExecServiceHandler](sandboxv1connect.ExecServiceName, &execService{edge: e}, sandboxv1connect.NewExecServiceHandler, opts),
		serve[sandboxv1connect.FileServiceHandler](sandboxv1connect.FileServiceName, &fileService{edge: e}, sandboxv1connect.NewFileServiceHandler, opts),
		serve[sandboxv1connect.SessionServiceHandler](sandboxv1connect.SessionServiceName, &sessionService{edge: e}, sandboxv1connect.NewSessionServiceHandler, opts),
		serve[sandboxv1connect.ArtifactServiceHandler](sandboxv1connect.ArtifactServiceName, &artifactService{edge: e}, sandboxv1connect.NewArtifactServiceHandler, opts),
		serve[sandboxv1connect.SnapshotServiceHandler](sandboxv1connect.SnapshotServiceName, &snapshotService{edge: e}, sandboxv1connect.NewSnapshotServiceHandler, opts),
	}
}

// serve makes the service name of handler set impl with its generated
// constructor mk.
func serve[T any](name string, impl T, mk func(T, ...connect.HandlerOption) (string, http.Handler), opts []connect.HandlerOption) service {
	p, h := mk(impl, opts...)
	return service{name: name, impl: impl, path: p, handler: h}
}

// Names are the fully qualified names of the API's services.
func (e *Edge) Names() []string { return append([]string(nil), e.names...) }

// Handler serves the edge's RPCs (and answers 404 for any other path).
func (e *Edge) Handler() http.Handler { return e.mux }

// Handles reports whether r is a call of the edge: a POST to a path of one
// of its services, health or reflection. Nothing of the HTTP API's
// (/v1/…, /healthz, /e2b/…) has such a path.
func (e *Edge) Handles(r *http.Request) bool {
	if r.Method != http.MethodPost && r.Method != http.MethodGet {
		return false
	}
	_, pattern := e.mux.Handler(r)
	return pattern != ""
}

// Route sends the edge's calls to the edge and everything else to next
// (the HTTP API), on one listener. A request for a preview host
// (isPreview) always goes to next: a sandbox's own gRPC server reached
// through a preview link keeps its paths (its health and reflection
// included), and the API is never served on a sandbox's origin.
func (e *Edge) Route(next http.Handler, isPreview func(*http.Request) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e.Handles(r) && !isPreview(r) {
			e.mux.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// healthChecker answers grpc.health.v1: SERVING while the instance is
// ready, NOT_SERVING while it drains or is not ready, NotFound for a
// service the edge does not serve.
type healthChecker struct{ edge *Edge }

func (h *healthChecker) Check(ctx context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	if req.Service != "" && req.Service != grpchealth.HealthV1ServiceName && !containsName(h.edge.names, req.Service) {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("unknown service "+req.Service))
	}
	if !h.edge.ready(ctx) {
		return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
	}
	return &grpchealth.CheckResponse{Status: grpchealth.StatusServing}, nil
}

func containsName(names []string, n string) bool {
	for _, x := range names {
		if x == n {
			return true
		}
	}
	return false
}

// Request ids: the caller's x-request-id when it is well formed, as the
// HTTP API takes X-Request-Id, else a new one.
var requestIDRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

func newRequestID(given string) string {
	if requestIDRE.MatchString(given) {
		return given
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}

type ctxKey int

const (
	principalKey ctxKey = iota
	requestIDKey
)

func principalOf(ctx context.Context) tenant.Principal {
	p, _ := ctx.Value(principalKey).(tenant.Principal)
	return p
}

func tenantOf(ctx context.Context) string { return principalOf(ctx).Tenant }

func requestIDOf(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// bearer is the API key of an authorization value ("Bearer <key>").
func bearer(h string) (string, bool) {
	key, ok := strings.CutPrefix(h, "Bearer ")
	return key, ok && key != ""
}
