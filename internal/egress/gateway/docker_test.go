package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/egress"
	"genesis.dev/sandbox/internal/testenv"
)

// docker runs the docker CLI with a deadline and returns trimmed stdout.
func docker(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("docker %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

func buildProbe(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "probe")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./testdata/probe")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build probe: %v: %s", err, out)
	}
	os.Chmod(filepath.Dir(bin), 0o755)
	return bin
}

// TestSandboxOnInternalNetwork puts a container, under runc and under
// runsc, on its own internal Docker network (no route out) whose only other
// member is the host side of the bridge, where the gateway serves. With
// /etc/resolv.conf pointing at the gateway, as the service sets it up, the
// allowed name works over HTTP, TLS (SNI) and CONNECT; the other name does
// not resolve and is refused; a server on another network the test made is
// unreachable by address.
func TestSandboxOnInternalNetwork(t *testing.T) {
	d := testenv.Docker(t)
	runtimes := testenv.Runtimes(t, d)
	image := testenv.BusyboxImage(t, d)
	probe := buildProbe(t)
	web := startUpstream(t, nil, "web.test", "other.test")
	g := startGateway(t, nil)

	tag := fmt.Sprintf("genesis-egress-test-%d", rand.IntN(1<<30))
	label := testenv.LabelTest + "=1"
	// A stray server on a network of its own: the sandbox must not reach it.
	outside := docker(t, "network", "create", "--label", label, tag+"-outside")
	t.Cleanup(func() { exec.Command("docker", "network", "rm", outside).Run() })
	target := docker(t, "run", "-d", "--label", label, "--network", tag+"-outside", "--name", tag+"-target",
		"-v", probe+":/probe:ro", image, "/probe", "serve", ":8080")
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", target).Run() })
	targetIP := docker(t, "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", target)

	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: web.cert}), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, rt := range runtimes {
		t.Run(string(rt), func(t *testing.T) {
			net := tag + "-" + string(rt)
			docker(t, "network", "create", "--internal", "--label", label, net)
			t.Cleanup(func() { exec.Command("docker", "network", "rm", net).Run() })
			gwIP := netip.MustParseAddr(docker(t, "network", "inspect", "-f", "{{(index .IPAM.Config 0).Gateway}}", net))
			g.put(t, "sb-"+string(rt), gwIP, webOperator(web), egress.Policy{Mode: egress.ModeAllowlist,
				Allow: []egress.Rule{{Host: "web.test"}}})
			resolv := filepath.Join(dir, "resolv-"+string(rt))
			if err := os.WriteFile(resolv, []byte("nameserver "+gwIP.String()+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			out := docker(t, "run", "--rm", "--label", label, "--runtime", string(rt), "--network", net,
				"-v", resolv+":/etc/resolv.conf:ro", "-v", probe+":/probe:ro", "-v", ca+":/ca.pem:ro",
				image, "/probe", "check", "web.test", "other.test", "/ca.pem",
				"http://"+netip.AddrPortFrom(gwIP, egress.PortProxy).String(), targetIP+":8080")
			var res map[string]string
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatalf("probe output %q: %v", out, err)
			}
			want := map[string]string{
				"lookup_allowed": gwIP.String(),
				"lookup_denied":  "nxdomain",
				"http":           "200 host=web.test path=/plain auth=",
				"https":          "200 host=web.test path=/tls auth=",
				"https_proxy":    "200 host=web.test path=/connect auth=",
			}
			for k, v := range want {
				if res[k] != v {
					t.Errorf("%s: %q, want %q", k, res[k], v)
				}
			}
			if !strings.HasPrefix(res["http_denied"], "error: ") { // no such host
				t.Errorf("http_denied: %q", res["http_denied"])
			}
			if !strings.HasPrefix(res["direct"], "blocked: ") {
				t.Errorf("direct connection to %s: %q", targetIP, res["direct"])
			}
			ev := g.waitEvent(t, "tls allow from "+string(rt), func(e egress.Event) bool {
				return e.Sandbox == "sb-"+string(rt) && e.Proto == egress.ProtoTLS && e.Decision == egress.DecisionAllow
			})
			if ev.BytesUp == 0 || ev.BytesDown == 0 || ev.Address != web.addr.String() {
				t.Errorf("tls event %+v", ev)
			}
		})
	}
}
