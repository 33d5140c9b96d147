package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"genesis.dev/sandbox/client"
)

// sandboxServerBuild builds ./test/e2e/sandboxserver (static) once.
var sandboxServerBuild struct {
	once sync.Once
	path string
	err  error
}

func sandboxServerBinary(t *testing.T) string {
	t.Helper()
	sandboxServerBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "genesis-sbserver-")
		if err != nil {
			sandboxServerBuild.err = err
			return
		}
		p := filepath.Join(dir, "sandboxserver")
		cmd := exec.Command("go", "build", "-trimpath", "-o", p, "./sandboxserver")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			sandboxServerBuild.err = fmt.Errorf("%v: %s", err, out)
			return
		}
		sandboxServerBuild.path = p
	})
	if sandboxServerBuild.err != nil {
		t.Fatalf("building sandboxserver: %v", sandboxServerBuild.err)
	}
	return sandboxServerBuild.path
}

// uploadSandboxServer puts the sandboxserver binary at /workspace/sbserver.
func uploadSandboxServer(t *testing.T, c *client.Client, id string) {
	t.Helper()
	f, err := os.Open(sandboxServerBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if _, err := c.WriteFile(ctx, id, "/workspace/sbserver", f, client.WriteFileOptions{Mode: "0755", Size: fi.Size()}); err != nil {
		t.Fatalf("upload sandboxserver: %v", err)
	}
}

// startJob starts a background job and fails t on an error.
func startJob(t *testing.T, c *client.Client, id string, req client.ExecRequest) *client.Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	j, err := c.StartJob(ctx, id, req)
	if err != nil {
		t.Fatalf("start job %+v: %v", req, err)
	}
	return j
}

// apiGet sends an authenticated GET (or a bare one with key "") to the
// service.
func apiGet(t *testing.T, svc *service, path, key string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", svc.url()+path, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestPorts reaches servers inside --network none sandboxes through the
// service under runc and runsc: python's http.server through the HTTP
// proxy, a WebSocket echo server through the same route, raw TCP through
// the WebSocket route and `genesis port-forward`, and a preview link (in
// headless Chromium, without an API key) until its TTL ends; the sandbox
// keeps no route out.
func TestPorts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "code-python-basic")
	svc := e.start(t)
	c := svc.client()
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "code-python-basic", Runtime: rt, RiskLevel: "low"})
			uploadSandboxServer(t, c, sb.ID)
			marker := "listing-" + randomHex(t, 4) + ".txt"
			execOK(t, c, sb.ID, "mkdir -p /workspace/site && echo hi > /workspace/site/"+marker)
			startJob(t, c, sb.ID, client.ExecRequest{Command: []string{"python3", "-m", "http.server", "8000", "--bind", "127.0.0.1"}, Cwd: "/workspace/site"})
			startJob(t, c, sb.ID, client.ExecRequest{Command: []string{"/workspace/sbserver", "wsecho", "-addr", "127.0.0.1:8001"}})
			startJob(t, c, sb.ID, client.ExecRequest{Command: []string{"/workspace/sbserver", "tcp", "-addr", "127.0.0.1:9000"}})

			base := client.PortPath(sb.ID, 8000)
			var body string
			eventually(t, 30*time.Second, "http.server answers through the proxy", func() (bool, string) {
				var code int
				code, _, body = apiGet(t, svc, base, e.apiKey)
				return code == 200 && strings.Contains(body, marker), fmt.Sprintf("%d %.200q", code, body)
			})
			if !strings.Contains(body, "Directory listing") {
				t.Errorf("not a directory listing: %.300q", body)
			}
			// The other two servers start beside it: each is reached only
			// once it listens (a runsc start on a loaded machine can take
			// seconds longer than python's).
			for _, port := range []int{8001, 9000} {
				eventually(t, 30*time.Second, fmt.Sprintf("port %d listening", port), func() (bool, string) {
					ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
					defer cancel()
					conn, err := c.DialPort(ctx, sb.ID, port)
					if err != nil {
						return false, err.Error()
					}
					conn.Close()
					return true, ""
				})
			}
			// No API key: 401; another key: 401 too (unknown tenant).
			if code, _, _ := apiGet(t, svc, base, ""); code != 401 {
				t.Errorf("proxy without a key: %d", code)
			}

			t.Run("websocket", func(t *testing.T) { testPortWebSocket(t, svc, sb.ID) })
			t.Run("tcp", func(t *testing.T) { testPortTCP(t, svc, sb.ID) })
			t.Run("port-forward", func(t *testing.T) { testPortForward(t, svc, sb.ID) })
			t.Run("refusals", func(t *testing.T) { testPortRefusals(t, svc, sb.ID) })
			t.Run("preview", func(t *testing.T) { testPortPreview(t, svc, sb.ID, marker) })

			// The sandbox still has no way out: only the loopback interface
			// and no route at all (read from inside, nothing sent).
			res := execOK(t, c, sb.ID, `python3 -c 'import socket; print(" ".join(n for _, n in socket.if_nameindex()))'; echo routes; tail -n +2 /proc/net/route`)
			if got := strings.TrimSpace(res.Stdout); got != "lo\nroutes" {
				t.Errorf("network inside the sandbox: %q, want only lo and no routes", got)
			}
		})
	}
}

