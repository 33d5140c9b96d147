package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// Every process tree the agent starts lives under a subreaper, so that the
// whole tree can be found and killed whatever its processes do with
// sessions and process groups: an orphan is reparented to the nearest
// subreaper above it. Shims (shim.go) are such subreapers, one per job. The
// agent is one too: it is the sandbox's init (or a child subreaper when it
// runs as a host process), and the kernel — Linux and gVisor alike — hands
// every orphan that has no shim above it to the agent's leader thread,
// where /proc/self/task/PID/children lists it.
//
// The agent can tell one tree's orphans from everything else's when that
// tree is the only one whose orphans can reach it: every other tree runs
// under a shim. So one synchronous exec at a time runs directly, with the
// agent as its subreaper (the direct slot), and the others borrow warm
// shims. The direct slot saves the hand-over to a shim and back, which
// costs about 3 ms under gVisor, where each wake-up of another process is
// expensive. Its containment is the shim's: at the timeout the command's
// tree, orphans included, is signalled; when the command exits, whatever is
// left of its tree is killed; and a sandbox's exec leaves no process
// behind, daemonized or not.
//
// An orphan the agent adopted before a direct exec started — from a tree
// whose shim was killed from inside the sandbox — is not that exec's and is
// left alone; a reset ends it.

// directSlot is the agent's one shim-less exec slot.
type directSlot struct {
	// children is the agent leader thread's children file, kept open: a
	// read at offset 0 lists the children afresh (one pread, 1 µs under
	// runc and 23 µs under gVisor, against 9 and 90 µs to open, read and
	// close it). nil when the agent cannot use the slot (not a subreaper,
	// or no such file). Read under the supervisor's lock, as is buf.
	children *os.File
	buf      []byte
	self     int // the agent's pid, which the slot's tree is below
	busy     atomic.Bool
	scan     *procScanner // used only by the slot's holder
	// strays is set once a shim ended without emptying its tree (it died,
	// or processes survived its SIGKILL): from then on the agent may hold
	// orphans that are no exec's, and a direct exec lists them first.
	strays atomic.Bool
}

// noteStrays records that the agent may have adopted orphans outside any
// direct exec.
func (s *Server) noteStrays() { s.direct.strays.Store(true) }

// initDirect enables the slot when the agent is init or a child subreaper
// and the kernel lists its leader thread's children.
func (s *Server) initDirect(subreaper bool) {
	if !subreaper {
		return
	}
	self := strconv.Itoa(os.Getpid())
	path := "/proc/" + self + "/task/" + self + "/children"
	f, err := os.Open(path)
	if err == nil {
		_, err = syscall.Pread(int(f.Fd()), make([]byte, 64), 0)
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		s.log.Info("synchronous execs all run under shims: the agent's children are not listed", "path", path, "err", err)
		return
	}
	s.direct.children, s.direct.buf, s.direct.self = f, make([]byte, 4096), os.Getpid()
	s.direct.scan = newProcScanner("/proc")
}

// takeDirect claims the direct slot; releaseDirect gives it back.
func (s *Server) takeDirect() bool {
	return s.direct.children != nil && s.direct.busy.CompareAndSwap(false, true)
}

func (s *Server) releaseDirect() { s.direct.busy.Store(false) }

