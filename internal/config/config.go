package config

import (
	"bytes"
	"cmp"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"genesis.dev/sandbox/images"
	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/tenant"
)

//go:embed default.yaml
var defaultYAML []byte

// Config is the whole service configuration.
type Config struct {
	Addr string `yaml:"addr"`
	// GRPCAddr is the listen address of the native gRPC listener (gRPC
	// only, on grpc-go's own HTTP/2 transport: the fastest path for gRPC
	// clients). Empty: none; gRPC is still served on Addr beside HTTP.
	GRPCAddr string `yaml:"grpc_addr"`
	// PublicURL is the service's base URL as its callers reach it: every
	// URL the service hands back (preview links, endpoints, display and
	// browser links) is built from it, never from a request's Host header.
	// Empty: http://{addr}, with an unspecified address (0.0.0.0, [::])
	// taken as 127.0.0.1 (PublicBaseURL).
	PublicURL        string            `yaml:"public_url"`
	DataDir          string            `yaml:"data_dir"`
	InstanceID       string            `yaml:"instance_id"`
	DefaultRiskLevel sandbox.RiskLevel `yaml:"default_risk_level"`
	Limits           Limits            `yaml:"limits"`
	Capacity         Capacity          `yaml:"capacity"`
	Intervals        Intervals         `yaml:"intervals"`
	Tenants          map[string]Tenant `yaml:"tenants"`
	// AdminAPIKey, if set, is a key of the built-in admin tenant "admin"
	// (admin: true); GENESIS_ADMIN_KEY / --admin-key override it.
	AdminAPIKey string    `yaml:"admin_api_key"`
	Audit       Audit     `yaml:"audit"`
	Network     Network   `yaml:"network"`
	Profiles    []Profile `yaml:"profiles"`
	// ImageRepository prefixes the references of the images built from
	// recipes, <prefix><recipe>:<hash> (default "genesis/").
	ImageRepository string `yaml:"image_repository"`
	// ImageMirror is the Debian archive the image builds fetch from
	// (debootstrap's mirror; apt in the image uses it too). Empty: the
	// one the machine's apt sources name for the recipe's suite.
	ImageMirror string `yaml:"image_mirror"`
	// ImageMirrorTrusted builds from ImageMirror without checking its
	// signatures (an unsigned repository, such as one made of a package
	// cache). Only for a mirror on this machine: a file:/ URI or a
	// loopback address (images.LocalMirror).
	ImageMirrorTrusted bool `yaml:"image_mirror_trusted"`
	// WarmPools switches the profiles' warm pools on (the default) or off;
	// with it off, every lease is a cold create.
	WarmPools bool  `yaml:"warm_pools"`
	Store     Store `yaml:"store"`
	// Ports configures reaching ports inside sandboxes.
	Ports PortsConfig `yaml:"ports"`
	// MCP configures MCP server instances.
	MCP MCP `yaml:"mcp"`
	// Skills configures skills and their runs.
	Skills Skills `yaml:"skills"`
	// Console configures the web console.
	Console Console `yaml:"console"`
	// Metrics configures GET /metrics.
	Metrics Metrics `yaml:"metrics"`
	// Log configures the service's log beyond its level (--log-level).
	Log Log `yaml:"log"`
	// Trace configures the sandboxes' operation traces.
	Trace Trace `yaml:"trace"`
	// Snapshots configures pause, hibernation, snapshots and forks.
	Snapshots Snapshots `yaml:"snapshots"`
	// Volumes configures named volumes (docs/volumes.md).
	Volumes Volumes `yaml:"volumes"`
	// E2B configures the E2B SDK adapter under /e2b (docs/compat-e2b.md).
	E2B E2B `yaml:"e2b"`
	// OpenSandbox configures the OpenSandbox SDK adapter (docs/compat-opensandbox.md).
	OpenSandbox OpenSandbox `yaml:"opensandbox"`
	// Driver is where sandboxes run: "docker" (the default) or
	// "kubernetes" (docs/kubernetes.md).
	Driver string `yaml:"driver"`
	// Kubernetes configures the Kubernetes driver.
	Kubernetes Kubernetes `yaml:"kubernetes"`
}

// Kubernetes configures the Kubernetes driver (driver: kubernetes).
type Kubernetes struct {
	// Kubeconfig is a kubeconfig file; empty means in-cluster.
	Kubeconfig string `yaml:"kubeconfig"`
	// Namespace holds the sandboxes' Pods.
	Namespace string `yaml:"namespace"`
	// AgentImage carries the agent at /genesis-agent (the service's own
	// image); an init container copies it into every sandbox Pod.
	AgentImage string `yaml:"agent_image"`
	// PullPolicy of the Pods: Never, IfNotPresent or Always.
	PullPolicy string `yaml:"pull_policy"`
	// AgentPort is the agent's TCP port in each Pod.
	AgentPort int `yaml:"agent_port"`
	// RuntimeClasses maps each runtime to its RuntimeClass ("" is the
	// cluster's default handler); a runtime not here is not offered.
	RuntimeClasses map[string]string `yaml:"runtime_classes"`
	// RequestRatio is the share of a sandbox's CPU and memory limits its
	// Pod requests from the scheduler: 1 (the default) makes every Pod
	// Guaranteed; less packs more sandboxes on a node that they may then
	// contend for.
	RequestRatio float64 `yaml:"request_ratio"`
	// StorageClass is the StorageClass of named volumes' claims (a
	// PersistentVolumeClaim per volume); empty means the cluster's
	// default. With neither, volumes answer 501 volumes_unavailable.
	StorageClass string `yaml:"storage_class"`
}

