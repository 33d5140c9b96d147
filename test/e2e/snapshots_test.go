package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// snapshotState is what the tests keep in a sandbox and check after each
// operation: a Python kernel holding x = 41 and a 200 MiB array with a
// known checksum, a background job counting once a second into
// /workspace/count, and a file in the workspace.
type snapshotState struct {
	sandboxID string
	contextID string
	countJob  string
	sum       string // the array's checksum
}

const arrayCode = `big = bytearray(200 * 1024 * 1024)
for i in range(0, len(big), 4096):
    big[i] = (i // 4096) % 251
import hashlib
x = 41
hashlib.sha256(big).hexdigest()`

func runValue(t *testing.T, c *client.Client, ctxID, code string) string {
	t.Helper()
	res, err := c.RunCode(callCtx(t), ctxID, client.RunCodeRequest{Code: code})
	if err != nil {
		t.Fatalf("run %q: %v", code, err)
	}
	if res.Status != "ok" || res.Value == nil {
		t.Fatalf("run %q: %+v", code, res)
	}
	return strings.Trim(*res.Value, "'")
}

// setUpState makes a sandbox of runtime with the state the tests keep.
func setUpState(t *testing.T, e *env, c *client.Client, runtime, risk string) snapshotState {
	t.Helper()
	sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "code-python-basic", Runtime: runtime, RiskLevel: risk,
		Resources: &client.Resources{CPU: 1, MemoryMB: 512, Pids: 256}})
	cx, err := c.CreateContext(callCtx(t), sb.ID, client.CreateContextRequest{})
	if err != nil {
		t.Fatal(err)
	}
	st := snapshotState{sandboxID: sb.ID, contextID: cx.ID}
	st.sum = runValue(t, c, cx.ID, arrayCode)
	execOK(t, c, sb.ID, "echo original > /workspace/f.txt")
	job := startJob(t, c, sb.ID, client.ExecRequest{Background: true,
		Script: "i=0; while true; do i=$((i+1)); echo $i > /workspace/count; sleep 1; done"})
	st.countJob = job.ID
	eventually(t, 20*time.Second, "the counter counts", func() (bool, string) {
		n := readCount(t, c, sb.ID)
		return n >= 2, strconv.Itoa(n)
	})
	return st
}

func readCount(t *testing.T, c *client.Client, id string) int {
	t.Helper()
	res := execOK(t, c, id, "cat /workspace/count 2>/dev/null || echo 0")
	n, _ := strconv.Atoi(strings.TrimSpace(res.Stdout))
	return n
}

