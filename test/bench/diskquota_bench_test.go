package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/diskquota"
)

// BenchmarkWorkspaceQuota measures what a disk quota adds to a sandbox
// create and destroy: making, formatting and mounting a 1 GiB workspace
// image (create), and unmounting and deleting it (remove), as the service
// does around the container.
func BenchmarkWorkspaceQuota(b *testing.B) {
	root, err := os.MkdirTemp("", "gq")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(root)
	m, err := diskquota.New(diskquota.Config{Root: root})
	if err != nil {
		b.Fatal(err)
	}
	if ok, why := m.Available(); !ok {
		if os.Getenv("CI") == "true" {
			b.Fatalf("disk quotas unavailable in CI: %s", why)
		}
		b.Skipf("disk quotas unavailable: %s", why)
	}
	iters := envInt(b, "GENESIS_BENCH_ITERS", 100)
	var create, remove []time.Duration
	for i := range iters {
		dir := filepath.Join(root, fmt.Sprint(i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		spec := diskquota.Spec{Image: dir + ".img", Dir: dir, SizeMB: 1024, UID: 1000, GID: 1000}
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		t0 := time.Now()
		err := m.Create(ctx, spec)
		t1 := time.Now()
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		if err := m.Remove(spec.Image, spec.Dir); err != nil {
			b.Fatal(err)
		}
		create, remove = append(create, t1.Sub(t0)), append(remove, time.Since(t1))
	}
	cs, rs := Summarize(create), Summarize(remove)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(Ms(cs.P50), "create-p50-ms")
	b.ReportMetric(Ms(cs.P99), "create-p99-ms")
	b.ReportMetric(Ms(rs.P50), "remove-p50-ms")
	b.ReportMetric(Ms(rs.P99), "remove-p99-ms")
	tbl := NewTable("step", "n", "p50 ms", "p99 ms", "max ms")
	tbl.Row("create+mkfs+mount", strconv.Itoa(cs.N), FormatMs(cs.P50), FormatMs(cs.P99), FormatMs(cs.Max))
	tbl.Row("unmount+delete", strconv.Itoa(rs.N), FormatMs(rs.P50), FormatMs(rs.P99), FormatMs(rs.Max))
	printTable("workspace quota (1 GiB loop-mounted ext4), ms", tbl)
}
