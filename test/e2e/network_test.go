package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/testenv"
)

// The network tests play "the internet" with two servers of their own (the
// inetserver binary in the busybox test image) on a Docker network the test
// creates; the service's gateway joins it (network.upstream_networks) and
// reaches the servers by names mapped with network.static_hosts. No packet
// goes anywhere the test did not create.

// internet is a test-owned stand-in for the internet.
type internet struct {
	network string
	allowed string // address of the server "allowed.test"
	other   string // address of the server "other.test"
	serverA string // container name of the allowed server (also tools.test)
	serverB string
}

var inetBuild struct {
	once sync.Once
	dir  string
	err  error
}

// inetServerDir builds ./test/e2e/inetserver (static) once.
func inetServerDir(t *testing.T) string {
	t.Helper()
	inetBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "genesis-inet-")
		if err != nil {
			inetBuild.err = err
			return
		}
		cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, "inetserver"), "./inetserver")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			inetBuild.err = fmt.Errorf("%v: %s", err, out)
			return
		}
		inetBuild.err = os.Chmod(dir, 0o755)
		inetBuild.dir = dir
	})
	if inetBuild.err != nil {
		t.Fatalf("building inetserver: %v", inetBuild.err)
	}
	return inetBuild.dir
}

// startInternet creates the test network and its two servers, removed at
// cleanup.
func startInternet(t *testing.T) *internet {
	t.Helper()
	d := testenv.Docker(t)
	img := testenv.BusyboxImage(t, d)
	dir := inetServerDir(t)
	tag := randomHex(t, 4)
	in := &internet{network: "genesis-e2e-inet-" + tag, serverA: "genesis-e2e-inet-a-" + tag, serverB: "genesis-e2e-inet-b-" + tag}
	dockerCmd(t, "network", "create", "--label", testenv.LabelTest+"=1", in.network)
	t.Cleanup(func() { dockerCmdQuiet("network", "rm", in.network) })
	for _, s := range []struct{ name, id string }{{in.serverA, "allowed"}, {in.serverB, "other"}} {
		dockerCmd(t, "run", "-d", "--name", s.name, "--label", testenv.LabelTest+"=1", "--runtime", "runc",
			"--network", in.network, "-v", dir+":/inet:ro", "--entrypoint", "/inet/inetserver", img, "-name", s.id)
		t.Cleanup(func() { dockerCmdQuiet("rm", "-f", s.name) })
	}
	in.allowed = dockerCmd(t, "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", in.serverA)
	in.other = dockerCmd(t, "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", in.serverB)
	for _, s := range []string{in.serverA, in.serverB} {
		eventually(t, 30*time.Second, s+" ready", func() (bool, string) {
			out := dockerLogs(t, s)
			return strings.Contains(out, "inetserver ready"), out
		})
	}
	return in
}

func dockerLogs(t *testing.T, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), dockerTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "logs", name).CombinedOutput()
	if err != nil {
		t.Fatalf("docker logs %s: %v: %s", name, err, out)
	}
	return string(out)
}

// dockerCmdQuiet runs a cleanup docker command, ignoring failures.
func dockerCmdQuiet(args ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), dockerTimeout)
	defer cancel()
	_ = exec.CommandContext(ctx, "docker", args...).Run()
}

