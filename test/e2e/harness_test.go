package e2e

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
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/images"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/driver/docker"
	"genesis.dev/sandbox/internal/testenv"
)

// Deadlines of the harness. They bound waits on real processes and Docker;
// none of them is a sleep.
const (
	readyTimeout  = 90 * time.Second // service start: the probe smoke-runs every runtime
	stopTimeout   = 40 * time.Second // SIGTERM → exit (the service drains for up to 30 s)
	callTimeout   = 2 * time.Minute  // one API call or CLI run
	dockerTimeout = 30 * time.Second // one docker CLI call
	pollEvery     = 100 * time.Millisecond
)

// env is one test's service environment: a data dir (so one service
// instance id), an API key, an optional config file, and the service
// process currently serving it. A test may restart the service on the same
// env; cleanup checks that no container of the instance is left.
type env struct {
	dataDir string
	config  string // config file path, "" for the embedded defaults
	apiKey  string
	docker  *docker.Driver
	// serveArgs are more arguments of sandbox-service serve.
	serveArgs []string

	mu      sync.Mutex
	current *service // the service serving now, nil before the first start
}

// newEnv skips t when Docker does not answer (fails in CI), then makes a
// short data dir (Unix socket paths under it must stay below 108 bytes) and,
// when configYAML is not empty, a config file with it. Its cleanup, which
// runs after the services are stopped, fails t if any container labelled
// with the env's instance id is left, and removes those containers.
func newEnv(t *testing.T, configYAML string) *env {
	t.Helper()
	drv := testenv.Docker(t)
	if _, err := exec.LookPath("docker"); err != nil {
		t.Fatalf("the Docker daemon answers but the docker CLI is not on PATH: %v", err)
	}
	dir, err := os.MkdirTemp("", "ge")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{dataDir: dir, apiKey: "e2e_" + randomHex(t, 16), docker: drv}
	if !strings.Contains(configYAML, "warm_pools:") {
		// The default warm pools would start containers for every test
		// service; tests of pools configure their own.
		configYAML = "warm_pools: false\n" + configYAML
	}
	if configYAML != "" {
		e.config = filepath.Join(dir, "e2e-config.yaml")
		if err := os.WriteFile(e.config, []byte(configYAML), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		defer os.RemoveAll(dir)
		inst := e.instance()
		if inst == "" {
			return // no service ever started
		}
		left := containers(t, "label="+driver.LabelInstance+"="+inst)
		if len(left) > 0 {
			t.Errorf("containers of instance %s left behind: %v", inst, left)
			dockerCmd(t, append([]string{"rm", "-f"}, left...)...)
		}
		// Snapshot images are kept with the data dir's snapshots, which
		// go with the test.
		imgs := strings.Fields(dockerCmd(t, "images", "-a", "-q", "--no-trunc", "--filter", "label="+driver.LabelInstance+"="+inst))
		slices.Sort(imgs)
		if imgs = slices.Compact(imgs); len(imgs) > 0 {
			if out, err := exec.Command("docker", append([]string{"rmi", "-f"}, imgs...)...).CombinedOutput(); err != nil {
				t.Logf("removing the images of instance %s: %v: %s", inst, err, out)
			}
		}
	})
	return e
}