// E2B configures the adapter that serves the E2B SDKs.
type E2B struct {
	// Enabled serves /e2b (default true).
	Enabled bool `yaml:"enabled"`
	// Templates maps an E2B template name to a profile; a template not in
	// it (or naming an undefined profile) is refused with 400.
	Templates map[string]string `yaml:"templates"`
	// DefaultTimeoutSeconds is a sandbox's life when create names no
	// timeout (E2B's own default is 300).
	DefaultTimeoutSeconds int64 `yaml:"default_timeout_seconds"`
	// SandboxDomain, if set, turns on E2B's host-based sandbox URLs
	// (https://{port}-{sandbox id}.{domain}): create answers it as the
	// sandbox's domain, and the SDKs, without E2B_SANDBOX_URL, reach every
	// port of the sandbox by that name. The operator provides wildcard DNS
	// for *.domain pointing at Listen and a certificate for it. It may
	// carry a port ("e2b.example.com:8443").
	SandboxDomain string `yaml:"sandbox_domain"`
	// Listen is the address of the host-based listener (for example
	// ":443"); TLSCertFile and TLSKeyFile its certificate (a wildcard for
	// *.SandboxDomain). Without them it speaks plain HTTP, for a TLS
	// terminator in front.
	Listen      string `yaml:"listen"`
	TLSCertFile string `yaml:"tls_cert_file"`
	TLSKeyFile  string `yaml:"tls_key_file"`
}

// OpenSandbox configures the OpenSandbox SDK adapter mounted at
// /opensandbox (OPEN_SANDBOX_DOMAIN=HOST:PORT/opensandbox).
type OpenSandbox struct {
	// Enabled serves /opensandbox (default true).
	Enabled bool `yaml:"enabled"`
	// Images maps an image the SDK names to a profile; an image not in it
	// is refused with 400 (the SDK's own error shape).
	Images map[string]string `yaml:"images"`
	// DefaultTimeoutSeconds is a sandbox's life when create names no
	// timeout (the SDK sends 600 unless told otherwise).
	DefaultTimeoutSeconds int64 `yaml:"default_timeout_seconds"`
}

// Trace configures the operation traces (docs/trace.md).
type Trace struct {
	// Record, when false, leaves browser actions and jobs out of the
	// traces and turns off pause and abort (the traces still take the
	// caller's events). Default true.
	Record bool `yaml:"record"`
	// Screenshots is when a computer action's screenshots are kept for the
	// trace: off, after (default: after each input action) or both
	// (before and after), each with a thumbnail.
	Screenshots string `yaml:"screenshots"`
}

// Snapshots configures the saved states of sandboxes (docs/snapshots.md).
type Snapshots struct {
	// Dir holds the snapshots' files; relative paths are under the data
	// dir.
	Dir string `yaml:"dir"`
	// Retention is how long a snapshot is kept after it is taken (0: until
	// it is deleted).
	Retention time.Duration `yaml:"retention"`
	// MaxPerTenant and MaxBytesPerTenant bound what one tenant keeps (0:
	// no bound).
	MaxPerTenant      int   `yaml:"max_per_tenant"`
	MaxBytesPerTenant int64 `yaml:"max_bytes_per_tenant"`
	// MaxBytesPerSnapshot bounds one snapshot's files: its workspace and
	// its root filesystem's changes (0: no bound). A workspace's files
	// are bounded by the sandbox's disk size too.
	MaxBytesPerSnapshot int64 `yaml:"max_bytes_per_snapshot"`
	// MaxFork bounds the copies of one fork.
	MaxFork int `yaml:"max_fork"`
}

// Volumes configures tenants' named volumes (docs/volumes.md).
type Volumes struct {
	// Dir holds the volumes' images and mount points; relative paths are
	// under the data dir.
	Dir string `yaml:"dir"`
	// MaxSizeMB bounds one volume; MaxMBPerTenant the summed size of a
	// tenant's volumes (its disk quota for volumes); MaxPerTenant their
	// number (0: no bound).
	MaxSizeMB      int64 `yaml:"max_size_mb"`
	MaxMBPerTenant int64 `yaml:"max_mb_per_tenant"`
	MaxPerTenant   int   `yaml:"max_per_tenant"`
	// Roots are the container paths strictly below which a sandbox may
	// mount a volume.
	Roots []string `yaml:"roots"`
}

// Console configures the web console served at /console/.
type Console struct {
	// Enabled serves the console (default true); off, /console/ is an
	// unknown route like any other.
	Enabled bool `yaml:"enabled"`
}

// Metrics configures the Prometheus exposition at GET /metrics.
type Metrics struct {
	// TenantLabels names tenants in the per-tenant series (the fair
	// queues') of a scrape that sends an admin key. Off (the default), and
	// for a scrape without a key, /metrics names no tenant.
	TenantLabels bool `yaml:"tenant_labels"`
}

// Log configures the service's log.
type Log struct {
	// SlowRequest: an API request that takes longer than this beyond the
	// wait its caller asked for (an exec's time limit, a create's or
	// lease's wait_seconds) logs one warning "slow request" with where its
	// time went (docs/operations.md); streams never do. 0: none.
	SlowRequest time.Duration `yaml:"slow_request"`
}

// AdminTenant is the tenant that owns admin_api_key.
const AdminTenant = "admin"

// Audit configures the audit log.
type Audit struct {
	// Retention is how long audit records are kept (pruned by the reconciler).
	Retention time.Duration `yaml:"retention"`
}

// Store selects the state store.
type Store struct {
	// Driver is "sqlite" (a file in the data dir) or "postgres" (shared by
	// several service instances).
	Driver string `yaml:"driver"`
	// DSN is the PostgreSQL connection string; the environment variable
	// GENESIS_STORE_DSN, when set, overrides it (keep passwords out of files).
	DSN string `yaml:"dsn"`
}

