package driver

import (
	"context"
	"net"
	"time"
)

// SandboxSpec asks a Sandboxer for one whole sandbox.
type SandboxSpec struct {
	// ID is the sandbox's id; what the sandboxer makes is named after it.
	ID string
	// Container is the sandbox's container without its agent: the
	// sandboxer adds the agent's delivery and command, the workspace at
	// /workspace and whatever else it needs. Container.Mounts are the
	// caller's own bind mounts (read-only file roots, resolver files).
	Container Spec
	// UID and GID own the workspace (the profile's user).
	UID, GID int
	// DiskMB, when not 0, caps the workspace with a quota the sandboxer
	// enforces (see QuotaReporter).
	DiskMB int64
}

// Dialer opens a connection to a sandbox's agent; ctx bounds the connect.
type Dialer func(ctx context.Context) (net.Conn, error)

// Sandboxer is the sandbox-level seam of a backend: it owns everything a
// sandbox needs around its container — host directories, the agent
// binary's delivery, the workspace, names — and knows how this process
// reaches the sandbox's agent. The container-level Driver still starts,
// stops, inspects and lists what a Sandboxer made.
type Sandboxer interface {
	// CreateSandbox makes, but does not start, the sandbox's container and
	// what it needs outside it, and returns the container's id. A failed
	// CreateSandbox leaves nothing behind.
	CreateSandbox(ctx context.Context, spec SandboxSpec) (string, error)
	// RemoveSandbox removes the sandbox's container (containerID; found by
	// the sandbox's name when empty) and everything CreateSandbox made for
	// it. Removing what is gone succeeds.
	RemoveSandbox(ctx context.Context, id, containerID string) error
	// AgentDialer returns how to reach sandbox id's agent from this
	// process. It does not connect; the dialer may look the address up.
	AgentDialer(id string) Dialer
	// AgentAddress names where sandbox id's agent is, for errors and logs.
	AgentAddress(id string) string
}

// AgentWatcher is implemented by sandboxers that can tell when a starting
// sandbox's agent may have begun to listen (the local one: something
// appeared in the directory of its socket), so that the wait for the
// agent dials at once instead of at its next poll.
type AgentWatcher interface {
	// WatchAgent returns a channel that receives (without blocking the
	// sender; a missed value is covered by the next) whenever sandbox
	// id's agent may have begun to listen, until ctx ends; nil when it
	// cannot watch.
	WatchAgent(ctx context.Context, id string) <-chan struct{}
}

// QuotaReporter is implemented by sandboxers that can cap a workspace
// (SandboxSpec.DiskMB).
type QuotaReporter interface {
	// QuotaAvailable says whether workspace quotas work here, and why not.
	QuotaAvailable() (bool, string)
}

// HostDirs is implemented by sandboxers that keep per-sandbox directories
// on the service's host (the local one): the application sweeps those a
// crash left behind.
type HostDirs interface {
	// SandboxDir is sandbox id's host directory.
	SandboxDir(id string) string
	// Recover releases, at start-up, workspace mounts of sandboxes that
	// keep(id) says are gone, and returns how many it released.
	Recover(keep func(id string) bool) (int, error)
	// Sweep removes the directories of sandboxes that keep(id, age) says
	// are gone and returns how many it removed.
	Sweep(keep func(id string, age time.Duration) bool) int
}

// ContainerReplacer is implemented by sandboxers that can give an existing
// sandbox a new container on the same directories: a hibernation removes
// its container and keeps everything else, a wake or a rollback makes a new
// one (Spec.Restore brings its state back). Its workspace is a host
// directory the service may copy into and out of.
type ContainerReplacer interface {
	// NewContainer makes, but does not start, a new container for the
	// existing sandbox spec.ID, as CreateSandbox makes its first.
	NewContainer(ctx context.Context, spec SandboxSpec) (string, error)
	// RemoveContainer removes the sandbox's container only (containerID;
	// found by the sandbox's name when empty). Removing a missing one
	// succeeds.
	RemoveContainer(ctx context.Context, id, containerID string) error
	// WorkspaceDir is the host directory mounted at /workspace.
	WorkspaceDir(id string) string
	// RunDir is the host directory mounted at AgentRunDir (the agent's
	// socket directory).
	RunDir(id string) string
}

// AgentRekeyer is implemented by sandboxers whose agents admit a
// connection by a token (driver/kube): a sandbox's token can be replaced,
// so that nobody who learnt the old one reaches the agent once the sandbox
// serves another holder (after a pool reset). The caller hands the agent
// the next token's SHA-256 over its open connection, then calls
// UseAgentToken; from then on the dialers present the next token.
type AgentRekeyer interface {
	// NextAgentToken returns the next token of sandbox id's agent: its
	// generation and SHA-256 (what the agent is to check).
	NextAgentToken(ctx context.Context, id string) (AgentToken, error)
	// UseAgentToken makes next the token every dialer of sandbox id
	// presents, also those of other service instances.
	UseAgentToken(ctx context.Context, id string, next AgentToken) error
}

// AgentToken names a generation of a sandbox's agent token by its SHA-256;
// the token itself stays with the sandboxer.
type AgentToken struct {
	Generation int64
	SHA256     [32]byte
}

// VolumeProvisioner is implemented by sandboxers that keep named volumes'
// data themselves rather than on the service's host (driver/kube: a
// PersistentVolumeClaim per volume). The volumes' records, names, limits
// and holds stay the caller's; a mount of such a volume is a Mount whose
// Volume is the volume's id.
type VolumeProvisioner interface {
	// VolumesAvailable says whether volumes can be made now, and why not
	// (for example: the cluster offers no StorageClass).
	VolumesAvailable(ctx context.Context) (bool, string)
	// CreateVolume makes the storage of spec; a failed CreateVolume
	// leaves nothing behind. Creating what exists with the same spec
	// succeeds (a retry).
	CreateVolume(ctx context.Context, spec VolumeSpec) error
	// RemoveVolume removes volume id's storage and its data. Removing
	// what is gone succeeds.
	RemoveVolume(ctx context.Context, id string) error
}

// VolumeFiles is implemented by VolumeProvisioners that can reach a
// volume's files without a sandbox: a short-lived helper (driver/kube: a
// Pod of the agent image, no network, runc) mounts the volume at
// VolumeFilesRoot, and its agent, the one allowed root being the volume,
// serves the file calls. The caller holds the volume for the helper (its
// holds count Holder like a sandbox) and closes the helper after its call.
type VolumeFiles interface {
	// OpenVolumeFiles starts helper holder mounting volume id (read-only
	// when readOnly) and returns a dialer of its agent (the caller waits
	// for the agent to answer). A failure leaves no helper behind.
	OpenVolumeFiles(ctx context.Context, holder, id string, readOnly bool) (Dialer, error)
	// CloseVolumeFiles removes helper holder; it returns once the helper's
	// processes have ended. Closing what is gone succeeds.
	CloseVolumeFiles(ctx context.Context, holder string) error
	// VolumeFilesHelpers lists the helpers that exist now, by holder.
	VolumeFilesHelpers(ctx context.Context) ([]string, error)
}

// VolumeFilesRoot is where a VolumeFiles helper mounts the volume: its
// agent's only allowed root.
const VolumeFilesRoot = "/mnt/volume"

// VolumeSpec asks a VolumeProvisioner for one volume.
type VolumeSpec struct {
	// ID is the volume's id; what the provisioner makes is named after it.
	ID string
	// Tenant and Name label it for operators; SizeMB is its capacity.
	Tenant, Name string
	SizeMB       int64
}