// instance returns the service instance id saved in the data dir, or "".
func (e *env) instance() string {
	b, err := os.ReadFile(filepath.Join(e.dataDir, "instance_id"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// runtimes returns the runtimes to cover: runc and runsc (runsc may be
// missing outside CI only).
func (e *env) runtimes(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, r := range testenv.Runtimes(t, e.docker) {
		out = append(out, string(r))
	}
	return out
}

// requireImage fails t when the image of a profile is not built.
func (e *env) requireImage(t *testing.T, profile string) {
	t.Helper()
	r, ok := images.Lookup(profile)
	if !ok {
		t.Fatalf("no image recipe for profile %s", profile)
	}
	ctx, cancel := context.WithTimeout(context.Background(), dockerTimeout)
	defer cancel()
	present, err := e.docker.ImagePresent(ctx, r.Ref())
	if err != nil {
		t.Fatalf("image %s: %v", r.Ref(), err)
	}
	if !present {
		t.Fatalf("image %s of profile %s is not built; run `make test-images` (make test does it first)", r.Ref(), profile)
	}
}

// service is one running sandbox-service process.
type service struct {
	e    *env
	addr string
	// grpcAddr is the native gRPC listener's address (--grpc-addr).
	grpcAddr string
	cmd      *exec.Cmd
	log      *lockedBuffer
	done     chan struct{} // closed when the process has exited
	err      error         // Wait's result, valid after done
}

// lockedBuffer collects the service's output from its writer goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// start runs `sandbox-service serve` on a free loopback port for e and waits
// until /readyz answers 200 with every runtime of e.runtimes healthy. The
// service is stopped (SIGTERM) when t ends, and its log is added to t's
// output if t failed.
func (e *env) start(t *testing.T) *service {
	t.Helper()
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		s, err := e.startOnce(t)
		if err == nil {
			e.mu.Lock()
			e.current = s
			e.mu.Unlock()
			return s
		}
		lastErr = err
		if !errors.Is(err, errExitedEarly) {
			break
		}
		// The free port may have been taken between probe and bind: retry.
	}
	t.Fatalf("starting sandbox-service: %v", lastErr)
	return nil
}

var errExitedEarly = errors.New("sandbox-service exited before it was ready")

func (e *env) startOnce(t *testing.T) (*service, error) {
	t.Helper()
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	gaddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	runtimes := e.runtimes(t)
	args := []string{"serve", "--addr", addr, "--grpc-addr", gaddr, "--data-dir", e.dataDir, "--api-key", e.apiKey}
	if e.config != "" {
		args = append(args, "--config", e.config)
	}
	args = append(args, e.serveArgs...)
	s := &service{e: e, addr: addr, grpcAddr: gaddr, log: &lockedBuffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(filepath.Join(binDir, "sandbox-service"), args...)
	s.cmd.Env = append(os.Environ(), "GENESIS_CONFIG=", "GENESIS_API_KEY=")
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		s.stop(t)
		if t.Failed() {
			t.Logf("sandbox-service log (%s, data dir %s):\n%s", addr, e.dataDir, s.log.String())
		}
	})
	if err := s.waitReady(runtimes); err != nil {
		if errors.Is(err, errExitedEarly) {
			t.Logf("sandbox-service exited early (%v); log:\n%s", s.err, s.log.String())
		}
		return nil, err
	}
	return s, nil
}

// freeAddr returns a loopback address with a port that was free just now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitReady polls /readyz until it answers 200 and reports each of runtimes
// healthy. A 200 alone is not enough: the service is ready once any runtime
// passed its smoke run, and one whose first smoke run timed out on a busy
// host is refused until the probe loop retries it, so a test that creates a
// sandbox under it at once would fail.
func (s *service) waitReady(runtimes []string) error {
	hc := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(readyTimeout)
	last := "no answer yet"
	for {
		select {
		case <-s.done:
			return fmt.Errorf("%w: %v", errExitedEarly, s.err)
		default:
		}
		resp, err := hc.Get("http://" + s.addr + "/readyz")
		if err == nil {
			body := new(bytes.Buffer)
			_, _ = body.ReadFrom(resp.Body)
			resp.Body.Close()
			last = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(body.String()))
			if resp.StatusCode == http.StatusOK {
				var h client.Health
				if err := json.Unmarshal(body.Bytes(), &h); err != nil {
					return fmt.Errorf("/readyz body %q: %w", body.String(), err)
				}
				if runtimesHealthy(h, runtimes) {
					return nil
				}
			}
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("/readyz not 200 with runtimes %v healthy within %v; last answer: %s; log:\n%s", runtimes, readyTimeout, last, s.log.String())
		}
		time.Sleep(pollEvery)
	}
}

// runtimesHealthy reports whether the readiness report h says each of
// runtimes is healthy.
func runtimesHealthy(h client.Health, runtimes []string) bool {
	for _, rt := range runtimes {
		if h.Checks["runtime."+rt] != "ok" {
			return false
		}
	}
	return true
}

// url is the service's base URL.
func (s *service) url() string { return "http://" + s.addr }

// client returns a public API client for the service.
func (s *service) client() *client.Client { return client.New(s.url(), s.e.apiKey) }

// stop ends the service with SIGTERM (SIGKILL after stopTimeout) and waits.
// It is idempotent.
func (s *service) stop(t *testing.T) {
	t.Helper()
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(stopTimeout):
		t.Errorf("sandbox-service did not exit within %v of SIGTERM; killing it", stopTimeout)
		s.kill(t)
	}
}