// TestHibernateWake hibernates a sandbox holding a kernel's variables, a
// 200 MiB array and a counting background job, and wakes it: under runsc
// the container is gone while it sleeps (no memory held) and everything
// comes back — x + 1 is 42, the array's checksum is the same, the counter
// continues from where it was and its job is still running; under runc
// the files come back (the workspace, the counter's last value) and the
// processes do not (memory_restored false, the job lost).
func TestHibernateWake(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "code-python-basic")
	svc := e.start(t)
	c := svc.client()
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			risk := "low"
			if rt == "runsc" {
				risk = "untrusted"
			}
			st := setUpState(t, e, c, rt, risk)
			// The counter adds at most one a second while it runs: from
			// this read until the checkpoint (inside the hibernate call)
			// and from the restore (inside the resume call) until the
			// read after the wake, never through the sleep between; one
			// more for a read that lands on a tick and one for the sleep
			// under way at the checkpoint, which may end at once after it.
			readBefore := time.Now()
			before := readCount(t, c, st.sandboxID)
			hib, err := c.HibernateSandbox(callCtx(t), st.sandboxID)
			if err != nil {
				t.Fatal(err)
			}
			hibernated := time.Now()
			if hib.State != "hibernated" || hib.Suspension == nil || hib.Suspension.Memory != (rt == "runsc") {
				t.Fatalf("hibernated: %+v %+v", hib, hib.Suspension)
			}
			if got := sandboxContainers(t, st.sandboxID); len(got) != 0 {
				t.Errorf("a hibernated sandbox keeps containers %v", got)
			}
			// Asleep for a while on purpose: a counter that went on (or
			// restarted) would show it.
			time.Sleep(5 * time.Second)
			resumed := time.Now()
			woke, err := c.ResumeSandbox(callCtx(t), st.sandboxID)
			if err != nil {
				t.Fatal(err)
			}
			if rt == "runsc" {
				// It counts on from where it was saved: not from 1, and
				// not through the five seconds it slept. Read first, so
				// that the checks below do not stretch its running time.
				n := readCount(t, c, st.sandboxID)
				running := hibernated.Sub(readBefore) + time.Since(resumed)
				if limit := before + int(running/time.Second) + 2; n < before || n > limit {
					t.Errorf("the counter is at %d after the wake; it was at %d when hibernated, and ran at most %v since (so ≤ %d)", n, before, running.Round(time.Millisecond), limit)
				}
				eventually(t, 15*time.Second, "the counter counts on", func() (bool, string) {
					m := readCount(t, c, st.sandboxID)
					return m > n, strconv.Itoa(m)
				})
			}
			if woke.State != "ready" || woke.Suspension != nil || woke.MemoryRestored == nil || *woke.MemoryRestored != (rt == "runsc") {
				t.Fatalf("woken: %+v", woke)
			}
			page, err := c.TracePage(callCtx(t), st.sandboxID, 0, 500)
			if err != nil {
				t.Fatal(err)
			}
			kinds := map[string]bool{}
			for _, ev := range page.Events {
				kinds[ev.Kind] = true
			}
			if !kinds["sandbox.hibernated"] || !kinds["sandbox.woken"] {
				t.Errorf("the trace lacks the hibernation or the wake: %v", kinds)
			}
			if rt == "runsc" {
				// The restored agent still starts commands above itself for
				// the OOM killer (internal/agent/oomadj.go).
				if v := execOK(t, c, st.sandboxID, "cat /proc/self/oom_score_adj").Stdout; v != "1000\n" {
					t.Errorf("oom_score_adj of an exec after the wake: %q, want 1000", v)
				}
				if v := runValue(t, c, st.contextID, "x + 1"); v != "42" {
					t.Errorf("x + 1 = %s after the wake", v)
				}
				if v := runValue(t, c, st.contextID, "hashlib.sha256(big).hexdigest()"); v != st.sum {
					t.Errorf("the array's checksum is %s, was %s", v, st.sum)
				}
				j, err := c.GetJob(callCtx(t), st.countJob)
				if err != nil || j.State != "running" {
					t.Errorf("the counting job after the wake: %+v %v", j, err)
				}
			} else {
				if v := execOK(t, c, st.sandboxID, "cat /workspace/f.txt").Stdout; v != "original\n" {
					t.Errorf("the workspace after the wake: %q", v)
				}
				eventually(t, 30*time.Second, "the counting job is lost with its process", func() (bool, string) {
					j, err := c.GetJob(callCtx(t), st.countJob)
					return err == nil && j.State == "lost", fmt.Sprintf("%+v %v", j, err)
				})
				if j, err := c.GetJob(callCtx(t), st.countJob); err != nil || !strings.Contains(j.Error, "did not survive") {
					t.Errorf("the lost job does not say why: %+v %v", j, err)
				}
				// The code context lost its kernel: a run says so once,
				// and how to go on.
				res, err := c.RunCode(callCtx(t), st.contextID, client.RunCodeRequest{Code: "x + 1"})
				if err != nil || res.Status != "error" || res.Error == nil || res.Error.Name != "KernelUnavailable" ||
					strings.Contains(res.Error.Value, "Traceback") || !strings.Contains(res.Error.Value, "create a new context") {
					t.Errorf("a run in the context after the wake: %+v %v", res, err)
				}
			}
		})
	}
}

