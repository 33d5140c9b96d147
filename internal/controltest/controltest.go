package controltest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/artifacts"
	"genesis.dev/sandbox/internal/assemble"
	"genesis.dev/sandbox/internal/browser"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/desktop"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/driver/fake"
	"genesis.dev/sandbox/internal/files"
	"genesis.dev/sandbox/internal/interactive"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/mcp/servers"
	"genesis.dev/sandbox/internal/ports"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/skills"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/store/sqlite"
	"genesis.dev/sandbox/internal/store/sqlstore"
	"genesis.dev/sandbox/internal/testenv"
	"genesis.dev/sandbox/internal/trace"
)

// The names the harness gives its image, profile and service instance.
const (
	Image    = "genesis-test/fake:1"
	Profile  = "test-basic"
	Instance = "gs-test"
)

// Clock is the service's injected clock: real time plus an offset.
type Clock struct{ off atomic.Int64 }

// Now is the real time plus the offset.
func (c *Clock) Now() time.Time { return time.Now().Add(time.Duration(c.off.Load())) }

// Advance moves the clock d ahead.
func (c *Clock) Advance(d time.Duration) { c.off.Add(int64(d)) }

// ProbeWith is a healthy probe result in which only the named runtimes pass
// their smoke test.
func ProbeWith(healthy ...string) driver.ProbeResult {
	p := driver.ProbeResult{Driver: "fake", Healthy: true, CgroupVersion: "2", CheckedAt: time.Now().UTC()}
	for _, rt := range []string{"runc", "runsc"} {
		ri := driver.RuntimeInfo{Name: rt, Healthy: false, Error: "smoke test failed", CheckedAt: p.CheckedAt}
		for _, h := range healthy {
			if h == rt {
				ri.Healthy, ri.Error = true, ""
			}
		}
		p.Runtimes = append(p.Runtimes, ri)
	}
	return p
}

// lockedBuffer collects agent output for the log of a failed test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type agentProc struct {
	cmd  *exec.Cmd
	keys []string // container id and name
	done chan struct{}
}

