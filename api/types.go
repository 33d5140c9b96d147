package api

import "time"

// Problem is an RFC 9457 application/problem+json error body.
type Problem struct {
	Type      string `json:"type,omitempty"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail,omitempty"`
	Code      string `json:"code"`
	Instance  string `json:"instance,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	// ImageBuild is set on a 503 image_building: where the background
	// build of the profile's image stands.
	ImageBuild *ImageBuild `json:"image_build,omitempty"`
}

// Resources are the limits of a sandbox. Zero fields take the profile default.
type Resources struct {
	CPU      float64 `json:"cpu,omitempty"`
	MemoryMB int64   `json:"memory_mb,omitempty"`
	Pids     int64   `json:"pids,omitempty"`
	// DiskMB is the size of the sandbox's workspace in MiB (a quota that
	// holds: writes beyond it fail with ENOSPC); 0 means no quota.
	DiskMB int64 `json:"disk_mb,omitempty"`
}

// CreateSandboxRequest is the body of POST /v1/sandboxes.
type CreateSandboxRequest struct {
	Profile      string            `json:"profile"`
	Runtime      string            `json:"runtime,omitempty"`
	RiskLevel    string            `json:"risk_level,omitempty"`
	Resources    *Resources        `json:"resources,omitempty"`
	Env          map[string]string `json:"env,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
	TTLSeconds   int64             `json:"ttl_seconds,omitempty"`
	ReadOnlyRoot *bool             `json:"read_only_root,omitempty"`
	// WaitSeconds is how long the request may wait for host capacity when
	// it is exhausted (0: answer 503 capacity_exhausted at once).
	WaitSeconds int64 `json:"wait_seconds,omitempty"`
	// Network is the network policy; nil takes the tenant's or profile's
	// default (normally mode none: no interface but loopback).
	Network *NetworkPolicy `json:"network,omitempty"`
	// SnapshotID, if set, starts the sandbox from a snapshot: its files,
	// and its processes and memory where the snapshot holds them. The
	// profile and runtime are the snapshot's (Profile may be left empty).
	SnapshotID string `json:"snapshot_id,omitempty"`
	// Volumes are the tenant's named volumes to mount (one writer or any
	// number of readers per volume; a busy one is 409 volume_busy).
	Volumes []VolumeMount `json:"volumes,omitempty"`
}

// Sandbox is a sandbox as the API shows it. It never exposes container ids
// or environment values.
type Sandbox struct {
	ID string `json:"id"`
	// Tenant owns the sandbox (an admin's listing spans tenants).
	Tenant          string            `json:"tenant,omitempty"`
	State           string            `json:"state"`
	Profile         string            `json:"profile"`
	Runtime         string            `json:"runtime"`
	RiskLevel       string            `json:"risk_level"`
	Image           string            `json:"image"`
	Resources       Resources         `json:"resources"`
	EnvKeys         []string          `json:"env_keys,omitempty"`
	Metadata        map[string]string `json:"metadata"`
	FailureReason   string            `json:"failure_reason,omitempty"`
	ResourceVersion string            `json:"resource_version"`
	CreatedAt       time.Time         `json:"created_at"`
	UpdatedAt       time.Time         `json:"updated_at"`
	ExpiresAt       *time.Time        `json:"expires_at,omitempty"`
	// Network is set for networked sandboxes (GET and create answers).
	Network *NetworkSummary `json:"network,omitempty"`
	// Endpoints are the named ports of the sandbox's profile with their
	// URLs through the service (GET answers).
	Endpoints []Endpoint `json:"endpoints,omitempty"`
	// Services are the profile's services and how they run (GET answers).
	Services []ServiceStatus `json:"services,omitempty"`
	// Reserved, when set, is the service workload the sandbox is reserved
	// to (mcp:<server id> for an MCP server that holds operator secrets):
	// no exec, file, session, terminal or port call reaches inside it
	// (403 sandbox_reserved).
	Reserved string `json:"reserved,omitempty"`
	// Suspension is set while the sandbox is paused or hibernated.
	Suspension *Suspension `json:"suspension,omitempty"`
	// MemoryRestored, on the answer of a create from a snapshot, a wake, a
	// fork's copy or a rollback, says whether processes and memory came
	// back (false: files only).
	MemoryRestored *bool `json:"memory_restored,omitempty"`
	// SessionsFromSnapshot, on the answer of a create from a snapshot or
	// a fork's copy, maps the snapshot's shell sessions and code contexts
	// to this sandbox's copies of them (a code context only when its
	// memory came back: its kernel is a process).
	SessionsFromSnapshot map[string]string `json:"sessions_from_snapshot,omitempty"`
}

