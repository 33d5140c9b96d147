package driver

import (
	"context"
	"io"
	"time"

	"genesis.dev/sandbox/internal/sandbox"
)

// Label keys put on every container and image the service creates.
const (
	LabelManaged   = "dev.genesis.managed"    // "true"
	LabelInstance  = "dev.genesis.instance"   // service instance id
	LabelSandbox   = "dev.genesis.sandbox"    // sandbox id
	LabelProfile   = "dev.genesis.profile"    // profile name
	LabelRuntime   = "dev.genesis.runtime"    // runtime name
	LabelCreatedAt = "dev.genesis.created-at" // RFC 3339
	LabelExpiresAt = "dev.genesis.expires-at" // RFC 3339, empty if none
	LabelRecipe    = "dev.genesis.recipe"     // image recipe hash (images only)
	LabelPurpose   = "dev.genesis.purpose"    // "sandbox" or "probe"
	LabelSnapshot  = "dev.genesis.snapshot"   // snapshot id (snapshot images only)
	// LabelVersionPrefix + component: a version an image reports (images only).
	LabelVersionPrefix = "dev.genesis.version."
)

// AgentMountDir is where the agent binary's directory is mounted read-only
// inside every sandbox, and AgentRunDir where the per-sandbox run directory
// (holding the agent's Unix socket) is mounted.
const (
	AgentMountDir  = "/.genesis"
	AgentBinary    = AgentMountDir + "/genesis-agent"
	AgentRunDir    = "/run/genesis"
	AgentSocketRel = "agent.sock"
)

// RestoreRuntime is the OCI runtime, registered in Docker beside runsc
// (cmd/genesis-runsc), that starts a container by restoring it from a
// checkpoint when a restore order names one.
const RestoreRuntime = "runsc-restore"

// RestoreOrderDir is where the service leaves restore orders for
// RestoreRuntime, one file per container: {container id}.json holding a
// RestoreOrder.
const RestoreOrderDir = "/run/genesis/restore"

// RestoreOrder tells RestoreRuntime how to bring a container up from a
// saved state instead of starting it fresh.
type RestoreOrder struct {
	// ImagePath, if set, is a checkpoint's directory (runsc checkpoint
	// --image-path): the container's start restores it, processes and
	// memory included.
	ImagePath string `json:"image_path,omitempty"`
	// Direct reads the image with O_DIRECT (runsc restore --direct).
	Direct bool `json:"direct,omitempty"`
	// RootfsUpperTar, if set, is a tar of a root filesystem's changes
	// (runsc tar rootfs-upper) that the container's create lays over its
	// image (gVisor's dev.gvisor.tar.rootfs.upper annotation); without
	// ImagePath the container then starts fresh on those files.
	RootfsUpperTar string `json:"rootfs_upper_tar,omitempty"`
}

// Driver is the contract of a runtime backend.
type Driver interface {
	// Name is the driver's name, e.g. "docker".
	Name() string
	// Capabilities are the static features of the driver.
	Capabilities() Capabilities
	// Probe inspects the backend now: runtimes present and whether each can
	// really start a container, versions, cgroup version, optional features.
	Probe(ctx context.Context) (ProbeResult, error)
	// Create makes (but does not start) a container for spec and returns its id.
	// A failed Create leaves nothing behind.
	Create(ctx context.Context, spec Spec) (string, error)
	// Start starts a created container.
	Start(ctx context.Context, id string) error
	// Stop stops a running container, killing it after grace.
	Stop(ctx context.Context, id string, grace time.Duration) error
	// Remove force-removes a container. Removing a missing container succeeds.
	Remove(ctx context.Context, id string) error
	// Inspect returns the status of a container; errdefs.ErrNotFound if absent.
	Inspect(ctx context.Context, id string) (Status, error)
	// List returns every container labelled as managed by this service
	// (any instance), running or not.
	List(ctx context.Context) ([]Status, error)
	// ImagePresent reports whether an image is available locally. It never pulls.
	ImagePresent(ctx context.Context, ref string) (bool, error)
}

// ImageImporter is implemented by drivers that can import a root filesystem
// tarball as a local image (CapImageImport).
type ImageImporter interface {
	ImportImage(ctx context.Context, ref string, rootfs io.Reader, labels map[string]string, changes []string) error
}

// Capabilities are the static features of a driver.
type Capabilities struct {
	ImageImport bool `json:"image_import"`
	Pause       bool `json:"pause"`
	Checkpoint  bool `json:"checkpoint"`
	// Networks: the driver implements Networker.
	Networks bool `json:"networks"`
}

