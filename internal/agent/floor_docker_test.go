package agent_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
)

// BenchmarkExecFloor measures, per runtime and in one interleaved run, the
// agent's exec floor and what it is made of:
//
//   - exec: an exec of `true` through this build's agent (the container's
//     PID 1, over its Unix socket, the log at its default level);
//   - base: the same through the agent of another build in a twin
//     container, when GENESIS_AGENT_BENCH_BASE names a git revision (built
//     from `git archive` in a temporary directory) or
//     GENESIS_AGENT_BENCH_BASE_BIN a genesis-agent binary;
//   - ping: a ping of this build's agent (the HTTP/2 round trip), and
//     baseping of the baseline's;
//   - cpu: the CPU time each container used per round (one exec, one
//     ping), from the host's cgroup v1 cpuacct hierarchy when it has one;
//   - spawn: the bare start of `true` inside the same container by a small
//     Go program (testdata/spawnfloor: ForkExec with two output pipes and
//     wait4), and through os/exec; run after the interleaved rounds.
//
// Each call of exec, base and the pings alternates with the others, the
// order rotating each round. The latencies are p50 and p90 in ms; on a busy
// host the CPU per round is the steadier comparison. For 300 rounds
// against the agent of git rev REV:
//
//	GENESIS_AGENT_BENCH_BASE=REV go test -run '^$' -bench BenchmarkExecFloor -benchtime 300x ./internal/agent/
//
// GENESIS_AGENT_BENCH_ENV (NAME=VALUE, space-separated) sets environment
// variables for this build's agent only, so that a run setting it and
// GENESIS_AGENT_BENCH_BASE_BIN to this build's own binary compares the
// agent with and without them (a runtime setting such as GOMAXPROCS).
//
// Counting the system calls and context switches of both containers'
// agents per round (perf stat -p on each agent's host pid while this runs)
// is steadier still.
func BenchmarkExecFloor(b *testing.B) {
	baseDir := baseAgentDir(b)
	floorDir := testProgramDir(b, "floor", "spawnfloor")
	for _, rt := range []string{"runc", "runsc"} {
		b.Run(rt, func(b *testing.B) {
			if !slices.Contains(runtimesUnderTest(b), rt) {
				b.Skipf("docker runtime %s not configured", rt)
			}
			info := []string{"--env", "GENESIS_AGENT_LOG_LEVEL=info", "-v", floorDir + ":/.floor:ro"}
			curArgs := slices.Clone(info)
			for _, kv := range strings.Fields(os.Getenv("GENESIS_AGENT_BENCH_ENV")) {
				curArgs = append(curArgs, "--env", kv)
			}
			cur := startContainer(b, rt, curArgs...)
			var base *sandboxContainer
			if baseDir != "" {
				base = startContainerFrom(b, rt, baseDir, info...)
			}
			ctx := context.Background()
			req := agentproto.ExecRequest{Command: []string{"true"}}
			execOn := func(c *sandboxContainer) func() error {
				return func() error {
					res, err := c.client.Exec(ctx, req)
					if err == nil && res.ExitCode != 0 {
						err = fmt.Errorf("true exited %d: %s", res.ExitCode, res.Stderr)
					}
					return err
				}
			}
			type row struct {
				name string
				call func() error
				d    []time.Duration
			}
			rows := []*row{{name: "exec", call: execOn(cur)}}
			if base != nil {
				rows = append(rows, &row{name: "base", call: execOn(base)})
			}
			pingOn := func(c *sandboxContainer) func() error {
				return func() error { _, err := c.client.Ping(ctx); return err }
			}
			rows = append(rows, &row{name: "ping", call: pingOn(cur)})
			if base != nil {
				rows = append(rows, &row{name: "baseping", call: pingOn(base)})
			}
			for range 10 {
				for _, r := range rows {
					if err := r.call(); err != nil {
						b.Fatalf("%s: %v", r.name, err)
					}
				}
			}
			curCPU, baseCPU := cpuUsage(cur), cpuUsage(base)
			b.ResetTimer()
			for i := range b.N {
				for k := range rows {
					r := rows[(i+k)%len(rows)]
					start := time.Now()
					err := r.call()
					r.d = append(r.d, time.Since(start))
					if err != nil {
						b.Fatalf("%s: %v", r.name, err)
					}
				}
			}
			b.StopTimer()
			// CPU time of each container (agent, commands and, under
			// gVisor, the sandbox's kernel) per round: one exec and one
			// ping. Less sensitive to a busy host than the latencies.
			if d, ok := curCPU(); ok {
				b.ReportMetric(float64(d.Microseconds())/float64(b.N), "exec-cpu-µs/round")
			}
			if d, ok := baseCPU(); ok {
				b.ReportMetric(float64(d.Microseconds())/float64(b.N), "base-cpu-µs/round")
			}
			for _, r := range rows {
				slices.Sort(r.d)
				b.ReportMetric(ms(r.d[len(r.d)/2]), r.name+"-p50-ms")
				b.ReportMetric(ms(r.d[len(r.d)*9/10]), r.name+"-p90-ms")
			}
			out, err := dockerCmd(5*time.Minute, nil, "exec", cur.id, "/.floor/spawnfloor", strconv.Itoa(max(b.N, 20)), "true")
			if err != nil {
				b.Fatal(err)
			}
			for _, line := range strings.Split(out, "\n") {
				f := strings.Fields(line)
				if len(f) != 3 {
					b.Fatalf("spawnfloor printed %q", line)
				}
				name := map[string]string{"forkexec_pipes_wait4": "spawn", "os_exec_run": "osexec"}[f[0]]
				for j, q := range []string{"p50", "p90"} {
					us, err := strconv.Atoi(f[1+j])
					if err != nil || name == "" {
						b.Fatalf("spawnfloor printed %q", line)
					}
					b.ReportMetric(float64(us)/1000, name+"-"+q+"-ms")
				}
			}
		})
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// cpuUsage returns a function that reports the CPU time c's cgroup used
// since cpuUsage was called; false when the container's cgroup cannot be
// read (or c is nil).
func cpuUsage(c *sandboxContainer) func() (time.Duration, bool) {
	none := func() (time.Duration, bool) { return 0, false }
	if c == nil {
		return none
	}
	read, err := containerCPU(c)
	if err != nil {
		return none
	}
	start, err := read()
	if err != nil {
		return none
	}
	return func() (time.Duration, bool) {
		now, err := read()
		return now - start, err == nil
	}
}

// containerCPU finds the cgroup of c's container from its host process
// (cgroup v1's cpuacct hierarchy or the v2 unified one) and returns a
// reader of the CPU time the cgroup has used.
func containerCPU(c *sandboxContainer) (func() (time.Duration, error), error) {
	out, err := dockerCmd(15*time.Second, nil, "inspect", "--format", "{{.State.Pid}}", c.id)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile("/proc/" + strings.TrimSpace(out) + "/cgroup")
	if err != nil {
		return nil, err
	}
	var v1, v2 string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2 = parts[2]
		}
		if slices.Contains(strings.Split(parts[1], ","), "cpuacct") {
			v1 = filepath.Join(parts[1], parts[2])
		}
	}
	if v1 != "" {
		path := filepath.Join("/sys/fs/cgroup", v1, "cpuacct.usage")
		if _, err := os.Stat(path); err == nil {
			return func() (time.Duration, error) {
				b, err := os.ReadFile(path)
				if err != nil {
					return 0, err
				}
				ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
				return time.Duration(ns), err
			}, nil
		}
	}
	if v2 != "" {
		path := filepath.Join("/sys/fs/cgroup", v2, "cpu.stat")
		if _, err := os.Stat(path); err == nil {
			return func() (time.Duration, error) {
				b, err := os.ReadFile(path)
				if err != nil {
					return 0, err
				}
				for _, line := range strings.Split(string(b), "\n") {
					if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
						us, err := strconv.ParseInt(v, 10, 64)
						return time.Duration(us) * time.Microsecond, err
					}
				}
				return 0, fmt.Errorf("%s has no usage_usec", path)
			}, nil
		}
	}
	return nil, fmt.Errorf("no CPU accounting found for container %s in %q", c.id, b)
}

