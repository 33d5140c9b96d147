package agentproto

// PathCheckpointPrepare readies the agent for a save of the sandbox's whole
// state (gVisor's runsc checkpoint): a bound host Unix socket cannot be
// saved, so the agent answers, then closes its listener and every
// connection and removes its socket, and listens again on the same path
// once the save is done (the sandbox resumed, restored in a new container,
// or the save failed) or once CheckpointPrepare.TimeoutMS passed without a
// save.
const PathCheckpointPrepare = "/v1/checkpoint/prepare"

// ResumeFile, in the agent's socket directory, ends a wait for a save from
// outside: the service writes it once a save that left the sandbox running
// is done (a frozen sandbox's save does not always tell the agent itself),
// and the agent removes it and serves again.
const ResumeFile = "resume"

// CheckpointPrepare is the body of POST PathCheckpointPrepare.
type CheckpointPrepare struct {
	// TimeoutMS is how long the agent waits for the save before it listens
	// again anyway (default and maximum 60000).
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
}

// CheckpointPrepared answers POST PathCheckpointPrepare.
type CheckpointPrepared struct {
	// Generation counts the saves this agent has lived through so far
	// (restores included).
	Generation int `json:"generation"`
}

// CodeCheckpointUnsupported: the agent does not run under gVisor, or
// /proc/gvisor/checkpoint cannot be opened.
const CodeCheckpointUnsupported = "checkpoint_unsupported"

// Identity variables the agent reads again after a restore (from the new
// container's spec, /proc/gvisor/spec_environ): the sandbox's new id and
// hostname, and a fresh random seed the workload can read from
// IdentityFile, so that the copies of a fork differ.
const (
	EnvSandboxID = "GENESIS_SANDBOX_ID"
	EnvHostname  = "GENESIS_HOSTNAME"
	EnvSeed      = "GENESIS_SEED"
	// IdentityFile holds the sandbox's current identity as KEY=VALUE lines
	// (GENESIS_SANDBOX_ID, GENESIS_SEED, GENESIS_RESTORED), rewritten by
	// the agent at start and after every restore; readable by the sandbox
	// user.
	IdentityFile = "/run/genesis/identity"
)
