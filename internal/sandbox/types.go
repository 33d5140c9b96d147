package sandbox

import (
	"crypto/rand"
	"encoding/base32"
	"strings"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
)

// Runtime names an isolation technology (an OCI runtime registered in Docker).
type Runtime string

// Known runtimes.
const (
	RuntimeRunc  Runtime = "runc"
	RuntimeRunsc Runtime = "runsc"
)

// Isolation returns the isolation strength of a runtime: higher is stronger.
// Unknown runtimes rank 0. Kata-style VM runtimes rank above gVisor.
func (r Runtime) Isolation() int {
	switch {
	case r == RuntimeRunc:
		return 1
	case r == RuntimeRunsc:
		return 2
	case strings.HasPrefix(string(r), "kata"):
		return 3
	}
	return 0
}

// RiskLevel is how much the caller trusts the work it runs.
type RiskLevel string

// Risk levels from most to least trusted.
const (
	RiskTrusted   RiskLevel = "trusted"
	RiskLow       RiskLevel = "low"
	RiskMedium    RiskLevel = "medium"
	RiskHigh      RiskLevel = "high"
	RiskUntrusted RiskLevel = "untrusted"
)

// RiskLevels lists the risk levels from most to least trusted.
var RiskLevels = []RiskLevel{RiskTrusted, RiskLow, RiskMedium, RiskHigh, RiskUntrusted}

// Rank orders risk levels: 0 for trusted up to 4 for untrusted, -1 if unknown.
func (r RiskLevel) Rank() int {
	for i, l := range RiskLevels {
		if l == r {
			return i
		}
	}
	return -1
}

// ParseRiskLevel validates s; the empty string yields def.
func ParseRiskLevel(s string, def RiskLevel) (RiskLevel, error) {
	if s == "" {
		return def, nil
	}
	r := RiskLevel(s)
	if r.Rank() < 0 {
		return "", errdefs.Invalid("unknown risk_level %q (want one of trusted, low, medium, high, untrusted)", s)
	}
	return r, nil
}

// Resources are the limits of one sandbox.
type Resources struct {
	CPU      float64 `json:"cpu" yaml:"cpu"`             // CPUs (fractional)
	MemoryMB int64   `json:"memory_mb" yaml:"memory_mb"` // memory and memory+swap
	Pids     int64   `json:"pids" yaml:"pids"`           // max processes
	DiskMB   int64   `json:"disk_mb,omitempty" yaml:"disk_mb"`
}

