//go:build kube

package kube

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"genesis.dev/sandbox/client"
)

// service is a sandbox-service with driver kubernetes on the plane.
type service struct {
	url, key string
	cmd      *exec.Cmd
	log      *os.File
	done     chan struct{} // closed when the process has exited
	stopOnce sync.Once
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// agentImage builds the agent image of this tree into the plane.
func agentImage(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("../../hack/kube/agent-image.sh").Output()
	if err != nil {
		t.Fatalf("agent image: %v", err)
	}
	ref := strings.TrimSpace(string(out))
	waitNodeImage(t, ref)
	return ref
}

// startService builds the service (once), writes a config with driver
// kubernetes (extra is appended to it) and starts it on a free port; it
// is stopped when t ends.
func startService(t testing.TB, dataDir, extra string) *service {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "genesis-kube-bin-")
		if buildErr != nil {
			return
		}
		for _, b := range []struct{ out, pkg string }{{"sandbox-service", "./cmd/sandbox-service"}, {"genesis-agent", "./cmd/genesis-agent"}} {
			c := exec.Command("go", "build", "-o", filepath.Join(binDir, b.out), b.pkg)
			c.Dir, c.Env = "../..", append(os.Environ(), "CGO_ENABLED=0")
			if out, err := c.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("building %s: %v: %s", b.pkg, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	sandboxImage(t)
	profileImage(t, "code-python-basic")
	drv := "kubernetes"
	if strings.HasPrefix(extra, "driver: docker\n") {
		drv, extra = "docker", strings.TrimPrefix(extra, "driver: docker\n")
	}
	// A first line "request_ratio: R" sets the Pods' requests to R times
	// their limits (default 0.01, so that many fit the plane's one node).
	ratio := "0.01"
	if rest, ok := strings.CutPrefix(extra, "request_ratio: "); ok {
		ratio, extra, _ = strings.Cut(rest, "\n")
	}
	if !strings.Contains(extra, "warm_pools:") {
		extra = "warm_pools: false\n" + extra
	}
	cfg := fmt.Sprintf(`driver: %s
kubernetes:
  kubeconfig: %s/admin.kubeconfig
  namespace: default
  agent_image: %s
  pull_policy: Never
  request_ratio: %s
  runtime_classes: {runc: runc, runsc: gvisor}
`, drv, state(), agentImage(t), ratio) + extra
	path := filepath.Join(dataDir, "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	s := &service{url: "http://" + addr, key: "kube-test-key-0123456789"}
	var err error
	if s.log, err = os.Create(filepath.Join(dataDir, "service.log")); err != nil {
		t.Fatal(err)
	}
	s.cmd = exec.Command(filepath.Join(binDir, "sandbox-service"), "serve", "--addr", addr, "--data-dir", dataDir,
		"--api-key", s.key, "--config", path, "--agent-binary", filepath.Join(binDir, "genesis-agent"))
	s.cmd.Env = append(os.Environ(), "GENESIS_CONFIG=", "GENESIS_API_KEY=")
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.done = make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			b, _ := os.ReadFile(s.log.Name())
			keep := filepath.Join(os.TempDir(), "genesis-kube-"+filepath.Base(dataDir)+"-"+strings.TrimPrefix(addr, "127.0.0.1:")+".log")
			_ = os.WriteFile(keep, b, 0o644)
			t.Logf("service log (whole in %s):\n%s", keep, tailLines(string(b), 60))
		}
	})
	deadline := time.Now().Add(3 * time.Minute)
	for {
		resp, err := http.Get(s.url + "/readyz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var h client.Health
			if resp.StatusCode == 200 && json.Unmarshal(body, &h) == nil && h.Checks["runtime.runc"] == "ok" {
				return s
			}
		}
		select {
		case <-s.done:
			t.Fatalf("service exited before it was ready: %v", s.cmd.ProcessState)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("service not ready in 3 min: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (s *service) stop() {
	s.stopOnce.Do(s.stopNow)
}

func (s *service) stopNow() {
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	s.log.Close()
}

func (s *service) client() *client.Client { return client.New(s.url, s.key) }

func freeAddr(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("sh", "-c", "python3 -c 'import socket;s=socket.socket();s.bind((\"127.0.0.1\",0));print(s.getsockname()[1])'").Output()
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strings.TrimSpace(string(out))
}

func tailLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// clearManagedPods removes what an earlier run that failed left behind.
func clearManagedPods(t testing.TB) {
	t.Helper()
	cs := clientset(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "dev.genesis.managed=true"})
	if err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	for _, p := range l.Items {
		_, _ = cs.CoreV1().Pods("default").Patch(ctx, p.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		_ = cs.CoreV1().Pods("default").Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	}
	noManagedPods(t)
}

// noManagedPods fails t if a Pod of the driver is left in the namespace.
func noManagedPods(t testing.TB) {
	t.Helper()
	cs := clientset(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		l, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "dev.genesis.managed=true"})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) == 0 {
			return
		}
		if ctx.Err() != nil {
			var names []string
			for _, p := range l.Items {
				names = append(names, p.Name)
			}
			t.Fatalf("pods left behind: %v", names)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestQuickstart is the quickstart flow on Kubernetes: create a sandbox,
// exec in it, move files, reach a port inside it, delete it — and check
// from inside that the Pod has no way out. A runsc sandbox is refused with
// the node's reason when gVisor pods cannot start, never run under runc.
func TestQuickstart(t *testing.T) {
	clearManagedPods(t)
	s := startService(t, t.TempDir(), "")
	c := s.client()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	create := func() *client.Sandbox {
		sb, err := c.CreateSandbox(ctx, client.CreateSandboxRequest{Profile: "code-python-basic", Runtime: "runc", RiskLevel: "low"}, "")
		if err != nil {
			t.Fatal(err)
		}
		return sb
	}
	sb, other := create(), create()
	host, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	res, err := c.Exec(ctx, sb.ID, client.ExecRequest{Command: []string{"uname", "-r"}})
	if err != nil || res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != strings.TrimSpace(string(host)) {
		t.Fatalf("uname -r = %+v, %v; want the host's kernel %s under runc", res, err, host)
	}
	// It runs as the profile's user, with no capabilities, and its
	// workspace is its own.
	res, err = c.Exec(ctx, sb.ID, client.ExecRequest{Script: `id -u; grep CapEff /proc/self/status; touch /workspace/w && echo ws-ok`})
	if err != nil || !strings.Contains(res.Stdout, "1000\n") || !strings.Contains(res.Stdout, "0000000000000000") || !strings.Contains(res.Stdout, "ws-ok") {
		t.Errorf("identity = %+v, %v; want uid 1000, no capabilities, a writable workspace", res, err)
	}

	// No route out, and neither the node nor a neighbour sandbox's agent
	// answers a connection from inside: checked from inside.
	cs := clientset(t)
	pod, err := cs.CoreV1().Pods("default").Get(ctx, "genesis-"+strings.ReplaceAll(other.ID, "_", "-"), metav1.GetOptions{})
	if err != nil || pod.Status.PodIP == "" {
		t.Fatalf("the other sandbox's pod: %v (%+v)", err, pod.Status)
	}
	res, err = c.Exec(ctx, sb.ID, client.ExecRequest{Command: []string{"python3", "-c", `
import socket, sys
routes = [l.split() for l in open("/proc/net/route").read().splitlines()[1:]]
print("route=default" if any(r[1] == "00000000" for r in routes) else "route=none")
for name, host, port in [("node", "10.251.0.1", 10250), ("neighbour", sys.argv[1], 7070)]:
    s = socket.socket(); s.settimeout(2)
    try:
        s.connect((host, port)); print(name + "=open")
    except Exception as e:
        print(name + "=closed:" + type(e).__name__)
`, pod.Status.PodIP}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("from inside: %q", res.Stdout)
	if !strings.Contains(res.Stdout, "route=none") || !strings.Contains(res.Stdout, "node=closed") || !strings.Contains(res.Stdout, "neighbour=closed") {
		t.Errorf("network from inside: %q %q; want no default route, the node's kubelet and the neighbour's agent closed", res.Stdout, res.Stderr)
	}
	// The service itself reaches the neighbour's agent (it has the token).
	if res, err := c.Exec(ctx, other.ID, client.ExecRequest{Command: []string{"true"}}); err != nil || res.ExitCode != 0 {
		t.Errorf("exec in the other sandbox: %+v, %v", res, err)
	}
	if err := c.DeleteSandbox(ctx, other.ID); err != nil {
		t.Fatal(err)
	}

	// Files.
	body := strings.Repeat("genesis on kubernetes\n", 1000)
	if _, err := c.WriteFile(ctx, sb.ID, "/workspace/hello.txt", strings.NewReader(body), client.WriteFileOptions{}); err != nil {
		t.Fatal(err)
	}
	dl, err := c.ReadFile(ctx, sb.ID, "/workspace/hello.txt", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(dl.Body)
	dl.Body.Close()
	if string(got) != body {
		t.Errorf("read back %d bytes; want %d", len(got), len(body))
	}

	// Streamed stdin: a job reads what the client streams, over the agent's
	// channel to the Pod.
	input := strings.Repeat("streamed into a pod\n", 50000)
	j, err := c.StartJob(ctx, sb.ID, client.ExecRequest{Script: "sha256sum > /workspace/stdin.sum", StdinStream: true})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := c.WriteStdin(ctx, j.ID, strings.NewReader(input)); err != nil || n != int64(len(input)) {
		t.Fatalf("streamed %d of %d bytes: %v", n, len(input), err)
	}
	if err := c.CloseStdin(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(input))
	for deadline := time.Now().Add(time.Minute); ; {
		res, err := c.Exec(ctx, sb.ID, client.ExecRequest{Script: "cat /workspace/stdin.sum 2>/dev/null"})
		if err == nil && strings.HasPrefix(res.Stdout, hex.EncodeToString(sum[:])) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job never wrote the sum of its stdin: %+v %v", res, err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// A terminal: the shell's echo of what is typed comes back over the
	// websocket, through the agent in the Pod.
	func() {
		tctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		ws, _, err := websocket.Dial(tctx, "ws://"+strings.TrimPrefix(s.url, "http://")+"/v1/sandboxes/"+sb.ID+"/terminal",
			&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + s.key}}})
		if err != nil {
			t.Fatalf("terminal: %v", err)
		}
		defer ws.CloseNow()
		if err := ws.Write(tctx, websocket.MessageBinary, []byte("echo term-$((6*7))\n")); err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		for !strings.Contains(out.String(), "term-42") {
			typ, data, err := ws.Read(tctx)
			if err != nil {
				t.Fatalf("terminal never printed term-42: %v; got %q", err, out.String())
			}
			if typ == websocket.MessageBinary {
				out.Write(data)
			}
		}
	}()

	// A port inside the sandbox, reached through the service (over the
	// agent's channel: the Pod serves nothing else).
	if _, err := c.StartJob(ctx, sb.ID, client.ExecRequest{Script: `mkdir -p /workspace/site && echo port-ok > /workspace/site/index.html && cd /workspace/site && exec python3 -m http.server 8000 --bind 127.0.0.1`}); err != nil {
		t.Fatal(err)
	}
	var portBody string
	for deadline := time.Now().Add(30 * time.Second); ; {
		conn, err := c.DialPort(ctx, sb.ID, 8000)
		if err == nil {
			fmt.Fprintf(conn, "GET / HTTP/1.0\r\n\r\n")
			b, _ := io.ReadAll(bufio.NewReader(conn))
			conn.Close()
			portBody = string(b)
			if strings.Contains(portBody, "port-ok") {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("port 8000 never answered port-ok (last %q, %v)", portBody, err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	if err := c.DeleteSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	noManagedPods(t)

	// gVisor: where its pods cannot start, the sandbox is refused, never
	// run under runc instead.
	caps, err := c.Capabilities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("capabilities runtimes: %+v", caps.Runtimes)
	gs, err := c.CreateSandbox(ctx, client.CreateSandboxRequest{Profile: "code-python-basic", Runtime: "runsc"}, "")
	if err == nil {
		res, err := c.Exec(ctx, gs.ID, client.ExecRequest{Command: []string{"uname", "-r"}})
		if err != nil || strings.TrimSpace(res.Stdout) == strings.TrimSpace(string(host)) {
			t.Errorf("runsc sandbox runs on the host's kernel (%+v, %v): silently downgraded", res, err)
		}
		_ = c.DeleteSandbox(ctx, gs.ID)
	} else {
		var pe *client.APIError
		if !errors.As(err, &pe) || pe.Status < 400 || pe.Status >= 500 && pe.Status != 503 {
			t.Errorf("runsc create: %v; want a clear refusal", err)
		}
		t.Logf("runsc refused: %v", err)
	}
	noManagedPods(t)
}