// netProbe is the Python run inside sandboxes: each named check is a Python
// expression over the helpers; the result is one JSON object.
const netProbe = `import json, os, socket, ssl, sys, urllib.request

def resolve(name):
    try:
        return socket.gethostbyname(name)
    except Exception as e:
        return "ERR " + type(e).__name__

def tcp(host, port, t=3):
    try:
        socket.create_connection((host, port), timeout=t).close()
        return "ok"
    except Exception as e:
        return "ERR " + type(e).__name__

def get(url, proxy=False, t=5):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    h = urllib.request.ProxyHandler() if proxy else urllib.request.ProxyHandler({})
    try:
        return urllib.request.build_opener(h, urllib.request.HTTPSHandler(context=ctx)).open(url, timeout=t).read().decode().strip()
    except Exception as e:
        return "ERR " + type(e).__name__ + " " + str(e)[:80]

def connect(host, port):
    ph, pp = os.environ["HTTP_PROXY"][len("http://"):].rsplit(":", 1)
    try:
        s = socket.create_connection((ph, int(pp)), timeout=5)
        s.sendall(("CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (host, port, host, port)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            b = s.recv(1)
            if not b:
                break
            head += b
        line = head.split(b"\r\n")[0].decode()
        if " 200" not in line:
            return "ERR " + line
        s.sendall(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n")
        data = b""
        while True:
            b = s.recv(4096)
            if not b:
                break
            data += b
        return data.decode().split("\r\n\r\n", 1)[-1].strip()
    except Exception as e:
        return "ERR " + type(e).__name__

def secret_hits(a, b):
    s = (a + b).encode()
    hits = []
    if any(s in (k + "=" + v).encode() for k, v in os.environ.items()):
        hits.append("env")
    for root, dirs, files in os.walk("/"):
        if root == "/":
            dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev")]
        for f in files:
            p = os.path.join(root, f)
            try:
                if os.path.islink(p) or not os.path.isfile(p) or os.path.getsize(p) > (64 << 20):
                    continue
                with open(p, "rb") as fh:
                    if s in fh.read():
                        hits.append(p)
            except Exception:
                pass
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            for part in ("environ", "cmdline"):
                try:
                    with open("/proc/%s/%s" % (pid, part), "rb") as fh:
                        if s in fh.read():
                            hits.append("/proc/%s/%s" % (pid, part))
                except Exception:
                    pass
    return "hits:" + ",".join(hits[:5])

def ifaces():
    return ",".join(sorted(n for _, n in socket.if_nameindex()))

checks = json.loads(sys.argv[1])
print(json.dumps({k: eval(v) for k, v in checks.items()}))
`

// probe runs named Python checks in a sandbox and returns their results.
func probe(t *testing.T, c *client.Client, id string, checks map[string]string) map[string]string {
	t.Helper()
	b, _ := json.Marshal(checks)
	script := "cat > /workspace/.netprobe.py <<'PY'\n" + netProbe + "PY\npython3 /workspace/.netprobe.py '" + strings.ReplaceAll(string(b), "'", `'\''`) + "'"
	res := execOK(t, c, id, script)
	if res.ExitCode != 0 {
		t.Fatalf("probe in %s: exit %d, stderr %q", id, res.ExitCode, res.Stderr)
	}
	var out map[string]string
	if err := json.Unmarshal([]byte(lastLine(res.Stdout)), &out); err != nil {
		t.Fatalf("probe output %q: %v", res.Stdout, err)
	}
	return out
}

// expect checks probe results: "=X" exact, "~X" contains, "!" an error.
func expect(t *testing.T, what string, got map[string]string, want map[string]string) {
	t.Helper()
	for k, w := range want {
		g := got[k]
		switch {
		case strings.HasPrefix(w, "="):
			if g != w[1:] {
				t.Errorf("%s: %s = %q; want %q", what, k, g, w[1:])
			}
		case strings.HasPrefix(w, "~"):
			if !strings.Contains(g, w[1:]) {
				t.Errorf("%s: %s = %q; want it to contain %q", what, k, g, w[1:])
			}
		case w == "!":
			if !strings.HasPrefix(g, "ERR") {
				t.Errorf("%s: %s = %q; want it to fail", what, k, g)
			}
		}
	}
}

func networkConfig(in *internet, secretFile string) string {
	return fmt.Sprintf(`network:
  upstream_networks: [%s]
  static_hosts: {allowed.test: %s, other.test: %s, tools.test: %s}
  internal_endpoints:
    billing: {host: billing.internal, addresses: [%s], ports: [80]}
  tools:
    echo: {upstream: "http://tools.test/tool", credential: {type: bearer, secret: echo}}
  secrets:
    echo: {file: %s}
  gateway:
    restart_backoff: 45s # the window in which the test sees egress blocked
`, in.network, in.allowed, in.other, in.allowed, in.other, secretFile)
}