// TestSnapshotForkRollback takes a snapshot of a sandbox, changes the
// sandbox, rolls it back (its workspace, and under runsc x, come back),
// forks it four times (each copy has the state and diverges on its own)
// and makes a sandbox from the snapshot; bad input changes nothing.
func TestSnapshotForkRollback(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "code-python-basic")
	svc := e.start(t)
	c := svc.client()
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			risk := "low"
			if rt == "runsc" {
				risk = "untrusted"
			}
			memory := rt == "runsc"
			st := setUpState(t, e, c, rt, risk)
			sn, err := c.CreateSnapshot(callCtx(t), st.sandboxID, client.CreateSnapshotRequest{Name: "base"})
			if err != nil {
				t.Fatal(err)
			}
			if sn.State != "ready" || sn.Memory != memory || sn.SizeBytes <= 0 || sn.SandboxID != st.sandboxID {
				t.Fatalf("snapshot: %+v", sn)
			}
			if sb, err := c.GetSandbox(callCtx(t), st.sandboxID); err != nil || sb.State != "ready" {
				t.Fatalf("after the snapshot the sandbox is %+v %v", sb, err)
			}
			if memory {
				runValue(t, c, st.contextID, "x = 100; 0")
			}
			execOK(t, c, st.sandboxID, "echo changed > /workspace/f.txt; touch /workspace/new")

			t.Run("rollback", func(t *testing.T) {
				back, err := c.RollbackSandbox(callCtx(t), st.sandboxID, sn.ID)
				if err != nil {
					t.Fatal(err)
				}
				if back.MemoryRestored == nil || *back.MemoryRestored != memory || back.ID != st.sandboxID {
					t.Errorf("rolled back: %+v", back)
				}
				if v := execOK(t, c, st.sandboxID, "cat /workspace/f.txt; ls /workspace").Stdout; v != "original\ncount\nf.txt\n" {
					t.Errorf("the workspace after the rollback: %q", v)
				}
				if memory {
					if v := runValue(t, c, st.contextID, "x"); v != "41" {
						t.Errorf("x = %s after the rollback", v)
					}
				}
			})

			t.Run("fork", func(t *testing.T) {
				res, err := c.ForkSandbox(callCtx(t), st.sandboxID, client.ForkRequest{Count: 4})
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Sandboxes) != 4 || len(res.Errors) != 0 {
					t.Fatalf("fork: %+v", res)
				}
				seeds := map[string]bool{}
				for i, child := range res.Sandboxes {
					e.deleteOnCleanup(t, child.ID)
					if child.ID == st.sandboxID || child.MemoryRestored == nil || *child.MemoryRestored != memory {
						t.Errorf("copy %d: %+v", i, child)
					}
					if v := execOK(t, c, child.ID, "cat /workspace/f.txt").Stdout; v != "original\n" {
						t.Errorf("copy %d's workspace: %q", i, v)
					}
					id := execOK(t, c, child.ID, "cat /run/genesis/identity").Stdout
					if !strings.Contains(id, "GENESIS_SANDBOX_ID="+child.ID) {
						t.Errorf("copy %d's identity: %q", i, id)
					}
					seeds[id] = true
					if memory {
						cx := child.SessionsFromSnapshot[st.contextID]
						if cx == "" {
							t.Fatalf("copy %d has no copy of the code context: %+v", i, child.SessionsFromSnapshot)
						}
						if v := runValue(t, c, cx, fmt.Sprintf("x = x + %d; x", i)); v != strconv.Itoa(41+i) {
							t.Errorf("copy %d: x = %s, want %d", i, v, 41+i)
						}
					}
				}
				if len(seeds) != 4 {
					t.Errorf("the copies share an identity: %v", seeds)
				}
				if memory {
					if v := runValue(t, c, st.contextID, "x"); v != "41" {
						t.Errorf("the source's x = %s after its copies changed theirs", v)
					}
				}
			})

			t.Run("create from it", func(t *testing.T) {
				sb, err := c.CreateSandbox(callCtx(t), client.CreateSandboxRequest{SnapshotID: sn.ID}, "")
				if err != nil {
					t.Fatal(err)
				}
				e.deleteOnCleanup(t, sb.ID)
				if sb.Profile != "code-python-basic" || sb.Runtime != rt || sb.MemoryRestored == nil || *sb.MemoryRestored != memory ||
					sb.Metadata["genesis.snapshot"] != sn.ID {
					t.Errorf("from the snapshot: %+v", sb)
				}
				if v := execOK(t, c, sb.ID, "cat /workspace/f.txt").Stdout; v != "original\n" {
					t.Errorf("its workspace: %q", v)
				}
			})

			t.Run("bad input", func(t *testing.T) {
				checkCode := func(what string, err error, code string) {
					t.Helper()
					if client.ErrorCode(err) != code {
						t.Errorf("%s: %v, want %s", what, err, code)
					}
				}
				_, err := c.ForkSandbox(callCtx(t), st.sandboxID, client.ForkRequest{Count: 1000})
				checkCode("fork ×1000", err, "invalid_count")
				_, err = c.RollbackSandbox(callCtx(t), st.sandboxID, "snap_nosuchsnapshot00")
				checkCode("rollback to no snapshot", err, "not_found")
				_, err = c.CreateSnapshot(callCtx(t), st.sandboxID, client.CreateSnapshotRequest{Name: "../x"})
				checkCode("a name with a path", err, "invalid_name")
				// A sandbox from it has its profile and runtime: a request
				// that names others is refused, not quietly overruled.
				_, err = c.CreateSandbox(callCtx(t), client.CreateSandboxRequest{SnapshotID: sn.ID, Profile: "tool-basic"}, "")
				checkCode("another profile", err, "snapshot_mismatch")
				otherRT := map[string]string{"runc": "runsc", "runsc": "runc"}[rt]
				_, err = c.CreateSandbox(callCtx(t), client.CreateSandboxRequest{SnapshotID: sn.ID, Runtime: otherRT}, "")
				checkCode("another runtime", err, "snapshot_mismatch")
				if !memory {
					yes := true
					_, err = c.CreateSnapshot(callCtx(t), st.sandboxID, client.CreateSnapshotRequest{Memory: &yes})
					checkCode("memory under runc", err, "memory_checkpoint_unsupported")
				}
				// Another tenant sees none of it.
				other := client.New(svc.url(), "e2e_no_such_key_0123456789")
				if _, err := other.GetSnapshot(callCtx(t), sn.ID); client.ErrorCode(err) != "unauthenticated" {
					t.Errorf("a wrong key: %v", err)
				}
				// A damaged snapshot is refused before anything changes.
				dmg, err := c.CreateSnapshot(callCtx(t), st.sandboxID, client.CreateSnapshotRequest{Name: "damaged"})
				if err != nil {
					t.Fatal(err)
				}
				p := filepath.Join(e.dataDir, "snapshots", dmg.ID, "workspace.tar")
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				b[len(b)/2] ^= 0xff
				if err := os.WriteFile(p, b, 0o600); err != nil {
					t.Fatal(err)
				}
				_, err = c.RollbackSandbox(callCtx(t), st.sandboxID, dmg.ID)
				checkCode("rollback to a damaged snapshot", err, "snapshot_corrupt")
				if v := execOK(t, c, st.sandboxID, "cat /workspace/f.txt").Stdout; v != "original\n" {
					t.Errorf("the sandbox after a refused rollback: %q", v)
				}
				if err := c.DeleteSnapshot(callCtx(t), dmg.ID); err != nil {
					t.Fatal(err)
				}
				if err := c.DeleteSnapshot(callCtx(t), dmg.ID); err != nil {
					t.Errorf("deleting a deleted snapshot: %v", err)
				}
				if _, err := os.Stat(filepath.Join(e.dataDir, "snapshots", dmg.ID)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("a deleted snapshot's files: %v", err)
				}
			})
		})
	}
}

