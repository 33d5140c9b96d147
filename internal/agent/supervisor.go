package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"genesis.dev/sandbox/internal/errdefs"
)

// exitInfo is what the reaper learns about a finished child.
type exitInfo struct {
	status syscall.WaitStatus
	at     time.Time
}

// supervisor starts child processes and is the only waiter for children in
// this process. Starting a process and registering its pid happen under mu,
// and the reaper dispatches under mu, so a child that exits before it is
// registered can never be mistaken for an unknown orphan.
type supervisor struct {
	log *slog.Logger

	mu      sync.Mutex
	waiters map[int]chan exitInfo // pid -> result, buffered(1)
	// quiet holds the registered processes that run no job now (job
	// shims while idle): signalJobs passes them over. hit holds those
	// signalJobs signalled since they last stopped being quiet.
	quiet  map[int]bool
	hit    map[int]bool
	closed bool

	sigchld chan os.Signal
	// adj raises the agent's oom_score_adj around each start (oomadj.go);
	// nil if the file is unusable.
	adj  *oomScoreAdj
	stop chan struct{}
	done chan struct{}
}

func newSupervisor(log *slog.Logger) *supervisor {
	return &supervisor{
		log:     log,
		waiters: make(map[int]chan exitInfo),
		quiet:   make(map[int]bool),
		hit:     make(map[int]bool),
	}
}

// run makes the process a child subreaper and starts the reaper goroutine.
// It reports whether the process is init or a child subreaper: whether
// every orphan without a shim above it comes to this process.
func (s *supervisor) run() (subreaper bool) {
	subreaper = true
	if os.Getpid() != 1 {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			s.log.Warn("cannot become child subreaper; orphans of jobs will not be reaped here", "err", err)
			subreaper = false
		}
	}
	s.sigchld = make(chan os.Signal, 1)
	s.stop = make(chan struct{})
	s.done = make(chan struct{})
	signal.Notify(s.sigchld, syscall.SIGCHLD)
	go s.reapLoop()
	return subreaper
}

// withKnown calls fn with a test for the pids this supervisor started and
// waits for, under its lock: no child is started or dispatched meanwhile.
func (s *supervisor) withKnown(fn func(known func(pid int) bool)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(func(pid int) bool { _, ok := s.waiters[pid]; return ok })
}

// shutdown stops the reaper goroutine. Registered waiters are left as they are.
func (s *supervisor) shutdown() {
	if s.stop == nil {
		return
	}
	signal.Stop(s.sigchld)
	close(s.stop)
	<-s.done
}

// reapBackstop is how often the reaper reaps without a SIGCHLD.
const reapBackstop = time.Minute

func (s *supervisor) reapLoop() {
	defer close(s.done)
	// SIGCHLD alone drives the loop: the channel holds one pending signal,
	// and a signal that finds it full is covered by the reap that pending
	// one starts (reapAll takes every exited child). The tick is only a
	// backstop against a signal lost below us (the kernel, gVisor's
	// sentry), and slow, since an idle agent must not wake: under gVisor
	// each wake-up costs the sandbox CPU (docs/performance.md, "An idle
	// sandbox's CPU"). The reap itself is idempotent.
	tick := time.NewTicker(reapBackstop)
	defer tick.Stop()
	s.reapAll()
	for {
		select {
		case <-s.stop:
			return
		case <-s.sigchld:
		case <-tick.C:
		}
		s.reapAll()
	}
}

// reapAll collects every exited child without blocking and hands each status
// to the job that registered the pid; unknown children (orphans that were
// reparented to us) are reaped silently. It runs in the reaper goroutine
// and wherever a child's exit is likely (runDirect), possibly at once:
// wait4 hands each status to one caller only.
func (s *supervisor) reapAll() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return // ECHILD or nothing more to reap right now
		}
		if !ws.Exited() && !ws.Signaled() {
			continue // stopped/continued: not reported without WUNTRACED, be safe
		}
		s.dispatch(pid, ws)
	}
}

// reapPid collects pid's exit, if it has one, without blocking, and hands
// it over as reapAll does: one wait4 where reapAll needs a second to learn
// that nothing more is there. Other children are left to the reaper.
func (s *supervisor) reapPid(pid int) {
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || got <= 0 || !ws.Exited() && !ws.Signaled() {
			return // not exited, or reaped already (ECHILD)
		}
		s.dispatch(got, ws)
		return
	}
}

// dispatch hands a reaped child's status to the job that registered its
// pid; an unknown child's (an orphan's) is dropped.
func (s *supervisor) dispatch(pid int, ws syscall.WaitStatus) {
	now := time.Now()
	s.mu.Lock()
	ch, ok := s.waiters[pid]
	if ok {
		delete(s.waiters, pid)
		delete(s.quiet, pid)
		delete(s.hit, pid)
	}
	s.mu.Unlock()
	if ok {
		ch <- exitInfo{status: ws, at: now}
	}
}

// start forks and execs argv0 with attr and registers the child atomically
// with respect to the reaper. The returned channel receives its exit status.
// A quiet child runs no job until setQuiet says it does (see signalJobs).
// The child starts with oom_score_adj oomAdj if that is above the agent's.
func (s *supervisor) start(argv0 string, argv []string, attr *syscall.ProcAttr, quiet bool, oomAdj int) (int, <-chan exitInfo, error) {
	ch := make(chan exitInfo, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, nil, fmt.Errorf("agent is shutting down: %w", errdefs.ErrUnavailable)
	}
	pid, err := s.adj.fork(oomAdj, func() (int, error) { return syscall.ForkExec(argv0, argv, attr) })
	if err != nil {
		return 0, nil, err
	}
	s.waiters[pid] = ch
	if quiet {
		s.quiet[pid] = true
	}
	return pid, ch, nil
}

// setQuiet records whether the registered child pid runs no job (quiet)
// or runs one. It reports whether signalJobs signalled pid since it last
// stopped being quiet.
func (s *supervisor) setQuiet(pid int, quiet bool) (hit bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	hit = s.hit[pid]
	delete(s.hit, pid)
	if _, ok := s.waiters[pid]; !ok {
		return hit
	}
	if quiet {
		s.quiet[pid] = true
	} else {
		delete(s.quiet, pid)
	}
	return hit
}

// signalJobs sends sig to the process group of every registered child that
// runs a job, passing over the quiet ones (idle job shims): a shim learns
// of a signal some time after it arrives (Go delivers signals to a
// channel), so one sent while it waits could reach the next job it is
// given. It returns the number of groups signalled.
func (s *supervisor) signalJobs(sig syscall.Signal) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for pid := range s.waiters {
		if s.quiet[pid] {
			continue
		}
		if err := syscall.Kill(-pid, sig); err == nil {
			s.hit[pid] = true
			n++
		}
	}
	return n
}

// signalAll sends sig to the process group of every registered child, the
// quiet ones too (at shutdown). It returns the number of groups signalled.
func (s *supervisor) signalAll(sig syscall.Signal) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for pid := range s.waiters {
		if err := syscall.Kill(-pid, sig); err == nil {
			n++
		}
	}
	return n
}

// closeStarts refuses further starts and returns the number of running jobs.
func (s *supervisor) closeStarts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return len(s.waiters)
}

// running returns the number of registered jobs that have not exited yet.
func (s *supervisor) running() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiters)
}
