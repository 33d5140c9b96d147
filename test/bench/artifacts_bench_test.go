package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// BenchmarkArtifacts measures job artifacts per runtime on one sandbox:
// the time collection adds to an exec that keeps GENESIS_BENCH_ARTIFACT_FILES
// fresh files of 16 KiB (default 100; GENESIS_BENCH_ARTIFACT_ITERS rounds,
// default 5; the exec of `true` without artifacts is the baseline), and the
// collection and download rates of one big artifact of
// GENESIS_BENCH_ARTIFACT_MIB random MiB (default 64, under the default
// per-file cap), sha256-checked.
func BenchmarkArtifacts(b *testing.B) {
	s := startService(b)
	files := envInt(b, "GENESIS_BENCH_ARTIFACT_FILES", 100)
	iters := envInt(b, "GENESIS_BENCH_ARTIFACT_ITERS", 5)
	mib := envInt(b, "GENESIS_BENCH_ARTIFACT_MIB", 64)
	tbl := NewTable("runtime", "files", "exec p50 ms", "exec+artifacts p50 ms", "collect p50 ms", "files/s",
		"big MiB", "collect MiB/s", "download MiB/s")
	s.eachRuntime(b, func(b *testing.B, rt string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		sb, err := s.create(ctx, rt)
		if err != nil {
			b.Fatalf("create (%s): %v", rt, err)
		}
		defer func() {
			if err := s.remove(ctx, sb.ID); err != nil {
				b.Error(err)
			}
		}()
		exec := func(script string, arts *client.ArtifactRequest) (*client.ExecResult, time.Duration) {
			t0 := time.Now()
			res, err := s.client.Exec(ctx, sb.ID, client.ExecRequest{Script: script, TimeoutMS: 600_000, Artifacts: arts})
			d := time.Since(t0)
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("exec %q (%s): %+v %v", script, rt, res, err)
			}
			return res, d
		}
		gen := fmt.Sprintf(`rm -rf /workspace/a && mkdir -p /workspace/a && i=0; while [ $i -lt %d ]; do head -c 16384 /dev/urandom > /workspace/a/f$i.bin; i=$((i+1)); done`, files)
		var plain, kept []time.Duration
		for range iters {
			exec(gen, nil)
			_, d := exec("true", nil)
			plain = append(plain, d)
			res, d := exec("true", &client.ArtifactRequest{Paths: []string{"a/*.bin"}})
			if res.Artifacts == nil || res.Artifacts.Collected != files {
				b.Fatalf("collected %+v, want %d files", res.Artifacts, files)
			}
			kept = append(kept, d)
		}
		ps, ks := Summarize(plain), Summarize(kept)
		collect := ks.P50 - ps.P50

		exec(fmt.Sprintf("head -c %d /dev/urandom > /workspace/big.bin", mib<<20), nil)
		res, withBig := exec("true", &client.ArtifactRequest{Paths: []string{"big.bin"}})
		if res.Artifacts == nil || res.Artifacts.Collected != 1 {
			b.Fatalf("big artifact: %+v", res.Artifacts)
		}
		collectRate := float64(mib) / (withBig - ps.P50).Seconds()
		list, err := s.client.ListArtifacts(ctx, res.JobID)
		if err != nil || len(list.Items) != 1 {
			b.Fatalf("list: %+v %v", list, err)
		}
		t0 := time.Now()
		d, err := s.client.DownloadArtifact(ctx, list.Items[0].ID, nil)
		if err != nil {
			b.Fatal(err)
		}
		h := sha256.New()
		n, err := io.Copy(h, d.Body)
		d.Body.Close()
		down := time.Since(t0)
		if err != nil || n != int64(mib)<<20 || hex.EncodeToString(h.Sum(nil)) != list.Items[0].SHA256 {
			b.Fatalf("download: %d bytes, %v", n, err)
		}
		downRate := float64(mib) / down.Seconds()

		b.ReportMetric(0, "ns/op")
		b.ReportMetric(Ms(ps.P50), "exec-p50-ms")
		b.ReportMetric(Ms(ks.P50), "exec+artifacts-p50-ms")
		b.ReportMetric(Ms(collect), "collect-p50-ms")
		b.ReportMetric(collectRate, "collect-MiB/s")
		b.ReportMetric(downRate, "download-MiB/s")
		tbl.Row(rt, strconv.Itoa(files), FormatMs(ps.P50), FormatMs(ks.P50), FormatMs(collect),
			fmt.Sprintf("%.0f", float64(files)/collect.Seconds()), strconv.Itoa(mib),
			fmt.Sprintf("%.0f", collectRate), fmt.Sprintf("%.0f", downRate))
	})
	printTable("artifacts: time collection adds to an exec keeping many small fresh files; one big artifact collected and downloaded (MiB/s)", tbl)
}