// Mount is a bind mount from the host into the container.
type Mount struct {
	Source   string
	Target   string
	ReadOnly bool
	// Volume, when set, names a volume the sandboxer keeps itself (see
	// VolumeProvisioner) by its id, mounted instead of the host path
	// Source, which is then empty.
	Volume string
}

// Spec describes a container to create. All hardening fields are explicit:
// the driver applies exactly what the spec says plus its always-on defaults
// (cap-drop ALL, no-new-privileges, network none unless Network says otherwise).
type Spec struct {
	Name      string            // container name
	Image     string            // local image reference
	Runtime   sandbox.Runtime   // OCI runtime
	Labels    map[string]string // merged with the managed labels by the caller
	Env       []string          // KEY=VALUE
	User      string            // "uid:gid"; empty means the image default
	Cmd       []string          // entrypoint argv (the agent as PID 1)
	WorkDir   string
	Resources sandbox.Resources
	CapAdd    []string          // minimal add-back after dropping all
	ReadOnly  bool              // read-only root filesystem
	Mounts    []Mount           // bind mounts
	Tmpfs     map[string]string // target → options
	Network   string            // "none" (default) or a network name
	// Sysctls are namespaced kernel parameters of the container, e.g.
	// net.ipv4.ip_unprivileged_port_start.
	Sysctls  map[string]string
	Hostname string
	// Restore, if set, brings the container up from a saved state
	// (RestoreOrder) instead of a fresh start: runsc only, through
	// RestoreRuntime; the driver refuses it where it has no such runtime.
	Restore *RestoreOrder
}

// Status is what the backend reports about one container.
type Status struct {
	ID        string
	Name      string
	Labels    map[string]string
	Image     string
	Runtime   string
	State     string // backend state: created, running, exited, ...
	Running   bool
	ExitCode  int
	OOMKilled bool
	Pid       int
	CreatedAt time.Time
	StartedAt time.Time
	// Networks maps each network the container is attached to, by name, to
	// its IPv4 address there (Inspect only).
	Networks map[string]string
}

// RuntimeFeatures are what the probe found a runtime can do to keep a
// sandbox's state, each with a reason when absent.
type RuntimeFeatures struct {
	// Pause freezes a sandbox's processes in place (Pauser).
	Pause Feature `json:"pause"`
	// FSSnapshot saves and restores a sandbox's files: its workspace and
	// its root filesystem's changes.
	FSSnapshot Feature `json:"fs_snapshot"`
	// MemoryCheckpoint saves and restores processes and memory
	// (Checkpointer and Spec.Restore).
	MemoryCheckpoint Feature `json:"memory_checkpoint"`
}

// RuntimeInfo is the probe result for one runtime.
type RuntimeInfo struct {
	// Features are the runtime's state-keeping features.
	Features  RuntimeFeatures `json:"features"`
	Name      string          `json:"name"`
	Path      string          `json:"path,omitempty"`
	Version   string          `json:"version,omitempty"` // kernel reported inside, e.g. 4.19.0-gvisor
	Healthy   bool            `json:"healthy"`           // a smoke container really started and ran
	Error     string          `json:"error,omitempty"`
	SmokeMS   int64           `json:"smoke_ms,omitempty"`
	CheckedAt time.Time       `json:"checked_at"`
	// TimedOut says the smoke run failed only by missing its deadline
	// (a busy host), not by an error of the runtime.
	TimedOut bool `json:"-"`
}

// Feature is an optional capability found by the probe.
type Feature struct {
	Supported bool   `json:"supported"`
	Method    string `json:"method,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// ProbeResult is the dynamic capability report of a driver.
type ProbeResult struct {
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
	CheckedAt     time.Time     `json:"checked_at"`
}

// Runtime returns the info for runtime name, if the probe found it.
func (p ProbeResult) Runtime(name sandbox.Runtime) (RuntimeInfo, bool) {
	for _, r := range p.Runtimes {
		if r.Name == string(name) {
			return r, true
		}
	}
	return RuntimeInfo{}, false
}

// HealthyRuntimes returns the names of runtimes whose smoke run passed.
func (p ProbeResult) HealthyRuntimes() []sandbox.Runtime {
	var out []sandbox.Runtime
	for _, r := range p.Runtimes {
		if r.Healthy {
			out = append(out, sandbox.Runtime(r.Name))
		}
	}
	return out
}

// RuntimeNames are the names of the runtimes the probe found, healthy or not.
func (p ProbeResult) RuntimeNames() []string {
	out := make([]string, len(p.Runtimes))
	for i, r := range p.Runtimes {
		out[i] = r.Name
	}
	return out
}
