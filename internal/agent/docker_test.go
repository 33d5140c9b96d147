package agent_test

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/agent/agentclient"
	"genesis.dev/sandbox/internal/agent/agentproto"
)

// testImage is the tiny busybox image the container tests build with
// docker import (there is no registry to pull from). An image of that name
// is reused, so the tag changes with the recipe.
const testImage = "genesis-test/busybox:agent-2"

// sandboxUID is the unprivileged user the agent runs as in the containers.
const sandboxUID = 1000

// dockerState is shared by the container tests of one test binary.
type dockerState struct {
	once     sync.Once
	err      error // docker unusable: skip
	buildErr error // docker usable but the image could not be made: fail
	runtimes []string
	created  bool // the image was built by this binary and is removed at exit
}

var docker dockerState

// dockerCmd runs the docker CLI with a deadline and returns trimmed stdout.
func dockerCmd(timeout time.Duration, stdin io.Reader, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// needDocker skips when Docker is absent, fails when the test image cannot
// be built, and returns the runtimes the daemon offers.
func needDocker(tb testing.TB) []string {
	tb.Helper()
	docker.once.Do(func() {
		if _, err := exec.LookPath("docker"); err != nil {
			docker.err = err
			return
		}
		out, err := dockerCmd(15*time.Second, nil, "info", "--format", "{{range $k, $v := .Runtimes}}{{$k}} {{end}}")
		if err != nil {
			docker.err = err
			return
		}
		docker.runtimes = strings.Fields(out)
		if _, err := dockerCmd(15*time.Second, nil, "image", "inspect", "--format", "{{.Id}}", testImage); err == nil {
			return
		}
		docker.buildErr = buildTestImage()
		docker.created = docker.buildErr == nil
	})
	if docker.err != nil {
		tb.Skipf("docker not available: %v", docker.err)
	}
	if docker.buildErr != nil {
		tb.Fatalf("building %s: %v", testImage, docker.buildErr)
	}
	return docker.runtimes
}

// removeTestImage removes the image if this binary built it.
func removeTestImage() {
	if docker.created {
		if _, err := dockerCmd(30*time.Second, nil, "rmi", "-f", testImage); err != nil {
			fmt.Fprintln(os.Stderr, "cleanup:", err)
		}
	}
}

// buildTestImage imports a root filesystem holding a static busybox and a
// symlink per applet, plus /tmp and a /workspace owned by the sandbox user.
func buildTestImage() error {
	bb, err := exec.LookPath("busybox")
	if err != nil {
		return fmt.Errorf("static busybox not found (install busybox-static): %w", err)
	}
	bin, err := os.ReadFile(bb)
	if err != nil {
		return err
	}
	list, err := exec.Command(bb, "--list").Output()
	if err != nil {
		return fmt.Errorf("busybox --list: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	dirs := []struct {
		name string
		mode int64
		uid  int
	}{{"bin/", 0o755, 0}, {"tmp/", 0o1777, 0}, {"workspace/", 0o755, sandboxUID}, {"etc/", 0o755, 0},
		{"srv/", 0o755, 0}, {"srv/drop/", 0o777, 0}} // a writable directory on the root that no mount covers
	for _, d := range dirs {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d.name, Mode: d.mode, Uid: d.uid, Gid: d.uid, ModTime: now}); err != nil {
			return err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755, Size: int64(len(bin)), ModTime: now}); err != nil {
		return err
	}
	if _, err := tw.Write(bin); err != nil {
		return err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/bin/sh\nsandbox:x:%d:%d:sandbox:/workspace:/bin/sh\n", sandboxUID, sandboxUID)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "etc/passwd", Mode: 0o644, Size: int64(len(passwd)), ModTime: now}); err != nil {
		return err
	}
	if _, err := io.WriteString(tw, passwd); err != nil {
		return err
	}
	for _, applet := range strings.Fields(string(list)) {
		if applet == "busybox" || strings.Contains(applet, "/") {
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + applet, Linkname: "busybox", Mode: 0o777, ModTime: now}); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	_, err = dockerCmd(60*time.Second, &buf, "import", "--message", "genesis-agent test image", "-", testImage)
	return err
}

