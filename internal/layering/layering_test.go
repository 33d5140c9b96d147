package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

// module is the module path; rules name packages relative to it.
const module = "genesis.dev/sandbox"

// pkg is what the rules need of one package of the module: its direct
// imports and all its dependencies (both without test files), as paths
// relative to the module for the module's own packages.
type pkg struct {
	Path    string
	Imports []string
	Deps    []string
}

// workloads are the packages that work inside running sandboxes over
// control's Attach and hooks. Some do not exist yet; their rules hold the
// day they are added. internal/trace is not one: it is a leaf (errdefs
// and api only) that every producer records through.
var workloads = []string{
	"internal/jobs", "internal/files", "internal/interactive", "internal/artifacts",
	"internal/ports", "internal/mcp", "internal/skills", "internal/browser", "internal/desktop",
	"internal/snapshots",
}

// testSupport are the packages that exist for tests: no binary links them.
var testSupport = []string{
	"internal/controltest", "internal/testenv", "internal/driver/fake", "internal/driver/drivertest",
	"internal/store/storetest", "internal/store/pgtest", "internal/slowlog/slowlogtest", "test/...",
}

// rule constrains the packages matching Pkg ("x" is x itself, "x/..." is x
// and every package below it).
type rule struct {
	Pkg string
	// Why is the rule in words, as the package's doc.go states it.
	Why string
	// Forbid lists packages (patterns as Pkg) that Pkg must not depend
	// on, directly or through another package.
	Forbid []string
	// NoImport lists packages that Pkg must not import directly (it may
	// reach them through the layer below it, as everything above control
	// reaches the store and the driver through control).
	NoImport []string
	// Only, if not nil, lists the module packages (patterns) Pkg may
	// import directly; External the non-standard-library imports it may
	// have. Only nil leaves both unchecked.
	Only     []string
	External []string
	// Tree marks a rule over a whole tree ("internal/..."): it constrains
	// every package below it but is no package's own rule, so a package it
	// matches still needs one (TestEveryPackageHasARule).
	Tree bool
}

func concat(lists ...[]string) []string { return slices.Concat(lists...) }