// Suspension is what a paused or hibernated sandbox returns to.
type Suspension struct {
	// ResumeState is the state a resume returns it to.
	ResumeState string `json:"resume_state"`
	// Operation is under way (hibernating, waking, …) when set.
	Operation string `json:"operation,omitempty"`
	// Memory says a hibernated sandbox comes back with its processes and
	// memory (runsc).
	Memory bool      `json:"memory"`
	Since  time.Time `json:"since"`
}

// ServiceStatus is one profile service of a sandbox: a long-running job
// the service starts once the sandbox is ready and restarts with backoff.
type ServiceStatus struct {
	Name string `json:"name"`
	// State: starting, running, ready (its ready port answers), backoff
	// (waiting to restart), exited (not restarted), failed, or held
	// (stopped while its browser profile is saved or loaded).
	State        string     `json:"state"`
	JobID        string     `json:"job_id,omitempty"` // its current job (logs: GET /v1/jobs/{id}/logs)
	Restarts     int        `json:"restarts"`
	LastExitCode *int       `json:"last_exit_code,omitempty"`
	Error        string     `json:"error,omitempty"`
	Since        time.Time  `json:"since"`
	ReadyAt      *time.Time `json:"ready_at,omitempty"`
}

// SandboxList is the body of GET /v1/sandboxes.
type SandboxList struct {
	Items []Sandbox `json:"items"`
}

// JobList is the body of GET /v1/sandboxes/{id}/jobs: newest first.
type JobList struct {
	Items []Job `json:"items"`
}

// PatchSandboxRequest is the body of PATCH /v1/sandboxes/{id}: a merge patch
// of metadata; a null value deletes the key.
type PatchSandboxRequest struct {
	Metadata map[string]*string `json:"metadata"`
}

// RenewSandboxRequest is the body of POST /v1/sandboxes/{id}/renew: the
// sandbox expires TTLSeconds from now (0: the service's default TTL).
type RenewSandboxRequest struct {
	TTLSeconds int64 `json:"ttl_seconds,omitempty"`
}

