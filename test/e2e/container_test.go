package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/mountinfo"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/testenv"
)

// Deadlines of the containerized service's test.
const (
	serviceImageTimeout = 20 * time.Minute // static builds, and the Debian base when its recipe changed
	containerStopWait   = 2 * time.Minute  // docker stop: the service drains (--stop-timeout 60)
)

// desktopDoc is the page whose `docker run` command the test runs.
const desktopDoc = "../../docs/docker-desktop.md"

// TestContainerizedService runs the service the way a Docker Desktop user
// does: as a container of the machine's Docker engine, with the engine's
// socket mounted, started by the `docker run` command of
// docs/docker-desktop.md. The image is built by `sandbox-service images
// build-service` (static binaries on the Debian base of images/service,
// which is cached by its recipe hash).
//
// With the data dir on a named volume (the Docker Desktop form), through
// the published port it makes a runc and a runsc sandbox, runs commands,
// moves a file in and out, reaches http.server inside through the port
// proxy, finds the agents' sockets in the volume on the engine's host (the
// bind mounts were translated), sees quotas reported unavailable with the
// reason and refused. With the data dir bind-mounted from the host with
// shared propagation and loop devices allowed (the page's Linux form),
// quotas are enforced. Each container is stopped with `docker stop` (a
// clean drain, exit 0), and nothing of the test is left.
func TestContainerizedService(t *testing.T) {
	t.Parallel()
	drv := testenv.Docker(t)
	runtimes := testenv.Runtimes(t, drv)
	e := &env{docker: drv}
	e.requireImage(t, "tool-basic")
	e.requireImage(t, "code-python-basic")

	image := buildServiceImage(t)
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte("warm_pools: false\nintervals: {drain_timeout: 5s}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Run("volume", func(t *testing.T) { testContainerOnVolume(t, image, cfg, runtimes) })
	t.Run("quota", func(t *testing.T) { testContainerQuota(t, image, cfg) })
	t.Run("runc-only", func(t *testing.T) { testContainerRuncOnly(t, image, cfg) })
}

// containerService is one service container of the test.
type containerService struct {
	name string
	svc  *service
}

// startContainerService runs `docker run` with the documented command
// (desktopRunCommand), waits until the service is ready with each of
// runtimes healthy and checks it found its own container. The container is
// removed when t ends; its log is added to t's output if t failed.
func startContainerService(t *testing.T, run runSpec, cfg string, runtimes []sandbox.Runtime) *containerService {
	t.Helper()
	key := "e2e_" + randomHex(t, 16)
	name := run.name
	run.extra = append(run.extra, "-v", cfg+":/etc/genesis/config.yaml:ro", "-e", "GENESIS_CONFIG=/etc/genesis/config.yaml", "-e", "GENESIS_API_KEY="+key)
	t.Cleanup(func() { dockerCmdQuiet("rm", "-f", "-v", name) })
	dockerCmd(t, desktopRunCommand(t, run)...)
	cs := &containerService{name: name}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log of the service container %s:\n%s", name, cs.logs())
		}
	})
	hostPort, _, _ := strings.Cut(dockerCmd(t, "port", name, "8080/tcp"), "\n")
	if !strings.HasPrefix(hostPort, "127.0.0.1:") {
		t.Fatalf("published port %q: want it on 127.0.0.1 only", hostPort)
	}
	cs.svc = &service{addr: hostPort, e: &env{apiKey: key}}
	waitContainerReady(t, cs.svc, name, runtimes)
	if !strings.Contains(cs.logs(), "running in a container of the Docker daemon") {
		t.Errorf("the service did not log that it found its container")
	}
	return cs
}

func (cs *containerService) logs() string {
	out, _ := exec.Command("docker", "logs", "--tail", "200", cs.name).CombinedOutput()
	return string(out)
}

// stop stops the container with `docker stop` — SIGTERM reaches the
// service through tini and the service drains — checks that it exited 0,
// and removes it.
func (cs *containerService) stop(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), containerStopWait)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "stop", cs.name).CombinedOutput(); err != nil {
		t.Fatalf("docker stop: %v: %s", err, out)
	}
	if code := dockerCmd(t, "inspect", "-f", "{{.State.ExitCode}}", cs.name); code != "0" {
		t.Errorf("the service exited %s after docker stop, want 0 (a clean drain)", code)
	}
	if t.Failed() {
		t.Logf("log of the service container %s:\n%s", cs.name, cs.logs())
	}
	dockerCmd(t, "rm", "-v", cs.name)
	if left := containers(t, "name="+cs.name); len(left) > 0 {
		t.Errorf("service container left: %v", left)
	}
}