// sandboxContainer is a running container whose PID 1 is genesis-agent.
type sandboxContainer struct {
	id     string
	runDir string // the host directory mounted at /run/genesis
	client *agentclient.Client
}

// newRunDir makes a run directory for a container, removed when tb ends.
func newRunDir(tb testing.TB) string {
	tb.Helper()
	runDir, err := os.MkdirTemp("", "gr")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(runDir) })
	if err := os.Chown(runDir, sandboxUID, sandboxUID); err != nil {
		tb.Fatal(err)
	}
	return runDir
}

// containerArgs are the docker run/create arguments after the name, labels
// and runtime: the lockdown, the mounts and the agent as entrypoint.
func containerArgs(runDir string, extraArgs ...string) []string {
	return containerArgsFrom(filepath.Dir(agentBin), runDir, extraArgs...)
}

// containerArgsFrom is containerArgs with the genesis-agent binary of
// agentDir.
func containerArgsFrom(agentDir, runDir string, extraArgs ...string) []string {
	args := []string{
		"--network", "none",
		"--cap-drop", "ALL",
		"--security-opt", "no-new-privileges",
		"--user", fmt.Sprintf("%d:%d", sandboxUID, sandboxUID),
		"--env", "SANDBOX_VAR=from-container",
		"--env", "GENESIS_AGENT_LOG_LEVEL=debug",
		"-v", agentDir + ":/.genesis:ro",
		"-v", runDir + ":/run/genesis",
	}
	args = append(args, extraArgs...)
	return append(args, "--entrypoint", "/.genesis/genesis-agent", testImage, "serve", "--socket", "/run/genesis/agent.sock")
}

// cleanupContainer removes c's container when tb ends (with its logs on a
// failure).
func cleanupContainer(tb testing.TB, c *sandboxContainer) {
	tb.Cleanup(func() {
		c.client.Close()
		if tb.Failed() {
			logs, _ := dockerCmd(30*time.Second, nil, "logs", c.id)
			tb.Logf("container %s logs:\n%s", c.id, logs)
		}
		if _, err := dockerCmd(60*time.Second, nil, "rm", "-f", "-v", c.id); err != nil {
			tb.Errorf("cleanup: %v", err)
		}
	})
}

// runCmd runs a command with a deadline and returns its combined output.
func runCmd(timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(out), err
}

// startContainer runs the agent as the entrypoint of a locked-down container
// under runtime and waits until it answers over the bind-mounted socket.
func startContainer(tb testing.TB, runtime string, extraArgs ...string) *sandboxContainer {
	tb.Helper()
	return startContainerFrom(tb, runtime, filepath.Dir(agentBin), extraArgs...)
}

// startContainerFrom is startContainer with the genesis-agent binary of
// agentDir.
func startContainerFrom(tb testing.TB, runtime, agentDir string, extraArgs ...string) *sandboxContainer {
	tb.Helper()
	runDir := newRunDir(tb)
	args := []string{"run", "-d",
		"--name", fmt.Sprintf("genesis-agent-test-%s-%d", runtime, time.Now().UnixNano()),
		"--label", "dev.genesis.purpose=agent-test",
		"--runtime", runtime,
	}
	args = append(args, containerArgsFrom(agentDir, runDir, extraArgs...)...)
	id, err := dockerCmd(60*time.Second, nil, args...)
	if err != nil {
		tb.Fatal(err)
	}
	c := &sandboxContainer{id: id, runDir: runDir, client: agentclient.Dial(filepath.Join(runDir, "agent.sock"))}
	cleanupContainer(tb, c)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, err := c.client.WaitReady(ctx, 2*time.Millisecond); err != nil {
		tb.Fatalf("agent in %s container not ready: %v", runtime, err)
	}
	return c
}

func runtimesUnderTest(tb testing.TB) []string {
	have := needDocker(tb)
	var out []string
	for _, rt := range []string{"runc", "runsc"} {
		if slices.Contains(have, rt) {
			out = append(out, rt)
		}
	}
	return out
}

func TestInContainers(t *testing.T) {
	for _, rt := range []string{"runc", "runsc"} {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			if !slices.Contains(runtimesUnderTest(t), rt) {
				t.Skipf("docker runtime %s not configured", rt)
			}
			testInContainer(t, rt)
		})
	}
}

