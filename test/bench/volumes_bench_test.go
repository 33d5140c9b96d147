package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// BenchmarkVolumes compares, per runtime, the write (with fsync) and read
// throughput of one file of GENESIS_BENCH_VOLUME_MIB MiB (default 256)
// written and read inside a sandbox on its workspace and on a named volume
// mounted writable (a loop-mounted ext4 bind-mounted in; under runsc
// through the gofer). The read follows the write, so it is mostly served
// from the page cache, on both alike.
func BenchmarkVolumes(b *testing.B) {
	s := startService(b)
	mib := envInt(b, "GENESIS_BENCH_VOLUME_MIB", 256)
	tbl := NewTable("runtime", "MiB", "workspace write MiB/s", "volume write MiB/s", "workspace read MiB/s", "volume read MiB/s")
	s.eachRuntime(b, func(b *testing.B, rt string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		name := "bench-" + rt
		if _, err := s.client.CreateVolume(ctx, name, int64(mib)+64); err != nil {
			var ae *client.APIError
			if errors.As(err, &ae) && ae.Status == 501 {
				b.Skipf("volumes unavailable: %v", err)
			}
			b.Fatal(err)
		}
		defer func() {
			if err := s.client.DeleteVolume(context.Background(), name); err != nil {
				b.Error(err)
			}
		}()
		sb, err := s.client.CreateSandbox(ctx, client.CreateSandboxRequest{Profile: profile, Runtime: rt,
			Metadata: map[string]string{"purpose": "bench"}, Volumes: []client.VolumeMount{{Volume: name, Path: "/mnt/vol"}}}, "")
		if err != nil {
			b.Fatalf("create (%s): %v", rt, err)
		}
		s.mu.Lock()
		s.live[sb.ID] = true
		s.mu.Unlock()
		defer func() {
			if err := s.remove(context.Background(), sb.ID); err != nil {
				b.Error(err)
			}
		}()
		rate := func(op, dir string) float64 {
			var script string
			switch op {
			case "write":
				script = fmt.Sprintf("s=$(date +%%s%%N); dd if=/dev/zero of=%s/bench.bin bs=1M count=%d conv=fsync 2>/dev/null || exit 9; e=$(date +%%s%%N); echo $((e-s))", dir, mib)
			default:
				script = fmt.Sprintf("s=$(date +%%s%%N); cat %s/bench.bin > /dev/null || exit 9; e=$(date +%%s%%N); echo $((e-s)); rm %s/bench.bin", dir, dir)
			}
			res, err := s.client.Exec(ctx, sb.ID, client.ExecRequest{Script: script, TimeoutMS: 600_000})
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("%s %s (%s): %v %+v", op, dir, rt, err, res)
			}
			ns, err := strconv.ParseInt(strings.TrimSpace(res.Stdout), 10, 64)
			if err != nil || ns <= 0 {
				b.Fatalf("%s %s (%s): elapsed %q", op, dir, rt, res.Stdout)
			}
			return float64(mib) / (float64(ns) / 1e9)
		}
		ww := rate("write", "/workspace")
		wr := rate("read", "/workspace")
		vw := rate("write", "/mnt/vol")
		vr := rate("read", "/mnt/vol")
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(ww, "workspace-write-MiB/s")
		b.ReportMetric(vw, "volume-write-MiB/s")
		b.ReportMetric(wr, "workspace-read-MiB/s")
		b.ReportMetric(vr, "volume-read-MiB/s")
		tbl.Row(rt, strconv.Itoa(mib), fmt.Sprintf("%.0f", ww), fmt.Sprintf("%.0f", vw), fmt.Sprintf("%.0f", wr), fmt.Sprintf("%.0f", vr))
	})
	printTable("named volume vs workspace throughput inside a sandbox", tbl)
}