// testContainerOnVolume is the Docker Desktop form: the data dir on a
// named volume.
func testContainerOnVolume(t *testing.T, image, cfg string, runtimes []sandbox.Runtime) {
	name := "genesis-e2e-" + randomHex(t, 4)
	volume := name
	t.Cleanup(func() { dockerCmdQuiet("volume", "rm", "-f", volume) })
	cs := startContainerService(t, runSpec{name: name, dataMount: volume + ":/var/lib/genesis", image: image}, cfg, runtimes)
	mountpoint := dockerCmd(t, "volume", "inspect", "-f", "{{.Mountpoint}}", volume)
	instance := strings.TrimSpace(readFile(t, filepath.Join(mountpoint, "instance_id")))
	c := cs.svc.client()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()

	// Quotas: a volume carries no mount to the engine's host, so they are
	// reported unavailable, with the reason, and an explicit one is refused.
	caps, err := c.Capabilities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if caps.DiskQuota.Supported || !strings.Contains(caps.DiskQuota.Reason, "volume "+volume) {
		t.Errorf("disk quota = %+v; want unsupported because the data dir is on volume %s", caps.DiskQuota, volume)
	}
	_, err = c.CreateSandbox(ctx, client.CreateSandboxRequest{Profile: "tool-basic", RiskLevel: "low", Resources: &client.Resources{DiskMB: 64}}, "")
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Problem.Code != "disk_quota_unavailable" {
		t.Errorf("create with disk_mb = %v; want 409 disk_quota_unavailable", err)
	}

	for _, rt := range runtimes {
		t.Run(string(rt), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			defer cancel()
			req := client.CreateSandboxRequest{Profile: "code-python-basic", Runtime: string(rt), RiskLevel: "low"}
			sb, err := c.CreateSandbox(ctx, req, "")
			if err != nil {
				t.Fatalf("create %+v: %v", req, err)
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
				defer cancel()
				if err := c.DeleteSandbox(ctx, sb.ID); err != nil {
					t.Errorf("delete %s: %v", sb.ID, err)
				}
			}()
			if sb.Runtime != string(rt) || sb.State != "ready" {
				t.Fatalf("sandbox %s is %s under %s, want ready under %s", sb.ID, sb.State, sb.Runtime, rt)
			}
			// The agent's socket is in the volume on the engine's host: the
			// engine was handed the translated path of the run directory.
			sock := filepath.Join(mountpoint, "sandboxes", sb.ID, "run", driver.AgentSocketRel)
			if fi, err := os.Stat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
				t.Errorf("agent socket on the engine's host: %v (%v); want a socket in the volume", fi, err)
			}

			res := execOK(t, c, sb.ID, "echo hello from $(id -u)")
			if res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != "hello from 1000" {
				t.Fatalf("exec: exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
			}

			marker := "in-" + randomHex(t, 4) + ".txt"
			content := "moved through the containerized service " + randomHex(t, 8) + "\n"
			if _, err := c.WriteFile(ctx, sb.ID, "/workspace/site/"+marker, strings.NewReader(content), client.WriteFileOptions{Size: int64(len(content))}); err != nil {
				t.Fatalf("upload: %v", err)
			}
			if got := execOK(t, c, sb.ID, "cat /workspace/site/"+marker); got.Stdout != content {
				t.Fatalf("the uploaded file inside: %q, want %q", got.Stdout, content)
			}
			execOK(t, c, sb.ID, "cp /workspace/site/"+marker+" /workspace/out.txt")
			dl, err := c.ReadFile(ctx, sb.ID, "/workspace/out.txt", nil)
			if err != nil {
				t.Fatalf("download: %v", err)
			}
			got, err := io.ReadAll(dl.Body)
			dl.Body.Close()
			if err != nil || string(got) != content {
				t.Fatalf("downloaded %q (%v), want %q", got, err, content)
			}

			startJob(t, c, sb.ID, client.ExecRequest{Command: []string{"python3", "-m", "http.server", "8000", "--bind", "127.0.0.1"}, Cwd: "/workspace/site"})
			path := client.PortPath(sb.ID, 8000) + marker
			eventually(t, 60*time.Second, "http.server answers through the port proxy", func() (bool, string) {
				code, _, body := apiGet(t, cs.svc, path, cs.svc.e.apiKey)
				return code == http.StatusOK && body == content, fmt.Sprintf("%d %.200q", code, body)
			})
			if code, _, _ := apiGet(t, cs.svc, path, ""); code != http.StatusUnauthorized {
				t.Errorf("the port proxy without a key answered %d, want 401", code)
			}
		})
	}

	cs.stop(t)
	if left := containers(t, "label="+driver.LabelInstance+"="+instance); len(left) > 0 {
		t.Errorf("containers of instance %s left after the service stopped: %v", instance, left)
	}
	if left := mountsBelow(t, mountpoint); len(left) > 0 {
		t.Errorf("mounts left in the volume: %v", left)
	}
	dockerCmd(t, "volume", "rm", volume)
	if out, err := exec.Command("docker", "volume", "inspect", volume).CombinedOutput(); err == nil {
		t.Errorf("volume %s left: %s", volume, out)
	}
}