// PoolSpec sizes the warm pool of one (profile, runtime).
type PoolSpec struct {
	Runtime sandbox.Runtime `yaml:"runtime"`
	// MinIdle idle sandboxes are kept warm, refilled right after each claim.
	MinIdle int `yaml:"min_idle"`
	// MaxTotal bounds the live sandboxes of this profile and runtime made by
	// this instance (idle and leased); the pool never grows past it.
	MaxTotal int `yaml:"max_total"`
	// SnapshotID, if set, feeds the pool from a snapshot (snap_…) instead
	// of the profile's image: each member is made from the snapshot's
	// files, and its processes and memory where the snapshot holds them,
	// and a lease that names the snapshot takes one. The snapshot's
	// profile and runtime must be the pool's; it cannot be deleted while
	// the pool names it. A profile may have one such pool per runtime and
	// snapshot beside its plain pool (docs/snapshots.md).
	SnapshotID string `yaml:"snapshot_id"`
}

// LeasePolicy bounds the leases of a profile.
type LeasePolicy struct {
	// DefaultTTLSeconds is the lease length when a request gives none;
	// 0 takes limits.default_ttl_seconds.
	DefaultTTLSeconds int64 `yaml:"default_ttl_seconds"`
	// MaxTTLSeconds caps ttl_seconds; 0 takes limits.max_ttl_seconds.
	MaxTTLSeconds int64 `yaml:"max_ttl_seconds"`
	// OnRelease is what happens to a released or expired lease's sandbox:
	// destroy (the default; the pool makes a fresh member) or reset (a
	// sandbox taken from the pool and still like its members is wiped and
	// returned to it; anything else is destroyed).
	OnRelease ReleaseAction `yaml:"on_release"`
	// HibernateIdle, when not 0, hibernates a leased sandbox that has been
	// idle (no job started, no state change) that long; the next call that
	// needs it wakes it (docs/snapshots.md).
	HibernateIdle time.Duration `yaml:"hibernate_idle"`
}

// ReleaseAction is a profile's lease.on_release.
type ReleaseAction string

// Release actions; "" means ReleaseDestroy.
const (
	ReleaseDestroy ReleaseAction = "destroy"
	ReleaseReset   ReleaseAction = "reset"
)

// Resets reports whether released sandboxes of the profile are reset and
// returned to their pool rather than destroyed.
func (lp LeasePolicy) Resets() bool { return lp.OnRelease == ReleaseReset }

// Limits bound what a request may ask for.
type Limits struct {
	MaxBodyBytes         int64   `yaml:"max_body_bytes"`
	DefaultTTLSeconds    int64   `yaml:"default_ttl_seconds"`
	MaxTTLSeconds        int64   `yaml:"max_ttl_seconds"`
	MaxCPU               float64 `yaml:"max_cpu"`
	MaxMemoryMB          int64   `yaml:"max_memory_mb"`
	MaxPids              int64   `yaml:"max_pids"`
	DefaultExecTimeoutMS int64   `yaml:"default_exec_timeout_ms"`
	MaxExecTimeoutMS     int64   `yaml:"max_exec_timeout_ms"`
	DefaultOutputBytes   int64   `yaml:"default_output_bytes"`
	MaxOutputBytes       int64   `yaml:"max_output_bytes"`
	MaxSandboxes         int     `yaml:"max_sandboxes"`
	// MaxDiskMB caps resources.disk_mb, the size of a sandbox's workspace.
	MaxDiskMB int64 `yaml:"max_disk_mb"`
	// Files bound the file operations.
	Files FileLimits `yaml:"files"`
	// Artifacts caps what one job may keep as artifacts.
	Artifacts ArtifactLimits `yaml:"artifacts"`
}

// ArtifactLimits cap the artifacts of one job. A request may lower them,
// never raise them.
type ArtifactLimits struct {
	MaxFileBytes  int64 `yaml:"max_file_bytes"`
	MaxTotalBytes int64 `yaml:"max_total_bytes"`
	MaxFiles      int   `yaml:"max_files"`
}

// FileLimits bound the file operations of the API. Zero is not a valid
// value: every key must be positive.
type FileLimits struct {
	// MaxUploadBytes is the largest file one upload (or one part of a
	// multipart upload, or one extracted archive) may write; larger
	// announced bodies get 413 before anything is written.
	MaxUploadBytes int64 `yaml:"max_upload_bytes"`
	// MaxMultipartBytes bounds the whole body of one multipart upload.
	MaxMultipartBytes int64 `yaml:"max_multipart_bytes"`
	// MaxFilesPerCall bounds the files of one multipart upload and the
	// paths of one batch replace.
	MaxFilesPerCall int `yaml:"max_files_per_call"`
	// MaxPathBytes bounds a path as given (at most 4096, the agent's own bound).
	MaxPathBytes int `yaml:"max_path_bytes"`
	// MaxSearchResults caps the matches of one search.
	MaxSearchResults int `yaml:"max_search_results"`
	// MaxSearchTimeout caps the time of one search.
	MaxSearchTimeout time.Duration `yaml:"max_search_timeout"`
	// MaxArchiveEntries caps the entries of one extracted archive.
	MaxArchiveEntries int `yaml:"max_archive_entries"`
	// CallTimeout bounds a metadata call (stat, list, mkdir, move, delete, chmod).
	CallTimeout time.Duration `yaml:"call_timeout"`
	// TransferTimeout bounds a whole upload or download.
	TransferTimeout time.Duration `yaml:"transfer_timeout"`
}

// MaxPathBytesHard is the largest max_path_bytes: the agent's own bound.
const MaxPathBytesHard = 4096

// MinDiskMB is the smallest workspace a disk quota may ask for.
const MinDiskMB = 16

