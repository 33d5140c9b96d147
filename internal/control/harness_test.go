package control_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/driver/fake"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/store/sqlite"
	"genesis.dev/sandbox/internal/testenv"
)

// The control layer is tested over the fake driver. The fake runs no
// containers, so its Start hook runs the real genesis-agent as a host
// process listening on the socket in the sandbox's run directory (as the
// profile user, like the container would), and its Remove hook stops it.

const (
	testImage    = "genesis-test/fake:1"
	testProfile  = "test-basic"
	testInstance = "gs-test"
)

// clock is the service's injected clock: real time plus an offset.
type clock struct{ off atomic.Int64 }

func (c *clock) Now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *clock) Advance(d time.Duration) { c.off.Add(int64(d)) }

// probeWith is a healthy probe result in which only the named runtimes pass
// their smoke test.
func probeWith(healthy ...string) driver.ProbeResult {
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

// agents runs one genesis-agent host process per started fake container.
type agents struct {
	bin     string
	asUser  bool // run as the spec's uid:gid
	drv     *fake.Driver
	enabled atomic.Bool
	log     lockedBuffer

	mu    sync.Mutex
	byKey map[string]*agentProc
	all   []*agentProc
}

func (a *agents) hook(_ context.Context, op fake.Op, id string) error {
	switch op {
	case fake.OpStart:
		if a.enabled.Load() {
			return a.start(id)
		}
	case fake.OpRemove:
		a.stop(id)
	}
	return nil
}

func (a *agents) start(id string) error {
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
	cmd.Stdout, cmd.Stderr = &a.log, &a.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if a.asUser && spec.User != "" {
		uid, gid, err := parseUser(spec.User)
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

func parseUser(u string) (uid, gid uint32, err error) {
	a, b, _ := strings.Cut(u, ":")
	x, err := strconv.ParseUint(a, 10, 32)
	if err != nil {
		return 0, 0, err
	}
	y := x
	if b != "" {
		if y, err = strconv.ParseUint(b, 10, 32); err != nil {
			return 0, 0, err
		}
	}
	return uint32(x), uint32(y), nil
}

// stop ends the agent of a container (by id or name) and reaps it: SIGTERM
// first, so it can end its jobs, SIGKILL after a deadline.
func (a *agents) stop(id string) {
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

// running counts agent processes that have not exited.
func (a *agents) running() int {
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

func (a *agents) killAll() {
	a.mu.Lock()
	all := append([]*agentProc(nil), a.all...)
	a.mu.Unlock()
	for _, p := range all {
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

type harness struct {
	t      *testing.T
	dir    string // data dir
	cfg    *config.Config
	drv    *fake.Driver
	st     *sqlite.Store
	svc    *control.Service
	clock  *clock
	agents *agents
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

// newHarness builds a started service over the fake driver with runc and
// runsc healthy. configure, if not nil, edits the settings first.
func newHarness(t *testing.T, configure func(*config.Config)) *harness {
	t.Helper()
	return newHarnessWith(t, configure, nil)
}

// newHarnessWith is newHarness with tune changing the service's own
// settings before it starts.
func newHarnessWith(t *testing.T, configure func(*config.Config), tune func(*control.Config)) *harness {
	t.Helper()
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
		Name:             testProfile,
		Description:      "test profile over the fake driver",
		Image:            testImage,
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
	ag := &agents{bin: filepath.Join(agentDir, "genesis-agent"), byKey: map[string]*agentProc{}}
	ag.asUser = traversable(filepath.Join(dir, "x")) && traversable(ag.bin)
	if !ag.asUser {
		t.Logf("data dir or agent binary not reachable by uid 1000: agents run as root")
	}
	ag.enabled.Store(true)
	drv := fake.New(fake.Config{Images: []string{testImage}, Hook: ag.hook})
	ag.drv = drv
	drv.SetProbeResult(probeWith("runc", "runsc"))
	t.Cleanup(func() {
		ag.killAll()
		if t.Failed() {
			t.Logf("agent output:\n%s", ag.log.String())
		}
	})

	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "state.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })

	clk := &clock{}
	ccfg := control.Config{
		Settings: cfg, Store: st, Driver: drv, AgentDir: agentDir, InstanceID: testInstance, Now: clk.Now,
	}
	if tune != nil {
		tune(&ccfg)
	}
	svc, err := control.New(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	return &harness{t: t, dir: dir, cfg: cfg, drv: drv, st: st, svc: svc, clock: clk, agents: ag}
}

// setProbe replaces the probe result and refreshes the service's cache.
func (h *harness) setProbe(p driver.ProbeResult) {
	h.drv.SetProbeResult(p)
	h.svc.RefreshProbe(context.Background())
}

func (h *harness) create(tenant string, in control.CreateSandboxInput) *sandbox.Sandbox {
	h.t.Helper()
	in.Tenant = tenant
	if in.Profile == "" {
		in.Profile = testProfile
	}
	sb, err := h.svc.CreateSandbox(context.Background(), in)
	if err != nil {
		h.t.Fatalf("CreateSandbox(%+v): %v", in, err)
	}
	return sb
}

func (h *harness) record(id string) *sandbox.Sandbox {
	h.t.Helper()
	sb, err := h.st.GetSandbox(context.Background(), "", id)
	if err != nil {
		h.t.Fatalf("record %s: %v", id, err)
	}
	return sb
}

func (h *harness) records() []*sandbox.Sandbox {
	h.t.Helper()
	list, err := h.st.ListSandboxes(context.Background(), store.SandboxFilter{})
	if err != nil {
		h.t.Fatal(err)
	}
	return list
}

func (h *harness) containers() []driver.Status {
	h.t.Helper()
	list, err := h.drv.List(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return list
}

// container returns the fake's container of sandbox id, if any.
func (h *harness) container(id string) (driver.Status, bool) {
	h.t.Helper()
	for _, c := range h.containers() {
		if c.Labels[driver.LabelSandbox] == id {
			return c, true
		}
	}
	return driver.Status{}, false
}

func (h *harness) sandboxDir(id string) string { return filepath.Join(h.dir, "sandboxes", id) }

func exists(p string) bool {
	_, err := os.Lstat(p)
	return !errors.Is(err, os.ErrNotExist)
}

// sandboxDirs lists the entries of <data-dir>/sandboxes.
func (h *harness) sandboxDirs() []string {
	h.t.Helper()
	entries, err := os.ReadDir(filepath.Join(h.dir, "sandboxes"))
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// assertGone checks that sandbox id left no container, directory or agent.
func (h *harness) assertGone(id string) {
	h.t.Helper()
	if c, ok := h.container(id); ok {
		h.t.Errorf("container %s of %s still in the driver (state %s)", c.ID, id, c.State)
	}
	if exists(h.sandboxDir(id)) {
		h.t.Errorf("sandbox dir of %s still exists", id)
	}
	h.waitAgents(0)
}

// waitAgents polls until n agent processes run.
func (h *harness) waitAgents(n int) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for h.agents.running() != n {
		if time.Now().After(deadline) {
			h.t.Errorf("%d agent processes run, want %d", h.agents.running(), n)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// assertNothingCreated checks that no record, container, directory or
// agent exists.
func (h *harness) assertNothingCreated() {
	h.t.Helper()
	if r := h.records(); len(r) != 0 {
		h.t.Errorf("%d sandbox records exist, want none (first: %s %s)", len(r), r[0].ID, r[0].State)
	}
	if c := h.containers(); len(c) != 0 {
		h.t.Errorf("%d containers exist, want none", len(c))
	}
	if d := h.sandboxDirs(); len(d) != 0 {
		h.t.Errorf("sandbox dirs exist: %v", d)
	}
	if n := h.agents.running(); n != 0 {
		h.t.Errorf("%d agents run, want none", n)
	}
}