// quotaForm is the page's Linux form for quotas, with /srv/genesis standing
// for a host directory on a shared mount.
const quotaForm = "-v /srv/genesis:/var/lib/genesis:rshared --device /dev/loop-control --device-cgroup-rule 'b 7:* rmw'"

// testContainerQuota is the Linux form with quotas: the data dir a host
// directory on a mount with shared propagation (the test makes one),
// bind-mounted rshared, loop devices allowed. The quota-limited workspace
// the service mounts inside its container reaches the engine's host, so
// the sandbox's writes stop at its size.
func testContainerQuota(t *testing.T, image, cfg string) {
	doc, err := os.ReadFile(desktopDoc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(strings.Fields(string(doc)), " "), quotaForm) {
		t.Fatalf("%s no longer gives the quota form %q", desktopDoc, quotaForm)
	}
	dir := t.TempDir()
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind-mounting %s on itself: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		t.Fatalf("making %s a shared mount: %v", dir, err)
	}

	runc := []sandbox.Runtime{sandbox.RuntimeRunc}
	cs := startContainerService(t, runSpec{name: "genesis-e2e-" + randomHex(t, 4), dataMount: dir + ":/var/lib/genesis:rshared", image: image,
		extra: []string{"--device", "/dev/loop-control", "--device-cgroup-rule", "b 7:* rmw"}}, cfg, runc)
	c := cs.svc.client()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	caps, err := c.Capabilities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !caps.DiskQuota.Supported || !caps.DiskQuota.Enforced {
		t.Fatalf("disk quota = %+v; want enforced", caps.DiskQuota)
	}
	sb, err := c.CreateSandbox(ctx, client.CreateSandboxRequest{Profile: "tool-basic", Runtime: "runc", RiskLevel: "low", Resources: &client.Resources{DiskMB: 32}}, "")
	if err != nil {
		t.Fatalf("create with disk_mb: %v", err)
	}
	ws := filepath.Join(dir, "sandboxes", sb.ID, "workspace")
	if fs := mountFSType(t, ws); fs != "ext4" {
		t.Errorf("the workspace on the engine's host is %q, want the service's ext4 mount", fs)
	}
	res := execOK(t, c, sb.ID, "dd if=/dev/zero of=/workspace/big bs=1M count=64")
	if res.ExitCode == 0 || !strings.Contains(res.Stderr, "No space left") {
		t.Errorf("writing 64 MiB into a 32 MiB workspace: exit %d, stderr %q; want ENOSPC", res.ExitCode, res.Stderr)
	}
	if err := c.DeleteSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if fs := mountFSType(t, ws); fs != "" {
		t.Errorf("the workspace is still mounted (%s) after the sandbox was deleted", fs)
	}
	cs.stop(t)
	if left := mountsBelow(t, dir); len(left) > 0 {
		t.Errorf("mounts left below the data dir: %v", left)
	}
}