// Capacity is what this host offers to all its sandboxes together; create
// and lease requests beyond it wait in fair per-tenant queues (see
// internal/admission). Zero totals are derived from the host.
type Capacity struct {
	Sandboxes int     `yaml:"sandboxes"` // live sandboxes; 0: limits.max_sandboxes
	CPU       float64 `yaml:"cpu"`       // sum of CPU limits; 0: host CPUs × cpu_overcommit
	MemoryMB  int64   `yaml:"memory_mb"` // sum of memory limits; 0: host memory × memory_overcommit
	// CPUOvercommit and MemoryOvercommit scale the host's CPUs and memory
	// when cpu or memory_mb is 0: sandbox limits are ceilings, not
	// reservations, and most sandboxes idle most of the time.
	CPUOvercommit    float64 `yaml:"cpu_overcommit"`
	MemoryOvercommit float64 `yaml:"memory_overcommit"`
	// MaxWaitSeconds bounds a request's wait_seconds.
	MaxWaitSeconds int64 `yaml:"max_wait_seconds"`
}

// Totals returns the capacity with zero totals derived from the host's CPUs
// and memory (hostMemoryMB ≤ 0: unknown, then memory is not what binds).
func (c Capacity) Totals(l Limits, hostCPUs int, hostMemoryMB int64) (cpu float64, memoryMB int64, sandboxes int) {
	cpu, memoryMB, sandboxes = c.CPU, c.MemoryMB, c.Sandboxes
	if sandboxes == 0 {
		sandboxes = l.MaxSandboxes
	}
	if cpu == 0 {
		cpu = float64(max(hostCPUs, 1)) * c.CPUOvercommit
	}
	if memoryMB == 0 {
		memoryMB = int64(float64(hostMemoryMB) * c.MemoryOvercommit)
		if hostMemoryMB <= 0 {
			memoryMB = l.MaxMemoryMB * int64(sandboxes)
		}
	}
	return cpu, memoryMB, sandboxes
}

// Intervals are background periods and deadlines.
type Intervals struct {
	Probe             time.Duration `yaml:"probe"`
	Reconcile         time.Duration `yaml:"reconcile"`
	OrphanGrace       time.Duration `yaml:"orphan_grace"`
	LogRetention      time.Duration `yaml:"log_retention"`
	ArtifactRetention time.Duration `yaml:"artifact_retention"`
	AgentReadyTimeout time.Duration `yaml:"agent_ready_timeout"`
	DockerCallTimeout time.Duration `yaml:"docker_call_timeout"`
	// PoolCheck is how often idle pool members are health-checked (agent
	// ping) and pools topped up.
	PoolCheck time.Duration `yaml:"pool_check"`
	// DrainTimeout is how long a SIGTERM drain lets active leases finish
	// before everything of this instance is destroyed.
	DrainTimeout time.Duration `yaml:"drain_timeout"`
}

// Tenant is the operator's policy for one tenant.
type Tenant struct {
	// MinRiskLevel raises every request of the tenant to at least this level.
	MinRiskLevel sandbox.RiskLevel `yaml:"min_risk_level"`
	// MaxToolRiskLevel is the highest risk of an MCP server instance or a
	// skill run the tenant may start; the lower of it and mcp. or
	// skills.max_risk_level applies.
	MaxToolRiskLevel sandbox.RiskLevel `yaml:"max_tool_risk_level"`
	// APIKeys are extra keys for this tenant (plain text in the file; they
	// are compared in constant time and never logged).
	APIKeys []string `yaml:"api_keys"`
	// ApproverKeys are keys of this tenant with the scope approve: they
	// also decide MCP calls held for approval and approve changed tool
	// definitions (a person's keys, not an agent's).
	ApproverKeys []string `yaml:"approver_keys"`
	// Weight is the tenant's share in fair queueing (0: the default 1).
	Weight int `yaml:"weight"`
	// Admin lets the tenant's keys use the admin API (tenants, keys, every
	// tenant's audit records).
	Admin bool `yaml:"admin"`
	// Quotas bound what the tenant holds at once (0: unlimited).
	Quotas tenant.Quotas `yaml:"quotas"`
	// Network, if set, is the network policy of the tenant's sandboxes
	// whose request names none (it wins over the profile's).
	Network *NetworkPolicy `yaml:"network"`
}

// Profile is a runtime profile: a named recipe for sandboxes.
type Profile struct {
	Name             string            `yaml:"name"`
	Description      string            `yaml:"description"`
	Recipe           string            `yaml:"recipe"` // image recipe name under images/
	Image            string            `yaml:"image"`  // explicit image ref; overrides recipe
	AllowedRuntimes  []sandbox.Runtime `yaml:"allowed_runtimes"`
	DefaultRiskLevel sandbox.RiskLevel `yaml:"default_risk_level"`
	Resources        sandbox.Resources `yaml:"resources"`
	Network          NetworkPolicy     `yaml:"network"`
	User             string            `yaml:"user"`
	ReadOnlyRoot     bool              `yaml:"read_only_root"`
	CapAdd           []string          `yaml:"cap_add"`
	// FileRoots are the directories inside the sandbox the file API may
	// touch (absolute, clean, or "~" for the sandbox user's home, which the
	// agent looks up); empty means DefaultFileRoots. Relative paths are
	// resolved against the first.
	FileRoots []string `yaml:"file_roots"`
	// VolumeRoots, if set, narrows where named volumes may be mounted in
	// this profile's sandboxes: strictly below one of these, as well as
	// below one of the service's volumes.roots (docs/volumes.md).
	VolumeRoots []string    `yaml:"volume_roots"`
	Pools       []PoolSpec  `yaml:"pools"`
	Lease       LeasePolicy `yaml:"lease"`
	// Ports is which ports inside the sandbox callers may reach.
	Ports PortPolicy `yaml:"ports"`
	// Endpoints name ports the sandboxes serve (listed with their URLs).
	Endpoints []EndpointSpec `yaml:"endpoints"`
	// Services are started once a sandbox is ready and kept running.
	Services []ServiceSpec `yaml:"services"`
	// Browser, if set, makes this a browser profile (config.BrowserSpec).
	Browser *BrowserSpec `yaml:"browser"`
	// Desktop, if set, makes this a desktop profile (config.DesktopSpec).
	Desktop *DesktopSpec `yaml:"desktop"`
}

