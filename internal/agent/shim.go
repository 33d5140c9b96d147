package agent

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A background job runs under a shim: a second instance of the agent binary
// that is a child subreaper. Every process the job creates stays below the
// shim, whatever it does with sessions and process groups: when an
// intermediate parent dies, its orphans are reparented to the nearest
// subreaper, the shim. So the job's tree is exactly the shim's descendants,
// found by following PPid links in /proc, and the shim can signal all of it.
//
// Shims are started ahead of their jobs and serve one job after another
// (spare.go), so a job start neither waits for a new process and its
// runtime to come up nor pays for one. The agent starts one as
//
//	genesis-agent-shim shim spare
//
// (the "genesis-agent shim" subcommand, which calls RunShim) with only
// GENESIS_AGENT_SHIM=1 in its environment, /dev/null as fds 0-2,
// the status pipe as fd 3 and the control socket (a Unix stream socket) as
// fd 4. The idle shim names itself genesis-spare and waits on fd 4 for a
// job: a 4-byte big-endian length carrying the job's stdin, stdout and
// stderr as SCM_RIGHTS, then that many bytes of shimSpec JSON. It names
// itself genesis-shim and runs the job with the three descriptors as the
// command's fds 0-2, closing its own copies as soon as the command runs
// (its own fds 0-2 stay /dev/null). End of file while idle means the agent
// retired the shim.
//
// Status (shim → agent), one line each: "pid N" once the command runs (or,
// with LatePID, just before the exit line, in the same write), "warn TEXT"
// for problems worth logging, and finally "exit WS" with the command's raw
// wait status, or "exit WS idle" when the shim has emptied the job's tree
// and waits for the next job. Without "idle" the shim exits after the line.
//
// Control (agent → shim, during a job), one byte each: 'T' sends SIGTERM
// to every process of the tree; 'K' SIGKILLs the tree until it is empty.
// End of file (the agent is gone) acts like 'K', and the shim then exits.
// A shim that got a control byte is not given another job: the agent
// retires it, so a byte that crossed the job's end can never be taken for
// the next job's header. Signals the agent forwards (SIGTERM, SIGINT,
// SIGHUP) go only to shims that run a job, which pass them to the job's
// group; a shim that got one is retired after its job, for the same
// reason (Go hands a signal to the shim some time after it arrives).
//
// When the command exits, the shim SIGKILLs whatever is left of the tree,
// so a finished job leaves nothing behind, then reports.
const (
	shimEnvVar    = ShimEnvVar
	shimArgv0     = "genesis-agent-shim"
	shimArgSpare  = "spare"
	shimStatusFD  = 3
	shimControlFD = 4

	shimCmdTerm = 'T'
	shimCmdKill = 'K'

	// Process names (comm) of an idle spare and of a shim running a job.
	shimNameSpare = "genesis-spare"
	shimNameJob   = "genesis-shim"
)

// maxShimSpec bounds a job spec sent to a shim (argv and environment; the
// request body that carried them is bounded too).
const maxShimSpec = 256 << 20

// shimSpec is the job a spare shim receives.
type shimSpec struct {
	Path string   `json:"path"`
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir"`
	// LatePID holds the "pid N" line back until the exit line, which it
	// then precedes in one write: a caller that waits for the whole job
	// (a sync exec) does not need the pid at the start, and every status
	// line is a wake-up of the agent.
	LatePID bool `json:"late_pid,omitempty"`
	// TTY starts the command as a session leader with fd 0 (a terminal)
	// as its controlling terminal.
	TTY bool `json:"tty,omitempty"`
}

// shimKillWithin bounds how long a shim keeps killing a tree that does not
// go away (processes stuck in uninterruptible sleep).
const shimKillWithin = 5 * time.Second

// ShimEnvVar is set to 1 in the environment of every job shim the agent
// starts. Agents before the shim subcommand started shims as
// "genesis-agent-shim serve spare" and recognised them by it alone;
// IsLegacyShim tells such a start apart from a real serve.
const ShimEnvVar = "GENESIS_AGENT_SHIM"

