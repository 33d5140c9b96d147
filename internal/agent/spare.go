package agent

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
)

// A background job's shim is started before the job: starting a process
// and its Go runtime costs milliseconds that a job start should not wait
// for. The agent keeps idle shims (spares) waiting on their control
// sockets; a job start hands one the job (shim.go describes the exchange).
// A shim whose job ended cleanly goes back to the idle set, so a steady
// stream of jobs reuses warm shims and starts no process but the jobs'
// own. Only when a job start found the set empty is another spare started,
// a little later and in the background, so that the start does not compete
// with the job it is for. An idle spare holds no job's data and runs
// nothing: it only waits, so retiring it is closing its socket.

// maxIdleSpares bounds the idle shims kept: one that comes back to a full
// set is retired.
const maxIdleSpares = 2

// spareShim is a shim process waiting for its job.
type spareShim struct {
	pid    int
	done   <-chan exitInfo // the supervisor's report of its exit
	status *os.File        // read end of its status pipe
	lines  *bufio.Reader   // status lines; kept across the shim's jobs
	ctl    *os.File        // the agent's end of its control socket (non-blocking)
	dead   bool            // its exit report was consumed
	gen    uint64          // the spare set's generation when it was started
}

// spareSet holds the idle spares, the most recently used last.
type spareSet struct {
	mu      sync.Mutex
	idle    []*spareShim
	added   uint64 // counts shims put into idle
	gen     uint64 // bumped by retireSpares: older shims are not kept
	filling bool
	closed  bool
}

// startSpare starts an idle shim.
func (s *Server) startSpare() (sp *spareShim, err error) {
	s.spares.mu.Lock()
	gen := s.spares.gen
	s.spares.mu.Unlock()
	statR, statW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("shim status pipe: %v: %w", err, errdefs.ErrInternal)
	}
	defer statW.Close()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		statR.Close()
		return nil, fmt.Errorf("shim control socket: %v: %w", err, errdefs.ErrInternal)
	}
	theirs := os.NewFile(uintptr(fds[1]), "shim-control")
	defer theirs.Close()
	syscall.SetNonblock(fds[0], true) // so that writes honour deadlines
	ctl := os.NewFile(uintptr(fds[0]), "shim-control")
	defer func() {
		if err != nil {
			statR.Close()
			ctl.Close()
		}
	}()
	attr := &syscall.ProcAttr{
		Dir: "/",
		Env: []string{shimEnvVar + "=1"},
		// Until its job arrives the shim has nothing to read or say on
		// stdio; its stderr is the agent's, so a crash shows in the log.
		Files: []uintptr{s.devNull.Fd(), s.devNull.Fd(), 2, statW.Fd(), theirs.Fd()},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	}
	// Quiet until it is handed a job: an idle shim gets no forwarded signal.
	pid, done, err := s.sup.start(s.shimPath, shimArgs(), attr, true, shimOOMScoreAdj)
	if err != nil {
		if errors.Is(err, errdefs.ErrUnavailable) {
			return nil, err
		}
		return nil, fmt.Errorf("start the job shim %s: %v: %w", s.shimPath, err, errdefs.ErrInternal)
	}
	return &spareShim{pid: pid, done: done, status: statR, lines: bufio.NewReaderSize(statR, 512), ctl: ctl, gen: gen}, nil
}

// alive reports whether the shim has not exited (a signal may have ended
// it while it waited). A dead shim's exit report is consumed.
func (sp *spareShim) alive() bool {
	if sp.dead {
		return false
	}
	select {
	case <-sp.done:
		sp.dead = true
		return false
	default:
		return true
	}
}

// retire ends an unused spare: at end of file on its socket it exits.
func (sp *spareShim) retire() {
	sp.ctl.Close()
	sp.status.Close()
}