// TestPauseResume freezes a sandbox: while paused every call into it is
// 409 sandbox_paused (a job's process stands still), and resumed the job
// counts on.
func TestPauseResume(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	c := svc.client()
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt, RiskLevel: "low"})
			startJob(t, c, sb.ID, client.ExecRequest{Background: true,
				Script: "i=0; while true; do i=$((i+1)); echo $i > /workspace/count; sleep 0.2; done"})
			eventually(t, 20*time.Second, "the counter counts", func() (bool, string) {
				return readCount(t, c, sb.ID) >= 2, ""
			})
			p, err := c.PauseSandbox(callCtx(t), sb.ID)
			if err != nil {
				t.Fatal(err)
			}
			if p.State != "paused" || p.Suspension == nil || p.Suspension.ResumeState != "ready" {
				t.Fatalf("paused: %+v", p)
			}
			if _, err := c.Exec(callCtx(t), sb.ID, client.ExecRequest{Command: []string{"true"}}); client.ErrorCode(err) != "sandbox_paused" {
				t.Errorf("exec in a paused sandbox: %v", err)
			}
			if _, err := c.ReadFile(context.Background(), sb.ID, "/workspace/count", nil); client.ErrorCode(err) != "sandbox_paused" {
				t.Errorf("a file read in a paused sandbox: %v", err)
			}
			frozen, _ := os.ReadFile(filepath.Join(e.dataDir, "sandboxes", sb.ID, "workspace", "count"))
			// Nothing proves a process stands still but a moment of it.
			time.Sleep(time.Second)
			still, _ := os.ReadFile(filepath.Join(e.dataDir, "sandboxes", sb.ID, "workspace", "count"))
			if string(frozen) != string(still) {
				t.Errorf("a paused job counted from %q to %q", frozen, still)
			}
			if _, err := c.ResumeSandbox(callCtx(t), sb.ID); err != nil {
				t.Fatal(err)
			}
			n := readCount(t, c, sb.ID)
			eventually(t, 15*time.Second, "the counter counts on", func() (bool, string) {
				return readCount(t, c, sb.ID) > n, ""
			})
		})
	}
}

