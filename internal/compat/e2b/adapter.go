package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"genesis.dev/sandbox/internal/compat/e2b/gen/filesystem/filesystemconnect"
	"genesis.dev/sandbox/internal/compat/e2b/gen/process/processconnect"
	"genesis.dev/sandbox/internal/compat/shared"
	"genesis.dev/sandbox/internal/compat/tokens"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/files"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/tenant"
)

// Prefix is where the adapter is mounted: E2B_API_URL and E2B_SANDBOX_URL
// both point at it.
const Prefix = "/e2b"

// The ports the SDKs name in E2b-Sandbox-Port: the in-sandbox agent (envd)
// and the code interpreter.
const (
	EnvdPort        = 49983
	InterpreterPort = 49999
)

// envdVersion is the agent version reported to the SDKs: it decides which
// wire features they use (0.4.0: the user is the server's choice; 0.5.2:
// closeStdin; 0.5.7: octet-stream uploads). Metadata on files (0.6.2) is
// not offered.
const envdVersion = "0.5.7"

// Config wires an Adapter.
type Config struct {
	Control *control.Service
	Jobs    *jobs.Manager
	Files   *files.Gateway
	// KeyLive answers nil while the API key keyID of keyTenant may act
	// (tenancy.Service.KeyLive): every use of a sandbox token asks it, so
	// a token ends with the key it was made with.
	KeyLive func(ctx context.Context, keyTenant, keyID string) error
	// Settings are the adapter's configuration (templates, timeouts).
	Settings config.E2B
	// MaxJobTimeoutMS is the longest a command may run (limits.max_exec_timeout_ms).
	MaxJobTimeoutMS int64
	// TokenKey keys the per-sandbox tokens (package tokens); the service
	// keeps it in a file of its data dir, so that tokens survive a
	// restart. Empty: a key made at start, so tokens end with the process.
	TokenKey []byte
	// ProxyPort proxies a request to a port of a tenant's sandbox (the
	// service's port proxy); prefix is the URL path of the port's root.
	// Without it, ports other than the agent's and the interpreter's are
	// not served.
	ProxyPort func(w http.ResponseWriter, r *http.Request, tenant, sandboxID string, port int, path, prefix string)
	// PreviewDomain is the domain of the service's preview origins
	// ("localhost:8080"): without host-based mode, create answers it as
	// the sandbox's domain, so getHost(port) names the port's preview
	// origin on this service, never E2B's public domain.
	PreviewDomain string
	// Snapshots, if set, serves pause, resume, auto-pause at the timeout,
	// snapshots and forks; without it they answer 501.
	Snapshots Snapshots
	// Volumes, if set, serves the SDK's Volume class and a create's
	// volumeMounts as named volumes; without it they answer 501.
	Volumes Volumes
	Logger  *slog.Logger
}

// Adapter serves the E2B control plane, the agent API and the code
// interpreter under Prefix.
type Adapter struct {
	ctl   *control.Service
	jobs  *jobs.Manager
	files *files.Gateway
	auth  func(ctx context.Context, key string) (tenant.Principal, error)
	set   config.E2B
	// keyLive is Config.KeyLive.
	keyLive func(ctx context.Context, keyTenant, keyID string) error
	// previewDomain is Config.PreviewDomain.
	previewDomain string
	maxJob        int64
	log           *slog.Logger
	// tokens are the per-sandbox access tokens (package tokens): each
	// names the key it was asked for with and is refused once that key is.
	tokens *tokens.Signer

	envd      http.Handler // the Connect services, prefix stripped
	procs     processTable
	proxyPort func(w http.ResponseWriter, r *http.Request, tenant, sandboxID string, port int, path, prefix string)

	ctxMu    sync.Mutex
	contexts map[string]*contextSlot // sandbox id → its default code context

	snaps Snapshots
	vols  Volumes // volumes.go; nil: none
	// bg are the auto-pauses under way, at most cap(autoPauses) at once;
	// closed (under bgMu) once Close waits for them.
	bgMu       sync.Mutex
	bg         sync.WaitGroup
	closed     bool
	autoPauses chan struct{}
}