func (p *agentProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Agents runs one genesis-agent host process per started fake container.
type Agents struct {
	// Enabled lets a started fake container get an agent (a test clears
	// it to have containers whose agent never answers).
	Enabled atomic.Bool

	bin    string
	asUser bool // run as the spec's uid:gid
	drv    *fake.Driver
	log    lockedBuffer

	mu    sync.Mutex
	byKey map[string]*agentProc
	all   []*agentProc
}

func (a *Agents) hook(_ context.Context, op fake.Op, id string) error {
	switch op {
	case fake.OpStart:
		if a.Enabled.Load() {
			return a.start(id)
		}
	case fake.OpRemove:
		a.stop(id)
	}
	return nil
}

func (a *Agents) start(id string) error {
	spec, ok := a.drv.Spec(id)
	if !ok {
		return nil // the fake reports the missing container itself
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if p := a.byKey[id]; p != nil && !p.exited() {
		return nil // already running
	}
	runDir := ""
	for _, m := range spec.Mounts {
		if m.Target == driver.AgentRunDir {
			runDir = m.Source
		}
	}
	if runDir == "" {
		return fmt.Errorf("harness: spec of %s has no mount at %s", id, driver.AgentRunDir)
	}
	cmd := exec.Command(a.bin, "serve", "--socket", filepath.Join(runDir, driver.AgentSocketRel))
	cmd.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, spec.Env...)
	// Outside a container the agent resets only the directories named
	// here: the sandbox's workspace.
	for _, m := range spec.Mounts {
		if m.Target == "/workspace" {
			cmd.Env = append(cmd.Env, "GENESIS_AGENT_RESET_DIRS="+m.Source)
		}
	}
	cmd.Stdout, cmd.Stderr = &a.log, &a.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if a.asUser && spec.User != "" {
		uid, gid, err := driver.ParseUser(spec.User)
		if err != nil {
			return err
		}
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("harness: starting agent: %w", err)
	}
	p := &agentProc{cmd: cmd, keys: []string{id, spec.Name}, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	for _, k := range p.keys {
		a.byKey[k] = p
	}
	a.all = append(a.all, p)
	return nil
}

// stop ends the agent of a container (by id or name) and reaps it: SIGTERM
// first, so it can end its jobs, SIGKILL after a deadline.
func (a *Agents) stop(id string) {
	a.mu.Lock()
	p := a.byKey[id]
	if p != nil {
		for _, k := range p.keys {
			delete(a.byKey, k)
		}
	}
	a.mu.Unlock()
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// AsUser reports whether the agents run as the profile's user (they run as
// root when the data dir or agent binary is out of that user's reach).
func (a *Agents) AsUser() bool { return a.asUser }

// Running counts agent processes that have not exited.
func (a *Agents) Running() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, p := range a.all {
		if !p.exited() {
			n++
		}
	}
	return n
}

func (a *Agents) killAll() {
	a.mu.Lock()
	all := append([]*agentProc(nil), a.all...)
	a.mu.Unlock()
	for _, p := range all {
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Harness is a started service over the fake driver and what it runs on.
type Harness struct {
	T   *testing.T
	Dir string // data dir
	Cfg *config.Config
	Drv *fake.Driver
	St  *sqlstore.Store
	// Stack is the service as assemble.Build builds it for
	// cmd/sandbox-service; Svc and the managers below are its parts.
	Stack     *assemble.Stack
	Svc       *control.Service
	Terminals *interactive.Terminals
	Files     *files.Gateway
	Ports     *ports.Proxy
	Jobs      *jobs.Manager
	Artifacts *artifacts.Keeper
	Services  *jobs.Services
	Browser   *browser.Manager
	Desktop   *desktop.Manager
	MCP       *servers.Manager
	Skills    *skills.Manager
	Trace     *trace.Store
	Clock     *Clock
	Agents    *Agents
}

// traversable reports whether every ancestor of p lets others search it, so
// that an agent running as the sandbox user can reach p.
func traversable(p string) bool {
	for d := filepath.Dir(p); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if d == filepath.Dir(d) {
			return true
		}
	}
}

// New builds a started service over the fake driver with runc and runsc
// healthy, tenants "a" and "b" and the profile Profile. configure, if not
// nil, edits the settings first.
func New(t *testing.T, configure func(*config.Config)) *Harness {
	t.Helper()
	return NewWith(t, configure, nil)
}

// NewWith is New with tune changing the service's own settings before it
// starts.
func NewWith(t *testing.T, configure func(*config.Config), tune func(*control.Config)) *Harness {
	t.Helper()
	return NewOpts(t, Options{Configure: configure, Tune: tune})
}

// Options are the optional parts of a harness.
type Options struct {
	// Configure, if set, edits the settings.
	Configure func(*config.Config)
	// Tune, if set, edits the service's own config before it is built.
	Tune func(*control.Config)
	// Hooks are registered with the service before it starts, after the
	// stack's own.
	Hooks []control.Hook
	// Metrics, if set, observes the latencies of the service and the jobs.
	Metrics assemble.Metrics
	// Assemble, if set, edits the stack's config last: what a test leaves
	// out or fakes beyond the above (Images, say). A part is left out by
	// the settings that disable it (e2b.enabled, opensandbox.enabled,
	// trace.record).
	Assemble func(*assemble.Config)
	// Store, if set, is the store (the caller closes it), for example one
	// PostgreSQL database that several harnesses share; otherwise a new
	// SQLite file.
	Store *sqlstore.Store
	// Instance, if set, is the service's instance id (default Instance).
	Instance string
}

// NewOpts is New with options.
func NewOpts(t *testing.T, o Options) *Harness {
	t.Helper()
	configure, tune := o.Configure, o.Tune
	if os.Geteuid() != 0 {
		t.Skip("control creates sandbox directories owned by the profile user (chown to 1000); needs root")
	}
	dir, err := os.MkdirTemp("", "gc") // short: the agent socket path must stay under 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Default()
	if err != nil {
		t.Fatal(err)
	}
	cfg.WarmPools = false // tests that want pools set them up
	cfg.DataDir = dir
	cfg.Intervals.Probe = time.Hour
	cfg.Intervals.Reconcile = time.Hour
	cfg.Intervals.AgentReadyTimeout = 10 * time.Second
	cfg.Intervals.DockerCallTimeout = 5 * time.Second
	cfg.Tenants["a"] = config.Tenant{}
	cfg.Tenants["b"] = config.Tenant{}
	cfg.Profiles = append(cfg.Profiles, config.Profile{
		Name:             Profile,
		Description:      "test profile over the fake driver",
		Image:            Image,
		AllowedRuntimes:  []sandbox.Runtime{sandbox.RuntimeRunc, sandbox.RuntimeRunsc},
		DefaultRiskLevel: sandbox.RiskLow,
		Resources:        sandbox.Resources{CPU: 0.5, MemoryMB: 256, Pids: 64},
		User:             "1000:1000",
	})
	if configure != nil {
		configure(cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("test config: %v", err)
	}

	agentDir := testenv.AgentDir(t)
	ag := &Agents{bin: filepath.Join(agentDir, "genesis-agent"), byKey: map[string]*agentProc{}}
	ag.asUser = traversable(filepath.Join(dir, "x")) && traversable(ag.bin)
	if !ag.asUser {
		t.Logf("data dir or agent binary not reachable by uid 1000: agents run as root")
	}
	ag.Enabled.Store(true)
	drv := fake.New(fake.Config{Images: []string{Image}, Hook: ag.hook})
	ag.drv = drv
	drv.SetProbeResult(ProbeWith("runc", "runsc"))
	t.Cleanup(func() {
		ag.killAll()
		if t.Failed() {
			t.Logf("agent output:\n%s", ag.log.String())
		}
	})

	st := o.Store
	if st == nil {
		if st, err = sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "state.db")}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
	}
	instance := Instance
	if o.Instance != "" {
		instance = o.Instance
	}

	clk := &Clock{}
	ac := assemble.Config{Settings: cfg, Store: st, Driver: drv, AgentDir: agentDir, InstanceID: instance, Now: clk.Now, Metrics: o.Metrics, TuneControl: tune}
	if o.Assemble != nil {
		o.Assemble(&ac)
	}
	stack, err := assemble.Build(context.Background(), ac)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stack.Close(); err != nil {
			t.Errorf("closing the service: %v", err)
		}
	})
	for _, hk := range o.Hooks {
		stack.Control.AddHook(hk)
	}
	if err := stack.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &Harness{T: t, Dir: dir, Cfg: cfg, Drv: drv, St: st, Stack: stack, Svc: stack.Control, Terminals: stack.Terminals, Files: stack.Files,
		Jobs: stack.Jobs, Artifacts: stack.Artifacts, Ports: stack.Ports, Services: stack.Services, Browser: stack.Browser, Desktop: stack.Desktop,
		MCP: stack.MCP, Skills: stack.Skills, Trace: stack.Trace, Clock: clk, Agents: ag}
}