// TestSnapshotCrash kills the service (SIGKILL) while it writes a
// snapshot of a sandbox with a large workspace, and starts it again: the
// half-written snapshot is gone (its record failed, no files left), and
// the sandbox is running again, thawed, its agent serving, its files as
// they were — under runc and runsc.
func TestSnapshotCrash(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	c := svc.client()
	var ids []string
	for _, rt := range e.runtimes(t) {
		sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt, RiskLevel: "low",
			Resources: &client.Resources{CPU: 1, MemoryMB: 512, Pids: 256}})
		// 400 MiB in the workspace: seconds of copying, time to be killed in.
		execOK(t, c, sb.ID, "for i in $(seq 1 40); do head -c 10485760 /dev/urandom > /workspace/blob$i; done; echo kept > /workspace/k")
		ids = append(ids, sb.ID)
	}
	for _, id := range ids {
		done := make(chan error, 1)
		go func() {
			_, err := c.CreateSnapshot(context.Background(), id, client.CreateSnapshotRequest{Name: "doomed"})
			done <- err
		}()
		var draft string
		eventually(t, 60*time.Second, "the snapshot is being written", func() (bool, string) {
			m, _ := filepath.Glob(filepath.Join(e.dataDir, "snapshots", ".snap_*.tmp"))
			if len(m) > 0 {
				draft = m[0]
			}
			return len(m) > 0, ""
		})
		svc.kill(t)
		<-done
		svc = e.start(t)
		c = svc.client()
		if _, err := os.Stat(draft); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the half-written snapshot %s is still on disk: %v", draft, err)
		}
		list, err := c.ListSnapshots(callCtx(t), id)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 || list[0].State != "failed" || list[0].Error == "" {
			t.Errorf("the snapshots of %s after the crash: %+v", id, list)
		}
		eventually(t, 60*time.Second, "the sandbox runs again", func() (bool, string) {
			sb, err := c.GetSandbox(callCtx(t), id)
			return err == nil && sb.State == "ready", fmt.Sprintf("%+v %v", sb, err)
		})
		if v := execOK(t, c, id, "cat /workspace/k").Stdout; v != "kept\n" {
			t.Errorf("the sandbox's files after the crash: %q", v)
		}
		// And it can be snapshotted again.
		if _, err := c.CreateSnapshot(callCtx(t), id, client.CreateSnapshotRequest{Name: "after"}); err != nil {
			t.Errorf("a snapshot after the crash: %v", err)
		}
	}
}