// ExecRequest is the body of POST /v1/sandboxes/{id}/exec. Exactly one of
// Command (argv) and Script (run by /bin/sh -c) is set.
type ExecRequest struct {
	Command     []string          `json:"command,omitempty"`
	Script      string            `json:"script,omitempty"`
	Cwd         string            `json:"cwd,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	Stdin       string            `json:"stdin,omitempty"`
	StdinBase64 string            `json:"stdin_base64,omitempty"` // exact bytes; exclusive with Stdin
	// StdinStream (background and streamed jobs) gives the job a pipe as
	// its stdin, written with WriteStdin or AttachJob and closed with
	// CloseStdin; exclusive with Stdin and StdinBase64.
	StdinStream bool `json:"stdin_stream,omitempty"`
	// TimeoutMS is the job's time limit; 0 takes the service default for
	// a synchronous or streamed exec and means none for a background job.
	TimeoutMS      int64 `json:"timeout_ms,omitempty"`
	MaxOutputBytes int64 `json:"max_output_bytes,omitempty"`
	// Background starts the job and answers 202 with the Job at once; read
	// its output with GET /v1/jobs/{id}/logs.
	Background bool `json:"background,omitempty"`
	// Artifacts names files to keep when the job ends.
	Artifacts *ArtifactRequest `json:"artifacts,omitempty"`
}

// ExecResult is the answer of POST /v1/sandboxes/{id}/exec. Stdout and Stderr
// are UTF-8 text (invalid bytes replaced); the *_base64 fields carry the
// exact bytes when the output was not valid UTF-8.
type ExecResult struct {
	JobID           string `json:"job_id"`
	ExitCode        int    `json:"exit_code"`
	ExitReason      string `json:"exit_reason"`
	Signal          string `json:"signal,omitempty"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutBase64    string `json:"stdout_base64,omitempty"`
	StderrBase64    string `json:"stderr_base64,omitempty"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
	StdoutBytes     int64  `json:"stdout_bytes"`
	StderrBytes     int64  `json:"stderr_bytes"`
	DurationMS      int64  `json:"duration_ms"`
	// Artifacts is the outcome of the job's artifact request, if any.
	Artifacts *ArtifactSummary `json:"artifacts,omitempty"`
}

// Job is the record of one execution (GET /v1/jobs/{id}).
type Job struct {
	ID              string     `json:"id"`
	SandboxID       string     `json:"sandbox_id"`
	State           string     `json:"state"`
	Command         []string   `json:"command,omitempty"`
	Script          string     `json:"script,omitempty"`
	Cwd             string     `json:"cwd,omitempty"`
	ExitCode        *int       `json:"exit_code,omitempty"`
	ExitReason      string     `json:"exit_reason,omitempty"`
	Signal          string     `json:"signal,omitempty"`
	Error           string     `json:"error,omitempty"`
	StdoutBytes     int64      `json:"stdout_bytes"`
	StderrBytes     int64      `json:"stderr_bytes"`
	StdoutTruncated bool       `json:"stdout_truncated"`
	StderrTruncated bool       `json:"stderr_truncated"`
	TimeoutMS       int64      `json:"timeout_ms,omitempty"`
	Mode            string     `json:"mode"` // sync | background
	CreatedAt       time.Time  `json:"created_at"`
	StartedAt       *time.Time `json:"started_at,omitempty"`
	FinishedAt      *time.Time `json:"finished_at,omitempty"`
	// Artifacts is the outcome of the job's artifact request, if any.
	Artifacts *ArtifactSummary `json:"artifacts,omitempty"`
}

// Profile is a runtime profile as GET /v1/profiles shows it.
type Profile struct {
	Name             string    `json:"name"`
	Description      string    `json:"description"`
	Image            string    `json:"image"`
	ImageStatus      string    `json:"image_status"` // present | queued | building | failed | not_built
	BuildCommand     string    `json:"build_command,omitempty"`
	AllowedRuntimes  []string  `json:"allowed_runtimes"`
	UsableRuntimes   []string  `json:"usable_runtimes"`
	DefaultResources Resources `json:"default_resources"`
	Network          string    `json:"network"`
	User             string    `json:"user"`
	ReadOnlyRoot     bool      `json:"read_only_root"`

	// ImageBuild is the background build's progress while the image is
	// not present and the service builds it (image_status queued,
	// building or failed).
	ImageBuild *ImageBuild `json:"image_build,omitempty"`
	// Pools are the profile's warm pools (empty when warm pools are off).
	Pools []ProfilePool `json:"pools"`
	Lease ProfileLease  `json:"lease"`
	// FileRoots are the directories the file API may touch in the
	// profile's sandboxes ("~" is the sandbox user's home); relative paths
	// resolve against the first.
	FileRoots []string `json:"file_roots"`
	// Versions are the component versions the built image reports
	// (chromium, playwright, node, ...); empty while the image is not built.
	Versions map[string]string `json:"versions,omitempty"`
	// Browser is set for a browser profile: its sandboxes serve
	// /v1/sandboxes/{id}/browser.
	Browser *ProfileBrowser `json:"browser,omitempty"`
	// Desktop is set for a desktop profile: its sandboxes serve the
	// computer actions, control and live-view routes.
	Desktop *ProfileDesktop `json:"desktop,omitempty"`
}

// ProfileDesktop describes a desktop profile's display.
type ProfileDesktop struct {
	Width      int `json:"width"`
	Height     int `json:"height"`
	MaxActions int `json:"max_actions"`
}

// ProfileBrowser describes a browser profile's browser.
type ProfileBrowser struct {
	CDPPort        int    `json:"cdp_port"`
	PlaywrightPort int    `json:"playwright_port,omitempty"`
	DownloadsDir   string `json:"downloads_dir"`
	MaxActions     int    `json:"max_actions"`
}

// ProfilePool sizes a profile's warm pool under one runtime.
type ProfilePool struct {
	Runtime  string `json:"runtime"`
	MinIdle  int    `json:"min_idle"`
	MaxTotal int    `json:"max_total"`
}

// ProfileLease bounds a profile's leases.
type ProfileLease struct {
	DefaultTTLSeconds int64 `json:"default_ttl_seconds"`
	MaxTTLSeconds     int64 `json:"max_ttl_seconds"`
}

// ProfileList is the body of GET /v1/profiles.
type ProfileList struct {
	Items []Profile `json:"items"`
}

// ImageBuild is where the service's background build of an image stands.
type ImageBuild struct {
	// State is queued, waiting (for another build), building, built or
	// failed.
	State string `json:"state"`
	// Step is bootstrap, packages, setup or import, the StepNumber-th of
	// Steps.
	Step       string `json:"step,omitempty"`
	StepNumber int    `json:"step_number,omitempty"`
	Steps      int    `json:"steps,omitempty"`
	// Done of Total Unit (packages, scripts, bytes) of the step; Total is
	// 0 while the step does not know it.
	Done  int64  `json:"done,omitempty"`
	Total int64  `json:"total,omitempty"`
	Unit  string `json:"unit,omitempty"`
	// Percent estimates the whole build.
	Percent int `json:"percent"`
	// Summary says it in a few words: "building 42%: packages (2/4) 120/456 packages".
	Summary    string     `json:"summary"`
	Detail     string     `json:"detail,omitempty"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	UpdatedAt  *time.Time `json:"updated_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	Error      string     `json:"error,omitempty"`
}

// Image is one image the configured profiles run: GET /v1/images.
type Image struct {
	// Name is the recipe (images/<name>), or the reference of an image
	// the configuration names.
	Name     string   `json:"name"`
	Ref      string   `json:"ref"`
	Profiles []string `json:"profiles"`
	// Status is present, queued, building, failed or not_built, as a
	// profile's image_status.
	Status       string      `json:"status"`
	BuildCommand string      `json:"build_command,omitempty"`
	Build        *ImageBuild `json:"build,omitempty"`
}

// ImageList is the body of GET /v1/images.
type ImageList struct {
	Items []Image `json:"items"`
}

// RuntimeInfo is the probe result for one runtime.
type RuntimeInfo struct {
	Name      string    `json:"name"`
	Path      string    `json:"path,omitempty"`
	Version   string    `json:"version,omitempty"`
	Healthy   bool      `json:"healthy"`
	Error     string    `json:"error,omitempty"`
	SmokeMS   int64     `json:"smoke_ms,omitempty"`
	CheckedAt time.Time `json:"checked_at"`
	// Features say what the runtime can do to keep a sandbox's state
	// (docs/snapshots.md), each with the reason when it cannot.
	Features RuntimeFeatures `json:"features"`
}

// RuntimeFeatures are a runtime's state-keeping features.
type RuntimeFeatures struct {
	// Pause freezes a sandbox's processes in place.
	Pause Feature `json:"pause"`
	// FSSnapshot saves and restores a sandbox's files.
	FSSnapshot Feature `json:"fs_snapshot"`
	// MemoryCheckpoint saves and restores its processes and memory.
	MemoryCheckpoint Feature `json:"memory_checkpoint"`
}

// Feature is an optional capability found by the probe.
type Feature struct {
	Supported bool   `json:"supported"`
	Enforced  bool   `json:"enforced"`
	Method    string `json:"method,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// Capabilities is the body of GET /v1/capabilities.
type Capabilities struct {
	Driver        string        `json:"driver"`
	Healthy       bool          `json:"healthy"`
	Error         string        `json:"error,omitempty"`
	DaemonVersion string        `json:"daemon_version,omitempty"`
	APIVersion    string        `json:"api_version,omitempty"`
	KernelVersion string        `json:"kernel_version,omitempty"`
	CgroupVersion string        `json:"cgroup_version,omitempty"`
	Runtimes      []RuntimeInfo `json:"runtimes"`
	Checkpoint    Feature       `json:"checkpoint"`
	DiskQuota     Feature       `json:"disk_quota"`
	// RiskPolicy maps each risk level to the runtimes it may use.
	RiskPolicy map[string][]string `json:"risk_policy"`
	Profiles   []Profile           `json:"profiles"`
	CheckedAt  time.Time           `json:"checked_at"`
	// Network says which network modes this host can enforce now.
	Network NetworkCapabilities `json:"network"`
	// Volumes says whether named volumes can be made here, where they
	// may be mounted and how large they may be.
	Volumes VolumesCapability `json:"volumes"`
}

// VolumesCapability is the named volumes part of GET /v1/capabilities.
type VolumesCapability struct {
	// Supported: volumes can be made on this host now; Reason says why
	// not otherwise (no loop devices, not root, another backend).
	Supported bool   `json:"supported"`
	Reason    string `json:"reason,omitempty"`
	// Roots are the container paths strictly below which a volume may be
	// mounted (a profile's volume_roots may narrow them).
	Roots []string `json:"roots"`
	// MaxSizeMB bounds one volume; MaxMBPerTenant the summed size of a
	// tenant's volumes; MaxPerTenant their number (0: no bound).
	MaxSizeMB      int64 `json:"max_size_mb,omitempty"`
	MaxMBPerTenant int64 `json:"max_mb_per_tenant,omitempty"`
	MaxPerTenant   int   `json:"max_per_tenant,omitempty"`
}

// Health is the body of /healthz and /readyz.
type Health struct {
	Status string            `json:"status"` // ok | unavailable
	Checks map[string]string `json:"checks,omitempty"`
}

// Session is a StatefulSession (kind "shell") or a code-interpreter context
// (kind "python").
type Session struct {
	ID        string    `json:"id"`
	SandboxID string    `json:"sandbox_id"`
	Kind      string    `json:"kind"`
	State     string    `json:"state"` // active | closed
	LastJobID string    `json:"last_job_id,omitempty"`
	Runs      int64     `json:"runs"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// CreateContextRequest is the body of POST /v1/sandboxes/{id}/contexts.
type CreateContextRequest struct {
	Language string `json:"language"` // python
}

// RunCodeRequest is the body of POST /v1/contexts/{id}/run.
type RunCodeRequest struct {
	Code      string `json:"code"`
	TimeoutMS int64  `json:"timeout_ms,omitempty"`
}

// CodeError is an exception raised by code run in a context.
type CodeError struct {
	Name      string   `json:"ename"`
	Value     string   `json:"evalue"`
	Traceback []string `json:"traceback"`
}

// RichOutput is a rich result of a run (e.g. a matplotlib figure as PNG).
type RichOutput struct {
	MIME string `json:"mime"`
	Data string `json:"data"` // base64
}

// RunCodeResult is the answer of POST /v1/contexts/{id}/run.
type RunCodeResult struct {
	JobID   string       `json:"job_id"`
	Status  string       `json:"status"` // ok | error
	Stdout  string       `json:"stdout"`
	Stderr  string       `json:"stderr"`
	Value   *string      `json:"value,omitempty"` // repr() of the final expression
	Error   *CodeError   `json:"error,omitempty"`
	Outputs []RichOutput `json:"outputs"`
	// DurationMS is the run's time inside the sandbox.
	DurationMS int64 `json:"duration_ms"`
	// Warnings say what the kernel could not do beside the code's own
	// outcome (rendering a figure failed, say).
	Warnings []string `json:"warnings,omitempty"`
}

// TruncatedEvent is the data of a "truncated" log event: the stream hit its
// output cap after Kept bytes; what followed was dropped.
type TruncatedEvent struct {
	Stream string `json:"stream"` // stdout | stderr
	Kept   int64  `json:"kept"`
}

// ExitEvent is the data of the final "exit" log event of a job.
type ExitEvent struct {
	JobID string `json:"job_id"`
	State string `json:"state"`
	// ExitCode is null when the job was lost (exit_reason "lost"; Error
	// says why).
	ExitCode        *int   `json:"exit_code"`
	ExitReason      string `json:"exit_reason"`
	Signal          string `json:"signal,omitempty"`
	Error           string `json:"error,omitempty"`
	StdoutBytes     int64  `json:"stdout_bytes"`
	StderrBytes     int64  `json:"stderr_bytes"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
	DurationMS      int64  `json:"duration_ms,omitempty"`
}

// TerminalTicket opens one sandbox's terminal WebSocket once, within a short
// time, as the caller who asked for it: for clients (browsers) that cannot
// send an Authorization header on a WebSocket. Give it as ?ticket= on
// GET /v1/sandboxes/{id}/terminal.
type TerminalTicket struct {
	Ticket    string    `json:"ticket"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Whoami is the answer of GET /v1/whoami: who the caller's key is.
type Whoami struct {
	Tenant string `json:"tenant"`
	// KeyID is the key's id (key_…, or cfgkey_… for keys from the config).
	KeyID string `json:"key_id"`
	// Admin: the key may use the admin API.
	Admin bool `json:"admin"`
	// Scopes are the key's scopes (ScopeApprove).
	Scopes []string `json:"scopes,omitempty"`
}