func TestNetworkPolicy(t *testing.T) {
	t.Parallel()
	in := startInternet(t)
	secret := "gs-tool-secret-" + randomHex(t, 16)
	secretFile := filepath.Join(t.TempDir(), "echo.secret")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, networkConfig(in, secretFile))
	e.requireImage(t, "code-python-basic")
	// Registered before the service starts, so it runs after the service
	// stopped (and so cannot restart it): the gateway outlives service
	// restarts by design, a test removes it itself.
	t.Cleanup(func() {
		if inst := e.instance(); inst != "" {
			dockerCmdQuiet("rm", "-f", "genesis-egress-"+inst)
		}
	})
	svc := e.start(t)
	c := svc.client()
	ctx := context.Background()

	caps, err := c.Capabilities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !caps.Network.Modes[client.NetworkAllowlist] || !caps.Network.Modes[client.NetworkNone] || caps.Network.Gateway != "idle" {
		t.Errorf("network capabilities before use = %+v; want all modes, gateway idle", caps.Network)
	}

	t.Run("runtimes", func(t *testing.T) {
		eachRuntime(t, e, func(t *testing.T, rt string) {
			testAllowlist(t, e, c, in, rt)
			testNone(t, e, c, in, rt)
			testToolProxy(t, e, c, in, rt, secret)
			testInternalAPI(t, e, c, rt)
		})
	})
	if t.Failed() {
		return
	}
	t.Run("GatewayKilled", func(t *testing.T) { testGatewayKilled(t, e, c, in) })
}

