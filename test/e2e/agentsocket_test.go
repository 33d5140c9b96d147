package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/agent/agentclient"
	"genesis.dev/sandbox/internal/driver"
)

// The agent's socket lives in a host directory the sandbox user owns
// ({data}/sandboxes/{id}/run, /run/genesis inside): sandbox code can put
// anything at its name. These tests check that the service never follows
// what it put there, and that a reset leaves only the agent's own socket.

// agentSocket is the host path of sandbox id's agent socket in e.
func (e *env) agentSocket(id string) string {
	return filepath.Join(e.dataDir, "sandboxes", id, "run", driver.AgentSocketRel)
}

// TestAgentSocketSwap, under runc and runsc: code in sandbox A replaces its
// agent's socket with a symlink to the socket of sandbox B (another
// tenant's). After a restart of the service (every agent connection is
// dialled anew) an exec in A does not run in B: the dial is refused (A's
// agent is unreachable; a security event is logged) and B is untouched.
func TestAgentSocketSwap(t *testing.T) {
	t.Parallel()
	const otherKey = "e2e-socket-other-tenant-key-0123456789"
	e := newEnv(t, "tenants:\n  other: {api_keys: [\""+otherKey+"\"]}\n")
	e.requireImage(t, "code-python-basic")
	svc := e.start(t)
	owner, other := svc.client(), client.New(svc.url(), otherKey)

	type victim struct{ rt, a, b string }
	var pairs []victim
	for _, rt := range e.runtimes(t) {
		a := e.createSandbox(t, client.CreateSandboxRequest{Profile: "code-python-basic", Runtime: rt, RiskLevel: "low"})
		b, err := other.CreateSandbox(callCtx(t), client.CreateSandboxRequest{Profile: "code-python-basic", Runtime: rt, RiskLevel: "low"}, "")
		if err != nil {
			t.Fatalf("%s: the other tenant's sandbox: %v", rt, err)
		}
		t.Cleanup(func() {
			e.mu.Lock()
			s := e.current
			e.mu.Unlock()
			select {
			case <-s.done:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			defer cancel()
			if err := client.New(s.url(), otherKey).DeleteSandbox(ctx, b.ID); err != nil {
				t.Logf("cleanup: delete %s: %v", b.ID, err)
			}
		})
		if res := execOK(t, other, b.ID, "echo B > /workspace/marker"); res.ExitCode != 0 {
			t.Fatalf("%s: B's marker: %+v", rt, res)
		}
		if res := execOK(t, owner, a.ID, "echo A > /workspace/a-only"); res.ExitCode != 0 {
			t.Fatalf("%s: A's file: %+v", rt, res)
		}
		// A's code swaps its socket for a symlink to B's host socket.
		res := execOK(t, owner, a.ID, fmt.Sprintf("rm -f /run/genesis/agent.sock && ln -s %s /run/genesis/agent.sock", e.agentSocket(b.ID)))
		if res.ExitCode != 0 {
			t.Fatalf("%s: the swap: %+v", rt, res)
		}
		// The swap took on the host (the test would prove nothing otherwise).
		if target, err := os.Readlink(e.agentSocket(a.ID)); err != nil || target != e.agentSocket(b.ID) {
			t.Fatalf("%s: A's socket on the host after the swap: %q %v", rt, target, err)
		}
		pairs = append(pairs, victim{rt, a.ID, b.ID})
	}

	// A crash and a restart (a stop would drain, destroying the
	// sandboxes): every connection to an agent is dialled anew.
	svc.kill(t)
	svc = e.start(t)
	owner, other = svc.client(), client.New(svc.url(), otherKey)

	for _, p := range pairs {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		res, err := owner.Exec(ctx, p.a, client.ExecRequest{Script: "cat /workspace/a-only; echo pwned > /workspace/marker", TimeoutMS: 30_000})
		cancel()
		switch {
		case err != nil:
			t.Logf("%s: exec in A after the swap fails, as it may: %v", p.rt, err)
		case strings.TrimSpace(res.Stdout) != "A":
			t.Errorf("%s: exec in A ran elsewhere: %+v", p.rt, res)
		}
		if got := execOK(t, other, p.b, "cat /workspace/marker").Stdout; strings.TrimSpace(got) != "B" {
			t.Errorf("%s: B's marker is %q: A's exec ran in B", p.rt, got)
		}
	}
	for _, p := range pairs {
		eventually(t, time.Minute, "the refused dial logged as a security event", func() (bool, string) {
			for _, line := range strings.Split(svc.log.String(), "\n") {
				if strings.Contains(line, "security:") && strings.Contains(line, p.a) {
					return true, ""
				}
			}
			return false, "no security event names " + p.a
		})
	}
}

// resetPyPoolConfig is one code-python-basic sandbox per runtime in a pool
// whose released sandboxes are reset and returned.
func resetPyPoolConfig() string {
	return `warm_pools: true
intervals: {pool_check: 2s, reconcile: 2s, drain_timeout: 20s}
profiles:
  - name: py-reset
    recipe: code-python-basic
    allowed_runtimes: [runc, runsc]
    default_risk_level: low
    resources: {cpu: 0.5, memory_mb: 256, pids: 128}
    network: none
    user: "1000:1000"
    pools: [{runtime: runc, min_idle: 1, max_total: 1}, {runtime: runsc, min_idle: 1, max_total: 1}]
    lease: {default_ttl_seconds: 300, max_ttl_seconds: 600, on_release: reset}
`
}

// plantScript replaces the agent's socket with the holder's own listening
// socket (served by a process that outlives the exec) and leaves more in
// the socket directory: a symlink to a host file, a file, a directory it
// cannot enter.
const plantScript = `rm -f /run/genesis/agent.sock
ln -s /etc/passwd /run/genesis/junk-link; echo x > /run/genesis/junk-file
mkdir -p /run/genesis/junk-dir/sub; chmod 000 /run/genesis/junk-dir
exec python3 -c '
import socket
s = socket.socket(socket.AF_UNIX)
s.bind("/run/genesis/agent.sock")
s.listen(8)
open("/run/genesis/planted", "w").write("x")
while True:
    s.accept()[0].close()
'`

// TestAgentSocketReset, under runc and runsc: a lease holder that replaces
// the agent's socket with a socket of its own and leaves files beside it
// does not pass any of it on: after the pool reset the run directory holds
// only the agent's socket (a new one, which the agent answers on) and its
// identity file, and the next holder's lease works.
func TestAgentSocketReset(t *testing.T) {
	t.Parallel()
	e := newEnv(t, resetPyPoolConfig())
	e.requireImage(t, "code-python-basic")
	svc := e.start(t)
	c := svc.client()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			pool := "py-reset-" + rt
			before := waitPool(t, c, pool, 1)
			l1, err := c.AcquireLease(ctx, client.AcquireLeaseRequest{Profile: "py-reset", Runtime: rt, Holder: "first"})
			if err != nil {
				t.Fatal(err)
			}
			sock := e.agentSocket(l1.SandboxID)
			ino := func() uint64 {
				var st syscall.Stat_t
				if err := syscall.Lstat(sock, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFSOCK {
					return 0
				}
				return st.Ino
			}
			agentIno := ino()
			if agentIno == 0 {
				t.Fatalf("no agent socket at %s", sock)
			}
			if _, err := c.StartJob(ctx, l1.SandboxID, client.ExecRequest{Script: plantScript}); err != nil {
				t.Fatal(err)
			}
			runDir := filepath.Dir(sock)
			eventually(t, 30*time.Second, "the holder's socket planted", func() (bool, string) {
				_, err := os.Stat(filepath.Join(runDir, "planted"))
				now := ino()
				return err == nil && now != 0 && now != agentIno, fmt.Sprintf("planted: %v, inode %d (agent's %d)", err, now, agentIno)
			})
			// The service's connection is the agent's: the holder still
			// reaches it, and the reset goes to it.
			if res := execOK(t, c, l1.SandboxID, "ls -A /run/genesis"); res.ExitCode != 0 {
				t.Fatalf("exec after the plant: %+v", res)
			}
			if err := c.ReleaseLease(ctx, l1.LeaseID); err != nil {
				t.Fatal(err)
			}
			p := waitPool(t, c, pool, 1)
			if p.Recycled != before.Recycled+1 || p.ResetFailed != before.ResetFailed {
				t.Fatalf("pool after the reset: recycled %d → %d, reset_failed %d → %d", before.Recycled, p.Recycled, before.ResetFailed, p.ResetFailed)
			}

			ents, err := os.ReadDir(runDir)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			if !slices.Equal(names, []string{driver.AgentSocketRel, "identity"}) {
				t.Errorf("run dir after the reset holds %v, want only the agent's socket and identity", names)
			}
			// A fresh dial, as the service makes after a restart, reaches
			// the agent itself.
			ac := agentclient.Dial(sock)
			defer ac.Close()
			pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
			ping, err := ac.Ping(pctx)
			pcancel()
			if err != nil || ping.Agent == "" {
				t.Fatalf("a fresh dial of %s after the reset: %+v %v (the holder's socket survived)", sock, ping, err)
			}

			l2, err := c.AcquireLease(ctx, client.AcquireLeaseRequest{Profile: "py-reset", Runtime: rt, Holder: "second"})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c.ReleaseLease(context.WithoutCancel(ctx), l2.LeaseID) }()
			if l2.SandboxID != l1.SandboxID {
				t.Fatalf("second lease got %s, want the reset sandbox %s", l2.SandboxID, l1.SandboxID)
			}
			if res := execOK(t, c, l2.SandboxID, "cat /run/genesis/identity >/dev/null && ls -A /run/genesis"); res.ExitCode != 0 {
				t.Fatalf("the next holder's exec: %+v", res)
			}
		})
	}
}

