package agent_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/agent/agentclient"
	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

func execOK(t *testing.T, c *agentclient.Client, req agentproto.ExecRequest) agentproto.ExecResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := c.Exec(ctx, req)
	if err != nil {
		t.Fatalf("Exec(%+v): %v", req, err)
	}
	return res
}

func TestPing(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	p, err := a.client.Ping(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if p.Protocol != agentproto.Version || p.PID != a.pid() || p.UID != os.Getuid() || p.Kernel == "" || p.Agent == "" {
		t.Fatalf("unexpected ping %+v (agent pid %d)", p, a.pid())
	}
}

func TestExecBasics(t *testing.T) {
	t.Parallel()
	a := startAgent(t, "PASSED_THROUGH=yes", "GENESIS_AGENT_SECRET=hidden", "LANG=")
	tmp := t.TempDir()
	plain := filepath.Join(tmp, "plain.sh")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		req        agentproto.ExecRequest
		code       int
		stdout     string
		stderr     string // exact unless stderrHas is set
		stderrHas  string
		reason     string
		signalName string
	}{
		{name: "echo argv", req: agentproto.ExecRequest{Command: []string{"echo", "hello", "world"}}, stdout: "hello world\n"},
		{name: "argv is not shell-expanded", req: agentproto.ExecRequest{Command: []string{"echo", "$HOME", "*"}}, stdout: "$HOME *\n"},
		{name: "script", req: agentproto.ExecRequest{Script: "x=4; echo $((x*2))"}, stdout: "8\n"},
		{name: "separate streams", req: agentproto.ExecRequest{Script: "echo out; echo err >&2; echo out2"}, stdout: "out\nout2\n", stderr: "err\n"},
		{name: "exit code", req: agentproto.ExecRequest{Script: "echo bye; exit 7"}, code: 7, stdout: "bye\n"},
		{name: "false", req: agentproto.ExecRequest{Command: []string{"false"}}, code: 1},
		{name: "custom shell", req: agentproto.ExecRequest{Script: "echo $0", Shell: "/bin/bash"}, stdout: "/bin/bash\n"},
		{name: "request env", req: agentproto.ExecRequest{Script: `echo "$FOO|$PASSED_THROUGH|$GENESIS_AGENT_SECRET|$LANG"`, Env: map[string]string{"FOO": "bar baz"}}, stdout: "bar baz|yes||\n"},
		{name: "env overrides PATH", req: agentproto.ExecRequest{Command: []string{"sh", "-c", "echo $PATH"}, Env: map[string]string{"PATH": "/usr/bin:/bin"}}, stdout: "/usr/bin:/bin\n"},
		{name: "default base env", req: agentproto.ExecRequest{Command: []string{"sh", "-c", `test -n "$HOME" && echo ok`}}, stdout: "ok\n"},
		{name: "absolute cwd", req: agentproto.ExecRequest{Command: []string{"pwd"}, Cwd: tmp}, stdout: tmp + "\n"},
		{name: "relative cwd from /", req: agentproto.ExecRequest{Command: []string{"pwd"}, Cwd: "usr/lib"}, stdout: "/usr/lib\n"},
		{name: "default cwd", req: agentproto.ExecRequest{Command: []string{"pwd"}}, stdout: "/\n"},
		{name: "missing cwd", req: agentproto.ExecRequest{Command: []string{"pwd"}, Cwd: "/nonexistent-dir"}, code: 127, stderrHas: "genesis-agent: cwd /nonexistent-dir"},
		{name: "stdin", req: agentproto.ExecRequest{Command: []string{"cat"}, Stdin: []byte("from stdin\x00bin")}, stdout: "from stdin\x00bin"},
		{name: "no stdin is empty", req: agentproto.ExecRequest{Command: []string{"wc", "-c"}}, stdout: "0\n"},
		{name: "command not found", req: agentproto.ExecRequest{Command: []string{"no-such-command-xyz"}}, code: 127, stderr: "genesis-agent: no-such-command-xyz: command not found\n"},
		{name: "missing path", req: agentproto.ExecRequest{Command: []string{"/no/such/binary"}}, code: 127, stderrHas: "genesis-agent: /no/such/binary"},
		{name: "not executable", req: agentproto.ExecRequest{Command: []string{plain}}, code: 126, stderrHas: "permission denied"},
		{name: "directory", req: agentproto.ExecRequest{Command: []string{"/tmp"}}, code: 126, stderrHas: "is a directory"},
		{name: "shell not found", req: agentproto.ExecRequest{Script: "true", Shell: "/no/sh"}, code: 127, stderrHas: "genesis-agent: /no/sh"},
		{name: "killed by signal", req: agentproto.ExecRequest{Script: "kill -USR1 $$; sleep 5"}, code: 128 + 10, reason: "signal", signalName: "SIGUSR1"},
		{name: "killed by SIGKILL", req: agentproto.ExecRequest{Script: "kill -KILL $$; sleep 5"}, code: 128 + 9, reason: "signal", signalName: "SIGKILL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := execOK(t, a.client, tc.req)
			reason := tc.reason
			if reason == "" {
				reason = "exited"
			}
			if res.ExitCode != tc.code || res.ExitReason != reason || res.Signal != tc.signalName {
				t.Errorf("exit = %d %q %q, want %d %q %q (stderr %q)", res.ExitCode, res.ExitReason, res.Signal, tc.code, reason, tc.signalName, res.Stderr)
			}
			if string(res.Stdout) != tc.stdout {
				t.Errorf("stdout = %q, want %q", res.Stdout, tc.stdout)
			}
			if tc.stderrHas != "" {
				if !strings.HasPrefix(string(res.Stderr), "genesis-agent: ") || !strings.Contains(string(res.Stderr), tc.stderrHas) {
					t.Errorf("stderr = %q, want it to contain %q", res.Stderr, tc.stderrHas)
				}
			} else if string(res.Stderr) != tc.stderr {
				t.Errorf("stderr = %q, want %q", res.Stderr, tc.stderr)
			}
			if res.StdoutBytes != int64(len(res.Stdout)) || res.StderrBytes != int64(len(res.Stderr)) || res.StdoutTruncated || res.StderrTruncated {
				t.Errorf("byte counts %d/%d truncated %v/%v for %d/%d kept", res.StdoutBytes, res.StderrBytes,
					res.StdoutTruncated, res.StderrTruncated, len(res.Stdout), len(res.Stderr))
			}
		})
	}
}