func testInContainer(t *testing.T, rt string) {
	c := startContainer(t, rt)
	ctx := context.Background()

	p, err := c.client.Ping(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p.PID != 1 || p.UID != sandboxUID {
		t.Errorf("ping %+v: want PID 1 and uid %d", p, sandboxUID)
	}
	if rt == "runsc" && !strings.HasSuffix(p.Kernel, "-gvisor") {
		t.Errorf("kernel under runsc = %q, want a gVisor kernel", p.Kernel)
	}

	res := execOK(t, c.client, agentproto.ExecRequest{Command: []string{"uname", "-r"}})
	if got := strings.TrimSpace(string(res.Stdout)); got != p.Kernel {
		t.Errorf("uname -r = %q, ping kernel %q", got, p.Kernel)
	}
	t.Logf("%s: kernel %s", rt, p.Kernel)

	res = execOK(t, c.client, agentproto.ExecRequest{
		Script: `echo "hello $SANDBOX_VAR $(id -u) $(pwd)"; echo "[$GENESIS_AGENT_LOG_LEVEL]" >&2`,
	})
	if string(res.Stdout) != "hello from-container 1000 /workspace\n" || string(res.Stderr) != "[]\n" || res.ExitCode != 0 {
		t.Errorf("echo: %q %q %d", res.Stdout, res.Stderr, res.ExitCode)
	}

	res = execOK(t, c.client, agentproto.ExecRequest{Command: []string{"cat"}, Stdin: []byte("round trip")})
	if string(res.Stdout) != "round trip" {
		t.Errorf("stdin: %q", res.Stdout)
	}

	res = execOK(t, c.client, agentproto.ExecRequest{Command: []string{"no-such-tool"}})
	if res.ExitCode != 127 || !strings.HasPrefix(string(res.Stderr), "genesis-agent: ") {
		t.Errorf("not found: %d %q", res.ExitCode, res.Stderr)
	}

	res = execOK(t, c.client, agentproto.ExecRequest{Script: "head -c 3000000 /dev/zero", MaxOutputBytes: 1000})
	if len(res.Stdout) != 1000 || res.StdoutBytes != 3000000 || !res.StdoutTruncated {
		t.Errorf("cap: kept %d of %d truncated %v", len(res.Stdout), res.StdoutBytes, res.StdoutTruncated)
	}

	start := time.Now()
	res = execOK(t, c.client, agentproto.ExecRequest{Script: "sleep 30 & sleep 30", TimeoutMS: 500, KillGraceMS: 100})
	if el := time.Since(start); res.ExitReason != "timeout" || el > 2*time.Second {
		t.Errorf("timeout: reason %q after %v", res.ExitReason, el)
	}

	// Orphans: grandchildren outlive the job in their own sessions and are
	// reparented to the agent (PID 1), which must reap them.
	res = execOK(t, c.client, agentproto.ExecRequest{
		Script: "for i in 1 2 3; do setsid sh -c 'sleep 0.2' </dev/null >/dev/null 2>&1 & done; sh -c 'sleep 0.1 &'; echo ok",
	})
	if string(res.Stdout) != "ok\n" {
		t.Errorf("double fork job: %+v", res)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := containerProcs(t, c)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes left besides the agent and the probe: %q", left)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Twenty jobs at once over the one connection.
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.client.Exec(ctx, agentproto.ExecRequest{Script: fmt.Sprintf("echo %d", i)})
			if err != nil || string(res.Stdout) != fmt.Sprintf("%d\n", i) {
				t.Errorf("parallel job %d: %v %q", i, err, res.Stdout)
			}
		}()
	}
	wg.Wait()

	p50 := measureExecTrue(t, c.client, 200)
	t.Logf("%s: exec round trip of true via agentclient: p50 %v over 200 calls", rt, p50)
}