// DefaultFileRoot is the first file root of a profile that names none:
// relative paths are resolved against it.
const DefaultFileRoot = "/workspace"

// DefaultFileRoots are the file roots of a profile that names none: the
// places the sandbox user may write to itself — the workspace, /tmp and
// its home ("~"). The agent confines every path to them, as that user.
func DefaultFileRoots() []string {
	return []string{DefaultFileRoot, "/tmp", agentproto.HomeRoot}
}

// Roots returns the profile's file roots, DefaultFileRoots when it names
// none.
func (p *Profile) Roots() []string {
	if len(p.FileRoots) == 0 {
		return DefaultFileRoots()
	}
	return p.FileRoots
}

// LeaseTTL returns the default and maximum lease lengths of p in seconds.
func (c *Config) LeaseTTL(p *Profile) (def, maxTTL int64) {
	def, maxTTL = p.Lease.DefaultTTLSeconds, p.Lease.MaxTTLSeconds
	if maxTTL == 0 {
		maxTTL = c.Limits.MaxTTLSeconds
	}
	if def == 0 {
		def = min(c.Limits.DefaultTTLSeconds, maxTTL)
	}
	return def, maxTTL
}

// Profile returns the profile called name.
func (c *Config) Profile(name string) (*Profile, bool) {
	for i := range c.Profiles {
		if c.Profiles[i].Name == name {
			return &c.Profiles[i], true
		}
	}
	return nil, false
}

// Default returns the embedded defaults, validated.
func Default() (*Config, error) { return Load("") }

// Load reads the embedded defaults and lays the YAML file at path (if not
// empty) over them, then validates. Unknown keys in the file are errors.
func Load(path string) (*Config, error) {
	var c Config
	if err := decode(defaultYAML, &c); err != nil {
		return nil, fmt.Errorf("embedded defaults: %w", err)
	}
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("config file: %w", err)
		}
		if err := decode(b, &c); err != nil {
			return nil, fmt.Errorf("config file %s: %w", path, err)
		}
	}
	if dsn := os.Getenv("GENESIS_STORE_DSN"); dsn != "" {
		c.Store.DSN = dsn
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

func decode(b []byte, c *Config) error {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		return errdefs.Mark(errors.New(yamlMessage(err)), errdefs.ErrInvalidArgument)
	}
	return nil
}

// unknownField is how the YAML decoder names a key the config does not have.
var unknownField = regexp.MustCompile(`field (\S+) not found in type \S+`)

// yamlMessage is a decoding error of a config file as a person reads it:
// its lines on one line, and an unknown key called so rather than by the
// Go type it is not a field of.
func yamlMessage(err error) string {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err.Error()
	}
	msgs := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		msgs[i] = unknownField.ReplaceAllString(m, "unknown key $1")
	}
	return strings.Join(msgs, "; ")
}

var profileName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// Validate checks every key and reports each offending one, joined with
// errors.Join in the order of their keys (ErrInvalidArgument).
func (c *Config) Validate() error {
	var v problems
	c.validate(&v)
	return v.err()
}