// Sandbox is the persistent record of one sandbox.
type Sandbox struct {
	ID          string            `json:"id"`
	Tenant      string            `json:"tenant"`
	Profile     string            `json:"profile"`
	Runtime     Runtime           `json:"runtime"`
	RiskLevel   RiskLevel         `json:"risk_level"`
	State       State             `json:"state"`
	Image       string            `json:"image"`
	Resources   Resources         `json:"resources"`
	Env         map[string]string `json:"env,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	ContainerID string            `json:"-"`
	// Instance is the service instance that made the sandbox and alone can
	// reach its agent (several instances may share one store).
	Instance        string     `json:"-"`
	FailureReason   string     `json:"failure_reason,omitempty"`
	ResourceVersion int64      `json:"resourceVersion"`
	CreatedAt       time.Time  `json:"created_at"`
	UpdatedAt       time.Time  `json:"updated_at"`
	ExpiresAt       *time.Time `json:"expires_at,omitempty"`
	// Network is filled by the service for networked sandboxes; it is not
	// part of the sandbox record.
	Network *NetworkSummary `json:"network,omitempty"`
	// Reserved, when set, names the service workload the sandbox is
	// reserved to (mcp:<instance> for an MCP server that holds operator
	// secrets): no caller but that workload reaches inside it, its tenant
	// included. Set when the sandbox is made or claimed, never changed;
	// such a sandbox is destroyed when it ends, never reset for another
	// holder.
	Reserved string `json:"reserved,omitempty"`
	// Pool, when set, is the snapshot whose warm pool the sandbox was made
	// for (its state came from that snapshot); a claim from the profile's
	// plain pool never takes it. Set when the sandbox is made, never
	// changed.
	Pool string `json:"pool,omitempty"`
	// Suspension is set while the sandbox is paused or hibernated, or on
	// its way there or back.
	Suspension *Suspension `json:"suspension,omitempty"`
}

// Suspension is what the service keeps of a paused or hibernated sandbox.
type Suspension struct {
	// ResumeState is the state the sandbox returns to.
	ResumeState State `json:"resume_state"`
	// Operation is the operation under way (pausing, hibernating, waking,
	// rolling back), or "" once it is done: a crash leaves it set, and the
	// reconciler finishes or undoes it.
	Operation string `json:"operation,omitempty"`
	// SnapshotID is the service's own snapshot a hibernated sandbox wakes
	// from.
	SnapshotID string `json:"snapshot_id,omitempty"`
	// Memory says the sandbox comes back with its processes and memory.
	Memory bool      `json:"memory"`
	Since  time.Time `json:"since"`
}

// Expired reports whether the sandbox's TTL has passed at now.
func (s *Sandbox) Expired(now time.Time) bool {
	return s.ExpiresAt != nil && !now.Before(*s.ExpiresAt)
}

// Job is the persistent record of one execution.
type Job struct {
	ID              string     `json:"id"`
	Tenant          string     `json:"tenant"`
	SandboxID       string     `json:"sandbox_id"`
	Command         []string   `json:"command,omitempty"`
	Script          string     `json:"script,omitempty"`
	Cwd             string     `json:"cwd,omitempty"`
	State           JobState   `json:"state"`
	ExitCode        *int       `json:"exit_code,omitempty"`
	ExitReason      ExitReason `json:"exit_reason,omitempty"`
	Signal          string     `json:"signal,omitempty"`
	Error           string     `json:"error,omitempty"`
	StdoutBytes     int64      `json:"stdout_bytes"`
	StderrBytes     int64      `json:"stderr_bytes"`
	StdoutTruncated bool       `json:"stdout_truncated"`
	StderrTruncated bool       `json:"stderr_truncated"`
	TimeoutMS       int64      `json:"timeout_ms,omitempty"`
	Mode            JobMode    `json:"mode"`
	CreatedAt       time.Time  `json:"created_at"`
	StartedAt       *time.Time `json:"started_at,omitempty"`
	FinishedAt      *time.Time `json:"finished_at,omitempty"`
}

// JobMode says how a job runs.
type JobMode string

// Job modes.
const (
	JobModeSync       JobMode = "sync"       // the caller waits for the result
	JobModeBackground JobMode = "background" // detached; output kept in the job log
)

var idEncoding = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// NewID returns a fresh random identifier with the given prefix, e.g.
// "sbx_3k9…". IDs are short so that socket paths stay short.
func NewID(prefix string) string {
	var b [10]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return prefix + "_" + idEncoding.EncodeToString(b[:])
}

// ValidID reports whether id looks like an identifier made by NewID with prefix.
func ValidID(prefix, id string) bool {
	rest, ok := strings.CutPrefix(id, prefix+"_")
	if !ok || len(rest) != 16 {
		return false
	}
	for _, c := range rest {
		if !strings.ContainsRune("0123456789abcdefghjkmnpqrstvwxyz", c) {
			return false
		}
	}
	return true
}

// SessionKind says what a session keeps between calls.
type SessionKind string

// Session kinds.
const (
	SessionShell  SessionKind = "shell"  // cwd and exported environment, by script wrapping
	SessionPython SessionKind = "python" // a code-interpreter context: Python globals
)

// SessionState is the state of a session.
type SessionState string

// Session states.
const (
	SessionActive SessionState = "active"
	SessionClosed SessionState = "closed"
)

// Session is a StatefulSession or code-interpreter context bound to a sandbox.
type Session struct {
	ID        string       `json:"id"`
	Tenant    string       `json:"tenant"`
	SandboxID string       `json:"sandbox_id"`
	Kind      SessionKind  `json:"kind"`
	State     SessionState `json:"state"`
	// Cwd and Env are the shell session's saved state as last reported by
	// the sandbox (informational; the sandbox holds the authoritative copy).
	Cwd       string `json:"cwd,omitempty"`
	LastJobID string `json:"last_job_id,omitempty"`
	// KernelJobID is the background job running a context's kernel.
	KernelJobID string    `json:"kernel_job_id,omitempty"`
	Runs        int64     `json:"runs"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}