// containerProcs lists processes in the container other than the agent,
// its idle spare job shims and the listing exec itself (its shell, their
// children and the shim it runs under), as "pid state comm".
func containerProcs(t *testing.T, c *sandboxContainer) []string {
	t.Helper()
	// Every line of /proc/N/stat (the listing shell and its children are
	// ignored by pgid), then the idle spare shims: started as
	// "genesis-agent-shim shim spare" and not (yet) renamed for a job.
	res := execOK(t, c.client, agentproto.ExecRequest{Script: `echo "self $$ $PPID"; cat /proc/[0-9]*/stat 2>/dev/null
for p in /proc/[0-9]*; do
  case "$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null)" in
  "genesis-agent-shim shim spare ") read -r c <"$p/comm" && [ "$c" != genesis-shim ] && echo "spare ${p#/proc/}";;
  esac
done; true`})
	lines := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "self ") {
		t.Fatalf("proc listing: %q", res.Stdout)
	}
	self, shim, _ := strings.Cut(strings.TrimPrefix(lines[0], "self "), " ")
	spare := map[string]bool{}
	for _, l := range lines[1:] {
		if pid, ok := strings.CutPrefix(l, "spare "); ok {
			spare[pid] = true
		}
	}
	var out []string
	for _, l := range lines[1:] {
		pid, rest, ok := strings.Cut(l, " ")
		i := strings.LastIndexByte(rest, ')')
		if !ok || i < 0 {
			continue
		}
		f := strings.Fields(rest[i+1:])
		if len(f) < 3 || pid == "1" || pid == shim || f[2] == self || spare[pid] {
			continue
		}
		out = append(out, pid+" "+f[0]+" "+rest[:i+1])
	}
	return out
}

// measureExecTrue returns the median round trip of n execs of true.
func measureExecTrue(tb testing.TB, c *agentclient.Client, n int) time.Duration {
	tb.Helper()
	ctx := context.Background()
	for range 10 { // warm the connection and the page cache
		if _, err := c.Exec(ctx, agentproto.ExecRequest{Command: []string{"true"}}); err != nil {
			tb.Fatal(err)
		}
	}
	d := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		res, err := c.Exec(ctx, agentproto.ExecRequest{Command: []string{"true"}})
		d = append(d, time.Since(start))
		if err != nil || res.ExitCode != 0 {
			tb.Fatalf("exec true: %v %+v", err, res)
		}
	}
	slices.Sort(d)
	return d[len(d)/2]
}

// TestOOMInContainer runs a job out of its container's memory and checks
// that the kernel's OOM killer takes the job, not the agent: every process
// the agent starts has a higher oom_score_adj than the agent (oomadj.go).
// The job keeps writers alive after the first kill (the shell holding the
// substitution dies first, then head and tr keep allocating pipe and page
// memory), which under load used to make a second kill pick PID 1.
func TestOOMInContainer(t *testing.T) {
	for _, rt := range []string{"runc", "runsc"} {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			if !slices.Contains(runtimesUnderTest(t), rt) {
				t.Skipf("docker runtime %s not configured", rt)
			}
			testOOMInContainer(t, rt)
		})
	}
}