// testContainerRuncOnly is the service against an engine without gVisor,
// as Docker Desktop's is: the engine's API reaches it through a proxy that
// leaves runsc out of GET /info. Low-risk work runs under runc; work that
// needs gVisor is refused, saying where to get it, and nothing is made
// for it.
func testContainerRuncOnly(t *testing.T, image, cfg string) {
	sock := runcOnlyEngine(t)
	name := "genesis-e2e-" + randomHex(t, 4)
	volume := name
	t.Cleanup(func() { dockerCmdQuiet("volume", "rm", "-f", volume) })
	runc := []sandbox.Runtime{sandbox.RuntimeRunc}
	cs := startContainerService(t, runSpec{name: name, dataMount: volume + ":/var/lib/genesis", socket: sock, image: image}, cfg, runc)
	c := cs.svc.client()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	caps, err := c.Capabilities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range caps.Runtimes {
		if r.Name == "runsc" {
			t.Fatalf("the probe lists runsc on an engine without it: %+v", caps.Runtimes)
		}
	}
	sb, err := c.CreateSandbox(ctx, client.CreateSandboxRequest{Profile: "tool-basic", RiskLevel: "low"}, "")
	if err != nil {
		t.Fatalf("low-risk create: %v", err)
	}
	if sb.Runtime != "runc" {
		t.Errorf("low-risk sandbox runs under %s, want runc", sb.Runtime)
	}
	if res := execOK(t, c, sb.ID, "echo ok"); strings.TrimSpace(res.Stdout) != "ok" {
		t.Errorf("exec: %+v", res)
	}
	for _, req := range []client.CreateSandboxRequest{
		{Profile: "tool-basic", RiskLevel: "medium"},
		{Profile: "tool-basic", RiskLevel: "untrusted"},
		{Profile: "code-python-basic"}, // its default risk is medium
		{Profile: "tool-basic", RiskLevel: "low", Runtime: "runsc"},
	} {
		_, err := c.CreateSandbox(ctx, req, "")
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Problem.Code != "runtime_unavailable" ||
			!strings.Contains(ae.Message(), "docs/operations.md#getting-gvisor") {
			t.Errorf("create %+v = %v; want 409 runtime_unavailable saying how to get gVisor", req, err)
		}
	}
	mountpoint := dockerCmd(t, "volume", "inspect", "-f", "{{.Mountpoint}}", volume)
	instance := strings.TrimSpace(readFile(t, filepath.Join(mountpoint, "instance_id")))
	if got := containers(t, "label="+driver.LabelInstance+"="+instance); len(got) != 1 {
		t.Errorf("containers of the service after the refusals: %v; want only the low-risk sandbox's", got)
	}
	if err := c.DeleteSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	cs.stop(t)
	dockerCmd(t, "volume", "rm", volume)
}

// runcOnlyEngine serves the engine's API on a Unix socket of its own with
// runsc left out of GET /info — an engine like Docker Desktop's, which has
// runc only — and returns the socket's path. Everything else passes
// through unchanged (streamed answers included). It stops when t ends.
func runcOnlyEngine(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "docker.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	info := regexp.MustCompile(`^(/v[0-9.]+)?/info$`)
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: "docker"})
	rp.Transport = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", "/var/run/docker.sock")
	}}
	rp.FlushInterval = -1
	rp.ModifyResponse = func(r *http.Response) error {
		if !info.MatchString(r.Request.URL.Path) || r.StatusCode != http.StatusOK {
			return nil
		}
		b, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return err
		}
		var v map[string]any
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		if rts, ok := v["Runtimes"].(map[string]any); ok {
			delete(rts, "runsc")
		}
		if b, err = json.Marshal(v); err != nil {
			return err
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		r.ContentLength = int64(len(b))
		r.Header.Set("Content-Length", strconv.Itoa(len(b)))
		return nil
	}
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock
}

// mountFSType is the file system type mounted at p in this mount
// namespace (the last mount there), or "".
func mountFSType(t *testing.T, p string) string {
	t.Helper()
	ms, err := mountinfo.ReadMounts()
	if err != nil {
		t.Fatal(err)
	}
	fs := ""
	for _, m := range ms {
		if m.Point == p {
			fs = m.FSType
		}
	}
	return fs
}

