package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// TestSecurityDefaults checks, from inside real sandboxes, what an untrusted
// program gets by default: an unprivileged user, no capabilities, no new
// privileges, no network but loopback, a read-only system and a writable
// workspace; and, from Docker, that memory cannot spill into swap and that
// the pids limit stops a fork loop (under runc the fork fails and the
// sandbox lives on; under gVisor reaching the host limit may end the whole
// sandbox, which must then be reported failed and cleaned up).
func TestSecurityDefaults(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	c := svc.client()
	const pids = 64

	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			sb := e.createSandbox(t, client.CreateSandboxRequest{
				Profile: "tool-basic", Runtime: rt, Resources: &client.Resources{Pids: pids},
			})
			run := func(script string) *client.ExecResult { return execOK(t, c, sb.ID, script) }

			if r := run("id -u"); r.ExitCode != 0 || r.Stdout != "1000\n" {
				t.Errorf("id -u: want 1000, got exit %d stdout %q stderr %q", r.ExitCode, r.Stdout, r.Stderr)
			}

			r := run("cat /proc/self/status")
			status := map[string]string{}
			for _, line := range strings.Split(r.Stdout, "\n") {
				if k, v, ok := strings.Cut(line, ":"); ok {
					status[k] = strings.TrimSpace(v)
				}
			}
			if status["CapEff"] != "0000000000000000" {
				t.Errorf("CapEff = %q, want 0000000000000000", status["CapEff"])
			}
			if status["NoNewPrivs"] != "1" {
				t.Errorf("NoNewPrivs = %q, want 1", status["NoNewPrivs"])
			}

			r = run("cat /proc/net/dev")
			var ifaces []string
			for _, line := range strings.Split(r.Stdout, "\n") {
				if name, _, ok := strings.Cut(line, ":"); ok {
					ifaces = append(ifaces, strings.TrimSpace(name))
				}
			}
			if !slices.Equal(ifaces, []string{"lo"}) {
				t.Errorf("network interfaces %v, want only lo (network none); /proc/net/dev:\n%s", ifaces, r.Stdout)
			}

			if r := run("echo x > /etc/e2e-probe"); r.ExitCode == 0 {
				t.Errorf("writing to /etc succeeded; want it refused")
			}
			if r := run("test -e /etc/e2e-probe"); r.ExitCode == 0 {
				t.Errorf("/etc/e2e-probe exists after the refused write")
			}
			if r := run("echo hello > /workspace/e2e.txt && cat /workspace/e2e.txt"); r.ExitCode != 0 || r.Stdout != "hello\n" {
				t.Errorf("/workspace not writable: exit %d stdout %q stderr %q", r.ExitCode, r.Stdout, r.Stderr)
			}

			cs := sandboxContainers(t, sb.ID)
			if len(cs) != 1 {
				t.Fatalf("want exactly one container for %s, got %v", sb.ID, cs)
			}
			var hc struct {
				Memory, MemorySwap, PidsLimit int64
				Runtime, NetworkMode          string
			}
			if err := json.Unmarshal([]byte(dockerCmd(t, "inspect", "--format", "{{json .HostConfig}}", cs[0])), &hc); err != nil {
				t.Fatalf("docker inspect: %v", err)
			}
			if want := sb.Resources.MemoryMB << 20; hc.Memory != want || hc.MemorySwap != hc.Memory {
				t.Errorf("HostConfig Memory=%d MemorySwap=%d, want both %d (no swap)", hc.Memory, hc.MemorySwap, want)
			}
			wantPids := int64(pids)
			if rt == "runsc" {
				wantPids = 2*int64(pids) + 64 // gVisor's own tasks count against the host cgroup
			}
			if hc.PidsLimit != wantPids || hc.Runtime != rt || hc.NetworkMode != "none" {
				t.Errorf("HostConfig PidsLimit=%d Runtime=%q NetworkMode=%q, want %d %q \"none\"", hc.PidsLimit, hc.Runtime, hc.NetworkMode, wantPids, rt)
			}

			// A fork loop far past the limit: the shell cannot fork them all.
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			defer cancel()
			bomb, err := c.Exec(ctx, sb.ID, client.ExecRequest{
				Script: "for i in $(seq 1 400); do sleep 5 & done; echo all-started", TimeoutMS: 30_000,
			})
			if rt == "runsc" && err != nil {
				// Documented gVisor behaviour: reaching the host pids limit
				// ends the whole sandbox instead of failing the fork. The
				// service must say so honestly and leave nothing behind.
				eventually(t, 20*time.Second, "runsc sandbox reported failed after the fork loop", func() (bool, string) {
					got, gerr := c.GetSandbox(ctx, sb.ID)
					if gerr != nil {
						return false, gerr.Error()
					}
					return got.State == "failed" && got.FailureReason != "", got.State + " " + got.FailureReason
				})
				eventually(t, 20*time.Second, "failed runsc sandbox's container removed", func() (bool, string) {
					cs := sandboxContainers(t, sb.ID)
					return len(cs) == 0, fmt.Sprint(cs)
				})
				t.Logf("fork loop under pids %d ended the runsc sandbox (reported failed): %v", pids, err)
				return
			}
			if err != nil {
				t.Fatalf("fork loop under pids %d took the %s sandbox down instead of failing inside it: %v", pids, rt, err)
			}
			if bomb.ExitCode == 0 || strings.Contains(bomb.Stdout, "all-started") {
				t.Errorf("fork loop of 400 under pids %d: exit %d stdout %q stderr %q; want a failed fork", pids, bomb.ExitCode, bomb.Stdout, bomb.Stderr)
			}
			t.Logf("fork loop under pids %d: exit %d, stderr %q", pids, bomb.ExitCode, lastLine(bomb.Stderr))
			eventually(t, 20*time.Second, "sandbox answers after the fork loop", func() (bool, string) {
				r, err := c.Exec(ctx, sb.ID, client.ExecRequest{Command: []string{"echo", "alive"}})
				if err != nil {
					return false, err.Error()
				}
				return r.ExitCode == 0 && r.Stdout == "alive\n", r.Stderr
			})
		})
	}
}