// dumpableScript tries, as sandbox code, to read the agent's (PID 1)
// environment and memory and to attach to it; and checks that the
// workload itself stays dumpable and can trace its own child.
const dumpableScript = `python3 - <<'EOF'
import ctypes, errno, json, os, time
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
out = {}
for name in ("environ", "mem"):
    try:
        with open("/proc/1/" + name, "rb") as f:
            f.read(1)
        out[name] = "read"
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e.errno))
if libc.ptrace(16, 1, None, None) == 0:
    out["attach"] = "attached"
    libc.ptrace(17, 1, None, None)
else:
    out["attach"] = errno.errorcode.get(ctypes.get_errno(), "?")
out["self_dumpable"] = libc.prctl(3, 0, 0, 0, 0)
pid = os.fork()
if pid == 0:
    time.sleep(30)
    os._exit(0)
out["attach_child"] = "attached" if libc.ptrace(16, pid, None, None) == 0 else errno.errorcode.get(ctypes.get_errno(), "?")
os.kill(pid, 9)
os.waitpid(pid, 0)
print(json.dumps(out))
EOF`

// TestAgentNotDumpable, under runc and runsc: sandbox code, which runs as
// the agent's user, cannot read the agent's /proc/1/environ or
// /proc/1/mem nor PTRACE_ATTACH to it, also after a hibernation and a
// wake (under runsc a restore of the agent's memory); the workload itself
// stays dumpable (an execve resets the flag) and may trace its own children.
func TestAgentNotDumpable(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "code-python-basic")
	svc := e.start(t)
	c := svc.client()
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			risk := "low"
			if rt == "runsc" {
				risk = "untrusted" // its hibernation saves the memory: the agent is restored, not started
			}
			sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "code-python-basic", Runtime: rt, RiskLevel: risk})
			probe := func(when string) {
				t.Helper()
				res := execOK(t, c, sb.ID, dumpableScript)
				if res.ExitCode != 0 {
					t.Fatalf("%s: probe: %+v", when, res)
				}
				var got map[string]any
				if err := json.Unmarshal([]byte(strings.TrimSpace(res.Stdout)), &got); err != nil {
					t.Fatalf("%s: probe output %q: %v", when, res.Stdout, err)
				}
				t.Logf("%s, %s: %v", rt, when, got)
				if got["environ"] != "EACCES" || got["mem"] != "EACCES" {
					t.Errorf("%s: the agent's /proc/1/environ: %v, /proc/1/mem: %v; want EACCES", when, got["environ"], got["mem"])
				}
				if got["attach"] != "EPERM" {
					t.Errorf("%s: PTRACE_ATTACH to the agent: %v, want EPERM", when, got["attach"])
				}
				if got["self_dumpable"] != float64(1) {
					t.Errorf("%s: the workload's own dumpable flag is %v, want 1 (execve resets it)", when, got["self_dumpable"])
				}
				if got["attach_child"] != "attached" {
					t.Errorf("%s: the workload cannot trace its own child: %v", when, got["attach_child"])
				}
			}
			probe("started")
			if _, err := c.HibernateSandbox(callCtx(t), sb.ID); err != nil {
				t.Fatal(err)
			}
			woke, err := c.ResumeSandbox(callCtx(t), sb.ID)
			if err != nil {
				t.Fatal(err)
			}
			if woke.MemoryRestored == nil || *woke.MemoryRestored != (rt == "runsc") {
				t.Fatalf("woken: %+v", woke)
			}
			probe("woken")
		})
	}
}