// TestSnapshotImageLifetime follows a runc snapshot's image (its root
// filesystem; runsc keeps a tar instead): a sandbox made from the snapshot
// and destroyed leaves it for the next one; a snapshot deleted while a
// sandbox still runs from it keeps its image until that sandbox ends, and
// then the image goes — none is left with no name.
func TestSnapshotImageLifetime(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "tool-basic")
	if !slices.Contains(e.runtimes(t), "runc") {
		t.Skip("runc is not available")
	}
	svc := e.start(t)
	c := svc.client()
	images := func() []string {
		return strings.Fields(dockerCmd(t, "images", "-a", "-q", "--no-trunc", "--filter", "label=dev.genesis.purpose=snapshot",
			"--filter", "label=dev.genesis.instance="+e.instance()))
	}
	src := e.createSandbox(t, client.CreateSandboxRequest{Profile: "tool-basic", Runtime: "runc", RiskLevel: "low"})
	execOK(t, c, src.ID, "echo kept > /workspace/f.txt")
	sn, err := c.CreateSnapshot(callCtx(t), src.ID, client.CreateSnapshotRequest{Name: "base"})
	if err != nil {
		t.Fatal(err)
	}
	if got := images(); len(got) != 1 {
		t.Fatalf("snapshot images after one snapshot: %v", got)
	}
	for i := range 2 {
		sb := e.createSandbox(t, client.CreateSandboxRequest{SnapshotID: sn.ID})
		if v := execOK(t, c, sb.ID, "cat /workspace/f.txt").Stdout; v != "kept\n" {
			t.Fatalf("sandbox %d from the snapshot: %q", i, v)
		}
		if err := c.DeleteSandbox(callCtx(t), sb.ID); err != nil {
			t.Fatal(err)
		}
		eventually(t, 60*time.Second, "the sandbox's container gone", func() (bool, string) {
			left := sandboxContainers(t, sb.ID)
			return len(left) == 0, fmt.Sprint(left)
		})
		if got := images(); len(got) != 1 {
			t.Fatalf("snapshot images after sandbox %d from the snapshot ended: %v, want the snapshot's", i, got)
		}
	}
	// Deleted while a sandbox runs from it: the image stays for that
	// sandbox, and goes when it ends (at the latest at the next sweep,
	// which a restart runs).
	last := e.createSandbox(t, client.CreateSandboxRequest{SnapshotID: sn.ID})
	if err := c.DeleteSnapshot(callCtx(t), sn.ID); err != nil {
		t.Fatal(err)
	}
	if v := execOK(t, c, last.ID, "cat /workspace/f.txt").Stdout; v != "kept\n" {
		t.Fatalf("a sandbox whose snapshot was deleted: %q", v)
	}
	if got := images(); len(got) != 1 {
		t.Fatalf("snapshot images while a sandbox runs from a deleted snapshot: %v", got)
	}
	if err := c.DeleteSandbox(callCtx(t), last.ID); err != nil {
		t.Fatal(err)
	}
	svc.stop(t)
	svc = e.start(t)
	c = svc.client()
	eventually(t, 60*time.Second, "no snapshot image left", func() (bool, string) {
		got := images()
		return len(got) == 0, fmt.Sprint(got)
	})
	if err := c.DeleteSandbox(callCtx(t), src.ID); err != nil && client.ErrorCode(err) != "not_found" {
		t.Errorf("deleting the source: %v", err)
	}
}