// SetProbe replaces the probe result and refreshes the service's cache.
func (h *Harness) SetProbe(p driver.ProbeResult) {
	h.Drv.SetProbeResult(p)
	h.Svc.RefreshProbe(context.Background())
}

// Create creates a sandbox of tenant (of the profile Profile unless in
// names one) and fails the test when that fails.
func (h *Harness) Create(tenant string, in control.CreateSandboxInput) *sandbox.Sandbox {
	h.T.Helper()
	in.Tenant = tenant
	if in.Profile == "" {
		in.Profile = Profile
	}
	sb, err := h.Svc.CreateSandbox(context.Background(), in)
	if err != nil {
		h.T.Fatalf("CreateSandbox(%+v): %v", in, err)
	}
	return sb
}

// Record returns the stored record of sandbox id.
func (h *Harness) Record(id string) *sandbox.Sandbox {
	h.T.Helper()
	sb, err := h.St.GetSandbox(context.Background(), "", id)
	if err != nil {
		h.T.Fatalf("record %s: %v", id, err)
	}
	return sb
}

// Records returns every stored sandbox record.
func (h *Harness) Records() []*sandbox.Sandbox {
	h.T.Helper()
	list, err := h.St.ListSandboxes(context.Background(), store.SandboxFilter{})
	if err != nil {
		h.T.Fatal(err)
	}
	return list
}

// Containers lists the fake's containers.
func (h *Harness) Containers() []driver.Status {
	h.T.Helper()
	list, err := h.Drv.List(context.Background())
	if err != nil {
		h.T.Fatal(err)
	}
	return list
}

// Container returns the fake's container of sandbox id, if any.
func (h *Harness) Container(id string) (driver.Status, bool) {
	h.T.Helper()
	for _, c := range h.Containers() {
		if c.Labels[driver.LabelSandbox] == id {
			return c, true
		}
	}
	return driver.Status{}, false
}

// SandboxDir is the directory of sandbox id under the data dir.
func (h *Harness) SandboxDir(id string) string { return filepath.Join(h.Dir, "sandboxes", id) }

// Exists reports whether p exists (a dangling symlink counts).
func Exists(p string) bool {
	_, err := os.Lstat(p)
	return !errors.Is(err, os.ErrNotExist)
}

// SandboxDirs lists the entries of <data-dir>/sandboxes.
func (h *Harness) SandboxDirs() []string {
	h.T.Helper()
	entries, err := os.ReadDir(filepath.Join(h.Dir, "sandboxes"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) { // made with the first sandbox
		h.T.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// AssertGone checks that sandbox id left no container, directory or agent.
func (h *Harness) AssertGone(id string) {
	h.T.Helper()
	if c, ok := h.Container(id); ok {
		h.T.Errorf("container %s of %s still in the driver (state %s)", c.ID, id, c.State)
	}
	if Exists(h.SandboxDir(id)) {
		h.T.Errorf("sandbox dir of %s still exists", id)
	}
	h.WaitAgents(0)
}

// WaitAgents polls until n agent processes run.
func (h *Harness) WaitAgents(n int) {
	h.T.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for h.Agents.Running() != n {
		if time.Now().After(deadline) {
			h.T.Errorf("%d agent processes run, want %d", h.Agents.Running(), n)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// AssertNothingCreated checks that no record, container, directory or
// agent exists.
func (h *Harness) AssertNothingCreated() {
	h.T.Helper()
	if r := h.Records(); len(r) != 0 {
		h.T.Errorf("%d sandbox records exist, want none (first: %s %s)", len(r), r[0].ID, r[0].State)
	}
	if c := h.Containers(); len(c) != 0 {
		h.T.Errorf("%d containers exist, want none", len(c))
	}
	if d := h.SandboxDirs(); len(d) != 0 {
		h.T.Errorf("sandbox dirs exist: %v", d)
	}
	if n := h.Agents.Running(); n != 0 {
		h.T.Errorf("%d agents run, want none", n)
	}
}