// rules is the layering. Exceptions are written into the rules with the
// reason they stand.
var rules = []rule{
	{
		Pkg:      "api",
		Why:      "api holds the HTTP API's wire types and is a leaf anyone may import: the standard library only",
		Only:     []string{},
		External: []string{},
	},
	{
		Pkg:      "client",
		Why:      "client is the public SDK: the wire types of api, a WebSocket library and a vector base64 decoder; nothing of internal/",
		Only:     []string{"api"},
		External: []string{"github.com/coder/websocket", "github.com/segmentio/asm/base64", "golang.org/x/sys/cpu"},
	},
	{
		Pkg:    "internal/...",
		Why:    "the service never imports the public SDK or a command: the wire types are api's",
		Forbid: []string{"client", "cmd/..."},
		Tree:   true,
	},
	{
		Pkg:    "cmd/...",
		Why:    "the binaries are wired from the service's packages, never from test support",
		Forbid: testSupport,
	},
	{
		Pkg:    "cmd/genesis",
		Why:    "the CLI is a client of the API: it speaks it through the SDK and api, and imports nothing of internal/",
		Forbid: []string{"internal/..."},
	},
	{
		Pkg:      "cmd/genesis-agent",
		Why:      "the agent binary is the agent package's main",
		Only:     []string{"internal/agent", "internal/agent/agentproto"},
		External: []string{},
	},
	{
		Pkg:      "cmd/genesis-egress",
		Why:      "the egress gateway's binary runs the gateway package alone (in a container of its own)",
		Only:     []string{"internal/egress/gateway"},
		External: []string{},
	},
	{
		Pkg:      "images",
		Why:      "images embeds the profiles' recipes: the standard library only",
		Only:     []string{},
		External: []string{},
	},
	{
		Pkg:      "hack/...",
		Why:      "hack holds helper programs of the development clusters: the standard library only",
		Only:     []string{},
		External: []string{},
	},
	{
		Pkg:      "tools/...",
		Why:      "tools holds helper programs of the build: the standard library only",
		Only:     []string{},
		External: []string{},
	},
	{
		Pkg:    "test/...",
		Why:    "the end-to-end tests, benchmarks and their fixtures reach the service from outside, over its API: nothing of internal/ (their tests may use test support such as testenv)",
		Forbid: []string{"internal/..."},
	},
	{
		Pkg:      "internal/layering",
		Why:      "layering is this test alone",
		Only:     []string{},
		External: []string{},
	},
	{
		Pkg:    "internal/control",
		Why:    "control is the lifecycle core: it calls the workload packages only through the hooks it declares, and knows no API",
		Forbid: concat(workloads, []string{"internal/httpapi", "internal/tenancy", "client", "cmd/..."}),
		Only: []string{"internal/driver", "internal/store", "internal/agent/agentclient", "internal/agent/agentproto",
			"internal/policy", "internal/config", "images", "internal/imagebuild", "internal/admission", "internal/diskquota", "internal/driver/local",
			"internal/egress", "internal/netctl", "internal/imagestate", "internal/probe", "internal/instances", "internal/stopwatch", "internal/busy", "internal/tenant", "internal/sandbox", "internal/errdefs", "internal/nofollow"},
	},
	{
		Pkg:      "internal/busy",
		Why:      "busy is the in-memory busy accounting of leased sandboxes; control does its record writes: the standard library only",
		Only:     []string{},
		External: []string{},
	},
	{
		Pkg:      "internal/b64",
		Why:      "b64 is a base64 encoder for the streamed job output: the standard library, a vector base64 encoder and the CPU's features",
		Only:     []string{},
		External: []string{"github.com/segmentio/asm/base64", "golang.org/x/sys/cpu"},
	},
	{
		Pkg:      "internal/stopwatch",
		Why:      "stopwatch times the laps of one call for a caller that asks (Server-Timing): the standard library only",
		Only:     []string{},
		External: []string{},
	},
	{
		Pkg:      "internal/slowlog",
		Why:      "slowlog logs the API's slow requests with the hops of their Server-Timing: the standard library only",
		Only:     []string{},
		External: []string{},
	},
	{
		Pkg:      "internal/slowlog/slowlogtest",
		Why:      "slowlogtest reads the slow request log's lines for tests: the standard library only",
		Only:     []string{},
		External: []string{},
	},
	{
		Pkg: "internal/instances",
		Why: "instances is one instance's part in sharing a store below control (its instance lock, the leader, the adoption of gone instances): " +
			"the store's contract, sandbox and errdefs only; never control, a driver, a workload or an API package",
		Forbid:   concat(workloads, []string{"internal/control", "internal/driver/...", "internal/httpapi", "client", "cmd/..."}),
		Only:     []string{"internal/store", "internal/sandbox", "internal/errdefs"},
		External: []string{},
	},
	{
		Pkg: "internal/netctl",
		Why: "netctl runs the egress gateway and the networks of sandboxes below control: driver, the store's contract, config, egress and its client, sandbox and errdefs; " +
			"it knows no sandbox lifecycle (control tells it which sandboxes live) and imports no control, workload, API or client package",
		Forbid: concat(workloads, []string{"internal/control", "internal/httpapi", "client", "cmd/..."}),
		Only: []string{"internal/driver", "internal/store", "internal/config", "internal/egress", "internal/egress/egressclient",
			"internal/sandbox", "internal/errdefs"},
		External: []string{},
	},
	{
		Pkg: "internal/tenancy",
		Why: "tenancy administers tenants, their keys and the audit log over the store's contract: config, store, tenant, sandbox and errdefs; " +
			"it asks control for tenants' sandboxes through an interface of its own and imports no control, workload, API or client package",
		Forbid:   concat(workloads, []string{"internal/control", "internal/httpapi", "client", "cmd/..."}),
		Only:     []string{"internal/config", "internal/store", "internal/tenant", "internal/sandbox", "internal/errdefs"},
		External: []string{},
	},
	{
		Pkg:    "internal/driver/...",
		Why:    "drivers run containers; records and policy are above them",
		Forbid: []string{"internal/store/...", "internal/control", "internal/httpapi"},
	},
	{
		Pkg:    "internal/store/...",
		Why:    "stores persist records; they know neither the runtime nor the application",
		Forbid: concat(workloads, []string{"internal/driver/...", "internal/control", "internal/httpapi"}),
	},
	{
		Pkg: "internal/sandbox",
		Why: "sandbox is the domain vocabulary: it imports only errdefs; " +
			"exception: egress, whose Policy is part of a sandbox's Network record (egress itself imports only errdefs)",
		Only: []string{"internal/errdefs", "internal/egress"},
	},
	{
		Pkg: "internal/agent",
		Why: "the agent runs inside the sandbox: the standard library, its wire protocol, errdefs and mountinfo; " +
			"its own subpackages except the host-side client; externals: x/sys and creack/pty (its terminals)",
		Only:     []string{"internal/agent/agentproto", "internal/agent/fsops", "internal/errdefs", "internal/mountinfo"},
		External: []string{"golang.org/x/sys/...", "github.com/creack/pty"},
		Forbid:   []string{"internal/agent/agentclient"},
	},
	{
		Pkg:    "internal/agent/agentproto",
		Why:    "the wire protocol is shared by agent and host: it imports only errdefs",
		Only:   []string{"internal/errdefs"},
		Forbid: []string{"internal/agent", "internal/agent/agentclient"},
	},
	{
		Pkg:      "internal/ports",
		Why:      "ports is a workload package: control, agentclient, config, sandbox and errdefs (and interactive's Hub, for a VNC takeover); no API, store or driver",
		Forbid:   concat([]string{"internal/httpapi", "client"}, without(workloads, "internal/ports", "internal/interactive")),
		NoImport: []string{"internal/store/...", "internal/driver/..."},
	},
	{
		Pkg:      "internal/interactive",
		Why:      "interactive reaches sandboxes through Attach only",
		Forbid:   concat([]string{"internal/httpapi", "client"}, without(workloads, "internal/interactive")),
		NoImport: []string{"internal/store/...", "internal/driver/..."},
	},
	{
		Pkg:      "internal/files",
		Why:      "files reaches sandboxes through Attach only",
		Forbid:   concat([]string{"internal/httpapi", "client"}, without(workloads, "internal/files")),
		NoImport: []string{"internal/store/...", "internal/driver/..."},
	},
	{
		Pkg:      "internal/artifacts",
		Why:      "the keeper reaches sandboxes through Attach and its records through the store contract",
		Forbid:   concat([]string{"internal/httpapi", "client"}, without(workloads, "internal/artifacts")),
		NoImport: []string{"internal/driver/..."},
	},
	{
		Pkg:      "internal/jobs",
		Why:      "jobs reach sandboxes through Attach, and keep job records, logs and artifacts",
		Forbid:   concat([]string{"internal/httpapi", "client"}, without(workloads, "internal/jobs", "internal/artifacts")),
		NoImport: []string{"internal/driver/..."},
	},
	{
		Pkg:      "internal/mcp",
		Why:      "mcp is the protocol proxy of one server: errdefs and the MCP SDK (with its JSON Schema validator); it knows no sandbox, lease or API",
		Only:     []string{"internal/errdefs"},
		External: []string{"github.com/modelcontextprotocol/go-sdk/...", "github.com/google/jsonschema-go/..."},
	},
	{
		Pkg:      "internal/mcp/servers",
		Why:      "servers places MCP servers in sandboxes through control's leases and jobs' background jobs; no API, store or driver",
		Forbid:   []string{"internal/httpapi", "client", "cmd/..."},
		NoImport: []string{"internal/store/...", "internal/driver/...", "internal/joblog", "internal/agent/..."},
	},
	{
		Pkg: "internal/skills",
		Why: "skills keeps revisions through the store contract and runs scripts through control's sandboxes, jobs' exec, files and artifacts; no API, driver, job log or agent client",
		Forbid: concat([]string{"internal/httpapi", "client", "cmd/..."},
			without(workloads, "internal/skills", "internal/jobs", "internal/files", "internal/artifacts")),
		NoImport: []string{"internal/driver/...", "internal/joblog", "internal/agent/agentclient", "internal/store/sqlstore", "internal/store/sqlite", "internal/store/postgres"},
	},
	{
		Pkg:      "internal/changes",
		Why:      "changes reads and writes sandboxes' workspaces through the file gateway and snapshots' through the snapshots manager; no API, client, store, driver or agent client",
		Forbid:   []string{"internal/httpapi", "client", "cmd/..."},
		NoImport: []string{"internal/store/...", "internal/driver/...", "internal/agent/agentproto"},
	},
	{
		Pkg: "internal/mcpserve",
		Why: "the service's own MCP server calls control, jobs, files, the browser, the desktop and the snapshots as the HTTP handlers do (reading a job's output through the job log; agentclient only for the Files contract's file response, api for the browser's and the desktop's wire types); no HTTP edge, client, command, store, driver or admission",
		Forbid: concat([]string{"internal/httpapi", "client", "cmd/...", "internal/assemble"},
			without(workloads, "internal/jobs", "internal/files", "internal/artifacts", "internal/ports", "internal/browser", "internal/interactive", "internal/snapshots")),
		NoImport: []string{"internal/store/...", "internal/driver/...", "internal/admission"},
		Only: []string{"internal/control", "internal/jobs", "internal/files", "internal/browser", "internal/snapshots", "internal/joblog", "internal/sandbox", "internal/tenant", "internal/errdefs",
			"internal/agent/agentproto", "internal/agent/agentclient", "api"},
		External: []string{"github.com/modelcontextprotocol/go-sdk/..."},
	},
	{
		Pkg:      "internal/console",
		Why:      "the console only serves its embedded files: the standard library and nothing of the project",
		Only:     []string{},
		External: []string{},
	},
	{
		Pkg:      "internal/desktop",
		Why:      "desktop is a workload package: it reaches sandboxes through control's Attach and hooks only (the agent's port dial and job start); it imports no API, store or driver package",
		Forbid:   concat([]string{"internal/httpapi", "client", "cmd/..."}, without(workloads, "internal/desktop", "internal/ports", "internal/interactive")),
		NoImport: []string{"internal/store/...", "internal/driver/..."},
	},
	{
		Pkg:      "internal/recording",
		Why:      "recording is a leaf below the workload packages: trace, sandbox, errdefs and the agent's protocol types only",
		Only:     []string{"internal/trace", "internal/sandbox", "internal/errdefs", "internal/agent/agentproto"},
		External: []string{},
	},
	{
		Pkg:      "internal/trace",
		Why:      "trace is a leaf every producer may record through: errdefs, api (an export's manifest; itself a leaf) and the standard library only",
		Only:     []string{"internal/errdefs", "api"},
		External: []string{},
	},
	{
		Pkg: "internal/compat/e2b/...",
		Why: "the E2B adapter translates onto control (leases, sandboxes), jobs, files, snapshots, volumes (a volume's files) and config (and names the caller's key, tenant); no API, client, store, driver, job log or agent package; " +
			"externals: connect-go and protobuf (its generated code)",
		Forbid:   []string{"internal/httpapi", "client", "cmd/..."},
		NoImport: []string{"internal/driver/...", "internal/store/...", "internal/admission", "internal/joblog", "internal/agent/..."},
		Only: []string{"internal/control", "internal/jobs", "internal/files", "internal/snapshots", "internal/config", "internal/sandbox", "internal/errdefs",
			"internal/compat/e2b/gen/...", "internal/compat/tokens", "internal/compat/shared", "internal/tenant", "internal/volumes"},
		External: []string{"connectrpc.com/connect", "google.golang.org/protobuf/..."},
	},
	{
		Pkg:      "internal/compat/opensandbox",
		Why:      "the OpenSandbox adapter translates onto control (leases, sandboxes), jobs, files, snapshots and config (and names the caller's key, tenant); no API, client, store, driver, job log or agent package",
		Forbid:   []string{"internal/httpapi", "client", "cmd/..."},
		NoImport: []string{"internal/driver/...", "internal/store/...", "internal/admission", "internal/joblog", "internal/agent/..."},
		Only: []string{"internal/control", "internal/jobs", "internal/files", "internal/snapshots", "internal/config", "internal/sandbox", "internal/errdefs",
			"internal/compat/tokens", "internal/compat/shared", "internal/tenant"},
		External: []string{},
	},
	{
		Pkg:      "internal/compat/shared",
		Why:      "what the compatibility adapters do alike: control, files, sandbox and errdefs only",
		Only:     []string{"internal/control", "internal/files", "internal/sandbox", "internal/errdefs"},
		External: []string{},
	},
	{
		Pkg:      "internal/compat/tokens",
		Why:      "tokens is a leaf: the standard library only",
		Only:     []string{},
		External: []string{},
	},
	{
		Pkg:      "internal/imagecli",
		Why:      "imagecli is the image builder's command line: the recipes, imagebuild, the Docker driver and config; no service, store or API",
		Only:     []string{"images", "internal/imagebuild", "internal/driver/docker", "internal/config"},
		External: []string{},
	},
	{
		Pkg:    "cmd/genesis-images",
		Why:    "genesis-images must compile in seconds (make run builds the quickstart's images with it while the service compiles): nothing of the service, its store, API or Kubernetes driver",
		Forbid: []string{"internal/control", "internal/httpapi", "internal/store/...", "internal/driver/kube", "internal/jobs", "client"},
	},
	{
		Pkg:      "internal/assemble",
		Why:      "assemble builds the service below the HTTP edge: the control service, every manager and the compatibility adapters; no API, client, command or test harness",
		Forbid:   []string{"internal/httpapi", "cmd/...", "internal/controltest"},
		NoImport: []string{"client"},
	},
	{
		Pkg:      "internal/replay",
		Why:      "replay re-runs a trace's agent actions through interfaces of its own: api, trace, jobs and browser (their inputs and results), control (the reservation check), sandbox and errdefs; no edge, SDK, store or driver",
		Forbid:   []string{"internal/httpapi", "client", "cmd/...", "internal/assemble"},
		Only:     []string{"api", "internal/trace", "internal/jobs", "internal/browser", "internal/control", "internal/sandbox", "internal/errdefs"},
		External: []string{},
	},
	{
		Pkg:      "internal/tickets",
		Why:      "tickets mints and redeems the terminal's one-use tickets: errdefs and the standard library only",
		Only:     []string{"internal/errdefs"},
		External: []string{},
	},
	{
		Pkg:      "internal/metrics",
		Why:      "metrics is the Prometheus instrumentation: control and jobs (the figures it reads, the observers it is), sandbox and the Prometheus client; no edge, SDK, store or driver",
		Forbid:   []string{"internal/httpapi", "client", "cmd/...", "internal/assemble"},
		Only:     []string{"internal/control", "internal/jobs", "internal/sandbox"},
		External: []string{"github.com/prometheus/client_golang/..."},
	},
	{
		Pkg:      "internal/auth",
		Why:      "auth answers who holds an API key for every edge: tenancy, tenant, api and errdefs only",
		Only:     []string{"internal/tenancy", "internal/tenant", "api", "internal/errdefs"},
		External: []string{},
	},
	{
		Pkg:      "internal/apiwire",
		Why:      "apiwire converts between the domain's types and api's wire types below every edge: api, errdefs and the packages whose types it converts; no edge, SDK, command, store, driver, job log or agent client",
		Forbid:   []string{"internal/httpapi", "client", "cmd/...", "internal/assemble"},
		NoImport: []string{"internal/driver/...", "internal/store/...", "internal/admission", "internal/joblog", "internal/agent/..."},
	},
	{
		Pkg:      "proto",
		Why:      "proto holds the gRPC contract (.proto files) and a test of its own that gen/ is current: no code the binaries link",
		Only:     []string{},
		External: []string{},
	},
	{
		Pkg:      "gen/...",
		Why:      "gen holds the code buf generates from proto/ (make proto): protobuf and connect-go, nothing of the module but gen",
		Only:     []string{"gen/..."},
		External: []string{"connectrpc.com/connect", "google.golang.org/protobuf/..."},
	},
	{
		Pkg: "internal/grpcedge",
		Why: "the gRPC edge is beside the HTTP API, not on it: it calls control and the workload managers with the generated messages of gen/, and checks keys through internal/auth; " +
			"never httpapi, the SDK, assemble, a driver, the store, admission, the job log or the agent protocol",
		Forbid:   []string{"internal/httpapi", "client", "cmd/...", "internal/assemble"},
		NoImport: []string{"internal/driver/...", "internal/store/...", "internal/admission", "internal/joblog", "internal/agent/..."},
	},
	{
		Pkg:      "internal/httpapi",
		Why:      "the API calls control and the workload managers and speaks api's wire types; it never imports the SDK, a driver, the store, admission, the job log or the agent protocol, nor assemble (the service is built below it and handed to it)",
		Forbid:   []string{"client", "cmd/...", "internal/assemble"},
		NoImport: []string{"internal/driver/...", "internal/store/...", "internal/admission", "internal/joblog", "internal/agent/..."},
	},
	{
		Pkg: "internal/browser",
		Why: "browser is a workload package: it reaches sandboxes through control's Attach and ports, records through trace and recording, and speaks api's action types; no API, SDK, store or driver " +
			"(exception: driver's image label constant, LabelVersionPrefix, which the driver contract owns)",
		Forbid:   concat([]string{"internal/httpapi", "client", "cmd/..."}, without(workloads, "internal/browser", "internal/ports")),
		NoImport: []string{"internal/store/...", "internal/driver/docker", "internal/driver/kube", "internal/driver/local", "internal/driver/fake"},
	},
	{
		Pkg:    "internal/snapshots",
		Why:    "snapshots is a workload package: control, driver, store, agentclient, sandbox, config and errdefs, and trace (the leaf every producer records through); no API or other workload",
		Forbid: concat([]string{"internal/httpapi", "client", "cmd/..."}, without(workloads, "internal/snapshots")),
		Only: []string{"internal/control", "internal/driver", "internal/store", "internal/agent/agentclient", "internal/sandbox",
			"internal/config", "internal/errdefs", "internal/trace"},
		External: []string{},
	},
	{
		Pkg: "internal/volumes",
		Why: "volumes owns named volumes below control (which mounts them through an interface it declares): the store's contract, diskquota, driver (a mount's shape), sandbox, tenant (a tenant's volume quotas) and errdefs, and agentclient (a provisioner's files helper's agent); " +
			"no control, workload, API or driver implementation",
		Forbid: concat(workloads, []string{"internal/control", "internal/httpapi", "client", "cmd/..."}),
		Only: []string{"internal/store", "internal/diskquota", "internal/mountinfo", "internal/driver", "internal/sandbox", "internal/tenant", "internal/errdefs", "internal/egress",
			"internal/agent/agentclient", "internal/agent/agentproto"},
		External: []string{"golang.org/x/sys/..."},
	},
	{
		Pkg:      "internal/config",
		Why:      "config reads the service's settings into the domain vocabulary (sandbox, egress, tenant) with errdefs and a YAML parser, checks file roots with the agent protocol's path policy and image repositories with the recipes' rule (images, a leaf); it runs nothing",
		Only:     []string{"internal/sandbox", "internal/egress", "internal/tenant", "internal/errdefs", "internal/agent/agentproto", "images"},
		External: []string{"go.yaml.in/yaml/v3"},
	},
	{
		Pkg:      "internal/policy",
		Why:      "policy decides runtimes from risk levels: the domain vocabulary and errdefs only",
		Only:     []string{"internal/sandbox", "internal/errdefs"},
		External: []string{},
	},
	{
		Pkg:      "internal/tenant",
		Why:      "tenant is the vocabulary of tenants, keys and principals: sandbox and errdefs only",
		Only:     []string{"internal/sandbox", "internal/errdefs"},
		External: []string{},
	},
	{
		Pkg:      "internal/admission",
		Why:      "admission is pure scheduling (weighted fair queues over an injected clock) and the holds of what was granted: sandbox and errdefs only",
		Only:     []string{"internal/sandbox", "internal/errdefs"},
		External: []string{},
	},
	{
		Pkg:      "internal/egress",
		Why:      "egress is the network policy vocabulary, which sandbox's records use: errdefs only",
		Only:     []string{"internal/errdefs"},
		External: []string{},
	},
	{
		Pkg:      "internal/egress/egressclient",
		Why:      "the gateway's client speaks the gateway's control protocol: egress and errdefs only",
		Only:     []string{"internal/egress", "internal/errdefs"},
		External: []string{},
	},
	{
		Pkg:      "internal/egress/gateway",
		Why:      "the gateway runs in a container of its own: egress, errdefs and a DNS message parser only",
		Only:     []string{"internal/egress", "internal/errdefs"},
		External: []string{"golang.org/x/net/dns/dnsmessage"},
	},
	{
		Pkg:      "internal/joblog",
		Why:      "the job log stores a job's output on the host: the agent's protocol types and errdefs only (and renameat2 for its spare files)",
		Only:     []string{"internal/agent/agentproto", "internal/errdefs"},
		External: []string{"golang.org/x/sys/unix"},
	},
	{
		Pkg:      "internal/errdefs",
		Why:      "errdefs holds the error classes every package wraps: the standard library only",
		Only:     []string{},
		External: []string{},
	},
	{
		Pkg:      "internal/agent/agentclient",
		Why:      "the host's client of the agent speaks its protocol: agentproto, errdefs and nofollow (it dials a socket the sandbox could swap) only",
		Only:     []string{"internal/agent/agentproto", "internal/errdefs", "internal/nofollow"},
		External: []string{},
	},
	{
		Pkg:      "internal/nofollow",
		Why:      "nofollow reaches paths a sandbox controls without following them: errdefs and x/sys/unix only",
		Only:     []string{"internal/errdefs"},
		External: []string{"golang.org/x/sys/..."},
	},
	{
		Pkg:      "internal/agent/fsops",
		Why:      "the agent's file operations run inside the sandbox: agentproto, errdefs and x/sys only",
		Only:     []string{"internal/agent/agentproto", "internal/errdefs"},
		External: []string{"golang.org/x/sys/..."},
	},
	{
		Pkg:    "internal/controltest",
		Why:    "controltest builds the control layer and the workloads below the API over the fake driver, for tests of the layers above control; it knows no API",
		Forbid: []string{"internal/httpapi", "client", "cmd/..."},
	},
	{
		Pkg:      "internal/testenv",
		Why:      "testenv answers what a test's environment has (Docker, the module root): the driver contract, the Docker driver and sandbox only",
		Only:     []string{"internal/driver", "internal/driver/docker", "internal/sandbox"},
		External: []string{},
	},
	{
		Pkg: "internal/probe",
		Why: "probe keeps what this host can run now below control: the driver's capability probe, the profiles' views and readiness; " +
			"driver, config, imagestate, imagebuild, diskquota (its method's name), sandbox and errdefs only; never control, the store, a workload or an API package",
		Forbid:   concat(workloads, []string{"internal/control", "internal/store/...", "internal/httpapi", "client", "cmd/..."}),
		Only:     []string{"internal/driver", "internal/config", "internal/imagestate", "internal/imagebuild", "internal/diskquota", "internal/sandbox", "internal/errdefs"},
		External: []string{},
	},
	{
		Pkg:      "internal/imagestate",
		Why:      "imagestate says where the profiles' images stand (reference, presence, background build, the wait for it): config, imagebuild, images and errdefs only; never control, the store, a driver package or an API package",
		Only:     []string{"internal/config", "internal/imagebuild", "images", "internal/errdefs"},
		External: []string{},
	},
	{
		Pkg:      "internal/imagebuild",
		Why:      "imagebuild builds the profiles' images through the driver: images, driver, mountinfo and errdefs only",
		Only:     []string{"images", "internal/driver", "internal/mountinfo", "internal/errdefs"},
		External: []string{},
	},
	{
		Pkg:      "internal/diskquota",
		Why:      "diskquota sets project quotas on the host's file system: mountinfo, errdefs and x/sys only",
		Only:     []string{"internal/mountinfo", "internal/errdefs"},
		External: []string{"golang.org/x/sys/..."},
	},
	{
		Pkg:      "internal/mountinfo",
		Why:      "mountinfo parses /proc/self/mountinfo: the standard library only",
		Only:     []string{},
		External: []string{},
	},
}