// New builds the adapter.
func New(cfg Config) (*Adapter, error) {
	if cfg.Control == nil || cfg.Jobs == nil || cfg.Files == nil || cfg.KeyLive == nil {
		return nil, errdefs.Invalid("e2b: control, jobs, files and KeyLive are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxJobTimeoutMS <= 0 {
		cfg.MaxJobTimeoutMS = 3600_000
	}
	signer := tokens.WithKey(cfg.TokenKey)
	if len(cfg.TokenKey) == 0 {
		var err error
		if signer, err = tokens.New(); err != nil {
			return nil, fmt.Errorf("e2b: %w", err)
		}
	}
	a := &Adapter{ctl: cfg.Control, keyLive: cfg.KeyLive, jobs: cfg.Jobs, files: cfg.Files, set: cfg.Settings, previewDomain: cfg.PreviewDomain,
		maxJob: cfg.MaxJobTimeoutMS, log: cfg.Logger, tokens: signer, contexts: map[string]*contextSlot{}, proxyPort: cfg.ProxyPort,
		snaps: cfg.Snapshots, vols: cfg.Volumes, autoPauses: make(chan struct{}, 2)}
	a.procs.bySandbox = map[string]*sandboxProcs{}
	mux := http.NewServeMux()
	mux.Handle(processconnect.NewProcessHandler(&processService{a: a}))
	mux.Handle(filesystemconnect.NewFilesystemHandler(&filesystemService{a: a}))
	a.envd = mux
	return a, nil
}

// Edge is what the HTTP server that serves the adapter lends it.
type Edge struct {
	// Authenticate answers who holds an API key of the service (the
	// server notes the caller in the request's audit record).
	Authenticate func(ctx context.Context, key string) (tenant.Principal, error)
}

// Bind gives the adapter the server that serves it: call it once, before
// the first request. Until then no API key is accepted (503).
func (a *Adapter) Bind(e Edge) { a.auth = e.Authenticate }

// Route is one method and path pattern the adapter serves (under Prefix).
type Route struct {
	Method, Pattern string
	Handler         http.HandlerFunc
	// SandboxTraffic routes are the sandbox's own API (E2B_SANDBOX_URL),
	// authenticated by its access token rather than an API key.
	SandboxTraffic bool
}

// Routes lists every route, for the server's mux and its OpenAPI check.
func (a *Adapter) Routes() []Route {
	p := Prefix
	return []Route{
		// Control plane (E2B_API_URL), authenticated by X-API-KEY.
		{"POST", p + "/sandboxes", a.apiKey(a.createSandbox), false},
		{"POST", p + "/v2/sandboxes", a.apiKey(a.createSandbox), false},
		{"GET", p + "/sandboxes", a.apiKey(a.listSandboxes), false},
		{"GET", p + "/v2/sandboxes", a.apiKey(a.listSandboxes), false},
		{"GET", p + "/sandboxes/{id}", a.apiKey(a.getSandbox), false},
		{"DELETE", p + "/sandboxes/{id}", a.apiKey(a.killSandbox), false},
		{"POST", p + "/sandboxes/{id}/timeout", a.apiKey(a.setTimeout), false},
		{"POST", p + "/v2/sandboxes/{id}/connect", a.apiKey(a.connectSandbox), false},
		{"POST", p + "/sandboxes/{id}/pause", a.apiKey(a.pauseSandbox), false},
		{"POST", p + "/sandboxes/{id}/snapshots", a.apiKey(a.createSnapshot), false},
		{"POST", p + "/sandboxes/{id}/fork", a.apiKey(a.forkSandbox), false},
		{"GET", p + "/snapshots", a.apiKey(a.listSnapshots), false},
		{"DELETE", p + "/templates/{templateID}", a.apiKey(a.deleteSnapshot), false},
		{"POST", p + "/volumes", a.apiKey(a.withVolumes(a.createVolume)), false},
		{"GET", p + "/volumes", a.apiKey(a.withVolumes(a.listVolumes)), false},
		{"GET", p + "/volumes/{volumeID}", a.apiKey(a.withVolumes(a.getVolume)), false},
		{"DELETE", p + "/volumes/{volumeID}", a.apiKey(a.withVolumes(a.deleteVolume)), false},
		// E2B's volume content API (E2B_VOLUME_API_URL): a volume's files,
		// authenticated by the volume's token (volumecontent.go).
		{"GET", p + "/volumecontent/{volumeID}/file", a.volumeContent(a.volumeReadFile), false},
		{"PUT", p + "/volumecontent/{volumeID}/file", a.volumeContent(a.volumeWriteFile), false},
		{"GET", p + "/volumecontent/{volumeID}/dir", a.volumeContent(a.volumeList), false},
		{"POST", p + "/volumecontent/{volumeID}/dir", a.volumeContent(a.volumeMakeDir), false},
		{"GET", p + "/volumecontent/{volumeID}/path", a.volumeContent(a.volumeStat), false},
		{"PATCH", p + "/volumecontent/{volumeID}/path", a.volumeContent(a.volumeSetMetadata), false},
		{"DELETE", p + "/volumecontent/{volumeID}/path", a.volumeContent(a.volumeRemove), false},
		// Sandbox traffic (E2B_SANDBOX_URL), routed by E2b-Sandbox-Id and
		// E2b-Sandbox-Port and authenticated by the sandbox's access token.
		{"GET", p + "/health", a.sandboxAuth(a.health), true},
		{"GET", p + "/files", a.sandboxAuth(a.readFile), true},
		{"POST", p + "/files", a.sandboxAuth(a.writeFiles), true},
		{"POST", p + "/process.Process/{method}", a.sandboxAuth(a.connectRPC), true},
		{"POST", p + "/filesystem.Filesystem/{method}", a.sandboxAuth(a.connectRPC), true},
		{"POST", p + "/execute", a.sandboxAuth(a.execute), true},
		{"POST", p + "/contexts", a.sandboxAuth(a.createContext), true},
		{"DELETE", p + "/contexts/{id}", a.sandboxAuth(a.deleteContext), true},
		// Any other port of the sandbox (getHost(port) in host-based mode),
		// authenticated by the sandbox's traffic token.
		{"ANY", p + "/ports/{port}/{path...}", a.sandboxAuth(a.portTraffic), true},
	}
}

// apiError is the error body of the E2B API and agent: {code, message},
// code being the HTTP status.
type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// WriteError answers err in the E2B shape (for the port proxy's failures).
func (a *Adapter) WriteError(w http.ResponseWriter, r *http.Request, err error) {
	a.writeError(w, r, err)
}

// writeError answers err in the E2B shape, its status from errdefs' table.
func (a *Adapter) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status := errdefs.HTTPStatus(err)
	if status >= 500 {
		a.log.Warn("e2b adapter", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if d, ok := errdefs.RetryAfter(err); ok {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(d.Seconds()))))
	}
	writeJSON(w, status, apiError{Code: status, Message: errdefs.Detail(err)})
}

