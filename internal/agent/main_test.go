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
)

// agentBin is the static genesis-agent built once by TestMain. The agent is
// always run as a subprocess: its reaper calls wait4(-1), which must not
// share a process with os/exec.
var agentBin string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "gabin")
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkdtemp:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	// Readable and traversable by the unprivileged uid of the container tests.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "chmod:", err)
		return 1
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		fmt.Fprintln(os.Stderr, "go tool not found:", err)
		return 1
	}
	// go test puts GOROOT/bin first on the test's PATH.
	agentBin = filepath.Join(dir, "genesis-agent")
	build := exec.Command(goTool, "build", "-o", agentBin, "genesis.dev/sandbox/cmd/genesis-agent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building genesis-agent: %v\n%s", err, out)
		return 1
	}
	defer removeTestImage()
	return m.Run()
}

// agentProc is a genesis-agent subprocess serving on a temporary socket.
type agentProc struct {
	cmd    *exec.Cmd
	socket string
	dir    string
	client *agentclient.Client
	stderr *lockedBuffer
	exited chan struct{}
	err    error // Wait result, valid after exited is closed
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startAgent runs the agent with extraEnv added to the test's environment
// and waits until it answers a ping.
func startAgent(t testing.TB, extraEnv ...string) *agentProc {
	t.Helper()
	return startAgentSocket(t, "", extraEnv...)
}

// startAgentSocket is startAgent on a given socket path ("" for a new
// temporary directory).
func startAgentSocket(t testing.TB, socket string, extraEnv ...string) *agentProc {
	t.Helper()
	return startAgentAs(t, socket, nil, extraEnv...)
}

// startAgentAs is startAgentSocket running the agent with cred (nil: the
// test's own user).
func startAgentAs(t testing.TB, socket string, cred *syscall.Credential, extraEnv ...string) *agentProc {
	t.Helper()
	if socket == "" {
		dir, err := os.MkdirTemp("", "ga")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		socket = filepath.Join(dir, "a.sock")
	}
	dir := filepath.Dir(socket)
	a := &agentProc{
		socket: socket,
		dir:    dir,
		stderr: &lockedBuffer{},
		exited: make(chan struct{}),
	}
	a.cmd = exec.Command(agentBin, "serve", "--socket", a.socket)
	a.cmd.Env = append(os.Environ(), "GENESIS_AGENT_LOG_LEVEL=debug")
	a.cmd.Env = append(a.cmd.Env, extraEnv...)
	a.cmd.Stderr = a.stderr
	if cred != nil {
		a.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		a.err = a.cmd.Wait()
		close(a.exited)
	}()
	a.client = agentclient.Dial(a.socket)
	t.Cleanup(func() {
		a.client.Close()
		killChildrenOf(a.cmd.Process.Pid)
		a.stop(t)
		if t.Failed() {
			t.Logf("agent log:\n%s", a.stderr.String())
		}
	})
	// Wait until this agent answers: another one may still own the path.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		p, err := a.client.WaitReady(ctx, 2*time.Millisecond)
		if err != nil {
			t.Fatalf("agent not ready: %v\n%s", err, a.stderr.String())
		}
		if p.PID == a.pid() {
			return a
		}
		a.client.Close() // drop the connection to the previous owner
		time.Sleep(2 * time.Millisecond)
	}
}

// stop sends SIGTERM and waits for the agent to exit, killing it if it
// takes too long.
func (a *agentProc) stop(t testing.TB) {
	select {
	case <-a.exited:
		return
	default:
	}
	a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.exited:
	case <-time.After(10 * time.Second):
		a.cmd.Process.Kill()
		<-a.exited
		t.Errorf("agent did not exit within 10s of SIGTERM")
	}
}

func (a *agentProc) pid() int { return a.cmd.Process.Pid }

// procInfo is the part of /proc/PID/stat the tests look at.
type procInfo struct {
	pid, ppid, pgrp int
	state           byte
}

func readProc(pid int) (procInfo, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procInfo{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 {
		return procInfo{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	pgrp, _ := strconv.Atoi(f[2])
	return procInfo{pid: pid, ppid: ppid, pgrp: pgrp, state: f[0][0]}, true
}

func allProcs() []procInfo {
	ents, _ := os.ReadDir("/proc")
	var out []procInfo
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readProc(pid); ok {
			out = append(out, p)
		}
	}
	return out
}

func procsWhere(keep func(procInfo) bool) []procInfo {
	var out []procInfo
	for _, p := range allProcs() {
		if keep(p) {
			out = append(out, p)
		}
	}
	return out
}

// waitNoProcs polls until no process matches keep or the deadline passes.
func waitNoProcs(t *testing.T, what string, within time.Duration, keep func(procInfo) bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		left := procsWhere(keep)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still present after %v: %+v", what, within, left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// idleSpare reports whether pid is the agent's idle spare job shim (see
// spare.go): started as "genesis-agent-shim shim spare" and not renamed
// for a job.
func idleSpare(pid int) bool {
	cmd, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || string(cmd) != "genesis-agent-shim\x00shim\x00spare\x00" {
		return false
	}
	comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return err == nil && strings.TrimSpace(string(comm)) != "genesis-shim"
}

// killChildrenOf SIGKILLs the direct children of pid (escaped test jobs).
func killChildrenOf(pid int) {
	for _, p := range procsWhere(func(p procInfo) bool { return p.ppid == pid }) {
		syscall.Kill(p.pid, syscall.SIGKILL)
	}
}

func isCanceledLike(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