// runDirect runs j as the direct slot's exec (see above). The caller holds
// the slot.
func (s *Server) runDirect(ctx context.Context, j *job) (agentproto.ExecResult, error) {
	stdin := s.devNull
	var stdinW *os.File
	var toClose []*os.File
	defer func() {
		for _, f := range toClose {
			f.Close()
		}
	}()
	if len(j.stdin) > 0 {
		r, w, err := os.Pipe()
		if err != nil {
			return agentproto.ExecResult{}, fmt.Errorf("stdin pipe: %v: %w", err, errdefs.ErrInternal)
		}
		stdin, stdinW = r, w
		toClose = append(toClose, r, w)
	}
	// The child's ends are plain descriptors, closed here once the child
	// has them (or on the way out if it never started).
	childEnds := [2]int{-1, -1}
	defer func() {
		for _, fd := range childEnds {
			if fd >= 0 {
				syscall.Close(fd)
			}
		}
	}()
	outR, outW, err := outputPipe()
	if err != nil {
		return agentproto.ExecResult{}, fmt.Errorf("stdout pipe: %v: %w", err, errdefs.ErrInternal)
	}
	toClose, childEnds[0] = append(toClose, outR), outW
	errR, errW, err := outputPipe()
	if err != nil {
		return agentproto.ExecResult{}, fmt.Errorf("stderr pipe: %v: %w", err, errdefs.ErrInternal)
	}
	toClose, childEnds[1] = append(toClose, errR), errW

	// Fd puts stdin's child end in blocking mode, which is what the child
	// needs; the output ends are blocking already.
	attr := &syscall.ProcAttr{
		Dir:   j.dir,
		Env:   j.env,
		Files: []uintptr{stdin.Fd(), uintptr(outW), uintptr(errW)},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	}
	oomBefore, oomOK := s.oom.read()
	// Orphans adopted before the command starts are not its own. There
	// are none unless a shim left some.
	var before map[int]bool
	s.sup.withKnown(func(known func(int) bool) {
		if !s.direct.strays.Load() {
			return
		}
		for _, pid := range s.adopted(known) {
			if before == nil {
				before = map[int]bool{}
			}
			before[pid] = true
		}
	})
	start := time.Now()
	pid, done, err := s.sup.start(j.argv0, j.argv, attr, false, workloadOOMScoreAdj)
	if err != nil {
		if errors.Is(err, errdefs.ErrUnavailable) {
			return agentproto.ExecResult{}, err
		}
		code := 126
		if errors.Is(err, syscall.ENOENT) {
			code = 127
		}
		return runErrorResult(&runError{code: code, msg: fmt.Sprintf("%s: %v", j.argv[0], err)}, time.Since(start)), nil
	}
	// The parent's copies of the child's ends must go now, or EOF never comes.
	for i, fd := range childEnds {
		syscall.Close(fd)
		childEnds[i] = -1
	}
	if stdinW != nil {
		stdin.Close()
	}

	stdout := capture{max: j.maxOut}
	stderr := capture{max: j.maxOut}
	// The command's exit closes its ends of both pipes just before it
	// becomes a zombie, so the reader that sees the second end of output
	// reaps it at once: the status is dispatched without waiting for
	// SIGCHLD to travel through the runtime's signal goroutine to the
	// reaper's (several thread wake-ups, each costly under gVisor). When
	// the output ends earlier (closed by the command, or the exit not
	// reapable yet) this finds nothing and SIGCHLD does it as before;
	// orphans of the command are the reaper's too.
	var wg sync.WaitGroup
	var open atomic.Int32
	open.Store(2)
	drain := func(c *capture, r *os.File) {
		defer wg.Done()
		b := s.getBuf()
		c.drain(r, b)
		s.putBuf(b)
		if open.Add(-1) == 0 {
			s.sup.reapPid(pid)
		}
	}
	wg.Add(2)
	go drain(&stdout, outR)
	go drain(&stderr, errR)
	if stdinW != nil {
		go func(data []byte) {
			stdinW.Write(data) // EPIPE when the job does not read it all: fine
			stdinW.Close()
		}(j.stdin)
	}

	var (
		reason   string
		sentKill bool
		timeout  <-chan time.Time
		grace    <-chan time.Time
		ctxDone  = ctx.Done()
		ei       exitInfo
	)
	if j.timeout > 0 {
		t := time.NewTimer(j.timeout)
		defer t.Stop()
		timeout = t.C
	}
	kill := func() {
		sentKill = true
		s.signalDirectTree(pid, before, syscall.SIGKILL)
	}
wait:
	for {
		select {
		case ei = <-done:
			break wait
		case <-timeout:
			timeout = nil
			reason = agentproto.ExitReasonTimeout
			if j.grace > 0 {
				s.signalDirectTree(pid, before, syscall.SIGTERM)
				g := time.NewTimer(j.grace)
				defer g.Stop()
				grace = g.C
			} else {
				kill()
			}
		case <-grace:
			grace = nil
			kill()
		case <-ctxDone:
			ctxDone = nil
			if reason == "" {
				reason = agentproto.ExitReasonCanceled
			}
			kill()
		}
	}
	// Whatever is left of the tree goes now, as under a shim.
	if left := s.sweepDirect(before, time.Now().Add(shimKillWithin)); left > 0 {
		s.log.Warn("processes of an exec survived SIGKILL", "pid", pid, "left", left, "within", shimKillWithin)
	}
	// The tree is gone, so the pipes end as soon as the kernel buffers are
	// read; processes that survived SIGKILL may hold them, which the
	// deadline bounds.
	if open.Load() > 0 { // the usual case has both at their end already
		drainBy := time.Now().Add(s.cfg.DrainTimeout)
		outR.SetReadDeadline(drainBy)
		errR.SetReadDeadline(drainBy)
	}
	wg.Wait()

	code, exitReason, sig := s.classifyExit(ei.status, sentKill, oomBefore, oomOK)
	if reason != "" {
		exitReason = reason
	}
	return agentproto.ExecResult{
		ExitCode:        code,
		ExitReason:      exitReason,
		Signal:          sig,
		Stdout:          stdout.bytes(),
		Stderr:          stderr.bytes(),
		StdoutBytes:     stdout.total,
		StderrBytes:     stderr.total,
		StdoutTruncated: stdout.truncated,
		StderrTruncated: stderr.truncated,
		DurationMS:      ei.at.Sub(start).Milliseconds(),
		PID:             pid,
	}, nil
}

// signalDirectTree sends sig to the direct exec's tree: the command's
// group, every process below the command, and every orphan the agent
// adopted since the command started (those in before are older) with
// everything below it.
func (s *Server) signalDirectTree(main int, before map[int]bool, sig syscall.Signal) {
	syscall.Kill(-main, sig)
	s.sup.withKnown(func(known func(int) bool) {
		procs, err := s.direct.scan.scan()
		if err != nil {
			return
		}
		for _, p := range directTree(procs, s.direct.self, main, spared(known, before), s.direct.scan.kids) {
			if !p.zombie() {
				syscall.Kill(p.pid, sig)
			}
		}
	})
}