// TestSnapshotDiskFull keeps the snapshots on a small file system of their
// own (tmpfs, 8 MiB): a snapshot of a sandbox whose workspace holds more
// than that, and under runsc a memory snapshot that does not fit, answer
// 503 snapshot_storage_full in one sentence that names no host path; the
// snapshot is listed as failed with that sentence, nothing is left on that disk, and the sandbox goes
// on working with its files (and under runsc its kernel's variables).
func TestSnapshotDiskFull(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "code-python-basic")
	dir := filepath.Join(e.dataDir, "small-snapshots")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mounting a small tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	e.config = filepath.Join(e.dataDir, "e2e-config.yaml")
	if err := os.WriteFile(e.config, []byte("snapshots: {dir: "+dir+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	svc := e.start(t)
	c := svc.client()
	full := func(t *testing.T, what string, err error) {
		t.Helper()
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != 503 || ae.Problem.Code != "snapshot_storage_full" {
			t.Fatalf("%s: %v, want 503 snapshot_storage_full", what, err)
		}
		if strings.Contains(err.Error(), e.dataDir) {
			t.Errorf("%s: the problem names a host path: %v", what, err)
		}
	}
	empty := func(t *testing.T, sbID string) {
		t.Helper()
		list, err := c.ListSnapshots(callCtx(t), sbID)
		if err != nil {
			t.Fatal(err)
		}
		for _, sn := range list { // a failed one is listed as failed, with why, holding nothing
			if sn.State != "failed" || sn.SizeBytes != 0 || !strings.Contains(sn.Error, "disk that keeps snapshots is full") {
				t.Errorf("a snapshot after a full disk: %+v", sn)
			}
		}
		eventually(t, 30*time.Second, "the snapshots' disk empty", func() (bool, string) {
			left, _ := os.ReadDir(dir)
			return len(left) == 0, fmt.Sprint(left)
		})
	}
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			risk := "low"
			if rt == "runsc" {
				risk = "medium"
			}
			sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "code-python-basic", Runtime: rt, RiskLevel: risk,
				Resources: &client.Resources{CPU: 1, MemoryMB: 512, Pids: 256}})
			cx, err := c.CreateContext(callCtx(t), sb.ID, client.CreateContextRequest{})
			if err != nil {
				t.Fatal(err)
			}
			runValue(t, c, cx.ID, "x = 41\nx")
			execOK(t, c, sb.ID, "head -c 16M /dev/urandom > /workspace/big.bin && echo kept > /workspace/f.txt")
			no := false
			_, err = c.CreateSnapshot(callCtx(t), sb.ID, client.CreateSnapshotRequest{Memory: &no})
			full(t, "a workspace larger than the disk", err)
			empty(t, sb.ID)
			if rt == "runsc" {
				execOK(t, c, sb.ID, "rm /workspace/big.bin")
				yes := true
				_, err = c.CreateSnapshot(callCtx(t), sb.ID, client.CreateSnapshotRequest{Memory: &yes})
				full(t, "a memory image larger than the disk", err)
				empty(t, sb.ID)
			}
			if v := execOK(t, c, sb.ID, "cat /workspace/f.txt").Stdout; v != "kept\n" {
				t.Errorf("the sandbox's file after the failed snapshots: %q", v)
			}
			if v := runValue(t, c, cx.ID, "x + 1"); v != "42" {
				t.Errorf("the kernel after the failed snapshots: x + 1 = %s", v)
			}
		})
	}
}