func (c *Config) validate(v *problems) {
	bad := v.add
	if c.Addr == "" {
		bad("addr", "must not be empty")
	}
	if c.GRPCAddr != "" && c.GRPCAddr == c.Addr {
		bad("grpc_addr", "must differ from addr (addr serves gRPC too)")
	}
	if c.DataDir == "" {
		bad("data_dir", "must not be empty")
	}
	switch c.Trace.Screenshots {
	case "off", "after", "both":
	default:
		bad("trace.screenshots", "must be off, after or both, got %q", c.Trace.Screenshots)
	}
	// A template naming a profile that a config left out is refused when a
	// sandbox is created from it, not here: the defaults' table must not
	// stop a config that replaces the profiles from loading.
	if (c.E2B.Listen == "") != (c.E2B.SandboxDomain == "") {
		bad("e2b.listen", "e2b.listen and e2b.sandbox_domain go together (the host-based listener serves *.sandbox_domain), got listen %q, domain %q", c.E2B.Listen, c.E2B.SandboxDomain)
	}
	if (c.E2B.TLSCertFile == "") != (c.E2B.TLSKeyFile == "") {
		bad("e2b.tls_cert_file", "e2b.tls_cert_file and e2b.tls_key_file go together")
	}
	if d := c.E2B.SandboxDomain; d != "" && (strings.Contains(d, "/") || strings.HasPrefix(d, ".") || strings.Contains(d, "://")) {
		bad("e2b.sandbox_domain", "must be a host name with an optional port (e2b.example.com, e2b.example.com:8443), got %q", d)
	}
	switch c.Driver {
	case "docker":
	case "kubernetes":
		k := c.Kubernetes
		if k.Namespace == "" {
			bad("kubernetes.namespace", "is required with driver kubernetes")
		}
		if k.AgentImage == "" {
			bad("kubernetes.agent_image", "is required with driver kubernetes (an image with the agent at /genesis-agent)")
		}
		if k.AgentPort < 1 || k.AgentPort > 65535 {
			bad("kubernetes.agent_port", "must be a port number, got %d", k.AgentPort)
		}
		switch k.PullPolicy {
		case "Never", "IfNotPresent", "Always":
		default:
			bad("kubernetes.pull_policy", "must be Never, IfNotPresent or Always, got %q", k.PullPolicy)
		}
		if k.RequestRatio <= 0 || k.RequestRatio > 1 {
			bad("kubernetes.request_ratio", "must be in (0, 1], got %v", k.RequestRatio)
		}
		if len(k.RuntimeClasses) == 0 {
			bad("kubernetes.runtime_classes", "must map at least one runtime to a RuntimeClass")
		}
		for rt := range k.RuntimeClasses {
			if rt != "runc" && rt != "runsc" {
				bad("kubernetes.runtime_classes", "names runtime %q; the runtimes are runc and runsc", rt)
			}
		}
	default:
		bad("driver", "must be docker or kubernetes, got %q", c.Driver)
	}
	if c.OpenSandbox.DefaultTimeoutSeconds < 0 {
		bad("opensandbox.default_timeout_seconds", "must not be negative, got %d", c.OpenSandbox.DefaultTimeoutSeconds)
	}
	if c.E2B.DefaultTimeoutSeconds < 0 {
		bad("e2b.default_timeout_seconds", "must not be negative, got %d", c.E2B.DefaultTimeoutSeconds)
	}
	if c.DefaultRiskLevel.Rank() < 0 {
		bad("default_risk_level", "unknown risk level %q", c.DefaultRiskLevel)
	}
	l := c.Limits
	for key, n := range map[string]int64{
		"limits.max_body_bytes": l.MaxBodyBytes, "limits.default_ttl_seconds": l.DefaultTTLSeconds,
		"limits.max_ttl_seconds": l.MaxTTLSeconds, "limits.max_memory_mb": l.MaxMemoryMB, "limits.max_pids": l.MaxPids,
		"limits.default_exec_timeout_ms": l.DefaultExecTimeoutMS, "limits.max_exec_timeout_ms": l.MaxExecTimeoutMS,
		"limits.default_output_bytes": l.DefaultOutputBytes, "limits.max_output_bytes": l.MaxOutputBytes,
		"limits.max_sandboxes": int64(l.MaxSandboxes), "limits.max_disk_mb": l.MaxDiskMB,
		"limits.files.max_upload_bytes": l.Files.MaxUploadBytes, "limits.files.max_multipart_bytes": l.Files.MaxMultipartBytes,
		"limits.files.max_files_per_call": int64(l.Files.MaxFilesPerCall), "limits.files.max_path_bytes": int64(l.Files.MaxPathBytes),
		"limits.files.max_search_results": int64(l.Files.MaxSearchResults), "limits.files.max_archive_entries": int64(l.Files.MaxArchiveEntries),
		"limits.files.max_search_timeout": int64(l.Files.MaxSearchTimeout), "limits.files.call_timeout": int64(l.Files.CallTimeout),
		"limits.files.transfer_timeout":   int64(l.Files.TransferTimeout),
		"limits.artifacts.max_file_bytes": l.Artifacts.MaxFileBytes, "limits.artifacts.max_total_bytes": l.Artifacts.MaxTotalBytes,
		"limits.artifacts.max_files": int64(l.Artifacts.MaxFiles),
	} {
		if n <= 0 {
			bad(key, "must be positive, got %d", n)
		}
	}
	if l.Files.MaxPathBytes > MaxPathBytesHard {
		bad("limits.files.max_path_bytes", "must be at most %d, got %d", MaxPathBytesHard, l.Files.MaxPathBytes)
	}
	if l.MaxDiskMB < MinDiskMB {
		bad("limits.max_disk_mb", "must be at least %d, got %d", MinDiskMB, l.MaxDiskMB)
	}
	if l.MaxCPU <= 0 {
		bad("limits.max_cpu", "must be positive, got %v", l.MaxCPU)
	}
	if l.DefaultTTLSeconds > l.MaxTTLSeconds {
		bad("limits.default_ttl_seconds", "exceeds limits.max_ttl_seconds")
	}
	if l.DefaultExecTimeoutMS > l.MaxExecTimeoutMS {
		bad("limits.default_exec_timeout_ms", "exceeds limits.max_exec_timeout_ms")
	}
	if l.Artifacts.MaxFileBytes > l.Artifacts.MaxTotalBytes {
		bad("limits.artifacts.max_file_bytes", "exceeds limits.artifacts.max_total_bytes")
	}
	if l.DefaultOutputBytes > l.MaxOutputBytes {
		bad("limits.default_output_bytes", "exceeds limits.max_output_bytes")
	}
	cp := c.Capacity
	if cp.Sandboxes < 0 {
		bad("capacity.sandboxes", "must not be negative, got %d", cp.Sandboxes)
	}
	if cp.CPU < 0 || math.IsNaN(cp.CPU) || math.IsInf(cp.CPU, 0) {
		bad("capacity.cpu", "must not be negative, got %v", cp.CPU)
	}
	if cp.MemoryMB < 0 {
		bad("capacity.memory_mb", "must not be negative, got %d", cp.MemoryMB)
	}
	if !(cp.CPUOvercommit > 0 && cp.CPUOvercommit <= 1000) {
		bad("capacity.cpu_overcommit", "must be in (0, 1000], got %v", cp.CPUOvercommit)
	}
	if !(cp.MemoryOvercommit > 0 && cp.MemoryOvercommit <= 1000) {
		bad("capacity.memory_overcommit", "must be in (0, 1000], got %v", cp.MemoryOvercommit)
	}
	if cp.MaxWaitSeconds < 0 {
		bad("capacity.max_wait_seconds", "must not be negative, got %d", cp.MaxWaitSeconds)
	}
	iv := c.Intervals
	for key, d := range map[string]time.Duration{
		"intervals.probe": iv.Probe, "intervals.reconcile": iv.Reconcile, "intervals.orphan_grace": iv.OrphanGrace,
		"intervals.log_retention": iv.LogRetention, "intervals.artifact_retention": iv.ArtifactRetention,
		"intervals.agent_ready_timeout": iv.AgentReadyTimeout, "intervals.docker_call_timeout": iv.DockerCallTimeout,
		"intervals.pool_check": iv.PoolCheck, "intervals.drain_timeout": iv.DrainTimeout,
	} {
		if d <= 0 {
			bad(key, "must be a positive duration, got %v", d)
		}
	}
	if c.Log.SlowRequest < 0 {
		bad("log.slow_request", "must not be negative (0 turns the slow request log off), got %v", c.Log.SlowRequest)
	}
	for name, t := range c.Tenants {
		if !profileName.MatchString(name) {
			bad("tenants."+name, "tenant names are lowercase letters, digits and dashes")
		}
		if t.MinRiskLevel != "" && t.MinRiskLevel.Rank() < 0 {
			bad("tenants."+name+".min_risk_level", "unknown risk level %q", t.MinRiskLevel)
		}
		if t.MaxToolRiskLevel != "" && t.MaxToolRiskLevel.Rank() < 0 {
			bad("tenants."+name+".max_tool_risk_level", "unknown risk level %q", t.MaxToolRiskLevel)
		}
		for i, k := range t.APIKeys {
			if len(k) < 16 {
				bad(fmt.Sprintf("tenants.%s.api_keys[%d]", name, i), "API keys must be at least 16 characters")
			}
		}
		for i, k := range t.ApproverKeys {
			if len(k) < 16 {
				bad(fmt.Sprintf("tenants.%s.approver_keys[%d]", name, i), "API keys must be at least 16 characters")
			}
			if slices.Contains(t.APIKeys, k) {
				bad(fmt.Sprintf("tenants.%s.approver_keys[%d]", name, i), "the key is in api_keys too; list it in one of them")
			}
		}
		if t.Weight < 0 || t.Weight > 1000 {
			bad("tenants."+name+".weight", "must be between 1 and 1000 (0: the default 1), got %d", t.Weight)
		}
		if err := t.Quotas.Validate("tenants." + name + ".quotas"); err != nil {
			v.wrap("tenants."+name+".quotas", err)
		}
	}
	if c.AdminAPIKey != "" {
		if len(c.AdminAPIKey) < 16 {
			bad("admin_api_key", "must be at least 16 characters")
		}
		if t, ok := c.Tenants[AdminTenant]; ok && !t.Admin {
			bad("tenants."+AdminTenant+".admin", "admin_api_key belongs to the tenant %q, which must then have admin: true", AdminTenant)
		}
	}
	if c.Audit.Retention <= 0 {
		bad("audit.retention", "must be a positive duration, got %v", c.Audit.Retention)
	}
	c.Network.validate(v)
	for name, t := range c.Tenants {
		if t.Network == nil {
			continue
		}
		if err := t.Network.Validate(c.Network.OperatorConfig); err != nil {
			bad("tenants."+name+".network", "%v", err)
		}
	}
	switch c.Store.Driver {
	case "sqlite":
		if c.Store.DSN != "" {
			bad("store.dsn", "is for the postgres driver; sqlite keeps its file in the data dir")
		}
	case "postgres":
		if c.Store.DSN == "" {
			bad("store.dsn", "the postgres driver needs a DSN (or GENESIS_STORE_DSN)")
		}
	default:
		bad("store.driver", "must be sqlite or postgres, got %q", c.Store.Driver)
	}
	if len(c.Profiles) == 0 {
		bad("profiles", "at least one profile is required")
	}
	if !images.ValidRepository(c.ImageRepository) {
		bad("image_repository", "must be lower-case letters, digits, '-', '_', '.' and '/', ending in '/' (like genesis/), got %q", c.ImageRepository)
	}
	if c.ImageMirror != "" && !images.ValidMirror(c.ImageMirror) {
		bad("image_mirror", "must be an http://, https:// or file:/ URI of a Debian archive, got %q", c.ImageMirror)
	}
	if c.ImageMirrorTrusted && !images.LocalMirror(c.ImageMirror) {
		bad("image_mirror_trusted", "trusts an unsigned mirror only on this machine: image_mirror must be a file:/ URI or a loopback address like http://127.0.0.1:PORT/, got %q", c.ImageMirror)
	}
	c.validatePorts(v)
	c.validateBrowser(v)
	c.validateDesktop(v)
	c.validateMCP(v)
	c.validateSkills(v)
	seen := map[string]bool{}
	for i, p := range c.Profiles {
		key := fmt.Sprintf("profiles[%d]", i)
		if profileName.MatchString(p.Name) {
			key = "profiles." + p.Name
		} else {
			bad(key+".name", "%q is not a valid profile name", p.Name)
		}
		if seen[p.Name] {
			bad(key, "duplicate profile")
			continue
		}
		seen[p.Name] = true
		if p.Recipe == "" && p.Image == "" {
			bad(key, "needs recipe or image")
		}
		if len(p.AllowedRuntimes) == 0 {
			bad(key+".allowed_runtimes", "must list at least one runtime")
		}
		for _, r := range p.AllowedRuntimes {
			if r.Isolation() == 0 {
				bad(key+".allowed_runtimes", "unknown runtime %q", r)
			}
		}
		if p.DefaultRiskLevel != "" && p.DefaultRiskLevel.Rank() < 0 {
			bad(key+".default_risk_level", "unknown risk level %q", p.DefaultRiskLevel)
		}
		r := p.Resources
		if r.CPU <= 0 || r.CPU > l.MaxCPU {
			bad(key+".resources.cpu", "must be in (0, %v]", l.MaxCPU)
		}
		if r.MemoryMB < 16 || r.MemoryMB > l.MaxMemoryMB {
			bad(key+".resources.memory_mb", "must be in [16, %d]", l.MaxMemoryMB)
		}
		if r.Pids < 8 || r.Pids > l.MaxPids {
			bad(key+".resources.pids", "must be in [8, %d]", l.MaxPids)
		}
		if r.DiskMB != 0 && (r.DiskMB < MinDiskMB || r.DiskMB > l.MaxDiskMB) {
			bad(key+".resources.disk_mb", "must be 0 (no quota) or in [%d, %d], got %d", MinDiskMB, l.MaxDiskMB, r.DiskMB)
		}
		for j, root := range p.FileRoots {
			switch {
			case root == agentproto.HomeRoot:
			case strings.ContainsAny(root, ":\x00"):
				bad(fmt.Sprintf("%s.file_roots[%d]", key, j), "%q must be an absolute clean path other than / without ':', or ~", root)
			default:
				// The agent's binary and run directories (driver.AgentMountDir,
				// driver.AgentRunDir) are never reachable; the agent itself
				// drops such a root too.
				if err := agentproto.CheckRoot(root, "/.genesis", "/run/genesis"); err != nil {
					bad(fmt.Sprintf("%s.file_roots[%d]", key, j), "%q must be an absolute clean path other than / without ':', or ~, and reach neither /proc, /sys, /dev nor the agent's /.genesis and /run/genesis", root)
				}
			}
		}
		for j, root := range p.VolumeRoots {
			if !path.IsAbs(root) || path.Clean(root) != root || root == "/" || strings.ContainsAny(root, ":,\x00") {
				bad(fmt.Sprintf("%s.volume_roots[%d]", key, j), "%q must be an absolute clean path other than / without ':' or ','", root)
			}
		}
		if err := p.Network.Validate(c.Network.OperatorConfig); err != nil {
			bad(key+".network", "%v", err)
		}
		c.validateLeasePools(v, key, &p)
	}
}

