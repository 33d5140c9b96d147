package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// snapshotPoolConfig is code-python-basic with the given pools, whose
// released sandboxes are to be reset.
func snapshotPoolConfig(pools string) string {
	return `warm_pools: true
intervals: {pool_check: 2s, reconcile: 2s}
profiles:
  - name: code-python-basic
    recipe: code-python-basic
    allowed_runtimes: [runc, runsc]
    default_risk_level: medium
    resources: {cpu: 1, memory_mb: 512, pids: 256}
    network: none
    user: "1000:1000"
    pools: ` + pools + `
    lease: {default_ttl_seconds: 300, max_ttl_seconds: 600, on_release: reset}
`
}

// poolBase is the state a snapshot-fed pool's members start with.
type poolBase struct {
	snapshotID string
	contextID  string // the code context holding x = 41
	count      int    // the counter when the snapshot was taken
}

// TestSnapshotPool, under runc and runsc: a warm pool fed from a snapshot
// hands a lease that names the snapshot a member that already has its
// state — the workspace's files (runc and runsc) and, under runsc, a
// Python code context's variable and a background process still counting
// — in pool-claim time, each member with an identity of its own. The
// snapshot cannot be deleted while the pool uses it; a released member is
// destroyed rather than wiped, and the pool makes another from the
// snapshot; once the snapshot's files are damaged the pool reports
// failing and a lease from it is refused.
func TestSnapshotPool(t *testing.T) {
	t.Parallel()
	e := newEnv(t, snapshotPoolConfig("[]"))
	e.requireImage(t, "code-python-basic")
	runtimes := e.runtimes(t)
	svc := e.start(t)
	c := svc.client()

	// The base: a sandbox per runtime set up once, snapshotted and deleted.
	base := map[string]poolBase{}
	var pools []string
	for _, rt := range runtimes {
		risk := "low"
		if rt == "runsc" {
			risk = "untrusted"
		}
		sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "code-python-basic", Runtime: rt, RiskLevel: risk})
		cx, err := c.CreateContext(callCtx(t), sb.ID, client.CreateContextRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if v := runValue(t, c, cx.ID, "x = 41; x"); v != "41" {
			t.Fatalf("%s: x = %s", rt, v)
		}
		execOK(t, c, sb.ID, "echo installed > /workspace/base.txt")
		startJob(t, c, sb.ID, client.ExecRequest{Background: true,
			Script: "i=0; while true; do i=$((i+1)); echo $i > /workspace/count; sleep 1; done"})
		eventually(t, 20*time.Second, rt+": the counter counts", func() (bool, string) {
			n := readCount(t, c, sb.ID)
			return n >= 2, strconv.Itoa(n)
		})
		sn, err := c.CreateSnapshot(callCtx(t), sb.ID, client.CreateSnapshotRequest{Name: "pool-base"})
		if err != nil {
			t.Fatal(err)
		}
		if sn.Memory != (rt == "runsc") {
			t.Fatalf("%s: snapshot %+v", rt, sn)
		}
		base[rt] = poolBase{snapshotID: sn.ID, contextID: cx.ID, count: readCount(t, c, sb.ID)}
		if err := c.DeleteSandbox(callCtx(t), sb.ID); err != nil {
			t.Fatal(err)
		}
		pools = append(pools, fmt.Sprintf("{runtime: %s, min_idle: 1, max_total: 3, snapshot_id: %s}", rt, sn.ID))
	}

	// The operator names the snapshots in the pools' config and restarts.
	svc.stop(t)
	if err := os.WriteFile(e.config, []byte(snapshotPoolConfig("["+strings.Join(pools, ", ")+"]")), 0o600); err != nil {
		t.Fatal(err)
	}
	svc = e.start(t)
	c = svc.client()

	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) {
			b := base[rt]
			memory := rt == "runsc"
			pool := "code-python-basic-" + rt + "-" + b.snapshotID
			p := waitPool(t, c, pool, 1)
			if p.SnapshotID != b.snapshotID || p.State != "ready" {
				t.Errorf("the pool: %+v", p)
			}

			// take leases a member from the snapshot and checks its state.
			take := func(what string) *client.Lease {
				t.Helper()
				waitPool(t, c, pool, 1)
				start := time.Now()
				l, err := c.AcquireLease(callCtx(t), client.AcquireLeaseRequest{SnapshotID: b.snapshotID})
				if err != nil {
					t.Fatal(err)
				}
				took := time.Since(start)
				sb := l.Sandbox
				if !l.Warm || sb == nil || sb.MemoryRestored == nil || *sb.MemoryRestored != memory || sb.Metadata["genesis.snapshot"] != b.snapshotID {
					t.Fatalf("%s: lease %+v sandbox %+v", what, l, sb)
				}
				t.Logf("%s: a warm lease from the snapshot took %v", what, took)
				if v := execOK(t, c, l.SandboxID, "cat /workspace/base.txt").Stdout; v != "installed\n" {
					t.Errorf("%s: the workspace: %q", what, v)
				}
				if id := execOK(t, c, l.SandboxID, "cat /run/genesis/identity").Stdout; !strings.Contains(id, "GENESIS_SANDBOX_ID="+l.SandboxID) {
					t.Errorf("%s: the identity: %q (%s)", what, id, execOK(t, c, l.SandboxID, "ls -la /run/genesis/; mount | grep genesis").Stdout)
				}
				if !memory {
					return l
				}
				cx := sb.SessionsFromSnapshot[b.contextID]
				if cx == "" {
					t.Fatalf("%s: no copy of the code context: %+v", what, sb.SessionsFromSnapshot)
				}
				if v := runValue(t, c, cx, "x + 1"); v != "42" {
					t.Errorf("%s: x + 1 = %s", what, v)
				}
				// The counter started before the snapshot counts on from
				// where it was, in the member's own workspace.
				n := readCount(t, c, l.SandboxID)
				if n < b.count {
					t.Errorf("%s: the counter is at %d; it was at %d in the snapshot", what, n, b.count)
				}
				eventually(t, 15*time.Second, what+": the counter counts on", func() (bool, string) {
					m := readCount(t, c, l.SandboxID)
					return m > n, strconv.Itoa(m)
				})
				return l
			}

			first := take("first lease")
			err := c.DeleteSnapshot(callCtx(t), b.snapshotID)
			if client.ErrorCode(err) != "snapshot_in_use" || !strings.Contains(err.Error(), pool) {
				t.Errorf("deleting the pool's snapshot: %v", err)
			}
			if _, err := c.GetSnapshot(callCtx(t), b.snapshotID); err != nil {
				t.Errorf("the snapshot after a refused delete: %v", err)
			}
			// A plain lease of the profile is never served from this pool.
			plainRisk := "low"
			if memory {
				plainRisk = "untrusted"
			}
			plain, err := c.AcquireLease(callCtx(t), client.AcquireLeaseRequest{Profile: "code-python-basic", Runtime: rt, RiskLevel: plainRisk})
			if err != nil {
				t.Fatal(err)
			}
			if plain.Warm || plain.Sandbox.Metadata["genesis.snapshot"] != "" {
				t.Errorf("a plain lease: %+v %+v", plain, plain.Sandbox)
			}
			if err := c.ReleaseLease(callCtx(t), plain.LeaseID); err != nil {
				t.Fatal(err)
			}

			// Released, the member is destroyed, never wiped back to the
			// bare image; the next lease gets another member from the
			// snapshot.
			if err := c.ReleaseLease(callCtx(t), first.LeaseID); err != nil {
				t.Fatal(err)
			}
			eventually(t, 60*time.Second, "the released member is gone", func() (bool, string) {
				sb, err := c.GetSandbox(callCtx(t), first.SandboxID)
				if err != nil {
					return client.ErrorCode(err) == "not_found", err.Error()
				}
				return sb.State == "destroyed", sb.State
			})
			second := take("second lease")
			if second.SandboxID == first.SandboxID {
				t.Errorf("the second lease got the released sandbox %s", first.SandboxID)
			}
			if p := waitPool(t, c, pool, 1); p.Recycled != 0 || p.ResetFailed != 0 {
				t.Errorf("a member of a snapshot pool was reset: %+v", p)
			}

			// Damaged, the snapshot makes no member: the pool says why.
			tarPath := filepath.Join(e.dataDir, "snapshots", b.snapshotID, "workspace.tar")
			raw, err := os.ReadFile(tarPath)
			if err != nil {
				t.Fatal(err)
			}
			raw[len(raw)/2] ^= 0xff
			if err := os.WriteFile(tarPath, raw, 0o600); err != nil {
				t.Fatal(err)
			}
			third, err := c.AcquireLease(callCtx(t), client.AcquireLeaseRequest{SnapshotID: b.snapshotID}) // the idle member made before
			if err != nil || !third.Warm {
				t.Fatalf("the last good member: %+v %v", third, err)
			}
			eventually(t, 90*time.Second, "the pool reports its damaged snapshot", func() (bool, string) {
				pl, err := c.Pools(callCtx(t))
				if err != nil {
					return false, err.Error()
				}
				for _, p := range pl.Items {
					if p.Name == pool {
						return p.State == "failing" && strings.Contains(p.LastError, "damaged"), fmt.Sprintf("%+v", p)
					}
				}
				return false, "no pool " + pool
			})
			_, err = c.AcquireLease(callCtx(t), client.AcquireLeaseRequest{SnapshotID: b.snapshotID})
			if client.ErrorCode(err) != "snapshot_corrupt" {
				t.Errorf("a lease from the damaged snapshot: %v", err)
			}
			for _, l := range []*client.Lease{second, third} {
				if err := c.ReleaseLease(callCtx(t), l.LeaseID); err != nil {
					t.Error(err)
				}
			}
		})
	}
	if r := svc.cli(t, "pool", "ls"); r.code != 0 || !strings.Contains(r.stdout, "failing") {
		t.Errorf("pool ls: %s", r)
	}
}