// sweepDirect SIGKILLs the orphans the agent adopted since the direct exec
// started (those in before are older), and everything below them, until
// none is alive or deadline passes; it returns how many processes are left
// alive. When the agent has no child it did not start — the common case —
// this costs one read of its children file.
func (s *Server) sweepDirect(before map[int]bool, deadline time.Time) int {
	self := s.direct.self
	for {
		alive := 0
		s.sup.withKnown(func(known func(int) bool) {
			known = spared(known, before)
			if len(s.adopted(known)) == 0 {
				return
			}
			procs, err := s.direct.scan.scan()
			if err != nil {
				return
			}
			for _, p := range directTree(procs, self, 0, known, s.direct.scan.kids) {
				if !p.zombie() {
					alive++
					syscall.Kill(p.pid, syscall.SIGKILL)
				}
			}
		})
		if alive == 0 || time.Now().After(deadline) {
			return alive
		}
		time.Sleep(2 * time.Millisecond) // for the kills to land; the supervisor reaps
	}
}

// adopted returns the children of the agent's leader thread that known
// does not name: orphans, and adopted zombies not reaped yet. Called under
// the supervisor's lock, so that a child being started is either unlisted
// or known. An unreadable children file yields -1, so that the caller
// scans.
func (s *Server) adopted(known func(int) bool) []int {
	d := &s.direct
	var b []byte
	for {
		n, err := syscall.Pread(int(d.children.Fd()), d.buf, 0)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return []int{-1}
		}
		if n < len(d.buf) {
			b = d.buf[:n]
			break
		}
		d.buf = make([]byte, 2*len(d.buf)) // a long list: read it whole
	}
	var out []int
	for f := range bytes.FieldsSeq(b) {
		pid, err := strconv.Atoi(string(f))
		if err == nil && !known(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// spared extends known with the pids in before: processes that are not the
// direct exec's to kill.
func spared(known func(int) bool, before map[int]bool) func(int) bool {
	if len(before) == 0 {
		return known
	}
	return func(pid int) bool { return before[pid] || known(pid) }
}

// directTree returns, from procs, the process main (if not 0) and
// everything below it, and every child of self that known does not name
// (an adopted orphan) with everything below it. kids is scratch space.
func directTree(procs []procEntry, self, main int, known func(int) bool, kids map[int][]int) []procEntry {
	var out []procEntry
	var roots []int
	for _, p := range procs {
		if p.pid == main || p.ppid == self && p.pid != self && !known(p.pid) {
			out = append(out, p)
			roots = append(roots, p.pid)
		}
	}
	seen := make(map[int]bool, len(out))
	for _, p := range out {
		seen[p.pid] = true
	}
	for _, r := range roots {
		for _, p := range treeBelow(procs, r, kids) {
			if !seen[p.pid] {
				seen[p.pid] = true
				out = append(out, p)
			}
		}
	}
	return out
}

// outputPipe makes a pipe for a child's output: the read end an *os.File
// in the runtime's poller, the write end a plain blocking descriptor to
// hand to the child, which the caller closes with syscall.Close once the
// child has it. Both are close-on-exec (the child gets its copy by dup2).
// Unlike os.Pipe and then Fd, the write end never enters the poller only
// to leave it again, and the read end's flags are known (O_RDONLY; close-
// on-exec is a descriptor flag), so one F_SETFL makes it non-blocking
// without syscall.SetNonblock's F_GETFL: pipe2, F_SETFL and os.NewFile's
// F_GETFL, 3 system calls before the poller's epoll_ctl where os.Pipe and
// Fd make 12, and 1 instead of 3 to close the write end — each a trap
// into the sentry under gVisor (≈ 3–25 µs each, the busier the host the
// more).
func outputPipe() (r *os.File, w int, err error) {
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		return nil, -1, err
	}
	if _, err := unix.FcntlInt(uintptr(p[0]), unix.F_SETFL, unix.O_NONBLOCK); err != nil {
		syscall.Close(p[0])
		syscall.Close(p[1])
		return nil, -1, err
	}
	return os.NewFile(uintptr(p[0]), "|0"), p[1], nil
}

// capture keeps the first max bytes of a direct exec's output stream and
// counts all of it.
type capture struct {
	max       int64
	buf       []byte
	total     int64
	truncated bool
}

func (c *capture) drain(r *os.File, scratch []byte) {
	lr := &lateReader{f: r, limit: pendingLimit}
	for {
		n, err := lr.Read(scratch)
		if n > 0 {
			c.total += int64(n)
			keep := int64(n)
			if room := c.max - int64(len(c.buf)); keep > room {
				keep = room
				c.truncated = true
			}
			if keep > 0 {
				c.buf = append(c.buf, scratch[:keep]...)
			}
		}
		if err != nil {
			return
		}
	}
}

// bytes returns the kept output, never nil.
func (c *capture) bytes() []byte {
	if c.buf == nil {
		return []byte{}
	}
	return c.buf
}