func TestExecRejectsBadRequests(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	for name, req := range map[string]agentproto.ExecRequest{
		"neither":          {},
		"both":             {Command: []string{"true"}, Script: "true"},
		"empty argv0":      {Command: []string{""}},
		"negative timeout": {Command: []string{"true"}, TimeoutMS: -1},
		"bad env name":     {Command: []string{"true"}, Env: map[string]string{"A=B": "c"}},
		"huge output cap":  {Command: []string{"true"}, MaxOutputBytes: 1 << 40},
	} {
		_, err := a.client.Exec(context.Background(), req)
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: err = %v, want ErrInvalidArgument", name, err)
		}
	}
}

func TestExecLargeStdin(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	in := bytes.Repeat([]byte("0123456789abcdef"), 256<<10) // 4 MiB: far beyond a pipe buffer
	res := execOK(t, a.client, agentproto.ExecRequest{Command: []string{"wc", "-c"}, Stdin: in})
	if got := strings.TrimSpace(string(res.Stdout)); got != strconv.Itoa(len(in)) {
		t.Fatalf("wc -c = %q, want %d", got, len(in))
	}
	// A job that does not read its stdin must not block the call.
	res = execOK(t, a.client, agentproto.ExecRequest{Command: []string{"true"}, Stdin: in})
	if res.ExitCode != 0 {
		t.Fatalf("true with unread stdin: %+v", res)
	}
}

