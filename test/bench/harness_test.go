package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/testenv"
)

// profile is the profile every benchmark sandbox uses.
const profile = "tool-basic"

// Deadlines; none of them bounds what is measured, they only stop a stuck
// run from hanging the benchmark.
const (
	readyTimeout  = 2 * time.Minute
	opTimeout     = 3 * time.Minute
	dockerTimeout = time.Minute
	stopTimeout   = 45 * time.Second
)

// serviceConfig is laid over the service's embedded defaults. The service
// removes any managed container it has no record of once it is older than
// orphan_grace, whichever service started it; other services share this
// Docker daemon, so the grace is long enough that this one never touches
// theirs. max_output_bytes is raised so that the streaming benchmarks can
// keep hundreds of MiB of a job's output; requests that do not ask for more
// still get default_output_bytes.
const serviceConfig = `limits: {max_sandboxes: 500, max_output_bytes: 1073741824}
intervals: {orphan_grace: 720h, reconcile: 1h}
admin_api_key: ` + benchAdminKey + `
`

// benchAdminKey is the admin key of the benchmark service (for the tenant
// and key API).
const benchAdminKey = "bench-admin-key-0123456789abcdef"

var bins struct {
	once sync.Once
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bins.dir != "" {
		os.RemoveAll(bins.dir)
	}
	os.Exit(code)
}

// binDir builds sandbox-service and the static genesis-agent once per test
// binary into one temporary directory, so the service finds the agent next
// to itself.
func binDir(tb testing.TB) string {
	tb.Helper()
	bins.once.Do(func() {
		root := testenv.ModuleRoot(tb)
		dir, err := os.MkdirTemp("", "genesis-bench-bin-")
		if err != nil {
			bins.err = err
			return
		}
		bins.dir = dir
		for _, b := range []struct {
			pkg, out string
			env      []string
		}{
			{"./cmd/sandbox-service", "sandbox-service", nil},
			{"./cmd/genesis-agent", "genesis-agent", []string{"CGO_ENABLED=0"}},
			{"./cmd/genesis-egress", "genesis-egress", []string{"CGO_ENABLED=0"}},
			{"./test/e2e/inetserver", "inetserver", []string{"CGO_ENABLED=0"}},
			{"./test/e2e/sandboxserver", "sandboxserver", []string{"CGO_ENABLED=0"}},
			{"./test/mcpfixture", "mcpfixture", []string{"CGO_ENABLED=0"}},
			{"./test/bench/cdpdirect", "cdpdirect", []string{"CGO_ENABLED=0"}},
		} {
			cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, b.out), b.pkg)
			cmd.Dir = root
			cmd.Env = append(os.Environ(), b.env...)
			if out, err := cmd.CombinedOutput(); err != nil {
				bins.err = fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
				return
			}
		}
	})
	if bins.err != nil {
		tb.Fatalf("building binaries: %v", bins.err)
	}
	return bins.dir
}

// service is one sandbox-service subprocess and a client for it. It tracks
// the sandboxes created through it so that stop can remove them.
type service struct {
	cmd     *exec.Cmd
	exited  chan struct{}
	base    string // temp dir holding config, log and data dir
	dataDir string
	logPath string
	url     string // http://127.0.0.1:port
	// grpcAddr is where its gRPC clients dial: its native gRPC listener
	// (grpc_addr), or url's address for a build without one (a baseline
	// older than it).
	grpcAddr string
	key      string // API key of the default tenant
	client   *client.Client
	http     *http.Client
	runtimes []string // usable runtimes of the profile, runc first
	image    string   // the profile's image reference

	mu   sync.Mutex
	live map[string]bool
}

// startService skips tb when Docker does not answer, builds the binaries,
// starts a service on a free loopback port, waits for /readyz and checks
// that the profile's image is built. tb's cleanup stops the service and
// removes everything it made.
func startService(tb testing.TB) *service {
	tb.Helper()
	return startServiceWith(tb, "")
}

