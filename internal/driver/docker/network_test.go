package docker_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/driver/docker"
	"genesis.dev/sandbox/internal/driver/drivertest"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/testenv"
)

func TestNetworkConformance(t *testing.T) {
	drivertest.RunNetworks(t, func(t *testing.T) drivertest.Harness {
		d := testenv.Docker(t)
		return drivertest.Harness{
			Driver:   d,
			Image:    testenv.BusyboxImage(t, d),
			Runtimes: testenv.Runtimes(t, d),
			Cmd:      []string{"/bin/busybox", "sleep", "300"},
			Labels:   testLabels,
		}
	}, "10.232.255.0/28")
}

// testNetwork creates an internal network removed at cleanup.
func testNetwork(t *testing.T, d *docker.Driver, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := d.CreateNetwork(ctx, driver.NetworkSpec{Name: name, Internal: true, Labels: testLabels}); err != nil {
		t.Fatalf("CreateNetwork %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := d.RemoveNetwork(ctx, name); err != nil {
			t.Errorf("cleanup: RemoveNetwork %s: %v", name, err)
		}
	})
}

// TestInternalNetworkReach runs a sandbox-like container under each runtime
// on its own internal network that a runc "gateway" container joins by
// connect (as the egress gateway does): the sandbox reaches the gateway by
// TCP, has no other interface than lo and that network, and cannot reach a
// server on another internal network. The host side of the bridge has no
// address to reach.
func TestInternalNetworkReach(t *testing.T) {
	d := testenv.Docker(t)
	img := testenv.BusyboxImage(t, d)
	tag := fmt.Sprintf("%d", time.Now().UnixNano()%1e9)
	upstream, other := "genesis-test-up-"+tag, "genesis-test-other-"+tag
	testNetwork(t, d, upstream)
	testNetwork(t, d, other)
	serve := []string{"/bin/busybox", "sh", "-c", "mkdir -p /tmp/w && echo pong > /tmp/w/index.html && exec httpd -f -p 8080 -h /tmp/w"}
	gw := run(t, d, driver.Spec{Name: "genesis-test-gw-" + tag, Image: img, Runtime: sandbox.RuntimeRunc, Cmd: serve, Network: upstream,
		Sysctls: map[string]string{"net.ipv4.ip_unprivileged_port_start": "0"}, User: "65534:65534"})
	foreign := run(t, d, driver.Spec{Name: "genesis-test-foreign-" + tag, Image: img, Runtime: sandbox.RuntimeRunc, Cmd: serve, Network: other})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	fst, err := d.Inspect(ctx, foreign)
	if err != nil || fst.Networks[other] == "" {
		t.Fatalf("Inspect foreign: %+v, %v", fst.Networks, err)
	}
	for _, rt := range testenv.Runtimes(t, d) {
		t.Run(string(rt), func(t *testing.T) {
			net := "genesis-test-sbx-" + string(rt) + "-" + tag
			testNetwork(t, d, net)
			gwIP, err := d.ConnectNetwork(ctx, net, gw, "")
			if err != nil {
				t.Fatalf("ConnectNetwork gateway: %v", err)
			}
			st, err := d.InspectNetwork(ctx, net)
			if err != nil {
				t.Fatal(err)
			}
			bridge := strings.TrimSuffix(st.Subnet, "/"+strings.SplitN(st.Subnet, "/", 2)[1])
			bridge = bridge[:len(bridge)-1] + "1" // the first address: the bridge's, unassigned
			script := fmt.Sprintf(`ip -o link | grep -v ' lo:' | wc -l
req() { printf 'GET / HTTP/1.0\r\n\r\n' | timeout 5 nc -w 3 "$1" 8080 2>&1 | tail -1; }
echo gw=$(req %s)
echo foreign=$(req %s)
echo bridge=$(req %s)
echo done`, gwIP, fst.Networks[other], bridge)
			id := run(t, d, driver.Spec{Name: "genesis-test-sbx-" + string(rt) + "-" + tag, Image: img, Runtime: rt, Network: net,
				Cmd: []string{"/bin/busybox", "sh", "-c", script}})
			out := logsUntil(t, d, id, "done")
			lines := strings.Fields(out)
			if len(lines) < 4 || lines[0] != "1" {
				t.Errorf("interfaces besides lo = %q; want exactly 1\n%s", lines, out)
			}
			if !strings.Contains(out, "gw=pong") {
				t.Errorf("sandbox did not reach the gateway at %s:\n%s", gwIP, out)
			}
			if strings.Contains(out, "foreign=pong") || strings.Contains(out, "bridge=pong") {
				t.Errorf("sandbox reached a server outside its network:\n%s", out)
			}
		})
	}
}
