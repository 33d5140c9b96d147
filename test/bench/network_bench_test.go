package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/testenv"
)

// BenchmarkNetworkProxy compares the egress gateway path with a direct
// connection between two containers on a test network, per runtime: the
// latency of a GET on a new connection (with the DNS lookup, which on the
// proxy path is answered by the gateway) and on a kept-alive connection,
// and the throughput of one download. The server is the test's own
// inetserver on a Docker network the benchmark creates; nothing leaves the
// machine.
//
// Direct: a client container (the runtime under test) on the server's
// network, by address. Proxy: a sandbox in allowlist mode reaching the
// server by a name mapped with network.static_hosts, so every byte passes
// the gateway (DNS answer, Host routing, splice).
//
// GENESIS_BENCH_NET_N sets the requests per sample (default 200),
// GENESIS_BENCH_NET_MB the download size in MiB (default 64).
func BenchmarkNetworkProxy(b *testing.B) {
	d := testenv.Docker(b)
	img := testenv.BusyboxImage(b, d)
	dir := binDir(b)
	n := envInt(b, "GENESIS_BENCH_NET_N", 200)
	mb := envInt(b, "GENESIS_BENCH_NET_MB", 64)
	ctx := context.Background()

	tag := randomKey(b)[:8]
	netName, server := "genesis-bench-net-"+tag, "genesis-bench-srv-"+tag
	inet := filepath.Join(dir, "inet")
	if err := os.MkdirAll(inet, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.Link(filepath.Join(dir, "inetserver"), filepath.Join(inet, "inetserver")); err != nil && !os.IsExist(err) {
		b.Fatal(err)
	}
	mustDocker(b, "network", "create", "--label", testenv.LabelTest+"=1", netName)
	b.Cleanup(func() { _, _ = dockerCLI(context.Background(), "network", "rm", netName) })
	mustDocker(b, "run", "-d", "--name", server, "--label", testenv.LabelTest+"=1", "--runtime", "runc", "--network", netName,
		"-v", inet+":/inet:ro", "--entrypoint", "/inet/inetserver", img, "-name", "bench")
	b.Cleanup(func() { _, _ = dockerCLI(context.Background(), "rm", "-f", server) })
	ip := mustDocker(b, "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", server)

	s := startServiceWith(b, fmt.Sprintf("network: {upstream_networks: [%s], static_hosts: {bench.test: %s}}\n", netName, ip))
	b.Cleanup(func() {
		if inst, err := os.ReadFile(filepath.Join(s.dataDir, "instance_id")); err == nil {
			_, _ = dockerCLI(context.Background(), "rm", "-f", "genesis-egress-"+strings.TrimSpace(string(inst)))
		}
	})
	args := fmt.Sprintf("-n %d -bytes %d", n, int64(mb)<<20)
	table := NewTable("runtime", "path", "conn p50", "conn p99", "keepalive p50", "keepalive p99", "download MiB/s")
	s.eachRuntime(b, func(b *testing.B, rt string) {
		for i := 0; i < b.N; i++ {
			// Direct: a client container of the same runtime on the server's network.
			out := mustDocker(b, "run", "--rm", "--runtime", rt, "--network", netName, "-v", inet+":/inet:ro",
				"--entrypoint", "/inet/inetserver", img, "-bench", "http://"+ip, "-n", fmt.Sprint(n), "-bytes", fmt.Sprint(int64(mb)<<20))
			direct := parseBench(b, out)

			// Proxy: a networked sandbox, through the gateway.
			cctx, cancel := context.WithTimeout(ctx, opTimeout)
			sb, err := s.client.CreateSandbox(cctx, client.CreateSandboxRequest{Profile: profile, Runtime: rt,
				Network: &client.NetworkPolicy{Mode: client.NetworkAllowlist, Allow: []client.NetworkRule{{Host: "bench.test", Ports: []int{80}}}}}, "")
			cancel()
			if err != nil {
				b.Fatalf("create networked sandbox: %v\n%s", err, s.logTail())
			}
			s.mu.Lock()
			s.live[sb.ID] = true
			s.mu.Unlock()
			bin, err := os.Open(filepath.Join(dir, "inetserver"))
			if err != nil {
				b.Fatal(err)
			}
			cctx, cancel = context.WithTimeout(ctx, opTimeout)
			_, err = s.client.WriteFile(cctx, sb.ID, "/workspace/inetserver", bin, client.WriteFileOptions{Mode: "0755"})
			cancel()
			bin.Close()
			if err != nil {
				b.Fatalf("upload client: %v", err)
			}
			cctx, cancel = context.WithTimeout(ctx, opTimeout)
			res, err := s.client.Exec(cctx, sb.ID, client.ExecRequest{Script: "/workspace/inetserver -bench http://bench.test " + args, TimeoutMS: opTimeout.Milliseconds()})
			cancel()
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("proxy client: %v %+v", err, res)
			}
			proxy := parseBench(b, res.Stdout)
			_ = s.remove(ctx, sb.ID)

			for _, p := range []struct {
				name string
				r    benchSamples
			}{{"direct", direct}, {"proxy", proxy}} {
				conn, keep := Summarize(p.r.conn), Summarize(p.r.keep)
				reportSummary(b, p.name+"-conn-", conn)
				b.ReportMetric(Ms(keep.P50), p.name+"-keepalive-p50-ms")
				b.ReportMetric(Ms(keep.P99), p.name+"-keepalive-p99-ms")
				b.ReportMetric(p.r.mibps, p.name+"-MiB/s")
				table.Row(rt, p.name, conn.P50.String(), conn.P99.String(), keep.P50.String(), keep.P99.String(), fmt.Sprintf("%.1f", p.r.mibps))
			}
		}
	})
	printTable(fmt.Sprintf("Egress gateway vs direct (%d requests per sample, %d MiB download)", n, mb), table)
}

type benchSamples struct {
	conn, keep []time.Duration
	mibps      float64
}

func parseBench(b *testing.B, out string) benchSamples {
	b.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var r struct {
		ConnNS      []int64 `json:"conn_ns"`
		KeepAliveNS []int64 `json:"keepalive_ns"`
		Bytes       int64   `json:"bytes"`
		DownloadNS  int64   `json:"download_ns"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		b.Fatalf("benchmark client output %q: %v", out, err)
	}
	var s benchSamples
	for _, v := range r.ConnNS {
		s.conn = append(s.conn, time.Duration(v))
	}
	for _, v := range r.KeepAliveNS {
		s.keep = append(s.keep, time.Duration(v))
	}
	s.mibps = float64(r.Bytes) / (1 << 20) / time.Duration(r.DownloadNS).Seconds()
	return s
}

func mustDocker(b *testing.B, args ...string) string {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	out, err := dockerCLI(ctx, args...)
	if err != nil {
		b.Fatalf("docker %s: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(out)
}
