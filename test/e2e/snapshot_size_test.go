package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// TestSnapshotSizeLimits: a snapshot is bounded as it is written, never
// larger than what the sandbox really holds. With disk_mb 64 and
// snapshots.max_bytes_per_snapshot 256 MiB:
//
//   - a 2 GiB sparse file in the workspace is 413 snapshot_too_large
//     (it would be written out in full), and nothing is kept;
//   - a 20 MiB file with 100 hard links is kept once (size_bytes about
//     20 MiB, not 2 GiB), and a sandbox made from it gets links again;
//     one made with a 16 MiB disk is 413 no_space naming no host path;
//   - under runc, a 1 GiB sparse file in the root filesystem is counted
//     (the committed image's layer) and refused, its image removed; a
//     dense one is counted in size_bytes.
func TestSnapshotSizeLimits(t *testing.T) {
	t.Parallel()
	e, svc, _ := quotaEnv(t, "snapshots: {max_bytes_per_snapshot: 268435456}\n")
	c := svc.client()
	images := func() []string {
		return strings.Fields(dockerCmd(t, "images", "-a", "-q", "--no-trunc", "--filter", "label=dev.genesis.purpose=snapshot",
			"--filter", "label=dev.genesis.instance="+e.instance()))
	}
	snapDir := filepath.Join(e.dataDir, "snapshots")
	refused := func(t *testing.T, what string, err error, status int, code string) {
		t.Helper()
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != status || ae.Problem.Code != code {
			t.Fatalf("%s: %v, want %d %s", what, err, status, code)
		}
		if strings.Contains(err.Error(), e.dataDir) || strings.Contains(err.Error(), "/tmp/") {
			t.Errorf("%s: the problem names a host path: %v", what, err)
		}
	}
	nothingKept := func(t *testing.T, sbID string, keep int) {
		t.Helper()
		list, err := c.ListSnapshots(callCtx(t), sbID)
		if err != nil {
			t.Fatal(err)
		}
		ready := 0
		for _, sn := range list {
			switch {
			case sn.State == "ready":
				ready++
			case sn.State != "failed" || sn.SizeBytes != 0:
				t.Errorf("a refused snapshot: %+v", sn)
			}
		}
		eventually(t, 30*time.Second, "no partial snapshot on disk", func() (bool, string) {
			left, _ := os.ReadDir(snapDir)
			return len(left) == ready+keep, fmt.Sprint(left)
		})
	}
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			risk := "low"
			if rt == "runsc" {
				risk = "medium"
			}
			before, _ := os.ReadDir(snapDir)
			sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt, RiskLevel: risk, Resources: &client.Resources{DiskMB: 64}})
			no := false
			execOK(t, c, sb.ID, "truncate -s 2G /workspace/sparse")
			_, err := c.CreateSnapshot(callCtx(t), sb.ID, client.CreateSnapshotRequest{Memory: &no})
			refused(t, "a 2 GiB sparse file in a 64 MiB workspace", err, 413, "snapshot_too_large")
			nothingKept(t, sb.ID, len(before))

			execOK(t, c, sb.ID, "rm /workspace/sparse && head -c 20M /dev/urandom > /workspace/big && for i in $(seq 100); do ln /workspace/big /workspace/h$i; done")
			extra := int64(0)
			if rt == "runc" {
				execOK(t, c, sb.ID, "head -c 5M /dev/urandom > $HOME/dense")
				extra = 5 << 20
			}
			sn, err := c.CreateSnapshot(callCtx(t), sb.ID, client.CreateSnapshotRequest{Memory: &no})
			if err != nil {
				t.Fatal(err)
			}
			if sn.SizeBytes < 20<<20+extra || sn.SizeBytes > 23<<20+extra {
				t.Errorf("a 20 MiB file with 100 links (and %d bytes in the root filesystem): size_bytes %d", extra, sn.SizeBytes)
			}
			cp := e.createSandbox(t, client.CreateSandboxRequest{SnapshotID: sn.ID, Resources: &client.Resources{DiskMB: 32}})
			if v := execOK(t, c, cp.ID, "stat -c %h /workspace/big && cmp /workspace/big /workspace/h77 && echo same").Stdout; v != "101\nsame\n" {
				t.Errorf("the links in a sandbox from the snapshot: %q", v)
			}
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			small, err := c.CreateSandbox(ctx, client.CreateSandboxRequest{SnapshotID: sn.ID, Resources: &client.Resources{DiskMB: 16}}, "")
			cancel()
			if err == nil {
				e.deleteOnCleanup(t, small.ID)
			}
			refused(t, "a 20 MiB snapshot into a 16 MiB disk", err, 413, "no_space")

			if rt == "runc" {
				execOK(t, c, sb.ID, "truncate -s 1G $HOME/sparse")
				_, err = c.CreateSnapshot(callCtx(t), sb.ID, client.CreateSnapshotRequest{Memory: &no})
				refused(t, "a 1 GiB sparse file in the root filesystem", err, 413, "snapshot_too_large")
				nothingKept(t, sb.ID, len(before))
				eventually(t, 30*time.Second, "only the kept snapshot's image", func() (bool, string) {
					got := images()
					return len(got) == 1, fmt.Sprint(got)
				})
			}
			if v := execOK(t, c, sb.ID, "echo alive").Stdout; v != "alive\n" {
				t.Errorf("the sandbox after the refused snapshots: %q", v)
			}
		})
	}
}