func (c *Config) validateLeasePools(v *problems, key string, p *Profile) {
	bad := v.add
	lp := p.Lease
	if lp.MaxTTLSeconds < 0 || lp.MaxTTLSeconds > c.Limits.MaxTTLSeconds {
		bad(key+".lease.max_ttl_seconds", "must be in [0, limits.max_ttl_seconds %d], got %d", c.Limits.MaxTTLSeconds, lp.MaxTTLSeconds)
	}
	if lp.DefaultTTLSeconds < 0 {
		bad(key+".lease.default_ttl_seconds", "must not be negative, got %d", lp.DefaultTTLSeconds)
	} else if def, maxTTL := c.LeaseTTL(p); def > maxTTL {
		bad(key+".lease.default_ttl_seconds", "%d exceeds the maximum %d", def, maxTTL)
	}
	switch lp.OnRelease {
	case "", ReleaseDestroy:
	case ReleaseReset:
		// The agent runs as the profile's user and wipes what that user
		// could write; as root it could not vouch for anything.
		if uid, _, _ := strings.Cut(p.User, ":"); uid == "" || uid == "0" || uid == "root" {
			bad(key+".lease.on_release", "reset needs the profile to run as a non-root user (user: \"uid:gid\"), got user %q", p.User)
		}
	default:
		bad(key+".lease.on_release", "must be destroy or reset, got %q", lp.OnRelease)
	}
	type poolOf struct {
		runtime  sandbox.Runtime
		snapshot string
	}
	seen := map[poolOf]bool{}
	for i, ps := range p.Pools {
		pk := fmt.Sprintf("%s.pools[%d]", key, i)
		switch {
		case !slices.Contains(p.AllowedRuntimes, ps.Runtime):
			bad(pk+".runtime", "%q is not in the profile's allowed_runtimes", ps.Runtime)
		case seen[poolOf{ps.Runtime, ps.SnapshotID}] && ps.SnapshotID != "":
			bad(pk+".snapshot_id", "a second pool for runtime %s and snapshot %s", ps.Runtime, ps.SnapshotID)
		case seen[poolOf{ps.Runtime, ps.SnapshotID}]:
			bad(pk+".runtime", "a second pool for runtime %s", ps.Runtime)
		}
		seen[poolOf{ps.Runtime, ps.SnapshotID}] = true
		if ps.SnapshotID != "" && !sandbox.ValidID("snap", ps.SnapshotID) {
			bad(pk+".snapshot_id", "%.70q is not a snapshot id (snap_…)", ps.SnapshotID)
		}
		if ps.MinIdle < 0 {
			bad(pk+".min_idle", "must not be negative, got %d", ps.MinIdle)
		}
		if ps.MaxTotal <= 0 {
			bad(pk+".max_total", "must be positive, got %d", ps.MaxTotal)
		} else if ps.MinIdle > ps.MaxTotal {
			bad(pk+".min_idle", "%d exceeds max_total %d", ps.MinIdle, ps.MaxTotal)
		}
	}
}

// problems collects the invalid keys of a config.
type problems []keyProblem

// keyProblem is one invalid key and what is wrong with it.
type keyProblem struct {
	key string
	err error
}

// add records that key is invalid, with a message from format and args.
func (v *problems) add(key, format string, args ...any) {
	*v = append(*v, keyProblem{key, errdefs.Mark(fmt.Errorf("config: %s: %s", key, fmt.Sprintf(format, args...)), errdefs.ErrInvalidArgument)})
}

// wrap records err, which already names key and carries its class.
func (v *problems) wrap(key string, err error) {
	*v = append(*v, keyProblem{key, fmt.Errorf("config: %w", err)})
}

// err joins the problems in the order of their keys (then messages), so
// that the report is the same from run to run; nil when there are none.
func (v problems) err() error {
	if len(v) == 0 {
		return nil
	}
	sorted := slices.Clone(v)
	slices.SortFunc(sorted, func(a, b keyProblem) int {
		return cmp.Or(strings.Compare(a.key, b.key), strings.Compare(a.err.Error(), b.err.Error()))
	})
	errs := make([]error, len(sorted))
	for i, p := range sorted {
		errs[i] = p.err
	}
	return errors.Join(errs...)
}