func TestExecOutputCap(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	const total = 5 << 20
	res := execOK(t, a.client, agentproto.ExecRequest{
		Script: fmt.Sprintf("head -c %d /dev/zero; head -c 300 /dev/zero >&2; echo done >&2", total),
	})
	if res.ExitCode != 0 || res.ExitReason != "exited" {
		t.Fatalf("exit %d %s: %q", res.ExitCode, res.ExitReason, res.Stderr)
	}
	if len(res.Stdout) != agentproto.DefaultMaxOutputBytes || res.StdoutBytes != total || !res.StdoutTruncated {
		t.Errorf("stdout kept %d of %d, truncated %v; want %d of %d, truncated", len(res.Stdout), res.StdoutBytes,
			res.StdoutTruncated, agentproto.DefaultMaxOutputBytes, total)
	}
	if res.StderrBytes != 305 || res.StderrTruncated {
		t.Errorf("stderr %d bytes truncated %v, want 305 not truncated", res.StderrBytes, res.StderrTruncated)
	}

	res = execOK(t, a.client, agentproto.ExecRequest{Script: "echo 0123456789; echo abcdefghij >&2", MaxOutputBytes: 4})
	if string(res.Stdout) != "0123" || res.StdoutBytes != 11 || !res.StdoutTruncated ||
		string(res.Stderr) != "abcd" || res.StderrBytes != 11 || !res.StderrTruncated {
		t.Errorf("cap 4: %+v", res)
	}
}

func TestExecTimeoutKillsGroup(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	start := time.Now()
	res := execOK(t, a.client, agentproto.ExecRequest{Script: "sleep 30 & sleep 30; echo never", TimeoutMS: 500})
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("timeout call took %v", el)
	}
	if res.ExitReason != "timeout" || res.Signal != "SIGKILL" || res.ExitCode != 137 {
		t.Errorf("result %s code %d signal %q, want timeout by SIGKILL", res.ExitReason, res.ExitCode, res.Signal)
	}
	if res.DurationMS < 450 {
		t.Errorf("duration %d ms, shorter than the timeout", res.DurationMS)
	}
	waitNoProcs(t, "processes of the timed-out group", 2*time.Second, func(p procInfo) bool { return p.pgrp == res.PID })
}

func TestExecTimeoutGrace(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	t.Run("ignores SIGTERM", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		res := execOK(t, a.client, agentproto.ExecRequest{
			Script: `trap "" TERM; sleep 30 & wait; sleep 30`, TimeoutMS: 300, KillGraceMS: 200,
		})
		el := time.Since(start)
		if res.ExitReason != "timeout" || res.Signal != "SIGKILL" {
			t.Errorf("result %s signal %q, want timeout by SIGKILL", res.ExitReason, res.Signal)
		}
		if res.DurationMS < 480 || el > 2*time.Second {
			t.Errorf("took %d ms (call %v), want about 500 ms", res.DurationMS, el)
		}
		waitNoProcs(t, "processes of the timed-out group", 2*time.Second, func(p procInfo) bool { return p.pgrp == res.PID })
	})
	t.Run("handles SIGTERM", func(t *testing.T) {
		t.Parallel()
		res := execOK(t, a.client, agentproto.ExecRequest{
			Script: `trap "echo got TERM; exit 3" TERM; sleep 30 & wait`, TimeoutMS: 300, KillGraceMS: 5000,
		})
		if res.ExitReason != "timeout" || res.ExitCode != 3 || string(res.Stdout) != "got TERM\n" {
			t.Errorf("result %s code %d stdout %q, want timeout, 3, got TERM", res.ExitReason, res.ExitCode, res.Stdout)
		}
		if res.DurationMS > 2000 {
			t.Errorf("took %d ms: SIGTERM not delivered at the timeout", res.DurationMS)
		}
	})
}

func TestExecDoesNotWaitForEscapedPipes(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	for name, script := range map[string]string{
		"in group":    "sleep 30 & echo started",
		"own session": "setsid sleep 30 & echo started",
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			res := execOK(t, a.client, agentproto.ExecRequest{Script: script})
			if el := time.Since(start); el > 1500*time.Millisecond {
				t.Errorf("call took %v, want it bounded", el)
			}
			if res.ExitCode != 0 || res.ExitReason != "exited" || string(res.Stdout) != "started\n" {
				t.Errorf("result %+v", res)
			}
			waitNoProcs(t, "processes of the job's group", 2*time.Second, func(p procInfo) bool { return p.pgrp == res.PID })
		})
	}
}