// ShimCommand is the subcommand of genesis-agent that runs a job shim.
const ShimCommand = "shim"

// shimArgs returns the argv with which the agent starts a spare shim.
func shimArgs() []string { return []string{shimArgv0, ShimCommand, shimArgSpare} }

// IsLegacyShim reports whether a process with argv args was started as a
// job shim the old way (the serve subcommand with ShimEnvVar=1); it must
// then run RunShim, not serve.
func IsLegacyShim(args []string) bool {
	return os.Getenv(shimEnvVar) == "1" && len(args) == 3 && args[1] == "serve" && args[2] == shimArgSpare
}

// RunShim is the body of a job shim process (see above); args are its
// os.Args: argv0, "shim" (or "serve" for IsLegacyShim) and "spare". It
// returns the process exit code (each command's status travels over the
// status pipe). Only the agent starts shims: the descriptors 3 and 4 it
// expects are the agent's.
func RunShim(args []string) int {
	runtime.GOMAXPROCS(1)
	if len(args) != 3 || args[2] != shimArgSpare || args[1] != ShimCommand && !IsLegacyShim(args) {
		fmt.Fprintln(os.Stderr, "genesis-agent: shim: want genesis-agent-shim shim spare, started by the agent")
		return 2
	}
	setProcName(shimNameSpare)
	// The command must not inherit the shim's channels to the agent.
	syscall.CloseOnExec(shimStatusFD)
	syscall.CloseOnExec(shimControlFD)
	status := os.NewFile(shimStatusFD, "shim-status")
	// Non-blocking, so that the control reader of a job can be stopped with
	// a deadline when the job ends and the socket goes back to carrying jobs.
	if err := syscall.SetNonblock(shimControlFD, true); err != nil {
		fmt.Fprintf(status, "warn spare shim: control socket: %v\nexit %d\n", err, 126<<8)
		return 1
	}
	control := os.NewFile(shimControlFD, "shim-control")
	sh := &shim{
		status:  status,
		control: control,
		self:    os.Getpid(),
		procs:   newProcScanner("/proc"),
		chld:    make(chan os.Signal, 1),
		fwd:     make(chan os.Signal, 4),
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		sh.warnSubreaper = err
	}
	sh.adj, sh.warnAdj = openOOMScoreAdj(oomScoreAdjPath, func(err error) {
		sh.report("warn out-of-memory priority of the command: %v", err)
	})
	signal.Notify(sh.chld, syscall.SIGCHLD)
	signal.Notify(sh.fwd, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	for {
		spec, stdio, err := receiveShimSpec(control)
		if errors.Is(err, io.EOF) {
			return 0 // retired
		}
		if err != nil {
			sh.report("warn spare shim: %v", err)
			sh.report("exit %d", 126<<8)
			return 1
		}
		setProcName(shimNameJob)
		if !sh.run(spec, stdio) {
			return 0
		}
	}
}

// receiveShimSpec reads a job from the (non-blocking) control socket: its
// spec and its stdin, stdout and stderr (close-on-exec descriptors the shim
// must close once the command has them). io.EOF means the socket closed before a
// job came.
func receiveShimSpec(control *os.File) (shimSpec, [3]int, error) {
	rc, err := control.SyscallConn()
	if err != nil {
		return shimSpec{}, [3]int{}, fmt.Errorf("receive job: %w", err)
	}
	var hdr [4]byte
	oob := make([]byte, syscall.CmsgSpace(3*4))
	var n, oobn int
	var rerr error
	if err := rc.Read(func(fd uintptr) bool {
		for {
			n, oobn, _, _, rerr = syscall.Recvmsg(int(fd), hdr[:], oob, syscall.MSG_CMSG_CLOEXEC)
			if rerr != syscall.EINTR {
				return rerr != syscall.EAGAIN
			}
		}
	}); err != nil {
		rerr = err
	}
	if rerr != nil {
		return shimSpec{}, [3]int{}, fmt.Errorf("receive job: %w", rerr)
	}
	if n == 0 {
		return shimSpec{}, [3]int{}, io.EOF
	}
	var fds []int
	if msgs, err := syscall.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, m := range msgs {
			if rights, err := syscall.ParseUnixRights(&m); err == nil {
				fds = append(fds, rights...)
			}
		}
	}
	if len(fds) != 3 {
		for _, f := range fds {
			syscall.Close(f)
		}
		return shimSpec{}, [3]int{}, fmt.Errorf("receive job: %d descriptors, want 3", len(fds))
	}
	closeFDs := func() {
		for _, f := range fds {
			syscall.Close(f)
		}
	}
	if _, err := io.ReadFull(control, hdr[n:]); err != nil {
		closeFDs()
		return shimSpec{}, [3]int{}, fmt.Errorf("receive job: %w", err)
	}
	size := binary.BigEndian.Uint32(hdr[:])
	if size > maxShimSpec {
		closeFDs()
		return shimSpec{}, [3]int{}, fmt.Errorf("receive job: spec of %d bytes", size)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(control, body); err != nil {
		closeFDs()
		return shimSpec{}, [3]int{}, fmt.Errorf("receive job: %w", err)
	}
	var spec shimSpec
	if err := json.Unmarshal(body, &spec); err != nil || spec.Path == "" || len(spec.Argv) == 0 {
		closeFDs()
		return shimSpec{}, [3]int{}, fmt.Errorf("receive job: malformed spec (%v)", err)
	}
	return spec, [3]int{fds[0], fds[1], fds[2]}, nil
}

// setProcName sets the name (comm) /proc shows for the process, best
// effort: with prctl when on the main thread, else through /proc/self/comm.
func setProcName(name string) {
	if syscall.Gettid() == os.Getpid() {
		if p, err := unix.BytePtrFromString(name); err == nil {
			unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(p)), 0, 0, 0)
		}
		return
	}
	os.WriteFile("/proc/self/comm", []byte(name), 0)
}

