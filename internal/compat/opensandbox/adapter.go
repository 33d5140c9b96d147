package opensandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"genesis.dev/sandbox/internal/compat/shared"
	"genesis.dev/sandbox/internal/compat/tokens"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/files"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/tenant"
)

// Prefix is where the adapter is mounted: OPEN_SANDBOX_DOMAIN is
// HOST:PORT/opensandbox (the SDK appends /v1).
const Prefix = "/opensandbox"

// The ports the SDK asks endpoints of at every create: execd (commands
// and files) and the egress sidecar.
const (
	ExecdPort  = 44772
	EgressPort = 18080
)

// TokenHeader carries a sandbox's execd token; the endpoint answer names
// it in its headers, which the SDKs send with every execd call.
const TokenHeader = "X-Genesis-Sandbox-Token"

// Config wires an Adapter.
type Config struct {
	Control *control.Service
	Jobs    *jobs.Manager
	Files   *files.Gateway
	// KeyLive answers nil while the API key keyID of keyTenant may act
	// (tenancy.Service.KeyLive): every use of a sandbox token asks it, so
	// a token ends with the key it was made with.
	KeyLive func(ctx context.Context, keyTenant, keyID string) error
	// Settings are the adapter's configuration (images, timeouts).
	Settings config.OpenSandbox
	// MaxJobTimeoutMS is the longest a command may run (limits.max_exec_timeout_ms).
	MaxJobTimeoutMS int64
	// TokenKey keys the per-sandbox tokens (package tokens); the service
	// keeps it in a file of its data dir, so that tokens survive a
	// restart. Empty: a key made at start, so tokens end with the process.
	TokenKey []byte
	// PublicHost is the service's host[:port] as callers reach it (from its
	// public URL): the endpoints answered are under it, never under a
	// request's Host header.
	PublicHost string
	// Preview, if set, opens another port of a sandbox to the caller: the
	// port's own preview origin (host[:port], no scheme) and a link token
	// the SDK sends in PreviewHeader.
	Preview func(ctx context.Context, by tenant.Principal, sandboxID string, port int) (host, token string, err error)
	// Snapshots, if set, serves pause and resume; without it they answer
	// 501.
	Snapshots Snapshots
	// Volumes, if set, serves a create's volumes (the pvc backend) as
	// named volumes; without it a create that asks for any answers 501.
	Volumes Volumes
	Logger  *slog.Logger
}

// PreviewHeader carries a preview link's token to a preview origin.
const PreviewHeader = "X-Genesis-Preview-Token"

// Adapter serves the OpenSandbox lifecycle and execd APIs under Prefix.
type Adapter struct {
	ctl    *control.Service
	jobs   *jobs.Manager
	files  *files.Gateway
	auth   func(ctx context.Context, key string) (tenant.Principal, error)
	set    config.OpenSandbox
	maxJob int64
	log    *slog.Logger
	tokens *tokens.Signer
	note   func(r *http.Request, code string)
	// keyLive is Config.KeyLive.
	keyLive func(ctx context.Context, keyTenant, keyID string) error
	// publicHost and preview are Config.PublicHost and Config.Preview.
	publicHost string
	preview    func(ctx context.Context, by tenant.Principal, sandboxID string, port int) (host, token string, err error)
	ctx        contexts
	snaps      Snapshots
	vols       Volumes // nil: none
}

// New builds the adapter.
func New(cfg Config) (*Adapter, error) {
	if cfg.Control == nil || cfg.Jobs == nil || cfg.Files == nil || cfg.KeyLive == nil {
		return nil, errdefs.Invalid("opensandbox: control, jobs, files and KeyLive are required")
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
			return nil, fmt.Errorf("opensandbox: %w", err)
		}
	}
	return &Adapter{ctl: cfg.Control, keyLive: cfg.KeyLive, jobs: cfg.Jobs, files: cfg.Files, set: cfg.Settings,
		maxJob: cfg.MaxJobTimeoutMS, log: cfg.Logger, tokens: signer, publicHost: cfg.PublicHost, preview: cfg.Preview,
		ctx: contexts{def: map[string]*defaultContext{}}, snaps: cfg.Snapshots, vols: cfg.Volumes}, nil
}