func testOOMInContainer(t *testing.T, rt string) {
	c := startContainer(t, rt, "--memory", "64m", "--memory-swap", "64m")
	ctx := context.Background()

	// The priorities: a command the agent starts directly and one a shim
	// starts are at 1000, the shim at 500, the agent at the container's
	// value (0). The agent is raised while it forks, so its value is read
	// from outside until it is back.
	res := execOK(t, c.client, agentproto.ExecRequest{Script: "cat /proc/self/oom_score_adj"})
	if got := strings.TrimSpace(string(res.Stdout)); got != "1000" {
		t.Errorf("oom_score_adj of an exec = %q, want 1000; stderr %q", got, res.Stderr)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got, err := dockerCmd(30*time.Second, nil, "exec", c.id, "cat", "/proc/1/oom_score_adj")
		if err != nil {
			t.Fatal(err)
		}
		if got == "0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("oom_score_adj of the agent = %q, want 0", got)
		}
	}
	// A background job runs under a shim; it stays up while the shim's
	// value is read (the shim is raised while it forks the command).
	if _, err := c.client.StartJob(ctx, agentproto.JobStartRequest{ExecRequest: agentproto.ExecRequest{JobID: "job_adj",
		Script: "echo $(cat /proc/self/oom_score_adj) $PPID >/tmp/adj.part && mv /tmp/adj.part /tmp/adj && exec sleep 60"}}); err != nil {
		t.Fatal(err)
	}
	var job []string
	deadline := time.Now().Add(20 * time.Second)
	for {
		if len(job) == 0 {
			res = execOK(t, c.client, agentproto.ExecRequest{Script: "cat /tmp/adj 2>/dev/null; true"})
			job = strings.Fields(string(res.Stdout))
		}
		var shimAdj string
		if len(job) == 2 {
			res = execOK(t, c.client, agentproto.ExecRequest{Command: []string{"cat", "/proc/" + job[1] + "/oom_score_adj"}})
			shimAdj = strings.TrimSpace(string(res.Stdout))
			if job[0] == "1000" && shimAdj == "500" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("oom_score_adj of a shim's command and its pid %q, of the shim %q; want 1000 and 500", job, shimAdj)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := c.client.CancelJob(ctx, "job_adj", 0); err != nil {
		t.Fatal(err)
	}

	if rt != "runc" {
		// gVisor keeps the values but has no OOM killer of its own: the
		// host cgroup's limit covers the sentry, whose kernel processes the
		// host kills, so any out-of-memory job ends the whole sandbox
		// (docs/security.md). Nothing in the sandbox can change that.
		return
	}

	// The shell holds the whole substitution in memory and is the biggest
	// process in the cgroup, so the kernel's OOM killer picks it first.
	res = execOK(t, c.client, agentproto.ExecRequest{Script: `x=$(head -c 400000000 /dev/zero | tr '\0' a); echo survived`})
	if res.ExitReason != "oom" || res.Signal != "SIGKILL" {
		t.Errorf("result %s signal %q code %d stdout %q stderr %q, want oom", res.ExitReason, res.Signal, res.ExitCode, res.Stdout, res.Stderr)
	}

	// The agent survived: the same PID 1 answers a new exec.
	p, err := c.client.Ping(ctx)
	if err != nil {
		t.Fatalf("the agent does not answer after the out-of-memory exec: %v", err)
	}
	if p.PID != 1 {
		t.Errorf("ping after the out-of-memory exec: pid %d, want 1", p.PID)
	}
	res = execOK(t, c.client, agentproto.ExecRequest{Script: "echo alive"})
	if string(res.Stdout) != "alive\n" || res.ExitCode != 0 {
		t.Errorf("exec after the out-of-memory exec: %+v", res)
	}
	// A SIGKILL without memory pressure stays a plain signal.
	res = execOK(t, c.client, agentproto.ExecRequest{Script: "kill -KILL $$"})
	if res.ExitReason != "signal" {
		t.Fatalf("plain SIGKILL reported as %q", res.ExitReason)
	}
}

// BenchmarkExecTrue measures the exec round trip of `true` through
// agentclient into a container, per runtime, next to a bare ping (the HTTP/2
// floor). Run with -benchtime=200x for the p50 over 200 calls.
func BenchmarkExecTrue(b *testing.B) {
	for _, rt := range []string{"runc", "runsc"} {
		b.Run(rt, func(b *testing.B) {
			if !slices.Contains(runtimesUnderTest(b), rt) {
				b.Skipf("docker runtime %s not configured", rt)
			}
			c := startContainer(b, rt)
			ctx := context.Background()
			b.Run("exec", func(b *testing.B) {
				req := agentproto.ExecRequest{Command: []string{"true"}}
				benchLatency(b, func() error {
					res, err := c.client.Exec(ctx, req)
					if err == nil && res.ExitCode != 0 {
						err = fmt.Errorf("true exited %d: %s", res.ExitCode, res.Stderr)
					}
					return err
				})
			})
			b.Run("ping", func(b *testing.B) {
				benchLatency(b, func() error {
					_, err := c.client.Ping(ctx)
					return err
				})
			})
		})
	}
}

// benchLatency runs call b.N times after a warm-up and reports p50 and p90.
func benchLatency(b *testing.B, call func() error) {
	for range 10 {
		if err := call(); err != nil {
			b.Fatal(err)
		}
	}
	d := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		err := call()
		d = append(d, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(d[len(d)*9/10].Microseconds())/1000, "p90-ms")
}