// runSpec is what the test changes in the documented `docker run` command.
type runSpec struct {
	name      string   // the container's name
	dataMount string   // the data dir's -v value
	socket    string   // the engine's socket on the host ("": /var/run/docker.sock)
	image     string   // the service image
	extra     []string // further options, before the image
}

// desktopRunCommand returns the arguments of the `docker run` command of
// docs/docker-desktop.md with run's parts in place of the page's (the port
// becomes any free one). It fails when the page's command lacks one of the
// parts it replaces, so the page and the test cannot drift apart.
func desktopRunCommand(t *testing.T, run runSpec) []string {
	t.Helper()
	doc, err := os.ReadFile(desktopDoc)
	if err != nil {
		t.Fatal(err)
	}
	var cmd string
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cmd == "" && !strings.HasPrefix(line, "docker run ") {
			continue
		}
		cmd += " " + strings.TrimSuffix(line, `\`)
		if !strings.HasSuffix(line, `\`) {
			break
		}
	}
	words := strings.Fields(cmd)
	if len(words) < 3 || strings.ContainsAny(cmd, `"'$`) {
		t.Fatalf("%s: no plain docker run command found: %q", desktopDoc, cmd)
	}
	socket := run.socket
	if socket == "" {
		socket = "/var/run/docker.sock"
	}
	replace := map[string]string{
		"genesis":                                   run.name,
		"genesis-data:/var/lib/genesis":             run.dataMount,
		"127.0.0.1:8080:8080":                       "127.0.0.1::8080",
		"/var/run/docker.sock:/var/run/docker.sock": socket + ":/var/run/docker.sock",
	}
	seen := map[string]bool{}
	args := words[1 : len(words)-1] // without "docker" and the image
	for i, w := range args {
		if r, ok := replace[w]; ok {
			args[i] = r
			seen[w] = true
		}
	}
	if len(seen) != len(replace) || words[len(words)-1] != "genesis/sandbox-service" || !strings.Contains(cmd, "--cap-add SYS_ADMIN") {
		t.Fatalf("%s: the docker run command %q lacks a part the test replaces (found %v) or the image genesis/sandbox-service", desktopDoc, cmd, seen)
	}
	return append(append(args, run.extra...), run.image)
}

// buildServiceImage builds static binaries and, with them, the service's
// image; it returns the image's reference and removes the image when t
// ends (the Debian base stays: it is the cache).
func buildServiceImage(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), serviceImageTimeout)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", dir+"/",
		"./cmd/sandbox-service", "./cmd/genesis", "./cmd/genesis-agent", "./cmd/genesis-egress")
	build.Dir = "../.."
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("static build: %v\n%s", err, out)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "sandbox-service"), "images", "build-service", "--tag", "")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("sandbox-service images build-service: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	ref := regexp.MustCompile(`genesis/sandbox-service:[0-9a-f]{12}`).FindString(stdout.String())
	if ref == "" {
		t.Fatalf("build-service named no image: %s", stdout.String())
	}
	t.Cleanup(func() { dockerCmdQuiet("rmi", ref) })
	t.Logf("service image: %s", strings.TrimSpace(stdout.String()))
	return ref
}

// waitContainerReady polls the published port's /readyz until each of
// runtimes is healthy, failing at once when the container stops.
func waitContainerReady(t *testing.T, svc *service, name string, runtimes []sandbox.Runtime) {
	t.Helper()
	var names []string
	for _, r := range runtimes {
		names = append(names, string(r))
	}
	eventually(t, readyTimeout, "the containerized service is ready", func() (bool, string) {
		if state := dockerCmd(t, "inspect", "-f", "{{.State.Status}}", name); state != "running" {
			t.Fatalf("the service container is %s", state)
		}
		// Until the service listens, the engine's port proxy accepts and
		// drops connections: an error here is a reason to poll again.
		hc := &http.Client{Timeout: 5 * time.Second}
		resp, err := hc.Get(svc.url() + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var h client.Health
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &h) != nil {
			return false, fmt.Sprintf("%d %s", resp.StatusCode, b)
		}
		body := string(b)
		return runtimesHealthy(h, names), body
	})
}

// mountsBelow lists this namespace's mount points below dir.
func mountsBelow(t *testing.T, dir string) []string {
	t.Helper()
	mps, err := mountinfo.Read()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mp := range mps {
		if strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
