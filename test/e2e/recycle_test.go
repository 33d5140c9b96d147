package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// resetPoolConfig is tool-basic with one pool member per runtime (so the
// next lease must get the reset sandbox) whose released sandboxes are reset
// and returned.
func resetPoolConfig() string {
	return strings.Replace(poolConfig(1, 1, 20*time.Second, ""),
		"lease: {default_ttl_seconds: 300, max_ttl_seconds: 600}",
		"lease: {default_ttl_seconds: 300, max_ttl_seconds: 600, on_release: reset}", 1)
}

// holderScript leaves what a lease holder may leave: files in every
// writable place (one in a directory it made unreadable), and a setsid
// orphan that ignores SIGTERM, whose parent exits.
const holderScript = `set -e
for d in /workspace /tmp /var/tmp /dev/shm "$HOME"; do
  [ -w "$d" ] || continue
  echo "$LEASE_SECRET" > "$d/.secret"; mkdir -p "$d/sub/deeper"; echo x > "$d/sub/deeper/f"; chmod 000 "$d/sub"
done
(setsid sh -c 'echo $$ > /workspace/orphan.pid; trap "" TERM HUP; exec sleep 1000' </dev/null >/dev/null 2>&1 &)
while [ ! -s /workspace/orphan.pid ]; do sleep 0.05; done
echo "home=$HOME"`

// leftoversScript prints the holder's env, every entry of the writable
// places, and the processes other than the agent and this script's own.
const leftoversScript = `echo "env=[$LEASE_SECRET]"
for d in /workspace /tmp /var/tmp /dev/shm "$HOME"; do [ "$d" = / ] || ls -A "$d" 2>/dev/null | sed "s|^|file=$d/|"; done
for p in /proc/[0-9]*; do
  pid=${p#/proc/}; [ "$pid" = 1 ] || [ "$pid" = $$ ] || echo "proc=$pid $(cat $p/comm 2>/dev/null)"
done`