// hand gives the spare its job: spec and the job's stdin, stdout and
// stderr, which it installs as its fds 0-2.
func (sp *spareShim) hand(spec shimSpec, stdio [3]*os.File, deadline time.Time) error {
	body, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("encode the job for its shim: %v: %w", err, errdefs.ErrInternal)
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(body)))
	// Fd puts the job's ends in blocking mode, which is what the job needs.
	rights := syscall.UnixRights(int(stdio[0].Fd()), int(stdio[1].Fd()), int(stdio[2].Fd()))
	rc, err := sp.ctl.SyscallConn()
	if err != nil {
		return fmt.Errorf("shim control socket: %v: %w", err, errdefs.ErrInternal)
	}
	if err := sp.ctl.SetWriteDeadline(deadline); err != nil {
		return fmt.Errorf("shim control socket: %v: %w", err, errdefs.ErrInternal)
	}
	var serr error
	if err := rc.Write(func(fd uintptr) bool {
		var n int
		n, serr = syscall.SendmsgN(int(fd), hdr[:], rights, nil, syscall.MSG_NOSIGNAL)
		if serr == syscall.EAGAIN {
			return false
		}
		if serr == nil && n != len(hdr) {
			serr = fmt.Errorf("short send of %d bytes", n)
		}
		return true
	}); err != nil {
		serr = err
	}
	if serr == nil {
		_, serr = sp.ctl.Write(body)
	}
	if serr != nil {
		return fmt.Errorf("hand the job to shim %d: %v: %w", sp.pid, serr, errdefs.ErrInternal)
	}
	return nil
}

// takeSpare returns a shim for a job: the most recently used idle spare, or
// a new one when there is none alive. Taking the last idle spare schedules
// a refill (refillSpare).
func (s *Server) takeSpare() (*spareShim, error) {
	for {
		s.spares.mu.Lock()
		var sp *spareShim
		if n := len(s.spares.idle); n > 0 {
			sp = s.spares.idle[n-1]
			s.spares.idle = s.spares.idle[:n-1]
			if n == 1 {
				added := s.spares.added
				time.AfterFunc(s.cfg.SpareRefillDelay, func() { s.refillSpareUnless(added) })
			}
		}
		s.spares.mu.Unlock()
		if sp == nil {
			return s.startSpare()
		}
		if sp.alive() {
			return sp, nil
		}
		sp.retire()
	}
}

// returnSpare puts a shim whose job ended back into the idle set, or
// retires it when the set is full or closed, or when a signal was
// forwarded to it during its job: that one may cross the job's end and
// reach the shim's next job.
func (s *Server) returnSpare(sp *spareShim) {
	signalled := s.sup.setQuiet(sp.pid, true)
	s.spares.mu.Lock()
	keep := !signalled && !s.spares.closed && len(s.spares.idle) < maxIdleSpares && sp.gen == s.spares.gen
	if keep {
		s.spares.idle = append(s.spares.idle, sp)
		s.spares.added++
	}
	s.spares.mu.Unlock()
	if !keep {
		sp.retire()
	}
}

// refillSpareUnless is refillSpare unless a shim was put into the idle set
// since added was read: then the set was not empty for long, as when jobs
// run one after another, and a new process would only cost CPU.
func (s *Server) refillSpareUnless(added uint64) {
	s.spares.mu.Lock()
	again := s.spares.added != added
	s.spares.mu.Unlock()
	if !again {
		s.refillSpare()
	}
}

// firstSpareAfter is how long after it listens the agent starts its first
// spare shim if no request (other than a ping) has ended before.
const firstSpareAfter = 250 * time.Millisecond

// firstSpareLater starts the first spare shim SpareRefillDelay after the
// agent has answered a request other than a ping (a new sandbox's first
// command: its answer is out by then), or firstSpareAfter after it
// listens, whichever comes first. Started with the agent, the shim (a
// second start of the agent's binary: under gVisor tens of milliseconds
// of CPU) ran beside the agent's own start and the first exec, on the
// critical path of a cold create; the first exec runs without a shim (the
// direct slot), and a job that comes before the spare starts its shim
// itself, as it would have while that spare was starting.
func (s *Server) firstSpareLater() {
	time.AfterFunc(firstSpareAfter, func() { s.firstSpare.Do(s.refillSpare) })
}

