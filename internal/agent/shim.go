package agent

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

// A background job runs under a shim: a second instance of the agent binary
// that is a child subreaper. Every process the job creates stays below the
// shim, whatever it does with sessions and process groups: when an
// intermediate parent dies, its orphans are reparented to the nearest
// subreaper, the shim. So the job's tree is exactly the shim's descendants,
// found by following PPid links in /proc, and the shim can signal all of it.
//
// The agent starts the shim as
//
//	genesis-agent-shim serve -- PATH ARGV0 [ARG...]
//
// with GENESIS_AGENT_SHIM=1 in its environment (Server.Run turns such a
// process into a shim before doing anything else; the variable is removed
// again before the job's command runs), the job's stdio as fds 0-2, the
// status pipe as fd 3 and the control pipe as fd 4.
//
// Status (shim → agent), one line each: "pid N" once the command runs,
// "warn TEXT" for problems worth logging, and finally "exit WS" with the
// command's raw wait status, after which the shim exits.
//
// Control (agent → shim), one byte each: 'T' sends SIGTERM to every process
// of the tree; 'K' SIGKILLs the tree until it is empty. End of file (the
// agent is gone) acts like 'K'.
//
// When the command exits, the shim SIGKILLs whatever is left of the tree,
// so a finished job leaves nothing behind, then reports and exits.
const (
	shimEnvVar    = "GENESIS_AGENT_SHIM"
	shimArgv0     = "genesis-agent-shim"
	shimStatusFD  = 3
	shimControlFD = 4

	shimCmdTerm = 'T'
	shimCmdKill = 'K'
)

// shimKillWithin bounds how long a shim keeps killing a tree that does not
// go away (processes stuck in uninterruptible sleep).
const shimKillWithin = 5 * time.Second

// shimRequested reports whether this process was started as a job shim.
func shimRequested() bool { return os.Getenv(shimEnvVar) == "1" }

// shimArgs returns the argv with which the agent starts a shim for path/argv.
func shimArgs(path string, argv []string) []string {
	return append([]string{shimArgv0, "serve", "--", path}, argv...)
}

// runShim is the body of a shim process; args are its os.Args. It returns
// the process exit code (the command's status travels over the status pipe).
func runShim(args []string) int {
	runtime.GOMAXPROCS(1)
	i := slices.Index(args, "--")
	if i < 0 || len(args) < i+3 {
		fmt.Fprintln(os.Stderr, "genesis-agent: shim: want -- PATH ARGV0 [ARG...]")
		return 2
	}
	path, argv := args[i+1], args[i+2:]
	// The command must not inherit the shim's channels to the agent.
	syscall.CloseOnExec(shimStatusFD)
	syscall.CloseOnExec(shimControlFD)
	sh := &shim{
		status: os.NewFile(shimStatusFD, "shim-status"),
		self:   os.Getpid(),
		procs:  newProcScanner("/proc"),
	}
	return sh.run(path, argv, os.NewFile(shimControlFD, "shim-control"))
}

type shim struct {
	status     *os.File
	self       int
	procs      *procScanner
	chld       chan os.Signal
	main       int
	mainDone   bool
	mainStatus syscall.WaitStatus
}

func (sh *shim) report(format string, args ...any) {
	fmt.Fprintf(sh.status, format+"\n", args...)
}

func (sh *shim) run(path string, argv []string, control *os.File) int {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		sh.report("warn cannot become a child subreaper (%v): escaped descendants cannot be tracked", errno)
	}
	sh.chld = make(chan os.Signal, 1)
	signal.Notify(sh.chld, syscall.SIGCHLD)
	fwd := make(chan os.Signal, 4)
	signal.Notify(fwd, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, shimEnvVar+"=") })
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{
		Env:   env,
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		code := 126
		if errors.Is(err, syscall.ENOENT) {
			code = 127
		}
		fmt.Fprintf(os.Stderr, "genesis-agent: %s: %v\n", argv[0], err)
		sh.report("exit %d", code<<8)
		return 0
	}
	sh.main = pid
	sh.report("pid %d", pid)

	ctl := make(chan byte, 4)
	go readShimControl(control, ctl)
	terminating, killed := false, false
	for !sh.mainDone {
		select {
		case <-sh.chld:
			sh.reap()
		case sig := <-fwd:
			// Like a sync job, the command's group gets forwarded signals.
			syscall.Kill(-pid, sig.(syscall.Signal))
		case c := <-ctl:
			if c == shimCmdTerm {
				terminating = true
				sh.signalTree(syscall.SIGTERM)
			} else {
				killed = true
				sh.killTree(time.Now().Add(shimKillWithin))
			}
		}
	}
	if terminating && !killed {
		// The rest of the tree got SIGTERM too: it has until the agent's
		// SIGKILL (at the end of the grace) to finish on its own.
		sh.awaitTree(ctl)
	}
	if left := sh.killTree(time.Now().Add(shimKillWithin)); left > 0 {
		sh.report("warn %d processes of the job survived SIGKILL for %v", left, shimKillWithin)
	}
	sh.report("exit %d", uint32(sh.mainStatus))
	return 0
}

// readShimControl forwards control bytes; 0 means the agent is gone.
func readShimControl(f *os.File, out chan<- byte) {
	b := make([]byte, 16)
	for {
		n, err := f.Read(b)
		for _, c := range b[:n] {
			out <- c
		}
		if err != nil {
			out <- 0
			return
		}
	}
}

// reap collects every exited child (orphans of the job land here too) and
// reports whether children remain. Since every orphan of the tree is
// reparented to the shim, no children means the tree is empty.
func (sh *shim) reap() bool {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if errors.Is(err, syscall.ECHILD) {
			return false
		}
		if err != nil || pid <= 0 {
			return true
		}
		if pid == sh.main && (ws.Exited() || ws.Signaled()) {
			sh.mainDone = true
			sh.mainStatus = ws
		}
	}
}

// awaitTree waits until the tree is empty or the agent asks to kill it.
func (sh *shim) awaitTree(ctl <-chan byte) {
	for sh.reap() {
		select {
		case <-sh.chld:
		case c := <-ctl:
			if c != shimCmdTerm {
				return
			}
		}
	}
}

// signalTree sends sig once to every live process of the tree.
func (sh *shim) signalTree(sig syscall.Signal) {
	ds, err := sh.procs.descendants(sh.self)
	if err != nil {
		syscall.Kill(-sh.main, sig)
		return
	}
	for _, p := range ds {
		if !p.zombie() {
			syscall.Kill(p.pid, sig)
		}
	}
}

// killTree SIGKILLs the tree and reaps until nothing is below the shim or
// the deadline passes; it returns how many live processes are left.
func (sh *shim) killTree(deadline time.Time) int {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		if !sh.reap() {
			return 0
		}
		ds, err := sh.procs.descendants(sh.self)
		if err != nil {
			// No /proc: the command's group is the best that can be done.
			syscall.Kill(-sh.main, syscall.SIGKILL)
			return 0
		}
		alive := 0
		for _, p := range ds {
			if !p.zombie() {
				alive++
				syscall.Kill(p.pid, syscall.SIGKILL)
			}
		}
		if time.Now().After(deadline) {
			return alive
		}
		// Wait for the kills to land: a SIGCHLD, or a short tick for
		// grandchildren whose death is reported to their own parents.
		t.Reset(2 * time.Millisecond)
		select {
		case <-sh.chld:
		case <-t.C:
		}
	}
}