// TestExecTimeout checks that a job over its time limit is ended within the
// limit plus the kill grace, reported as a timeout, and leaves no process.
func TestExecTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	c := svc.client()

	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt})
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			defer cancel()
			begin := time.Now()
			res, err := c.Exec(ctx, sb.ID, client.ExecRequest{Command: []string{"sleep", "30"}, TimeoutMS: 500})
			wall := time.Since(begin)
			if err != nil {
				t.Fatalf("exec: %v", err)
			}
			t.Logf("sleep 30 with timeout_ms 500 under %s: %v wall, exit_reason %s", rt, wall.Round(time.Millisecond), res.ExitReason)
			if res.ExitReason != "timeout" {
				t.Errorf("exit_reason %q, want timeout (exit %d, signal %q)", res.ExitReason, res.ExitCode, res.Signal)
			}
			if wall < 500*time.Millisecond {
				t.Errorf("wall time %v, want at least the 500ms limit", wall)
			}
			job, err := c.GetJob(ctx, res.JobID)
			if err != nil {
				t.Fatalf("get job: %v", err)
			}
			if job.ExitReason != "timeout" || job.StartedAt == nil || job.FinishedAt == nil {
				t.Errorf("job record: exit_reason %q started_at %v finished_at %v, want timeout and both times", job.ExitReason, job.StartedAt, job.FinishedAt)
			} else {
				// The job's own recorded run time, not the caller's wall time,
				// shows the kill came on time: the wall time also counts the
				// request's queueing and round trips, which a loaded machine
				// stretches. The 2s of slack over the limit plus the 200ms
				// kill grace is far below the 30s sleep, so a missed kill fails.
				ran := job.FinishedAt.Sub(*job.StartedAt)
				t.Logf("job record: ran %v", ran.Round(time.Millisecond))
				if limit := 500*time.Millisecond + 200*time.Millisecond + 2*time.Second; ran >= limit {
					t.Errorf("job ran %v by its record, want under %v", ran, limit)
				}
			}
			if names := processNames(t, c, sb.ID); slices.Contains(names, "sleep") {
				t.Errorf("a sleep process is left after the timeout: %v", names)
			}
		})
	}
}

// lastLine returns the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