// testPrograms holds, by name, the build of each testdata program
// (testProgramDir).
var testPrograms sync.Map // name → func() (string, error)

// testProgramDir builds testdata/<name> (static) into <sub>, a directory
// beside the agent's binary that the containers' user can read, once per
// test binary, and returns that directory.
func testProgramDir(tb testing.TB, sub, name string) string {
	tb.Helper()
	build, _ := testPrograms.LoadOrStore(name, sync.OnceValues(func() (string, error) {
		dir := filepath.Join(filepath.Dir(agentBin), sub)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		return dir, goBuild(".", filepath.Join(dir, name), "./testdata/"+name)
	}))
	dir, err := build.(func() (string, error))()
	if err != nil {
		tb.Fatal(err)
	}
	return dir
}

// baseAgentDir returns the directory of the baseline's genesis-agent
// (GENESIS_AGENT_BENCH_BASE_BIN, or GENESIS_AGENT_BENCH_BASE built from
// git), or "" without a baseline.
func baseAgentDir(tb testing.TB) string {
	tb.Helper()
	if bin := os.Getenv("GENESIS_AGENT_BENCH_BASE_BIN"); bin != "" {
		if filepath.Base(bin) != "genesis-agent" {
			tb.Fatalf("GENESIS_AGENT_BENCH_BASE_BIN=%s: want a binary named genesis-agent", bin)
		}
		return filepath.Dir(bin)
	}
	rev := os.Getenv("GENESIS_AGENT_BENCH_BASE")
	if rev == "" {
		return ""
	}
	tmp, err := os.MkdirTemp("", "gabase")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(tmp) })
	src, bin := filepath.Join(tmp, "src"), filepath.Join(tmp, "bin")
	for _, d := range []string{src, bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	archive := exec.CommandContext(ctx, "sh", "-c", `cd "$(git rev-parse --show-toplevel)" && git archive --format=tar "$1" | tar -x -C "$2"`, "sh", rev, src)
	if out, err := archive.CombinedOutput(); err != nil {
		tb.Fatalf("git archive %s: %v: %s", rev, err, out)
	}
	if err := goBuild(src, filepath.Join(bin, "genesis-agent"), "./cmd/genesis-agent"); err != nil {
		tb.Fatal(err)
	}
	return bin
}

// goBuild builds pkg, static, in dir into out.
func goBuild(dir, out, pkg string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v: %s", pkg, err, b)
	}
	return nil
}
