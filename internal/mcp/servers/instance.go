package servers

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/mcp"
	"genesis.dev/sandbox/internal/sandbox"
)

// CreateRequest asks for an instance: a catalog entry or an ad-hoc spec.
type CreateRequest struct {
	Catalog string `json:"catalog,omitempty"`
	Spec    *Spec  `json:"spec,omitempty"`
	// Scope is dedicated (one sandbox per instance; the default).
	Scope string `json:"scope,omitempty"`
	// LeaseID runs the server in a sandbox the tenant already leases
	// (it must be at least as isolated as the decision needs).
	LeaseID string `json:"lease_id,omitempty"`
	// Runtime asks for a runtime at least as strong as the decision's
	// (runsc for a low-risk server, say); a weaker one is refused.
	Runtime sandbox.Runtime `json:"runtime,omitempty"`
	Tools   mcp.Rules       `json:"tools,omitempty"`
	// PinMode is block (the default for medium risk and above) or warn.
	PinMode        mcp.PinMode `json:"pin_mode,omitempty"`
	IdleTTLSeconds int64       `json:"idle_ttl_seconds,omitempty"`
	CallTimeoutMS  int64       `json:"call_timeout_ms,omitempty"`
	CallCeilingMS  int64       `json:"call_ceiling_ms,omitempty"`
	InitTimeoutMS  int64       `json:"init_timeout_ms,omitempty"`
	// ApprovalTTLSeconds is how long a call of a tools.approve tool waits
	// for its decision (default 300; at most the call ceiling).
	ApprovalTTLSeconds int64 `json:"approval_ttl_seconds,omitempty"`
	// CreatedBy is the id of the API key that asks (set by the caller,
	// never read from a body): that key may not approve the instance's
	// calls or changed tools.
	CreatedBy string `json:"-"`
}

// Spec is an ad-hoc server: a command in a profile.
type Spec struct {
	Command []string          `json:"command"`
	Cwd     string            `json:"cwd,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Profile string            `json:"profile,omitempty"`
	// Transport, Port and Path: as in a catalog entry (stdio by default;
	// http with the port the server listens on).
	Transport   string      `json:"transport,omitempty"`
	Port        int         `json:"port,omitempty"`
	Path        string      `json:"path,omitempty"`
	Permissions Permissions `json:"permissions,omitempty"`
}

// Instance is the API view of an instance.
type Instance struct {
	ID        string   `json:"id"`
	Tenant    string   `json:"tenant"`
	Catalog   string   `json:"catalog,omitempty"`
	Command   []string `json:"command"`
	Profile   string   `json:"profile"`
	Scope     string   `json:"scope"`
	Endpoint  string   `json:"endpoint"`
	Token     string   `json:"token,omitempty"` // only in the answer to create
	LeaseID   string   `json:"lease_id"`
	OwnLease  bool     `json:"own_lease"`
	SandboxID string   `json:"sandbox_id"`
	// JobID is the server process's job: its stderr is
	// GET /v1/jobs/{job_id}/logs (resumable).
	JobID    string            `json:"job_id,omitempty"`
	Runtime  sandbox.Runtime   `json:"runtime"`
	Risk     sandbox.RiskLevel `json:"risk"`
	Network  string            `json:"network"`
	Decision Decision          `json:"decision"`
	State    string            `json:"state"`
	Restarts int               `json:"restarts"`
	// OutputRestarts counts the planned restarts of a server whose
	// stdout neared its job's output limit (not failures: they do not
	// count against the restart budget). Its sessions end with it.
	OutputRestarts  int                 `json:"output_restarts,omitempty"`
	LastExitCode    *int                `json:"last_exit_code,omitempty"`
	LastError       string              `json:"last_error,omitempty"`
	Server          *sdk.Implementation `json:"server,omitempty"`
	ProtocolVersion string              `json:"protocol_version,omitempty"`
	Tools           mcp.Rules           `json:"tools"`
	PinMode         mcp.PinMode         `json:"pin_mode"`
	IdleTTLSeconds  int64               `json:"idle_ttl_seconds"`
	CreatedAt       time.Time           `json:"created_at"`
	ReadyAt         *time.Time          `json:"ready_at,omitempty"`
	LastUsedAt      time.Time           `json:"last_used_at"`
	// Secrets are the secrets the server's process holds or reaches, by
	// name: "env:VAR=secret" for env_secrets, "gateway:TOOL" for operator
	// tools (whose credentials stay at the gateway). Never their values.
	Secrets []string `json:"secrets,omitempty"`
	// CreatedBy is the id of the API key that started the instance.
	CreatedBy string `json:"created_by,omitempty"`
}

// instance is one running server.
type instance struct {
	tokenHash [32]byte
	policy    *mcp.Policy
	cfg       mcp.Config // timeouts
	cmd       jobs.ExecInput
	callSpec  callSpec  // scope ephemeral: what each call's sandbox runs
	http      *httpSpec // transport http: where the server listens
	cancel    context.CancelFunc
	done      chan struct{}
	// reservation is what the instance's sandboxes are reserved to
	// (mcp:<id>) when its server holds operator secrets; "" otherwise.
	reservation string

	// rollover is set when the server is stopped because its stdout
	// neared the output limit: the next start is planned, not a failure.
	rollover atomic.Bool

	mu        sync.Mutex
	view      Instance
	stdio     *mcp.Stdio
	proxy     *mcp.Proxy
	handler   http.Handler
	calls     []CallEntry
	seq       int64
	approvals []*Approval
}

// CallEntry is a call record with its place in the instance's log.
type CallEntry struct {
	Seq int64 `json:"seq"`
	mcp.CallRecord
	// Egress are the egress gateway's events of the instance's sandbox in
	// the call's window (from its start to its end), when the sandbox has
	// network. Concurrent calls of one instance share their events. The
	// gateway's events reach the store every few seconds, so those of a
	// call that just ended may come on a later read.
	Egress []sandbox.NetworkEvent `json:"egress,omitempty"`
}

func newToken() (string, [32]byte) {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	tok := "gmcp_" + base64.RawURLEncoding.EncodeToString(b)
	return tok, sha256.Sum256([]byte(tok))
}

func invalid(format string, a ...any) error {
	return errdefs.Invalid(format, a...)
}

func (in *instance) snapshot() Instance {
	in.mu.Lock()
	defer in.mu.Unlock()
	v := in.view
	v.Command = slices.Clone(v.Command)
	return v
}