func TestExecCanceledKillsJob(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	pidFile := filepath.Join(a.dir, "job.pid")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := a.client.Exec(ctx, agentproto.ExecRequest{Script: "echo $$ > " + pidFile + "; exec sleep 30"})
		errc <- err
	}()
	var pid int
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(pidFile)
		if err == nil && bytes.HasSuffix(b, []byte("\n")) {
			if pid, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("job did not start")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-errc; !isCanceledLike(err) {
		t.Fatalf("Exec err = %v, want canceled", err)
	}
	waitNoProcs(t, "canceled job", 2*time.Second, func(p procInfo) bool { return p.pid == pid || p.pgrp == pid })
	// The agent and the connection keep working.
	if res := execOK(t, a.client, agentproto.ExecRequest{Command: []string{"true"}}); res.ExitCode != 0 {
		t.Fatalf("after cancel: %+v", res)
	}
}

func TestOrphansAreReaped(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	// The grandchildren escape the job's group, outlive it, and are
	// reparented to the agent (a subreaper), which must reap them.
	res := execOK(t, a.client, agentproto.ExecRequest{
		Script: "for i in 1 2 3 4 5; do setsid sh -c 'sleep 0.2' </dev/null >/dev/null 2>&1 & done; sh -c 'sleep 0.1 &'; echo ok",
	})
	if res.ExitCode != 0 || string(res.Stdout) != "ok\n" {
		t.Fatalf("result %+v", res)
	}
	agentPID := a.pid()
	waitNoProcs(t, "children of the agent", 3*time.Second, func(p procInfo) bool { return p.ppid == agentPID && !idleSpare(p.pid) })
}

func TestConcurrentExecs(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := a.client.Exec(context.Background(), agentproto.ExecRequest{
				JobID:  strconv.Itoa(i),
				Script: `sleep 0.1; echo "job $N"; echo "e$N" >&2; exit $N`,
				Env:    map[string]string{"N": strconv.Itoa(i)},
			})
			switch {
			case err != nil:
				errs <- err
			case res.ExitCode != i || string(res.Stdout) != fmt.Sprintf("job %d\n", i) || string(res.Stderr) != fmt.Sprintf("e%d\n", i):
				errs <- fmt.Errorf("job %d: got %+v", i, res)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestSignalsAreForwarded(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	marker := filepath.Join(a.dir, "ready")
	resc := make(chan agentproto.ExecResult, 1)
	go func() {
		res, _ := a.client.Exec(context.Background(), agentproto.ExecRequest{
			Script: `trap "echo got HUP; exit 5" HUP; sleep 30 & touch ` + marker + `; wait`,
		})
		resc <- res
	}()
	waitFile(t, marker)
	if err := a.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-resc:
		if res.ExitCode != 5 || string(res.Stdout) != "got HUP\n" {
			t.Fatalf("result %+v, want exit 5 after HUP", res)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("SIGHUP was not forwarded")
	}
}

func TestSIGTERMShutsDown(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	marker := filepath.Join(a.dir, "ready")
	resc := make(chan agentproto.ExecResult, 1)
	go func() {
		res, _ := a.client.Exec(context.Background(), agentproto.ExecRequest{Script: "touch " + marker + "; exec sleep 30"})
		resc <- res
	}()
	waitFile(t, marker)
	start := time.Now()
	a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.exited:
	case <-time.After(5 * time.Second):
		t.Fatal("agent did not exit after SIGTERM")
	}
	if a.err != nil {
		t.Errorf("agent exit: %v", a.err)
	}
	t.Logf("shutdown took %v", time.Since(start))
	res := <-resc
	if res.ExitReason != "signal" || res.Signal != "SIGTERM" {
		t.Errorf("job result %+v, want killed by the forwarded SIGTERM", res)
	}
	if _, err := os.Stat(a.socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left behind: %v", err)
	}
	waitNoProcs(t, "job", 2*time.Second, func(p procInfo) bool { return p.pgrp == res.PID && res.PID != 0 })
}

func TestStaleSocketReplaced(t *testing.T) {
	t.Parallel()
	first := startAgent(t)
	// A second agent on the same path takes it over atomically.
	dir := first.dir
	second := startAgentAt(t, filepath.Join(dir, "a.sock"))
	// A fresh client reaches the new agent; the old connection still
	// reaches the old one.
	c := agentclient.Dial(second.socket)
	defer c.Close()
	p, err := c.Ping(context.Background())
	if err != nil || p.PID != second.pid() {
		t.Fatalf("ping after takeover: %+v %v, want pid %d", p, err, second.pid())
	}
	if p, err := first.client.Ping(context.Background()); err != nil || p.PID != first.pid() {
		t.Fatalf("ping over the old connection: %+v %v, want pid %d", p, err, first.pid())
	}
	fi, err := os.Stat(second.socket)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket %v mode %v", err, fi.Mode())
	}
}

