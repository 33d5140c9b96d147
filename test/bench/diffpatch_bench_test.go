package bench

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// BenchmarkDiffPatch measures, per runtime, GET /v1/sandboxes/{id}/diff of
// a workspace of GENESIS_BENCH_DIFF_FILES files (default 10,000, 2 KiB of
// text each) of which GENESIS_BENCH_DIFF_CHANGED (default 100) changed
// since a snapshot, and POST …/patch of that diff onto a sandbox made from
// the snapshot (checked: the two workspaces then have no difference).
func BenchmarkDiffPatch(b *testing.B) {
	s := startService(b)
	nFiles := envInt(b, "GENESIS_BENCH_DIFF_FILES", 10_000)
	nChanged := envInt(b, "GENESIS_BENCH_DIFF_CHANGED", 100)
	tbl := NewTable("runtime", "files", "changed", "diff ms", "diff KiB", "patch ms")
	s.eachRuntime(b, func(b *testing.B, rt string) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		c := s.client
		a, err := s.create(ctx, rt)
		if err != nil {
			b.Fatalf("create (%s): %v", rt, err)
		}
		defer s.remove(ctx, a.ID)
		var arch bytes.Buffer
		tw := tar.NewWriter(&arch)
		line := []byte("the quick brown fox jumps over the lazy dog, line of a file\n")
		body := bytes.Repeat(line, 2048/len(line))
		for i := range nFiles {
			tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("d%03d/f%05d.txt", i%100, i), Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
			tw.Write(body)
		}
		tw.Close()
		if _, err := c.ExtractArchive(ctx, a.ID, "/workspace/proj", bytes.NewReader(arch.Bytes()), int64(arch.Len())); err != nil {
			b.Fatalf("seeding %d files (%s): %v", nFiles, rt, err)
		}
		noMemory := false
		snap, err := c.CreateSnapshot(ctx, a.ID, client.CreateSnapshotRequest{Memory: &noMemory})
		if err != nil {
			b.Fatalf("snapshot (%s): %v", rt, err)
		}
		defer c.DeleteSnapshot(ctx, snap.ID)
		script := fmt.Sprintf("cd /workspace/proj && i=0; for f in $(find . -name '*.txt' | sort | head -n %d); do sed -i '5s/fox/cat/' $f; done", nChanged)
		if res, err := c.Exec(ctx, a.ID, client.ExecRequest{Script: script, TimeoutMS: 300_000}); err != nil || res.ExitCode != 0 {
			b.Fatalf("changing %d files (%s): %+v %v", nChanged, rt, res, err)
		}
		t0 := time.Now()
		patch, truncated, err := c.DiffSandboxPatch(ctx, a.ID, snap.ID)
		diffTime := time.Since(t0)
		if err != nil || truncated {
			b.Fatalf("diff (%s): truncated %v, %v", rt, truncated, err)
		}
		d, err := c.DiffSandbox(ctx, a.ID, snap.ID)
		if err != nil || d.Summary.Modified != nChanged || d.Summary.Files != nChanged {
			b.Fatalf("diff (%s): %+v %v, want %d modified", rt, d.Summary, err, nChanged)
		}
		fresh, err := c.CreateSandbox(ctx, client.CreateSandboxRequest{Profile: profile, Runtime: rt, SnapshotID: snap.ID}, "")
		if err != nil {
			b.Fatalf("sandbox from the snapshot (%s): %v", rt, err)
		}
		defer c.DeleteSandbox(ctx, fresh.ID)
		t0 = time.Now()
		res, err := c.ApplyPatch(ctx, fresh.ID, []byte(patch), false)
		patchTime := time.Since(t0)
		if err != nil || len(res.Files) != nChanged {
			b.Fatalf("patch (%s): %v", rt, err)
		}
		if same, err := c.DiffSandbox(ctx, fresh.ID, a.ID); err != nil || same.Summary.Files != 0 {
			b.Fatalf("the patched sandbox differs (%s): %+v %v", rt, same, err)
		}
		b.ReportMetric(Ms(diffTime), "diff-ms")
		b.ReportMetric(Ms(patchTime), "patch-ms")
		tbl.Row(rt, strconv.Itoa(nFiles), strconv.Itoa(nChanged), FormatMs(diffTime), strconv.Itoa(len(patch)/1024), FormatMs(patchTime))
	})
	printTable("diff of a workspace against a snapshot, and the patch applied to a fresh sandbox from it (ms)", tbl)
}