// startServiceWith is startService with extraConfig (YAML) appended to the
// benchmark config.
func startServiceWith(tb testing.TB, extraConfig string) *service {
	tb.Helper()
	return startServiceLogging(tb, extraConfig, "warn")
}

// startServiceLogging is startServiceWith at the log level logLevel (the
// cold-create benchmark reads the service's debug lines).
func startServiceLogging(tb testing.TB, extraConfig, logLevel string) *service {
	tb.Helper()
	return startServiceFrom(tb, "", extraConfig, logLevel)
}

// startServiceIn is startServiceWith running the sandbox-service of dir,
// which must hold genesis-agent and genesis-egress beside it: a second
// service, e.g. another build's, on its own port and data directory.
func startServiceIn(tb testing.TB, dir, extraConfig string) *service {
	tb.Helper()
	return startServiceFrom(tb, dir, extraConfig, "warn")
}

// startServiceFrom is startServiceLogging running the sandbox-service (and
// genesis-agent) binaries in dir; "" builds them from this tree.
func startServiceFrom(tb testing.TB, dir, extraConfig, logLevel string) *service {
	tb.Helper()
	d := testenv.Docker(tb) // skips (or fails in CI) without Docker
	registered := testenv.Runtimes(tb, d)
	if dir == "" {
		dir = binDir(tb)
	}

	// A short base path: sandbox dirs under it hold Unix sockets.
	base, err := os.MkdirTemp("/tmp", "gsb-")
	if err != nil {
		tb.Fatal(err)
	}
	s := &service{
		exited:  make(chan struct{}),
		base:    base,
		dataDir: filepath.Join(base, "d"),
		logPath: filepath.Join(base, "service.log"),
		live:    map[string]bool{},
		http:    &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute}},
	}
	cfgPath := filepath.Join(base, "config.yaml")
	if !strings.Contains(extraConfig, "warm_pools:") {
		// The default warm pools would start containers the benchmarks do
		// not measure; the pool benchmarks switch them on.
		extraConfig += "warm_pools: false\n"
	}
	if err := os.WriteFile(cfgPath, []byte(serviceConfig+extraConfig), 0o600); err != nil {
		tb.Fatal(err)
	}
	logf, err := os.Create(s.logPath)
	if err != nil {
		tb.Fatal(err)
	}
	defer logf.Close()
	addr, err := freeLoopbackAddr()
	if err != nil {
		tb.Fatal(err)
	}
	gaddr, err := freeLoopbackAddr()
	if err != nil {
		tb.Fatal(err)
	}
	key := randomKey(tb)
	s.cmd = exec.Command(filepath.Join(dir, "sandbox-service"), "serve",
		"--addr", addr, "--data-dir", s.dataDir, "--api-key", key,
		"--config", cfgPath, "--log-level", logLevel)
	// The environment, not --grpc-addr: a baseline build without the
	// native gRPC listener ignores it (and is dialled on addr).
	s.cmd.Env = append(os.Environ(), "GENESIS_GRPC_ADDR="+gaddr)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		tb.Fatalf("starting sandbox-service: %v", err)
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	tb.Cleanup(func() { s.stop(tb) })
	s.url, s.key = "http://"+addr, key
	s.client = client.New(s.url, key, client.WithHTTPClient(s.http))

	if err := s.waitReady(); err != nil {
		tb.Fatalf("sandbox-service not ready: %v\n%s", err, s.logTail())
	}
	// A build with the native gRPC listener listens on it before it is
	// ready.
	s.grpcAddr = addr
	if c, err := net.DialTimeout("tcp", gaddr, time.Second); err == nil {
		c.Close()
		s.grpcAddr = gaddr
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	profs, err := s.client.Profiles(ctx)
	if err != nil {
		tb.Fatalf("profiles: %v", err)
	}
	i := slices.IndexFunc(profs.Items, func(p client.Profile) bool { return p.Name == profile })
	if i < 0 {
		tb.Fatalf("profile %s is not configured", profile)
	}
	if p := profs.Items[i]; p.ImageStatus != "present" {
		msg := fmt.Sprintf("image of profile %s is not built (make test-images; %s)", profile, p.BuildCommand)
		if os.Getenv("CI") == "true" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	s.image = profs.Items[i].Image
	for _, rt := range registered {
		if slices.Contains(profs.Items[i].UsableRuntimes, string(rt)) {
			s.runtimes = append(s.runtimes, string(rt))
		}
	}
	return s
}

func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func randomKey(tb testing.TB) string {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatal(err)
	}
	return "bench_" + hex.EncodeToString(b[:])
}