func testPortWebSocket(t *testing.T, svc *service, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	u := "ws" + strings.TrimPrefix(svc.url(), "http") + client.PortPath(id, 8001) + "ws"
	ws, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + svc.e.apiKey}}})
	if err != nil {
		t.Fatalf("websocket through the proxy: %v", err)
	}
	defer ws.CloseNow()
	for i := range 5 {
		msg := fmt.Sprintf("hello-%d", i)
		if err := ws.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		typ, b, err := ws.Read(ctx)
		if err != nil || typ != websocket.MessageText || string(b) != "echo:"+msg {
			t.Fatalf("echo %d: %v %q %v", i, typ, b, err)
		}
	}
	ws.Close(websocket.StatusNormalClosure, "")
}

func testPortTCP(t *testing.T, svc *service, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	conn, err := svc.client().DialPort(ctx, id, 9000)
	if err != nil {
		t.Fatalf("DialPort: %v", err)
	}
	defer conn.Close()
	// 8 MiB each way, byte-exact, in both directions at once.
	payload := bytes.Repeat([]byte("0123456789abcdef"), 512<<10)
	payload = append(payload, '\n')
	errc := make(chan error, 1)
	go func() { _, err := conn.Write(payload); errc <- err }()
	got := make([]byte, len(payload))
	if _, err := io.ReadFull(conn, got); err != nil {
		t.Fatalf("read echo: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, payload) {
		t.Fatal("echo over TCP differs")
	}
}

func testPortForward(t *testing.T, svc *service, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "genesis"), "port-forward", id, "0:9000")
	cmd.Env = append(os.Environ(), client.EnvURL+"="+svc.url(), client.EnvAPIKey+"="+svc.e.apiKey)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer // written by the command's copier while read here
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("port-forward printed nothing: %v (stderr %q)", err, stderr.String())
	}
	// "Forwarding from 127.0.0.1:PORT -> ID:9000"
	f := strings.Fields(line)
	if len(f) < 3 {
		t.Fatalf("port-forward said %q", line)
	}
	local := f[2]
	for i := range 3 {
		c, err := net.DialTimeout("tcp", local, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		msg := fmt.Sprintf("line %d through port-forward\n", i)
		c.Write([]byte(msg))
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		got, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if err != nil || got != msg {
			t.Fatalf("forwarded echo %d: %q %v", i, got, err)
		}
	}
}