// fakeAgentScript runs, as the holder, a second agent (the agent's own
// binary, which is in every sandbox) on the agent's socket: it answers a
// reset without ending itself, so a reset sent to it would hand it, and
// whatever it runs, to the next holder.
const fakeAgentScript = `GENESIS_AGENT_RESET_DIRS=/tmp exec ` + driver.AgentBinary + ` serve --socket /run/genesis/agent.sock`

// TestAgentSocketFakeAgentNotReset, under runc and runsc: a holder puts an
// agent of its own at the agent's socket, and the service restarts during
// the lease, so its next connection may reach that agent. On release the
// sandbox is destroyed, not reset and returned to the pool: no reset is
// trusted on a connection opened while the holder's code ran.
func TestAgentSocketFakeAgentNotReset(t *testing.T) {
	t.Parallel()
	e := newEnv(t, resetPyPoolConfig())
	e.requireImage(t, "code-python-basic")
	svc := e.start(t)
	c := svc.client()
	type held struct {
		rt, pool string
		lease    *client.Lease
		before   client.Pool
	}
	var leases []held
	for _, rt := range e.runtimes(t) {
		pool := "py-reset-" + rt
		before := waitPool(t, c, pool, 1)
		l, err := c.AcquireLease(callCtx(t), client.AcquireLeaseRequest{Profile: "py-reset", Runtime: rt, Holder: "first"})
		if err != nil {
			t.Fatal(err)
		}
		if !l.Warm {
			t.Fatalf("%s: lease not from the pool: %+v", rt, l)
		}
		sock := e.agentSocket(l.SandboxID)
		var st syscall.Stat_t
		if err := syscall.Lstat(sock, &st); err != nil {
			t.Fatal(err)
		}
		agentIno := st.Ino
		if _, err := c.StartJob(callCtx(t), l.SandboxID, client.ExecRequest{Script: fakeAgentScript}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, rt+": the holder's agent listens at the socket", func() (bool, string) {
			var st syscall.Stat_t
			err := syscall.Lstat(sock, &st)
			return err == nil && st.Ino != agentIno && st.Mode&syscall.S_IFMT == syscall.S_IFSOCK, fmt.Sprintf("%v, inode %d", err, st.Ino)
		})
		leases = append(leases, held{rt, pool, l, before})
	}

	svc.kill(t)
	svc = e.start(t)
	c = svc.client()
	for _, h := range leases {
		if err := c.ReleaseLease(callCtx(t), h.lease.LeaseID); err != nil {
			t.Fatalf("%s: release: %v", h.rt, err)
		}
		eventually(t, 2*time.Minute, h.rt+": the sandbox destroyed", func() (bool, string) {
			left := sandboxContainers(t, h.lease.SandboxID)
			return len(left) == 0, fmt.Sprintf("containers %v", left)
		})
		p := waitPool(t, c, h.pool, 1)
		if p.Recycled != h.before.Recycled {
			t.Errorf("%s: the sandbox was reset and returned to the pool (recycled %d → %d)", h.rt, h.before.Recycled, p.Recycled)
		}
		l2, err := c.AcquireLease(callCtx(t), client.AcquireLeaseRequest{Profile: "py-reset", Runtime: h.rt, Holder: "second"})
		if err != nil {
			t.Fatal(err)
		}
		if l2.SandboxID == h.lease.SandboxID {
			t.Errorf("%s: the next holder got the sandbox of the holder's agent", h.rt)
		}
		if err := c.ReleaseLease(callCtx(t), l2.LeaseID); err != nil {
			t.Errorf("%s: release: %v", h.rt, err)
		}
	}
}