// TestLeaseReset, under runc and runsc: with on_release: reset a released
// sandbox is wiped and the next lease (of another holder) gets the same
// sandbox and container with none of the files, processes or env of the
// first; a lease unlike the pool's members (other resources) is destroyed.
func TestLeaseReset(t *testing.T) {
	t.Parallel()
	e := newEnv(t, resetPoolConfig())
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	c := svc.client()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			pool := "tool-basic-" + rt
			before := waitPool(t, c, pool, 1)
			secret := "s-" + randomHex(t, 8)
			l1, err := c.AcquireLease(ctx, client.AcquireLeaseRequest{Profile: "tool-basic", Runtime: rt, Holder: "first",
				Env: map[string]string{"LEASE_SECRET": secret}, Metadata: map[string]string{"holder": "first"}})
			if err != nil {
				t.Fatal(err)
			}
			if !l1.Warm {
				t.Fatalf("first lease not warm: %+v", l1)
			}
			cont := sandboxContainers(t, l1.SandboxID)
			res := execOK(t, c, l1.SandboxID, holderScript)
			if res.ExitCode != 0 {
				t.Fatalf("holder script: %d %s", res.ExitCode, res.Stderr)
			}
			t.Logf("%s: %s", rt, strings.TrimSpace(res.Stdout))
			if _, err := c.StartJob(ctx, l1.SandboxID, client.ExecRequest{Script: "trap '' TERM; while :; do sleep 1; done"}); err != nil {
				t.Fatal(err)
			}
			// The job's shell forks its first sleep after StartJob returns.
			eventually(t, 20*time.Second, "the holder's sleep runs", func() (bool, string) {
				names := processNames(t, c, l1.SandboxID)
				return slices.Contains(names, "sleep"), "processes " + strings.Join(names, " ")
			})
			// The release answers once the lease is released and the
			// sandbox taken from the holder; the reset (which must kill a
			// job that ignores SIGTERM) runs after the answer. Right after
			// it the sandbox is draining (or already reset: then 404),
			// never the holder's to use, and no lease can get it.
			start := time.Now()
			if err := c.ReleaseLease(ctx, l1.LeaseID); err != nil {
				t.Fatal(err)
			}
			answered := time.Since(start)
			if sb, err := c.GetSandbox(ctx, l1.SandboxID); err == nil && sb.State != "draining" {
				t.Errorf("right after the release the sandbox is %s, want draining (or reset and gone)", sb.State)
			} else if err == nil {
				if _, err := c.Exec(ctx, l1.SandboxID, client.ExecRequest{Command: []string{"true"}}); !isStatus(err, 409, "sandbox_not_running") {
					t.Errorf("exec in the released sandbox while it is reset: %v, want 409", err)
				}
			}
			eventually(t, 2*time.Minute, "the reset sandbox to leave the tenant's hands", func() (bool, string) {
				_, err := c.GetSandbox(ctx, l1.SandboxID)
				return err != nil, fmt.Sprintf("get: %v", err)
			})
			t.Logf("%s: release answered in %v; reset done within %v", rt, answered, time.Since(start))
			p := waitPool(t, c, pool, 1)
			if p.Recycled != before.Recycled+1 || p.ResetFailed != before.ResetFailed {
				t.Errorf("pool after the reset: recycled %d → %d, reset_failed %d → %d", before.Recycled, p.Recycled, before.ResetFailed, p.ResetFailed)
			}

			l2, err := c.AcquireLease(ctx, client.AcquireLeaseRequest{Profile: "tool-basic", Runtime: rt, Holder: "second"})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c.ReleaseLease(context.WithoutCancel(ctx), l2.LeaseID) }()
			if l2.SandboxID != l1.SandboxID {
				t.Fatalf("second lease got %s, want the reset sandbox %s", l2.SandboxID, l1.SandboxID)
			}
			if got := sandboxContainers(t, l2.SandboxID); len(got) != 1 || !slices.Equal(got, cont) {
				t.Errorf("second lease's container %v, want the first's %v", got, cont)
			}
			sb, err := c.GetSandbox(ctx, l2.SandboxID)
			if err != nil || sb.Metadata["holder"] != "" {
				t.Errorf("second holder's sandbox record %+v %v: the first's metadata is left", sb, err)
			}
			out := execOK(t, c, l2.SandboxID, leftoversScript).Stdout
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				switch {
				case strings.HasPrefix(line, "env=") && line != "env=[]":
					t.Errorf("the first holder's env is visible: %q", line)
				case strings.HasPrefix(line, "file="):
					t.Errorf("the first holder's file is left: %q", line)
				case strings.HasPrefix(line, "proc="):
					// Only this script's own children (cat, ls, sed) and the agent's job shims may show.
					if name := line[strings.LastIndexByte(line, ' ')+1:]; name != "cat" && name != "ls" && name != "sed" && name != "genesis-shim" && name != "genesis-spare" {
						t.Errorf("a process is left: %q", line)
					}
				}
			}
			if strings.Contains(out, secret) {
				t.Errorf("the first holder's secret leaks:\n%s", out)
			}
			if err := c.ReleaseLease(ctx, l2.LeaseID); err != nil {
				t.Fatal(err)
			}

			// A lease unlike the members (other resources) is created cold
			// and destroyed on release.
			mem := int64(192)
			l3, err := c.AcquireLease(ctx, client.AcquireLeaseRequest{Profile: "tool-basic", Runtime: rt,
				Resources: &client.Resources{MemoryMB: mem}})
			if err != nil {
				t.Fatal(err)
			}
			if l3.Warm || l3.SandboxID == l1.SandboxID {
				t.Fatalf("a lease with other resources was served from the pool: %+v", l3)
			}
			p = waitPool(t, c, pool, 1)
			if err := c.ReleaseLease(ctx, l3.LeaseID); err != nil {
				t.Fatal(err)
			}
			eventually(t, 2*time.Minute, "the unlike lease's sandbox to be destroyed after the release", func() (bool, string) {
				left := sandboxContainers(t, l3.SandboxID)
				return len(left) == 0, fmt.Sprintf("containers %v", left)
			})
			if after := waitPool(t, c, pool, 1); after.Recycled != p.Recycled {
				t.Errorf("the unlike lease's sandbox was recycled: %d → %d", p.Recycled, after.Recycled)
			}

			// System V IPC objects outlive their processes and cannot all be
			// listed under gVisor: a holder that made one gets its sandbox
			// destroyed, not handed on.
			p = waitPool(t, c, pool, 1)
			l4, err := c.AcquireLease(ctx, client.AcquireLeaseRequest{Profile: "tool-basic", Runtime: rt})
			if err != nil || !l4.Warm {
				t.Fatalf("lease from the pool: %+v %v", l4, err)
			}
			if res := execOK(t, c, l4.SandboxID, "ipcmk -M 4096 && ipcmk -Q"); res.ExitCode != 0 {
				t.Fatalf("ipcmk: %+v", res)
			}
			if err := c.ReleaseLease(ctx, l4.LeaseID); err != nil {
				t.Fatal(err)
			}
			eventually(t, 2*time.Minute, "the sandbox with System V IPC objects to be destroyed", func() (bool, string) {
				left := sandboxContainers(t, l4.SandboxID)
				return len(left) == 0, fmt.Sprintf("containers %v", left)
			})
			if after := waitPool(t, c, pool, 1); after.ResetFailed != p.ResetFailed+1 || after.Recycled != p.Recycled {
				t.Errorf("pool after a reset refused for IPC objects: %+v (before %+v)", after, p)
			}
		})
	}
}