// firstSpareSoon is firstSpareLater's start after a first request.
func (s *Server) firstSpareSoon() { time.AfterFunc(s.cfg.SpareRefillDelay, s.refillSpare) }

// refillSpare starts a spare in the background unless one is idle or
// being started. A start that a reset overtook (retireSpares bumped the
// generation while the shim started, and the sweep may have killed it)
// is retired and started again for the new generation: the reset's own
// refill (primeAfterReset) found this one filling and left the set to it.
func (s *Server) refillSpare() {
	s.spares.mu.Lock()
	defer s.spares.mu.Unlock()
	if s.spares.closed || s.spares.filling || len(s.spares.idle) > 0 {
		return
	}
	s.spares.filling = true
	go func() {
		for {
			sp, err := s.startSpare()
			s.spares.mu.Lock()
			stale := err == nil && sp.gen != s.spares.gen
			if err == nil && !stale && !s.spares.closed && len(s.spares.idle) < maxIdleSpares {
				s.spares.idle, sp = append(s.spares.idle, sp), nil
				s.spares.added++
			}
			again := stale && !s.spares.closed && len(s.spares.idle) == 0
			s.spares.filling = again
			s.spares.mu.Unlock()
			if sp != nil {
				sp.retire()
			}
			if err != nil && !errors.Is(err, errdefs.ErrUnavailable) {
				s.log.Warn("starting a spare job shim", "err", err)
			}
			if !again {
				return
			}
		}
	}()
}

// primeAfterReset starts a spare shim in the background once a reset has
// swept the sandbox (its last step), so that the next holder's first job
// finds one, as a new sandbox's first holder's does (firstSpareLater),
// rather than starting its own shim on its path. A refill timer of before
// the reset may have started a shim during it, which the sweep may have
// killed: the generation is bumped again here, so that such a shim is
// retired rather than kept, and its refill starts a new one. The new
// shim is of the new generation and no process the previous holder could
// reach. The reset's answer does not wait for it.
func (s *Server) primeAfterReset() {
	s.retireSpares()
	s.refillSpare()
}

// retireAndWait retires a shim that is not reused and waits until it has
// exited (and was reaped), so that a job's end leaves no process of it
// behind; one that does not exit in time is killed.
func (s *Server) retireAndWait(sp *spareShim) {
	sp.retire()
	if sp.dead {
		return
	}
	t := time.NewTimer(retireWithin)
	defer t.Stop()
	select {
	case <-sp.done:
		return
	case <-t.C:
	}
	syscall.Kill(sp.pid, syscall.SIGKILL)
	select {
	case <-sp.done:
	case <-time.After(retireWithin):
		s.log.Warn("retired job shim did not exit", "pid", sp.pid)
	}
}

// retireWithin bounds the wait for a retired shim to exit.
const retireWithin = 2 * time.Second

// retireSpares retires every idle shim and waits for them to exit; shims
// started or used before the call are not kept afterwards (those of
// running jobs are retired when their jobs end), and no refill that was
// due starts one. A reset uses it so that no process the previous holder
// could reach runs the next holder's jobs.
func (s *Server) retireSpares() {
	s.spares.mu.Lock()
	idle := s.spares.idle
	s.spares.idle = nil
	s.spares.gen++
	s.spares.added++
	s.spares.mu.Unlock()
	for _, sp := range idle {
		s.retireAndWait(sp)
	}
}

// closeSpares retires the idle spares and starts no more.
func (s *Server) closeSpares() {
	s.spares.mu.Lock()
	idle := s.spares.idle
	s.spares.idle = nil
	s.spares.closed = true
	s.spares.mu.Unlock()
	for _, sp := range idle {
		sp.retire()
	}
}