type shim struct {
	status        *os.File
	control       *os.File
	self          int
	procs         *procScanner
	chld          chan os.Signal
	fwd           chan os.Signal
	warnSubreaper error // why the shim is not a subreaper, if it is not
	// adj raises the shim's oom_score_adj (shimOOMScoreAdj, from the
	// agent) to workloadOOMScoreAdj around a command's start (oomadj.go).
	adj     *oomScoreAdj
	warnAdj error // why adj is nil, if it is

	// The current job.
	main       int
	mainDone   bool
	mainStatus syscall.WaitStatus
}

func (sh *shim) report(format string, args ...any) {
	fmt.Fprintf(sh.status, format+"\n", args...)
}

// reportIdle names the shim a spare again and then sends the exit line
// that says it is idle (after pidLine, "" or a LatePID "pid N" line):
// the agent makes the job's end visible on that line, so whoever sees the
// end finds the shim already named as what it is.
func (sh *shim) reportIdle(pidLine string, ws uint32) {
	setProcName(shimNameSpare)
	sh.report("%sexit %d idle", pidLine, ws)
}

// run runs one job with stdio as its fds 0-2. It reports whether the shim
// may take another: not when the agent is gone or part of the tree
// survived. The shim keeps no copy of the job's stdio once the command
// runs, so the agent sees the end of its output as soon as the job's
// processes are gone, not only after the shim's exit report.
func (sh *shim) run(spec shimSpec, stdio [3]int) bool {
	if sh.warnSubreaper != nil {
		sh.report("warn cannot become a child subreaper (%v): escaped descendants cannot be tracked", sh.warnSubreaper)
	}
	if sh.warnAdj != nil {
		sh.report("warn the command starts with the shim's out-of-memory priority: %v", sh.warnAdj)
	}
	sh.main, sh.mainDone, sh.mainStatus = 0, false, 0
	drainSignals(sh.chld) // the last job's; a signal to an idle shim is not this job's
	drainSignals(sh.fwd)
	// The control reader is up before the command starts, so that it does
	// not compete with the command's start for the CPU.
	ctl := make(chan byte, 4)
	go readShimControl(sh.control, ctl)
	sys := &syscall.SysProcAttr{Setpgid: true}
	if spec.TTY {
		sys = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	}
	pid, err := sh.adj.fork(workloadOOMScoreAdj, func() (int, error) {
		return syscall.ForkExec(spec.Path, spec.Argv, &syscall.ProcAttr{
			Dir:   spec.Dir,
			Env:   spec.Env,
			Files: []uintptr{uintptr(stdio[0]), uintptr(stdio[1]), uintptr(stdio[2])},
			Sys:   sys,
		})
	})
	if err != nil {
		code := 126
		if errors.Is(err, syscall.ENOENT) {
			code = 127
		}
		syscall.Write(stdio[2], fmt.Appendf(nil, "genesis-agent: %s: %v\n", spec.Argv[0], err))
		closeStdio(stdio)
		if sh.stopControl(ctl) {
			sh.report("exit %d", code<<8)
			return false
		}
		sh.reportIdle("", uint32(code<<8))
		return true
	}
	closeStdio(stdio)
	sh.main = pid
	if !spec.LatePID {
		sh.report("pid %d", pid)
	}

	terminating, killed, agentGone := false, false, false
	for !sh.mainDone {
		select {
		case <-sh.chld:
			sh.reap()
		case sig := <-sh.fwd:
			// Like a sync job, the command's group gets forwarded signals.
			syscall.Kill(-pid, sig.(syscall.Signal))
		case c := <-ctl:
			switch c {
			case shimCmdTerm:
				terminating = true
				sh.signalTree(syscall.SIGTERM)
			case 0:
				agentGone = true
				fallthrough
			default:
				killed = true
				sh.killTree(time.Now().Add(shimKillWithin))
			}
		}
	}
	if terminating && !killed {
		// The rest of the tree got SIGTERM too: it has until the agent's
		// SIGKILL (at the end of the grace) to finish on its own.
		if sh.awaitTree(ctl) == 0 {
			agentGone = true
		}
	}
	left := sh.killTree(time.Now().Add(shimKillWithin))
	if left > 0 {
		sh.report("warn %d processes of the job survived SIGKILL for %v", left, shimKillWithin)
	}
	if sh.stopControl(ctl) {
		agentGone = true
	}
	idle := left == 0 && !agentGone
	sh.main = 0
	pidLine := ""
	if spec.LatePID {
		pidLine = fmt.Sprintf("pid %d\n", pid)
	}
	if idle {
		sh.reportIdle(pidLine, uint32(sh.mainStatus))
	} else {
		sh.report("%sexit %d", pidLine, uint32(sh.mainStatus))
	}
	return idle
}