// Edge is what the HTTP server that serves the adapter lends it.
type Edge struct {
	// Authenticate answers who holds an API key of the service (the
	// server notes the caller in the request's audit record).
	Authenticate func(ctx context.Context, key string) (tenant.Principal, error)
	// NoteError, if set, is told the code of each error answer (the
	// server's audit record of the request carries it).
	NoteError func(r *http.Request, code string)
}

// Bind gives the adapter the server that serves it: call it once, before
// the first request. Until then no API key is accepted (503).
func (a *Adapter) Bind(e Edge) { a.auth, a.note = e.Authenticate, e.NoteError }

// Route is one method and path pattern the adapter serves.
type Route struct {
	Method, Pattern string
	Handler         http.HandlerFunc
	// Execd routes are a sandbox's own API, authenticated by its token
	// rather than an API key.
	Execd bool
}

// Routes lists every route, for the server's mux and its OpenAPI check.
func (a *Adapter) Routes() []Route {
	v1, x := Prefix+"/v1", Prefix+"/sandboxes/{id}/execd"
	return []Route{
		// Lifecycle, authenticated by OPEN-SANDBOX-API-KEY.
		{"POST", v1 + "/sandboxes", a.apiKey(a.createSandbox), false},
		{"GET", v1 + "/sandboxes", a.apiKey(a.listSandboxes), false},
		{"GET", v1 + "/sandboxes/{id}", a.apiKey(a.getSandbox), false},
		{"DELETE", v1 + "/sandboxes/{id}", a.apiKey(a.deleteSandbox), false},
		{"POST", v1 + "/sandboxes/{id}/renew-expiration", a.apiKey(a.renewExpiration), false},
		{"POST", v1 + "/sandboxes/{id}/pause", a.apiKey(a.pauseSandbox), false},
		{"POST", v1 + "/sandboxes/{id}/resume", a.apiKey(a.resumeSandbox), false},
		{"GET", v1 + "/sandboxes/{id}/endpoints/{port}", a.apiKey(a.endpoint), false},
		{"POST", v1 + "/metrics/events", a.apiKey(a.metricsEvent), false},
		// execd, authenticated by the sandbox's token.
		{"GET", x + "/ping", a.execdAuth(a.ping), true},
		{"POST", x + "/command", a.execdAuth(a.runCommand), true},
		{"DELETE", x + "/command", a.execdAuth(a.interrupt), true},
		// /command/status/{id} and /command/{id}/logs: one pattern, as the
		// two overlap for the mux (a command id never is "status").
		{"GET", x + "/command/{a}/{b}", a.execdAuth(a.commandGet), true},
		{"POST", x + "/files/upload", a.execdAuth(a.upload), true},
		{"GET", x + "/files/download", a.execdAuth(a.download), true},
		{"GET", x + "/files/info", a.execdAuth(a.fileInfo), true},
		{"DELETE", x + "/files", a.execdAuth(a.deleteFiles), true},
		{"POST", x + "/files/mv", a.execdAuth(a.moveFiles), true},
		{"GET", x + "/files/search", a.execdAuth(a.searchFiles), true},
		{"GET", x + "/directories/list", a.execdAuth(a.listDirectory), true},
		{"POST", x + "/directories", a.execdAuth(a.makeDirectories), true},
		{"DELETE", x + "/directories", a.execdAuth(a.deleteDirectories), true},
		// The code interpreter: code contexts.
		{"POST", x + "/code/context", a.execdAuth(a.createCodeContext), true},
		{"GET", x + "/code/contexts/{context_id}", a.execdAuth(a.getCodeContext), true},
		{"DELETE", x + "/code/contexts/{context_id}", a.execdAuth(a.deleteCodeContext), true},
		{"POST", x + "/code", a.execdAuth(a.runCode), true},
	}
}

type ctxKey int

const (
	tenantKey ctxKey = iota
	sandboxKey
	principalKey
)

func tenantOf(ctx context.Context) string  { v, _ := ctx.Value(tenantKey).(string); return v }
func sandboxOf(ctx context.Context) string { v, _ := ctx.Value(sandboxKey).(string); return v }