type ctxKey int

const (
	tenantKey ctxKey = iota
	sandboxKey
	principalKey
)

func tenantOf(ctx context.Context) string  { v, _ := ctx.Value(tenantKey).(string); return v }
func sandboxOf(ctx context.Context) string { v, _ := ctx.Value(sandboxKey).(string); return v }

// principalOf is who made a control-plane call (the key its tokens name).
func principalOf(ctx context.Context) tenant.Principal {
	v, _ := ctx.Value(principalKey).(tenant.Principal)
	return v
}

// apiKey authenticates a control-plane call by X-API-KEY: a key of the
// service, or the same key spelled with an e2b_ prefix.
func (a *Adapter) apiKey(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("X-API-KEY")
		if key == "" {
			if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
				key = b
			}
		}
		if key == "" {
			a.writeError(w, r, fmt.Errorf("missing X-API-KEY header: %w", errdefs.ErrUnauthenticated))
			return
		}
		if a.auth == nil {
			a.writeError(w, r, fmt.Errorf("the E2B adapter is not served yet: %w", errdefs.ErrUnavailable))
			return
		}
		p, err := a.auth(r.Context(), key)
		if err != nil && strings.HasPrefix(key, "e2b_") {
			p, err = a.auth(r.Context(), strings.TrimPrefix(key, "e2b_"))
		}
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		ctx := context.WithValue(context.WithValue(r.Context(), tenantKey, p.Tenant), principalKey, p)
		h(w, r.WithContext(ctx))
	}
}

// accessToken is the per-sandbox token given at create, connect and get
// (package tokens), made for the caller's key.
func (a *Adapter) accessToken(ctx context.Context, sandboxID string) string {
	p := principalOf(ctx)
	return a.tokens.Sign(tokens.Claims{Tenant: p.Tenant, SandboxID: sandboxID, KeyID: p.KeyID, KeyTenant: p.KeyTenant})
}