func (s *service) waitReady() error {
	deadline := time.Now().Add(readyTimeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return fmt.Errorf("sandbox-service exited: %v", s.cmd.ProcessState)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, last = s.client.Ready(ctx)
		cancel()
		if last == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("no ready answer within %v: %w", readyTimeout, last)
}

// logTail returns the end of the service's log.
func (s *service) logTail() string {
	b, _ := os.ReadFile(s.logPath)
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(b)
}

// create creates a sandbox of the profile under runtime and tracks it.
func (s *service) create(ctx context.Context, runtime string) (*client.Sandbox, error) {
	sb, err := s.client.CreateSandbox(ctx, client.CreateSandboxRequest{
		Profile:  profile,
		Runtime:  runtime,
		Metadata: map[string]string{"purpose": "bench"},
	}, "")
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.live[sb.ID] = true
	s.mu.Unlock()
	return sb, nil
}

// remove deletes a sandbox and stops tracking it.
func (s *service) remove(ctx context.Context, id string) error {
	if err := s.client.DeleteSandbox(ctx, id); err != nil {
		return fmt.Errorf("delete %s: %w", id, err)
	}
	s.mu.Lock()
	delete(s.live, id)
	s.mu.Unlock()
	return nil
}

// describe says what the service knows of a sandbox, for error messages
// about one that went away under the benchmark.
func (s *service) describe(ctx context.Context, id string) string {
	sb, err := s.client.GetSandbox(ctx, id)
	if err != nil {
		return fmt.Sprintf("sandbox %s: %v", id, err)
	}
	return fmt.Sprintf("sandbox %s is %s: %s", id, sb.State, sb.FailureReason)
}

// rssKiB is the service process's VmRSS.
func (s *service) rssKiB() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	return VmRSSKiB(string(b))
}