// testAllowlist covers mode allowlist on one runtime.
func testAllowlist(t *testing.T, e *env, c *client.Client, in *internet, rt string) {
	ctx := context.Background()
	sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "code-python-basic", Runtime: rt, RiskLevel: "low",
		Network: &client.NetworkPolicy{Mode: client.NetworkAllowlist, Allow: []client.NetworkRule{{Host: "allowed.test", Ports: []int{80, 443}}}}})
	if sb.Network == nil || sb.Network.Mode != client.NetworkAllowlist || sb.Network.Status != "active" {
		t.Fatalf("created sandbox network = %+v; want allowlist, active", sb.Network)
	}
	n, err := c.GetNetwork(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	gw := n.GatewayIP
	if gw == "" || n.Status != "active" || len(n.Policy.Allow) != 1 {
		t.Fatalf("network = %+v", n)
	}
	got := probe(t, c, sb.ID, map[string]string{
		"ifaces":        "ifaces()",
		"resolve":       `resolve("allowed.test")`,
		"http":          `get("http://allowed.test/")`,
		"https":         `get("https://allowed.test/")`,
		"proxied":       `get("http://allowed.test/", proxy=True)`,
		"other_name":    `resolve("other.test")`,
		"other_http":    `get("http://other.test/", t=3)`,
		"other_ip":      fmt.Sprintf(`tcp(%q, 80)`, in.other),
		"allowed_ip":    fmt.Sprintf(`tcp(%q, 80)`, in.allowed),
		"allowed_ip_px": fmt.Sprintf(`connect(%q, 80)`, in.allowed),
		"other_port":    `tcp("allowed.test", 8080)`,
	})
	expect(t, rt+" allowlist", got, map[string]string{
		"ifaces":  "=eth0,lo",
		"resolve": "=" + gw, // every allowed name answers the gateway
		"http":    "=hello from allowed via http",
		"https":   "=hello from allowed via https",
		"proxied": "=hello from allowed via http",
		// Other names are not resolvable and not reachable through the gateway.
		"other_name": "!", "other_http": "!",
		// Direct IP connections have no route at all (the network is internal).
		"other_ip": "!", "allowed_ip": "!",
		// An IP literal of an allowed server goes only through the proxy and
		// only with a CIDR rule, which this policy does not have.
		"allowed_ip_px": "!",
		"other_port":    "!",
	})

	// Runtime update: the answer comes after the gateway has the policy.
	cidr := in.allowed + "/32"
	start := time.Now()
	n2, err := c.SetNetwork(ctx, sb.ID, client.NetworkPolicy{Mode: client.NetworkAllowlist, Allow: []client.NetworkRule{
		{Host: "allowed.test", Ports: []int{80, 443}}, {Host: "other.test", Ports: []int{80}}, {CIDR: cidr, Ports: []int{80}}}}, n.ResourceVersion)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("SetNetwork: %v", err)
	}
	// The time is logged, not asserted: a functional test does not bound
	// speed, and the probe right after the answer proves the policy applied.
	t.Logf("policy update under %s took %v", rt, took.Round(time.Millisecond))
	if n2.ResourceVersion == n.ResourceVersion || len(n2.Policy.Allow) != 3 {
		t.Errorf("updated network = %+v", n2)
	}
	got = probe(t, c, sb.ID, map[string]string{
		"other_http":    `get("http://other.test/")`,
		"allowed_ip_px": fmt.Sprintf(`connect(%q, 80)`, in.allowed),
		"other_ip_px":   fmt.Sprintf(`connect(%q, 80)`, in.other),
		"allowed_ip":    fmt.Sprintf(`tcp(%q, 80)`, in.allowed),
	})
	expect(t, rt+" after update", got, map[string]string{
		"other_http":    "=hello from other via http",
		"allowed_ip_px": "=hello from allowed via http", // IP literal + CIDR rule, through the proxy
		"other_ip_px":   "!",                            // no CIDR rule covers it
		"allowed_ip":    "!",                            // still no direct route
	})

	// The CLI shows the same policy and the events.
	e.mu.Lock()
	svc := e.current
	e.mu.Unlock()
	var shown client.SandboxNetwork
	if r := svc.cli(t, "net", "get", sb.ID, "-o", "json"); json.Unmarshal([]byte(r.stdout), &shown) != nil ||
		shown.ResourceVersion != n2.ResourceVersion || len(shown.Policy.Allow) != 3 || shown.Status != "active" {
		t.Errorf("genesis net get = %q", r.stdout)
	}

	// Refused changes leave the policy as it is.
	if _, err := c.SetNetwork(ctx, sb.ID, client.NetworkPolicy{Mode: client.NetworkAllowlist, Allow: []client.NetworkRule{{Host: "x.test"}}}, n.ResourceVersion); !isStatus(err, 412, "") {
		t.Errorf("stale If-Match: %v; want 412", err)
	}
	if _, err := c.SetNetwork(ctx, sb.ID, client.NetworkPolicy{Mode: client.NetworkNone}, ""); !isStatus(err, 409, "network_mode_requires_recreate") {
		t.Errorf("allowlist → none: %v; want 409 network_mode_requires_recreate", err)
	}
	for _, bad := range []client.NetworkPolicy{
		{Mode: client.NetworkAllowlist, Allow: []client.NetworkRule{{CIDR: "0.0.0.0/0"}}},
		{Mode: client.NetworkAllowlist, Allow: []client.NetworkRule{{Host: "a.*.test"}}},
		{Mode: client.NetworkInternalAPI, Endpoints: []string{"nope"}},
		{Mode: "open"},
	} {
		if _, err := c.SetNetwork(ctx, sb.ID, bad, ""); !isStatus(err, 400, "") {
			t.Errorf("bad policy %+v: %v; want 400", bad, err)
		}
	}
	if now, err := c.GetNetwork(ctx, sb.ID); err != nil || now.ResourceVersion != n2.ResourceVersion || len(now.Policy.Allow) != 3 {
		t.Errorf("policy after refused changes = %+v, %v; want version %s unchanged", now, err, n2.ResourceVersion)
	}

	// Egress audit: allowed and denied attempts, paged one by one.
	var all []client.NetworkEvent
	eventually(t, 30*time.Second, "egress events recorded", func() (bool, string) {
		all = pageEvents(t, c, sb.ID)
		var allowHTTP, denyDNS, denyConnect bool
		for _, ev := range all {
			allowHTTP = allowHTTP || (ev.Decision == "allow" && ev.Name == "allowed.test" && ev.Proto == "http" && ev.BytesDown > 0)
			denyDNS = denyDNS || (ev.Decision == "deny" && ev.Proto == "dns" && strings.TrimSuffix(ev.Name, ".") == "other.test")
			denyConnect = denyConnect || (ev.Decision == "deny" && ev.Proto == "connect" && ev.Address == in.other)
		}
		return allowHTTP && denyDNS && denyConnect, fmt.Sprintf("%d events: %+v", len(all), all)
	})
	for i := 1; i < len(all); i++ {
		if all[i].Cursor <= all[i-1].Cursor {
			t.Fatalf("event cursors not increasing: %d after %d", all[i].Cursor, all[i-1].Cursor)
		}
	}
}