// TestLeaseResetDiskQuota, under runc and runsc: a reset empties a
// workspace that is a disk-quota mount without unmounting it: the next
// holder finds it empty, still mounted and still bounded by the quota.
func TestLeaseResetDiskQuota(t *testing.T) {
	t.Parallel()
	cfg := strings.Replace(resetPoolConfig(), "pids: 128}", "pids: 128, disk_mb: 16}", 1)
	e, svc, _ := quotaEnv(t, cfg)
	c := svc.client()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	const mounted = `awk '$5 == "/workspace"' /proc/self/mountinfo | wc -l`
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			pool := "tool-basic-" + rt
			before := waitPool(t, c, pool, 1)
			l1, err := c.AcquireLease(ctx, client.AcquireLeaseRequest{Profile: "tool-basic", Runtime: rt})
			if err != nil || !l1.Warm {
				t.Fatalf("first lease: %+v %v", l1, err)
			}
			if res := execOK(t, c, l1.SandboxID, "head -c 4194304 /dev/zero > /workspace/big && mkdir /workspace/d && "+mounted); res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != "1" {
				t.Fatalf("filling the quota workspace: %+v", res)
			}
			if err := c.ReleaseLease(ctx, l1.LeaseID); err != nil {
				t.Fatal(err)
			}
			if p := waitPool(t, c, pool, 1); p.Recycled != before.Recycled+1 {
				t.Fatalf("pool after the release: %+v, want one more recycled", p)
			}
			l2, err := c.AcquireLease(ctx, client.AcquireLeaseRequest{Profile: "tool-basic", Runtime: rt})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c.ReleaseLease(context.WithoutCancel(ctx), l2.LeaseID) }()
			if l2.SandboxID != l1.SandboxID {
				t.Fatalf("second lease got %s, want the reset sandbox %s", l2.SandboxID, l1.SandboxID)
			}
			res := execOK(t, c, l2.SandboxID, "ls -A /workspace; echo mounts=$("+mounted+"); head -c 33554432 /dev/zero > /workspace/over 2>&1; echo rc=$?")
			if !strings.HasPrefix(res.Stdout, "mounts=1\n") || strings.Contains(res.Stdout, "rc=0") {
				t.Errorf("after the reset: %q; want an empty workspace, still mounted, writes past 16 MiB refused", res.Stdout)
			}
		})
	}
}
