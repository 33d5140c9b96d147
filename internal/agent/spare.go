package agent

import (
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
// for. The agent keeps one idle shim (a spare) waiting on its control
// socket; a job start hands it the job (shim.go describes the exchange) and
// starts the next spare in the background. An idle spare holds no job's
// data and runs nothing: it only waits, so retiring it is closing its
// socket.

// spareShim is a shim process waiting for its job.
type spareShim struct {
	pid    int
	done   <-chan exitInfo // the supervisor's report of its exit
	status *os.File        // read end of its status pipe
	ctl    *os.File        // the agent's end of its control socket (non-blocking)
}

// spareSet holds the idle spare.
type spareSet struct {
	mu      sync.Mutex
	idle    *spareShim
	filling bool
	closed  bool
}

// startSpare starts an idle shim.
func (s *Server) startSpare() (sp *spareShim, err error) {
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
	pid, done, err := s.sup.start(s.shimPath, shimArgs(), attr)
	if err != nil {
		if errors.Is(err, errdefs.ErrUnavailable) {
			return nil, err
		}
		return nil, fmt.Errorf("start the job shim %s: %v: %w", s.shimPath, err, errdefs.ErrInternal)
	}
	return &spareShim{pid: pid, done: done, status: statR, ctl: ctl}, nil
}

// alive reports whether the spare has not exited (a signal may have ended
// it while it waited). A dead spare's exit report is consumed.
func (sp *spareShim) alive() bool {
	select {
	case <-sp.done:
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

// takeSpare returns a shim for a job: the idle spare, or a new one when
// there is none (or it died). The caller starts the next spare
// (refillSpare) once its job runs, so that the two do not compete.
func (s *Server) takeSpare() (*spareShim, error) {
	s.spares.mu.Lock()
	sp := s.spares.idle
	s.spares.idle = nil
	s.spares.mu.Unlock()
	if sp != nil {
		if sp.alive() {
			return sp, nil
		}
		sp.retire()
	}
	return s.startSpare()
}

// refillSpare starts a spare in the background unless one is idle or
// being started.
func (s *Server) refillSpare() {
	s.spares.mu.Lock()
	defer s.spares.mu.Unlock()
	if s.spares.closed || s.spares.filling || s.spares.idle != nil {
		return
	}
	s.spares.filling = true
	go func() {
		sp, err := s.startSpare()
		s.spares.mu.Lock()
		s.spares.filling = false
		if err == nil && !s.spares.closed && s.spares.idle == nil {
			s.spares.idle, sp = sp, nil
		}
		s.spares.mu.Unlock()
		if sp != nil {
			sp.retire()
		}
		if err != nil && !errors.Is(err, errdefs.ErrUnavailable) {
			s.log.Warn("starting a spare job shim", "err", err)
		}
	}()
}

// closeSpares retires the idle spare and starts no more.
func (s *Server) closeSpares() {
	s.spares.mu.Lock()
	sp := s.spares.idle
	s.spares.idle = nil
	s.spares.closed = true
	s.spares.mu.Unlock()
	if sp != nil {
		sp.retire()
	}
}