// principalOf is who made a lifecycle call (the key its tokens name).
func principalOf(ctx context.Context) tenant.Principal {
	v, _ := ctx.Value(principalKey).(tenant.Principal)
	return v
}

// apiError is the SDK's error body: {code, message}.
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers err in the SDK's shape: the status from errdefs'
// table, the code this service's own (upper case) or the status's name.
func (a *Adapter) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status := errdefs.HTTPStatus(err)
	code := strings.ToUpper(errdefs.Code(err))
	if code == "" {
		code = strings.ToUpper(strings.ReplaceAll(http.StatusText(status), " ", "_"))
	}
	if a.note != nil {
		a.note(r, code)
	}
	if status >= 500 {
		a.log.Error("opensandbox adapter", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeJSON(w, status, apiError{Code: code, Message: errdefs.Detail(err)})
}

// apiKey authenticates a lifecycle call: OPEN-SANDBOX-API-KEY (or an
// Authorization bearer) is any API key of the service.
func (a *Adapter) apiKey(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("OPEN-SANDBOX-API-KEY")
		if key == "" {
			key, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		}
		if key == "" {
			a.writeError(w, r, errdefs.WithCode("unauthorized", fmt.Errorf("missing OPEN-SANDBOX-API-KEY header: %w", errdefs.ErrUnauthenticated)))
			return
		}
		if a.auth == nil {
			a.writeError(w, r, fmt.Errorf("the OpenSandbox adapter is not served yet: %w", errdefs.ErrUnavailable))
			return
		}
		p, err := a.auth(r.Context(), key)
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		ctx := context.WithValue(context.WithValue(r.Context(), tenantKey, p.Tenant), principalKey, p)
		h(w, r.WithContext(ctx))
	}
}

// execdToken is the token of an endpoint of a sandbox, made for the
// caller's key.
func (a *Adapter) execdToken(ctx context.Context, sandboxID string) string {
	p := principalOf(ctx)
	return a.tokens.Sign(tokens.Claims{Tenant: p.Tenant, SandboxID: sandboxID, KeyID: p.KeyID, KeyTenant: p.KeyTenant})
}

// execdAuth authenticates an execd call: the sandbox's token, made with a
// key that is still live, and the sandbox must still run (a token outlives
// nothing).
func (a *Adapter) execdAuth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		c, err := a.tokens.Check(r.Header.Get(TokenHeader), id)
		switch {
		case errors.Is(err, tokens.ErrOutdated):
			err = errdefs.WithCode("unauthorized", fmt.Errorf("the %s for sandbox %q is of an earlier format: take the headers GET /v1/sandboxes/{id}/endpoints/44772 answers now: %w", TokenHeader, id, errdefs.ErrUnauthenticated))
		case err != nil:
			err = errdefs.WithCode("unauthorized", fmt.Errorf("missing or wrong %s for sandbox %q (take the headers GET /v1/sandboxes/{id}/endpoints/44772 answers): %w", TokenHeader, id, errdefs.ErrUnauthenticated))
		default:
			err = a.keyLive(r.Context(), c.IssuerTenant(), c.KeyID)
		}
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		tenant := c.Tenant
		sb, err := a.ctl.GetSandbox(r.Context(), tenant, id)
		if err == nil && a.wakes(sb) {
			sb, _, err = a.snaps.Resume(r.Context(), tenant, id)
		}
		if err == nil && sb.State.Suspended() {
			err = errdefs.WithCode(control.CodePaused, errdefs.Mark(fmt.Errorf("sandbox %s is paused; resume it (POST /v1/sandboxes/%s/resume)", id, id), errdefs.ErrConflict))
		}
		if err == nil && !shared.Running(sb.State) {
			err = errdefs.WithCode("sandbox_not_running", fmt.Errorf("sandbox %s is %s: %w", id, sb.State, errdefs.ErrFailedPrecondition))
		}
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		ctx := context.WithValue(context.WithValue(r.Context(), tenantKey, tenant), sandboxKey, id)
		h(w, r.WithContext(ctx))
	}
}