// pageEvents lists every event of a sandbox one per page.
func pageEvents(t *testing.T, c *client.Client, id string) []client.NetworkEvent {
	t.Helper()
	var out []client.NetworkEvent
	cursor := ""
	for range 10000 {
		page, err := c.NetworkEvents(context.Background(), id, cursor, 1)
		if err != nil {
			t.Fatalf("NetworkEvents: %v", err)
		}
		if len(page.Items) == 0 {
			if page.NextCursor != cursor && cursor != "" {
				t.Fatalf("empty page moved the cursor from %s to %s", cursor, page.NextCursor)
			}
			return out
		}
		out = append(out, page.Items...)
		cursor = page.NextCursor
	}
	t.Fatal("events never ended")
	return nil
}

func isStatus(err error, status int, code string) bool {
	var ae *client.APIError
	return errors.As(err, &ae) && ae.Status == status && (code == "" || ae.Problem.Code == code)
}

// testNone checks that mode none has no route at all: only loopback.
func testNone(t *testing.T, e *env, c *client.Client, in *internet, rt string) {
	sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "code-python-basic", Runtime: rt, RiskLevel: "low"})
	if sb.Network != nil {
		t.Errorf("sandbox without network shows %+v", sb.Network)
	}
	n, err := c.GetNetwork(context.Background(), sb.ID)
	if err != nil || n.Policy.Mode != client.NetworkNone || n.Status != "none" {
		t.Errorf("network of a none sandbox = %+v, %v", n, err)
	}
	got := probe(t, c, sb.ID, map[string]string{
		"ifaces":  "ifaces()",
		"ip":      fmt.Sprintf(`tcp(%q, 80)`, in.allowed),
		"name":    `resolve("allowed.test")`,
		"no_env":  `os.environ.get("HTTP_PROXY", "unset")`,
		"loopbck": `tcp("127.0.0.1", 9)`,
	})
	expect(t, rt+" none", got, map[string]string{"ifaces": "=lo", "ip": "!", "name": "!", "no_env": "=unset"})
	if _, err := c.SetNetwork(context.Background(), sb.ID, client.NetworkPolicy{Mode: client.NetworkAllowlist,
		Allow: []client.NetworkRule{{Host: "allowed.test"}}}, ""); !isStatus(err, 409, "network_mode_requires_recreate") {
		t.Errorf("none → allowlist: %v; want 409 network_mode_requires_recreate", err)
	}
}

// testInternalAPI: a sandbox in mode internal-api reaches the operator's
// endpoint by its configured name (its private address is allowed only for
// that name) and nothing else.
func testInternalAPI(t *testing.T, e *env, c *client.Client, rt string) {
	sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "code-python-basic", Runtime: rt, RiskLevel: "low",
		Network: &client.NetworkPolicy{Mode: client.NetworkInternalAPI, Endpoints: []string{"billing"}}})
	got := probe(t, c, sb.ID, map[string]string{
		"endpoint":   `get("http://billing.internal/")`,
		"other_port": `tcp("billing.internal", 8080, t=2)`,
		"allowed":    `resolve("allowed.test")`,
		"other":      `get("http://other.test/", t=3)`,
	})
	expect(t, rt+" internal-api", got, map[string]string{
		"endpoint": "=hello from other via http", "other_port": "!", "allowed": "!", "other": "!",
	})
}

// testToolProxy checks that the tool's upstream gets the credential and
// that nothing in the sandbox holds it.
func testToolProxy(t *testing.T, e *env, c *client.Client, in *internet, rt, secret string) {
	sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "code-python-basic", Runtime: rt, RiskLevel: "low",
		Network: &client.NetworkPolicy{Mode: client.NetworkToolProxy, Tools: []string{"echo"}}})
	marker := "/probe-" + randomHex(t, 6)
	got := probe(t, c, sb.ID, map[string]string{
		"url":   `os.environ.get("GENESIS_TOOL_ECHO_URL", "")`,
		"tool":  fmt.Sprintf(`get(os.environ["GENESIS_TOOL_ECHO_URL"] + %q)`, strings.TrimPrefix(marker, "/")),
		"other": `get("http://allowed.test/", t=3)`,
	})
	expect(t, rt+" tool-proxy", got, map[string]string{"url": "=http://echo.tool/", "tool": "=tool ok", "other": "!"})
	eventually(t, 30*time.Second, "upstream saw the injected credential", func() (bool, string) {
		logs := dockerLogs(t, in.serverA)
		return strings.Contains(logs, "AUTH /tool"+marker+" Bearer "+secret), logs
	})
	// The secret is nowhere in the sandbox: not in the environment, in any
	// file, in any process's arguments or environment. The search gets it in
	// two halves so that the search itself does not carry it.
	half := len(secret) / 2
	got = probe(t, c, sb.ID, map[string]string{"hits": fmt.Sprintf(`secret_hits(%q, %q)`, secret[:half], secret[half:])})
	if got["hits"] != "hits:" {
		t.Errorf("%s sandbox holds the tool secret: %s", rt, got["hits"])
	}
}

