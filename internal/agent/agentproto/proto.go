// Package agentproto defines the wire protocol between the service and the
// in-sandbox genesis-agent: JSON over HTTP/2 (prior knowledge, cleartext) on
// the per-sandbox Unix socket, one multiplexed connection per sandbox.
//
// It holds only types, paths and constants, so both sides can import it
// without importing each other.
package agentproto

// Version is the protocol version; the agent reports it from /v1/ping.
const Version = "1"

// Paths served by the agent.
const (
	PathPing = "/v1/ping"
	PathExec = "/v1/exec"
)

// Ping is the answer of GET /v1/ping.
type Ping struct {
	Protocol string `json:"protocol"`
	Agent    string `json:"agent"` // build version
	PID      int    `json:"pid"`
	UID      int    `json:"uid"`
	Kernel   string `json:"kernel"` // uname -r inside the sandbox
	UptimeMS int64  `json:"uptime_ms"`
	// FileRoots are the allowed roots the agent applies to file paths,
	// HomeRoot resolved and refused roots dropped (the first is where
	// relative paths go).
	FileRoots []string `json:"file_roots,omitempty"`
}

// ExecRequest asks the agent to run one process and wait for it.
// Exactly one of Command (argv) and Script (run by /bin/sh -c) is set.
type ExecRequest struct {
	JobID   string            `json:"job_id"`
	Command []string          `json:"command,omitempty"`
	Script  string            `json:"script,omitempty"`
	Shell   string            `json:"shell,omitempty"` // default /bin/sh
	Cwd     string            `json:"cwd,omitempty"`
	Env     map[string]string `json:"env,omitempty"` // added to the agent's base env
	Stdin   []byte            `json:"stdin,omitempty"`
	// StdinStream (background jobs only) gives the job a pipe as its stdin
	// that stays open: PUT PathJobStdin streams bytes into it, POST
	// PathJobStdinClose (or the job's end) closes it. Not with Stdin.
	StdinStream    bool  `json:"stdin_stream,omitempty"`
	TimeoutMS      int64 `json:"timeout_ms,omitempty"`       // 0: no timeout
	KillGraceMS    int64 `json:"kill_grace_ms,omitempty"`    // SIGTERM → SIGKILL grace on timeout; 0: SIGKILL at once
	MaxOutputBytes int64 `json:"max_output_bytes,omitempty"` // per stream; 0: agent default (1 MiB)
}

// ExecResult is the outcome of an ExecRequest.
type ExecResult struct {
	ExitCode        int    `json:"exit_code"`
	ExitReason      string `json:"exit_reason"` // exited | timeout | signal | oom | canceled
	Signal          string `json:"signal,omitempty"`
	Stdout          []byte `json:"stdout"`
	Stderr          []byte `json:"stderr"`
	StdoutBytes     int64  `json:"stdout_bytes"` // total produced, kept or not
	StderrBytes     int64  `json:"stderr_bytes"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
	DurationMS      int64  `json:"duration_ms"`
	PID             int    `json:"pid"`
}

// Error is the JSON body of a non-2xx agent answer.
type Error struct {
	Code    string `json:"code"` // invalid_argument, not_found, internal
	Message string `json:"message"`
}

// DefaultMaxOutputBytes is the default cap per output stream.
const DefaultMaxOutputBytes = 1 << 20

// VersionInfo is the single JSON line printed by `genesis-agent version`.
// The capability probe runs that command in a throwaway container to prove a
// runtime works and to read the kernel it presents (gVisor: 4.19.0-gvisor).
type VersionInfo struct {
	Agent  string `json:"agent"`
	Kernel string `json:"kernel"`
	UID    int    `json:"uid"`
}

// Exit reasons reported in ExecResult.ExitReason.
const (
	ExitReasonExited   = "exited"
	ExitReasonSignal   = "signal"
	ExitReasonTimeout  = "timeout"
	ExitReasonOOM      = "oom"
	ExitReasonCanceled = "canceled"
)

// ConnWriteBuffer is the send buffer asked for on each end of an agent
// connection (SO_SNDBUF; the kernel doubles it, and caps the request at
// net.core.wmem_max). On a Unix stream socket the sender's buffer is all
// that can be in flight, and the default (208 KiB) splits each 1 MiB DATA
// frame of a job stream into five writes, each a wake-up of the reader;
// with this one a frame goes in one write and the reader takes it in one
// or two reads (BenchmarkJobStreamHop: ≈ 10,000 → 3,000 writes and
// 13,500 → 6,800 reads per GiB). It bounds nothing the HTTP/2 flow
// control does not already bound: the kernel holds at most this much per
// connection for a reader that does not read.
const ConnWriteBuffer = 1 << 20