// kill ends the service with SIGKILL, as a crash would, and waits.
func (s *service) kill(t *testing.T) {
	t.Helper()
	_ = s.cmd.Process.Kill()
	select {
	case <-s.done:
	case <-time.After(stopTimeout):
		t.Fatalf("sandbox-service pid %d did not die of SIGKILL within %v", s.cmd.Process.Pid, stopTimeout)
	}
}

// cliResult is one run of the genesis CLI.
type cliResult struct {
	args           []string
	stdout, stderr string
	code           int
}

func (r cliResult) String() string {
	return fmt.Sprintf("genesis %s: exit %d\nstdout: %q\nstderr: %q", strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
}

// cli runs the real genesis binary against the service, configured only by
// GENESIS_URL and GENESIS_API_KEY.
func (s *service) cli(t *testing.T, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "genesis"), args...)
	cmd.Env = append(os.Environ(), client.EnvURL+"="+s.url(), client.EnvAPIKey+"="+s.e.apiKey)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := cliResult{args: args, stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ctx.Err() == nil:
		r.code = ee.ExitCode()
	default:
		t.Fatalf("genesis %s: %v (stderr %q)", strings.Join(args, " "), err, r.stderr)
	}
	return r
}

// createSandbox creates a sandbox through the client and deletes it when t
// ends (through whichever service of the env runs then).
func (e *env) createSandbox(t *testing.T, req client.CreateSandboxRequest) *client.Sandbox {
	t.Helper()
	e.mu.Lock()
	c := e.current.client()
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	sb, err := c.CreateSandbox(ctx, req, "")
	if err != nil {
		t.Fatalf("create sandbox %+v: %v", req, err)
	}
	e.deleteOnCleanup(t, sb.ID)
	if sb.State != "ready" {
		t.Fatalf("created sandbox %s is %s, want ready", sb.ID, sb.State)
	}
	return sb
}

// deleteOnCleanup deletes sandbox id when t ends, if a service still runs.
// Failures are only logged: the env's container check is the assertion.
func (e *env) deleteOnCleanup(t *testing.T, id string) {
	t.Cleanup(func() {
		e.mu.Lock()
		s := e.current
		e.mu.Unlock()
		select {
		case <-s.done:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		if err := s.client().DeleteSandbox(ctx, id); err != nil {
			t.Logf("cleanup: delete %s: %v", id, err)
		}
	})
}

// execOK runs a shell script in a sandbox and fails t on an API error.
func execOK(t *testing.T, c *client.Client, id, script string) *client.ExecResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	res, err := c.Exec(ctx, id, client.ExecRequest{Script: script, TimeoutMS: 30_000})
	if err != nil {
		t.Fatalf("exec %q in %s: %v", script, id, err)
	}
	return res
}

// processesScript lists "pid comm" of every process in the sandbox, like
// `ps -eo pid,comm` (the minbase images have no procps).
const processesScript = `for p in /proc/[0-9]*; do printf '%s %s\n' "${p#/proc/}" "$(cat "$p/comm" 2>/dev/null)"; done`

// processNames returns the comm of every process in the sandbox.
func processNames(t *testing.T, c *client.Client, id string) []string {
	t.Helper()
	res := execOK(t, c, id, processesScript)
	if res.ExitCode != 0 {
		t.Fatalf("listing processes in %s: exit %d, stderr %q", id, res.ExitCode, res.Stderr)
	}
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
		if _, comm, ok := strings.Cut(line, " "); ok {
			names = append(names, comm)
		}
	}
	return names
}

// eventually polls cond until it reports true or timeout passes, then fails
// t with what and cond's last detail.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	testenv.Eventually(t, timeout, pollEvery, what, cond)
}

// dockerCmd runs the docker CLI and returns its trimmed stdout.
func dockerCmd(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), dockerTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("docker %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

// containers returns the ids of all containers (running or not) matching
// every docker ps filter given.
func containers(t *testing.T, filters ...string) []string {
	t.Helper()
	args := []string{"ps", "-a", "-q", "--no-trunc"}
	for _, f := range filters {
		args = append(args, "--filter", f)
	}
	return strings.Fields(dockerCmd(t, args...))
}

// sandboxContainers returns the managed containers of a sandbox id.
func sandboxContainers(t *testing.T, id string) []string {
	t.Helper()
	return containers(t, "label="+driver.LabelManaged+"=true", "label="+driver.LabelSandbox+"="+id)
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