// stop deletes the sandboxes still tracked, stops the service, removes any
// container of its instance that is left and deletes its files.
func (s *service) stop(tb testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	s.mu.Lock()
	ids := make([]string, 0, len(s.live))
	for id := range s.live {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	for _, id := range ids {
		if err := s.remove(ctx, id); err != nil {
			tb.Errorf("cleanup: %v", err)
		}
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(stopTimeout):
		tb.Errorf("sandbox-service did not stop within %v; killing it", stopTimeout)
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	// Safety net: whatever this instance still has in Docker.
	if inst, err := os.ReadFile(filepath.Join(s.dataDir, "instance_id")); err == nil {
		filter := "label=" + driver.LabelInstance + "=" + strings.TrimSpace(string(inst))
		if out, err := dockerCLI(ctx, "ps", "-aq", "--filter", filter); err == nil && out != "" {
			tb.Errorf("containers left behind by the service: %s", strings.Fields(out))
			args := append([]string{"rm", "-f"}, strings.Fields(out)...)
			if _, err := dockerCLI(ctx, args...); err != nil {
				tb.Errorf("cleanup: %v", err)
			}
		}
	}
	s.http.CloseIdleConnections()
	if err := os.RemoveAll(s.base); err != nil {
		tb.Errorf("cleanup: %v", err)
	}
}

// dockerCLI runs the docker client with a deadline and returns its trimmed
// standard output.
func dockerCLI(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, dockerTimeout)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// containerOf returns the id of the container of a sandbox.
func containerOf(ctx context.Context, sandboxID string) (string, error) {
	out, err := dockerCLI(ctx, "ps", "-q", "--filter", "label="+driver.LabelSandbox+"="+sandboxID)
	if err != nil {
		return "", err
	}
	ids := strings.Fields(out)
	if len(ids) != 1 {
		return "", fmt.Errorf("sandbox %s: want one running container, found %d", sandboxID, len(ids))
	}
	return ids[0], nil
}

// hostPID returns the host pid Docker reports for a container's main
// process: the agent under runc, the runsc-sandbox (Sentry) under runsc.
func hostPID(ctx context.Context, container string) (int, error) {
	out, err := dockerCLI(ctx, "inspect", "-f", "{{.State.Pid}}", container)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(out)
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("container %s: bad pid %q", container, out)
	}
	return pid, nil
}

// hostRSSKiB returns the VmRSS of a host process.
func hostRSSKiB(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return VmRSSKiB(string(b))
}

// goferOf returns the pid of the runsc-gofer that serves the same container
// as the runsc-sandbox sentry: the sibling under the same shim whose command
// line names the container.
func goferOf(sentry int, container string) (int, error) {
	ppid, err := parentPID(sentry)
	if err != nil {
		return 0, err
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == sentry {
			continue
		}
		if p, err := parentPID(pid); err != nil || p != ppid {
			continue
		}
		cl, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		if bytes.HasPrefix(cl, []byte("runsc-gofer\x00")) && bytes.Contains(cl, []byte(container)) {
			return pid, nil
		}
	}
	return 0, errors.New("no runsc-gofer found next to the sentry")
}

func parentPID(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// pid (comm) state ppid …; comm may contain spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	return strconv.Atoi(f[1])
}

// envInt reads a positive iteration count from the environment.
func envInt(tb testing.TB, name string, def int) int {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		tb.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// eachRuntime runs fn as a sub-benchmark per runtime runc and runsc, skipping
// a runtime the service cannot use.
func (s *service) eachRuntime(b *testing.B, fn func(b *testing.B, runtime string)) {
	for _, rt := range []string{"runc", "runsc"} {
		b.Run(rt, func(b *testing.B) {
			if !slices.Contains(s.runtimes, rt) {
				b.Skipf("runtime %s is not usable for %s on this host", rt, profile)
			}
			fn(b, rt)
		})
	}
}

// reportSummary reports a summary's fields as metrics named <prefix>p50-ms …
func reportSummary(b *testing.B, prefix string, s Summary) {
	b.ReportMetric(0, "ns/op") // the wall time of the whole run says nothing
	b.ReportMetric(Ms(s.P50), prefix+"p50-ms")
	b.ReportMetric(Ms(s.P90), prefix+"p90-ms")
	b.ReportMetric(Ms(s.P99), prefix+"p99-ms")
	b.ReportMetric(Ms(s.Mean), prefix+"mean-ms")
	b.ReportMetric(Ms(s.Min), prefix+"min-ms")
	b.ReportMetric(Ms(s.Max), prefix+"max-ms")
}

// printTable writes a titled, timestamped table to standard output, where
// go test shows it whole (benchmark logs are cut to ten lines).
func printTable(title string, t *Table) {
	fmt.Printf("\n## %s — %s, load average %s%s\n", title, time.Now().Format(time.RFC3339), loadAvg(), t)
}

// loadAvg returns the 1, 5 and 15 minute load averages of the host.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// timesInSandbox runs argv, a timing client inside sandbox id that prints
// {"US": [...]} (the µs of each call), and returns its calls after the
// first 20 (its warm-up).
func (s *service) timesInSandbox(ctx context.Context, b *testing.B, id string, argv ...string) []time.Duration {
	b.Helper()
	res, err := s.client.Exec(ctx, id, client.ExecRequest{Command: argv, TimeoutMS: 300_000, MaxOutputBytes: 16 << 20})
	if err != nil || res.ExitCode != 0 {
		b.Fatalf("direct: %v %+v", err, res)
	}
	var direct struct{ US []int64 }
	if err := json.Unmarshal([]byte(res.Stdout), &direct); err != nil {
		b.Fatalf("direct output %q: %v", res.Stdout, err)
	}
	var ds []time.Duration
	for _, us := range direct.US[min(20, len(direct.US)):] {
		ds = append(ds, time.Duration(us)*time.Microsecond)
	}
	return ds
}