// testGatewayKilled kills the gateway container: egress stops (never
// opens), every networked sandbox reports enforcement_down, and after the
// service restarts the gateway the policies hold again.
func testGatewayKilled(t *testing.T, e *env, c *client.Client, in *internet) {
	ctx := context.Background()
	sandboxes := map[string]string{}
	for _, rt := range e.runtimes(t) {
		sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "code-python-basic", Runtime: rt, RiskLevel: "low",
			Network: &client.NetworkPolicy{Mode: client.NetworkAllowlist, Allow: []client.NetworkRule{{Host: "allowed.test"}}}})
		sandboxes[rt] = sb.ID
		got := probe(t, c, sb.ID, map[string]string{"http": `get("http://allowed.test/")`})
		expect(t, rt+" before the kill", got, map[string]string{"http": "=hello from allowed via http"})
	}
	gw := "genesis-egress-" + e.instance()
	dockerCmd(t, "kill", gw)
	for rt, id := range sandboxes {
		eventually(t, 15*time.Second, rt+" sandbox network enforcement_down", func() (bool, string) {
			n, err := c.GetNetwork(ctx, id)
			if err != nil {
				return false, err.Error()
			}
			return n.Status == "enforcement_down", n.Status
		})
		sb, err := c.GetSandbox(ctx, id)
		if err != nil || sb.Network == nil || sb.Network.Status != "enforcement_down" {
			t.Errorf("%s sandbox shows network %+v, %v; want enforcement_down", rt, sb.Network, err)
		}
		got := probe(t, c, id, map[string]string{
			"http":    `get("http://allowed.test/", t=2)`,
			"proxied": `get("http://allowed.test/", proxy=True, t=2)`,
			"ip":      fmt.Sprintf(`tcp(%q, 80, 2)`, in.allowed),
		})
		expect(t, rt+" with the gateway down", got, map[string]string{"http": "!", "proxied": "!", "ip": "!"})
		if n, err := c.GetNetwork(ctx, id); err != nil || n.Status != "enforcement_down" {
			t.Fatalf("%s: the gateway came back before the blocked probe ended (%+v, %v); raise restart_backoff", rt, n, err)
		}
	}
	// A policy change while enforcement is down is refused and changes nothing.
	id := sandboxes[e.runtimes(t)[0]]
	before, _ := c.GetNetwork(ctx, id)
	if _, err := c.SetNetwork(ctx, id, client.NetworkPolicy{Mode: client.NetworkAllowlist,
		Allow: []client.NetworkRule{{Host: "other.test"}}}, ""); !isStatus(err, 503, "network_enforcement_unavailable") {
		t.Errorf("policy change with the gateway down: %v; want 503 network_enforcement_unavailable", err)
	}
	if after, _ := c.GetNetwork(ctx, id); before == nil || after == nil || after.Policy.Allow[0].Host != "allowed.test" {
		t.Errorf("policy after a refused change = %+v", after)
	}
	for rt, id := range sandboxes {
		eventually(t, 3*time.Minute, rt+" sandbox network active again", func() (bool, string) {
			n, err := c.GetNetwork(ctx, id)
			if err != nil {
				return false, err.Error()
			}
			return n.Status == "active", n.Status + " " + n.StatusReason
		})
		got := probe(t, c, id, map[string]string{"http": `get("http://allowed.test/")`, "other": `resolve("nothing.test")`})
		expect(t, rt+" after the gateway restart", got, map[string]string{"http": "=hello from allowed via http", "other": "!"})
	}
}