func testPortRefusals(t *testing.T, svc *service, id string) {
	c := svc.client()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	// Nobody listens on 8999: 502 port_unreachable, fast. The bound is a
	// not-a-hang bound, not a speed bound: a runsc round trip on a loaded
	// machine can take seconds, and 15 s still fails a refusal that waits
	// for something that never comes instead of answering.
	start := time.Now()
	code, h, body := apiGet(t, svc, client.PortPath(id, 8999), svc.e.apiKey)
	if code != 502 || !strings.Contains(body, "port_unreachable") {
		t.Errorf("closed port: %d %s", code, body)
	}
	d := time.Since(start)
	t.Logf("closed port answered after %v", d.Round(time.Millisecond))
	if d > 15*time.Second {
		t.Errorf("closed port answered after %v; want a refusal, not a hang", d)
	}
	_ = h
	if _, err := c.DialPort(ctx, id, 8999); client.ErrorCode(err) != "port_unreachable" {
		t.Errorf("DialPort to a closed port: %v", err)
	}
	// Outside the default policy (1024-65535).
	if code, _, body := apiGet(t, svc, client.PortPath(id, 80), svc.e.apiKey); code != 403 || !strings.Contains(body, "port_not_allowed") {
		t.Errorf("port 80: %d %s", code, body)
	}
	if code, _, _ := apiGet(t, svc, "/v1/sandboxes/"+id+"/ports/99999/", svc.e.apiKey); code != 400 {
		t.Errorf("port 99999: %d", code)
	}
	if code, _, _ := apiGet(t, svc, client.PortPath("sbx_nosuchsandbox", 8000), svc.e.apiKey); code != 404 {
		t.Errorf("unknown sandbox: %d", code)
	}
	if _, err := c.CreatePortLink(ctx, id, 8000, 0); client.ErrorCode(err) != "invalid_ttl" {
		t.Errorf("link with ttl 0: %v", err)
	}
	if code, _, _ := apiGet(t, svc, "/v1/previews/v1.bm9wZQ.bm9wZQ/", ""); code != 404 {
		t.Errorf("forged preview token: %d", code)
	}
}

func testPortPreview(t *testing.T, svc *service, id, marker string) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	link, err := svc.client().CreatePortLink(ctx, id, 8000, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// A browser with no API key renders the page.
	text := chromiumText(t, link.URL)
	if !strings.Contains(text, marker) {
		t.Errorf("headless Chromium on the preview link shows %.300q, want %s", text, marker)
	}
	// The link opens the port's own origin: the file is served there too.
	if code, _, body := previewDo(t, svc, "GET", link.Origin+"/"+marker, http.Header{"X-Genesis-Preview-Token": {link.Token}}); code != 200 || body != "hi\n" {
		t.Errorf("file through the link: %d %q", code, body)
	}

	// A short link works until its expiry and never after it. Each answer
	// is judged by when its request was sent, so a slow machine cannot
	// make the test wrong, only longer. The link lives 10 s, so that the
	// first request is sent well before the last 5 s, which are allowed
	// for the request's latency below.
	short, err := svc.client().CreatePortLink(ctx, id, 8000, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	sawOK := false
	eventually(t, 40*time.Second, "the preview link expires", func() (bool, string) {
		sent := time.Now()
		code, _, body := previewDo(t, svc, "GET", short.URL, nil)
		switch {
		case code == 200:
			if !sent.Before(short.ExpiresAt) {
				t.Fatalf("link answered 200 to a request sent at %v, after its expiry %v", sent, short.ExpiresAt)
			}
			sawOK = true
		case code == 404 && strings.Contains(body, "link_expired"):
			// Expiry is checked in whole seconds, and on a loaded machine
			// a request can take seconds to reach the check: a request
			// sent before ExpiresAt-5s must have been served.
			if sent.Before(short.ExpiresAt.Add(-5 * time.Second)) {
				t.Fatalf("link refused a request sent at %v, before its expiry %v", sent, short.ExpiresAt)
			}
			return true, ""
		default:
			t.Fatalf("preview link: %d %s", code, body)
		}
		return false, fmt.Sprintf("%d", code)
	})
	t.Logf("short link: served before expiry: %v", sawOK)
}