// checkToken answers the tenant of a valid token of sandboxID whose key is
// live: otherwise 401 (code token_revoked for a dead key).
func (a *Adapter) checkToken(ctx context.Context, token, sandboxID string) (string, error) {
	c, err := a.tokens.Check(token, sandboxID)
	switch {
	case errors.Is(err, tokens.ErrOutdated):
		return "", fmt.Errorf("the access token for sandbox %q is of an earlier format: connect to the sandbox again for a new one: %w", sandboxID, errdefs.ErrUnauthenticated)
	case err != nil:
		return "", fmt.Errorf("missing or wrong access token for sandbox %q: %w", sandboxID, errdefs.ErrUnauthenticated)
	}
	if err := a.keyLive(ctx, c.IssuerTenant(), c.KeyID); err != nil {
		return "", err
	}
	return c.Tenant, nil
}

// sandboxAuth authenticates sandbox traffic: E2b-Sandbox-Id names the
// sandbox, X-Access-Token (or E2B-Traffic-Access-Token, which the code
// interpreter's context calls send alone) must be its token. The port
// header picks the agent or the code interpreter.
func (a *Adapter) sandboxAuth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("E2b-Sandbox-Id")
		if id == "" {
			a.writeError(w, r, errdefs.Invalid("missing E2b-Sandbox-Id header (set E2B_SANDBOX_URL to this service's /e2b)"))
			return
		}
		token := r.Header.Get("X-Access-Token")
		if token == "" {
			token = r.Header.Get("E2B-Traffic-Access-Token")
		}
		tenant, err := a.checkToken(r.Context(), token, id)
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		// A token outlives nothing: once the sandbox is gone (killed,
		// expired) every call answers 502, as E2B's proxy does for a
		// sandbox that is not running (the SDKs read it so); so does a
		// paused one, unless it wakes on traffic.
		sb, err := a.ctl.GetSandbox(r.Context(), tenant, id)
		if err != nil && !errdefs.Is(err, errdefs.ErrNotFound) {
			a.writeError(w, r, err)
			return
		}
		if err == nil {
			sb, err = a.settled(r.Context(), tenant, sb)
		}
		if err != nil && !errdefs.Is(err, errdefs.ErrNotFound) {
			a.writeError(w, r, err)
			return
		}
		if err == nil && a.wakesOnTraffic(sb) {
			if sb, err = a.wakeOnTraffic(r.Context(), tenant, sb); err != nil {
				a.writeError(w, r, err)
				return
			}
		}
		if err != nil || !shared.Running(sb.State) {
			writeJSON(w, http.StatusBadGateway, apiError{Code: http.StatusBadGateway, Message: fmt.Sprintf("sandbox %s is not running", id)})
			return
		}
		ctx := context.WithValue(context.WithValue(r.Context(), tenantKey, tenant), sandboxKey, id)
		h(w, r.WithContext(ctx))
	}
}

// port reads E2b-Sandbox-Port (the agent's when absent).
func port(r *http.Request) int {
	p, err := strconv.Atoi(r.Header.Get("E2b-Sandbox-Port"))
	if err != nil {
		return EnvdPort
	}
	return p
}

// onPort refuses a request whose E2b-Sandbox-Port is not the one that
// serves what (404, as for a port nothing listens on).
func onPort(r *http.Request, want int, what string) error {
	if p := port(r); p != want {
		return fmt.Errorf("port %d serves no %s (it is on %d): %w", p, what, want, errdefs.ErrNotFound)
	}
	return nil
}

// health answers the agent's and the interpreter's health checks: 204
// while the sandbox runs (sandboxAuth answered 502 otherwise).
func (a *Adapter) health(w http.ResponseWriter, _ *http.Request) {
	w.WriteHeader(http.StatusNoContent)
}

// connectRPC passes a Connect call of the agent's port to the generated
// handlers.
func (a *Adapter) connectRPC(w http.ResponseWriter, r *http.Request) {
	if err := onPort(r, EnvdPort, "agent API"); err != nil {
		a.writeError(w, r, err)
		return
	}
	http.StripPrefix(Prefix, a.envd).ServeHTTP(flushWriter{w}, r)
}

// flushWriter gives connect-go the http.Flusher its streams need through
// whatever middleware wraps w (http.ResponseController finds it).
type flushWriter struct{ http.ResponseWriter }

func (f flushWriter) Flush() { _ = http.NewResponseController(f.ResponseWriter).Flush() }

func (f flushWriter) Unwrap() http.ResponseWriter { return f.ResponseWriter }

// lookupSandbox is the error of a sandbox the caller cannot see: E2B's 404.
func notFound(id string) error {
	return fmt.Errorf("sandbox %q not found: %w", id, errdefs.ErrNotFound)
}