func without(list []string, drop ...string) []string {
	return slices.DeleteFunc(slices.Clone(list), func(s string) bool { return slices.Contains(drop, s) })
}

// match reports whether path matches pattern ("x" or "x/...").
func match(pattern, path string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == pattern
}

func matchAny(patterns []string, path string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return match(p, path) })
}

// standard reports whether an import path is of the standard library (its
// first element has no dot).
func standard(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// own reports whether path is of the module and returns it relative.
func own(path string) (string, bool) {
	if path == module {
		return ".", true
	}
	return strings.CutPrefix(path, module+"/")
}

// violations checks pkgs against rules and returns one line per broken
// rule and offending import.
func violations(rules []rule, pkgs []pkg) []string {
	var out []string
	for _, r := range rules {
		for _, p := range pkgs {
			if !match(r.Pkg, p.Path) {
				continue
			}
			for _, d := range p.Deps {
				if rel, ok := own(d); ok && matchAny(r.Forbid, rel) {
					out = append(out, fmt.Sprintf("%s depends on %s: %s", p.Path, rel, r.Why))
				}
			}
			for _, imp := range p.Imports {
				if rel, ok := own(imp); ok && matchAny(r.NoImport, rel) {
					out = append(out, fmt.Sprintf("%s imports %s: %s", p.Path, rel, r.Why))
				}
			}
			if r.Only == nil {
				continue
			}
			for _, imp := range p.Imports {
				rel, ok := own(imp)
				switch {
				case ok && !matchAny(r.Only, rel):
					out = append(out, fmt.Sprintf("%s imports %s: %s", p.Path, rel, r.Why))
				case !ok && !standard(imp) && !matchAny(r.External, imp):
					out = append(out, fmt.Sprintf("%s imports %s: %s", p.Path, imp, r.Why))
				}
			}
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// listModule runs go list over the module and returns its packages.
func listModule(t *testing.T) []pkg {
	t.Helper()
	root := moduleRoot(t)
	cmd := exec.Command("go", "list", "-deps=false", "-json=ImportPath,Imports,Deps", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(outb))
	for {
		var p struct {
			ImportPath    string
			Imports, Deps []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list: %v", err)
		}
		rel, ok := own(p.ImportPath)
		if !ok {
			continue
		}
		pkgs = append(pkgs, pkg{Path: rel, Imports: p.Imports, Deps: p.Deps})
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages of the module; want the whole module", len(pkgs))
	}
	return pkgs
}

// unruled lists the packages of pkgs that no rule of their own matches
// (a Tree rule constrains them but is not theirs).
func unruled(rules []rule, pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		if !slices.ContainsFunc(rules, func(r rule) bool { return !r.Tree && match(r.Pkg, p.Path) }) {
			out = append(out, p.Path)
		}
	}
	sort.Strings(out)
	return out
}

// TestImportRules checks the module's packages against the rules.
func TestImportRules(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module")
	}
	pkgs := listModule(t)
	for _, r := range rules {
		if !slices.ContainsFunc(pkgs, func(p pkg) bool { return match(r.Pkg, p.Path) }) && !matchAny(workloads, r.Pkg) {
			t.Errorf("rule for %s matches no package: a rule that checks nothing", r.Pkg)
		}
	}
	for _, v := range violations(rules, pkgs) {
		t.Error(v)
	}
	for _, p := range unruled(rules, pkgs) {
		t.Errorf("package %s has no layering rule: add one (with its why) to the rules here and state it in its doc.go", p)
	}
}

// TestEveryPackageHasARule checks that a package matching no rule, or only
// a Tree rule, is reported, so that TestImportRules fails on a new package
// nobody placed.
func TestEveryPackageHasARule(t *testing.T) {
	t.Parallel()
	pkgs := []pkg{{Path: "internal/control"}, {Path: "internal/newthing"}, {Path: "api"}, {Path: "internal/store/newdialect"}, {Path: "wat"}}
	got := unruled(rules, pkgs)
	want := []string{"internal/newthing", "wat"}
	if !slices.Equal(got, want) {
		t.Fatalf("unruled = %q, want %q", got, want)
	}
}

// TestRulesCatchUpwardImports feeds the rules synthetic import lists with
// one forbidden arrow each and checks that each is caught, so that
// TestImportRules can fail.
func TestRulesCatchUpwardImports(t *testing.T) {
	t.Parallel()
	m := func(rel string) string { return module + "/" + rel }
	tests := []struct {
		name string
		pkg  pkg
		want string // a substring of the violation; "" for none
	}{
		{"control imports jobs", pkg{Path: "internal/control", Imports: []string{m("internal/jobs")}, Deps: []string{m("internal/jobs")}}, "internal/control depends on internal/jobs"},
		{"control reaches httpapi through another package", pkg{Path: "internal/control", Deps: []string{m("internal/x"), m("internal/httpapi")}}, "depends on internal/httpapi"},
		{"control imports the future ports", pkg{Path: "internal/control", Deps: []string{m("internal/ports")}}, "depends on internal/ports"},
		{"docker driver imports the store", pkg{Path: "internal/driver/docker", Deps: []string{m("internal/store")}}, "depends on internal/store"},
		{"sandbox imports config", pkg{Path: "internal/sandbox", Imports: []string{m("internal/config")}, Deps: []string{m("internal/config")}}, "internal/sandbox imports internal/config"},
		{"agent imports a third-party module", pkg{Path: "internal/agent", Imports: []string{"github.com/some/lib"}}, "imports github.com/some/lib"},
		{"agent imports its host client", pkg{Path: "internal/agent", Imports: []string{m("internal/agent/agentclient")}, Deps: []string{m("internal/agent/agentclient")}}, "internal/agent imports internal/agent/agentclient"},
		{"ports imports httpapi", pkg{Path: "internal/ports", Deps: []string{m("internal/httpapi")}}, "internal/ports depends on internal/httpapi"},
		{"ports imports the store", pkg{Path: "internal/ports", Imports: []string{m("internal/store")}, Deps: []string{m("internal/store")}}, "internal/ports imports internal/store"},
		{"ports reaches the store through control", pkg{Path: "internal/ports", Imports: []string{m("internal/control")}, Deps: []string{m("internal/control"), m("internal/store")}}, ""},
		{"files imports jobs", pkg{Path: "internal/files", Deps: []string{m("internal/jobs")}}, "internal/files depends on internal/jobs"},
		{"httpapi imports the store", pkg{Path: "internal/httpapi", Imports: []string{m("internal/store")}}, "internal/httpapi imports internal/store"},
		{"httpapi imports joblog", pkg{Path: "internal/httpapi", Imports: []string{m("internal/joblog")}}, "internal/httpapi imports internal/joblog"},
		{"httpapi imports a driver", pkg{Path: "internal/httpapi", Imports: []string{m("internal/driver/docker")}}, "imports internal/driver/docker"},
		{"netctl imports control", pkg{Path: "internal/netctl", Imports: []string{m("internal/control")}, Deps: []string{m("internal/control")}}, "internal/netctl depends on internal/control"},
		{"netctl imports a store implementation", pkg{Path: "internal/netctl", Imports: []string{m("internal/store/sqlstore")}}, "internal/netctl imports internal/store/sqlstore"},
		{"control imports the egress client", pkg{Path: "internal/control", Imports: []string{m("internal/egress/egressclient")}}, "internal/control imports internal/egress/egressclient"},
		{"tenancy imports control", pkg{Path: "internal/tenancy", Imports: []string{m("internal/control")}, Deps: []string{m("internal/control")}}, "internal/tenancy depends on internal/control"},
		{"tenancy imports a store implementation", pkg{Path: "internal/tenancy", Imports: []string{m("internal/store/sqlite")}}, "internal/tenancy imports internal/store/sqlite"},
		{"control depends on tenancy", pkg{Path: "internal/control", Deps: []string{m("internal/tenancy")}}, "internal/control depends on internal/tenancy"},
		{"control imports joblog", pkg{Path: "internal/control", Imports: []string{m("internal/joblog")}}, "internal/control imports internal/joblog"},
		{"sandbox with errdefs only", pkg{Path: "internal/sandbox", Imports: []string{"fmt", m("internal/errdefs")}, Deps: []string{"fmt", m("internal/errdefs")}}, ""},
		{"agent with x/sys", pkg{Path: "internal/agent", Imports: []string{"golang.org/x/sys/unix", m("internal/agent/agentproto")}}, ""},
		{"jobs with artifacts and control", pkg{Path: "internal/jobs", Deps: []string{m("internal/artifacts"), m("internal/control")}}, ""},
		{"api imports errdefs", pkg{Path: "api", Imports: []string{m("internal/errdefs")}, Deps: []string{m("internal/errdefs")}}, "api imports internal/errdefs"},
		{"api imports a third-party module", pkg{Path: "api", Imports: []string{"github.com/coder/websocket"}}, "api imports github.com/coder/websocket"},
		{"client imports internal", pkg{Path: "client", Imports: []string{m("api"), m("internal/errdefs")}, Deps: []string{m("api"), m("internal/errdefs")}}, "client imports internal/errdefs"},
		{"client with api and websocket", pkg{Path: "client", Imports: []string{m("api"), "github.com/coder/websocket", "net/http"}, Deps: []string{m("api")}}, ""},
		{"httpapi imports the SDK", pkg{Path: "internal/httpapi", Imports: []string{m("client")}, Deps: []string{m("client"), m("api")}}, "internal/httpapi depends on client"},
		{"browser reaches the SDK through another package", pkg{Path: "internal/browser", Deps: []string{m("internal/x"), m("client")}}, "internal/browser depends on client"},
		{"any internal package imports the SDK", pkg{Path: "internal/newthing", Deps: []string{m("client")}}, "internal/newthing depends on client"},
		{"snapshots imports jobs", pkg{Path: "internal/snapshots", Imports: []string{m("internal/jobs")}, Deps: []string{m("internal/jobs")}}, "internal/snapshots depends on internal/jobs"},
		{"the CLI imports control", pkg{Path: "cmd/genesis", Imports: []string{m("client"), m("internal/control")}, Deps: []string{m("client"), m("internal/control")}}, "cmd/genesis depends on internal/control"},
		{"the service links test support", pkg{Path: "cmd/sandbox-service", Deps: []string{m("internal/controltest")}}, "cmd/sandbox-service depends on internal/controltest"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := violations(rules, []pkg{tc.pkg})
			if tc.want == "" {
				if len(got) != 0 {
					t.Fatalf("violations %q, want none", got)
				}
				return
			}
			if !slices.ContainsFunc(got, func(v string) bool { return strings.Contains(v, tc.want) }) {
				t.Fatalf("violations %q, want one with %q", got, tc.want)
			}
		})
	}
}

// thinEdges are the edges that only decode, call and encode: image and
// archive work (pixel diffs, exports) belongs below them.
var thinEdges = []string{"internal/httpapi"}

// TestEdgeIsThin checks that no edge imports image/* or archive/*.
func TestEdgeIsThin(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module")
	}
	for _, p := range listModule(t) {
		if !slices.Contains(thinEdges, p.Path) {
			continue
		}
		for _, imp := range p.Imports {
			if imp == "image" || strings.HasPrefix(imp, "image/") || strings.HasPrefix(imp, "archive/") {
				t.Errorf("%s imports %s: an edge decodes, calls and encodes; image and archive work belongs below it", p.Path, imp)
			}
		}
	}
}