// stopControl stops the job's control reader, whose channel is ctl: the
// socket carries the next job. It reports whether the agent is gone.
func (sh *shim) stopControl(ctl <-chan byte) (agentGone bool) {
	sh.control.SetReadDeadline(time.Now())
	for c := range ctl {
		if c == 0 {
			agentGone = true
		}
	}
	sh.control.SetReadDeadline(time.Time{})
	return agentGone
}

// closeStdio closes the shim's copies of a job's stdio.
func closeStdio(stdio [3]int) {
	for _, fd := range stdio {
		syscall.Close(fd)
	}
}

// readShimControl forwards control bytes until the control socket's read
// deadline passes, then closes out; 0 means the agent is gone.
func readShimControl(f *os.File, out chan<- byte) {
	defer close(out)
	b := make([]byte, 16)
	for {
		n, err := f.Read(b)
		for _, c := range b[:n] {
			out <- c
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return
		}
		if err != nil {
			out <- 0
			return
		}
	}
}

// drainSignals empties a signal channel.
func drainSignals(c chan os.Signal) {
	for {
		select {
		case <-c:
		default:
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

// awaitTree waits until the tree is empty or the agent asks to kill it;
// it returns the control byte that ended the wait (0: the agent is gone),
// or shimCmdTerm when the tree emptied.
func (sh *shim) awaitTree(ctl <-chan byte) byte {
	for sh.reap() {
		select {
		case <-sh.chld:
		case c := <-ctl:
			if c != shimCmdTerm {
				return c
			}
		}
	}
	return shimCmdTerm
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