func TestClientErrors(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "ga")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	c := agentclient.Dial(filepath.Join(dir, "missing.sock"))
	defer c.Close()
	if _, err := c.Ping(context.Background()); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("Ping on missing socket: %v, want ErrUnavailable", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.WaitReady(ctx, 5*time.Millisecond); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("WaitReady on missing socket: %v, want ErrUnavailable", err)
	}
}

func TestWaitReadyBeforeStart(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "ga")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "a.sock")
	c := agentclient.Dial(sock)
	defer c.Close()
	ready := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := c.WaitReady(ctx, 2*time.Millisecond)
		ready <- err
	}()
	time.Sleep(50 * time.Millisecond) // let WaitReady fail a few times first
	startAgentAt(t, sock)
	if err := <-ready; err != nil {
		t.Fatal(err)
	}
}

// TestFirstAnswerAfterStartUp dials the agent the moment its socket's name
// appears: the agent listens before the rest of its start-up (the service
// dials while it runs), so that connection waits in the backlog, and its
// first answer comes only after the start-up is done — here, after the
// identity file the workload reads is written.
func TestFirstAnswerAfterStartUp(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "ga")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "a.sock")
	cmd := exec.Command(agentBin, "serve", "--socket", sock)
	cmd.Env = append(os.Environ(), agentproto.EnvSandboxID+"=sb_first")
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if t.Failed() {
			t.Logf("agent log:\n%s", stderr.String())
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Lstat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", sock)
		}
		time.Sleep(100 * time.Microsecond)
	}
	c := agentclient.Dial(sock)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := c.Ping(ctx)
	if err != nil {
		t.Fatalf("ping at the socket's first sight: %v", err)
	}
	if p.PID != cmd.Process.Pid {
		t.Fatalf("ping answered by pid %d, want %d", p.PID, cmd.Process.Pid)
	}
	b, err := os.ReadFile(filepath.Join(dir, "identity"))
	if err != nil {
		t.Fatalf("identity file at the first answer: %v", err)
	}
	if id := string(b); !strings.Contains(id, agentproto.EnvSandboxID+"=sb_first\n") || !strings.Contains(id, agentproto.EnvSeed+"=") {
		t.Fatalf("identity file at the first answer: %q", id)
	}
}

// startAgentAt is startAgent with a chosen socket path.
func startAgentAt(t *testing.T, socket string) *agentProc {
	t.Helper()
	return startAgentSocket(t, socket)
}

func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", path)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// BenchmarkHostExecOverhead compares an exec of true through the agent (a
// subprocess on this host) with spawning true directly, so the difference
// is what the agent and its HTTP/2 channel add.
func BenchmarkHostExecOverhead(b *testing.B) {
	trueBin, err := exec.LookPath("true")
	if err != nil {
		b.Skip("true not found")
	}
	b.Run("direct-spawn", func(b *testing.B) {
		cpu0 := procCPU(b, os.Getpid())
		benchLatency(b, func() error { return exec.Command(trueBin).Run() })
		b.ReportMetric(float64((procCPU(b, os.Getpid())-cpu0).Microseconds())/float64(b.N+10)/1000, "parent-cpu-ms/op")
	})
	b.Run("agent", func(b *testing.B) {
		a := startAgentSocket(b, "", "GENESIS_AGENT_LOG_LEVEL=info")
		req := agentproto.ExecRequest{Command: []string{trueBin}}
		cpu0 := procCPU(b, a.pid())
		benchLatency(b, func() error {
			_, err := a.client.Exec(context.Background(), req)
			return err
		})
		// CPU the agent process itself spent per exec (children excluded):
		// a load-independent view of its overhead.
		b.ReportMetric(float64((procCPU(b, a.pid())-cpu0).Microseconds())/float64(b.N+10)/1000, "agent-cpu-ms/op")
	})
}

// procCPU returns user+system CPU time of pid, without its children.
func procCPU(tb testing.TB, pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		tb.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond // USER_HZ = 100
}
