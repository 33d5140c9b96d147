package agent

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// maxJobIDLen bounds a background job's id.
const maxJobIDLen = 128

// shimStartTimeout bounds how long a job start waits for the shim to report
// the command's pid (a loaded machine can be slow to exec).
const shimStartTimeout = 30 * time.Second

// hardKillAfter is how long after asking a shim to kill its tree the agent
// kills the shim and the command's group itself (a shim that was stopped or
// does not respond).
const hardKillAfter = shimKillWithin + 5*time.Second

// bgJob is a background job: a command under a shim, detached from the
// request that started it, with its output kept in memory.
type bgJob struct {
	id      string
	started time.Time
	out     *output
	done    chan struct{} // closed when exit is set

	stdinStreamed bool      // started with stdin_stream
	stdin         *jobStdin // its write end; nil if not streamed or never started

	mu       sync.Mutex
	pid      int      // the command's pid; 0 until known or if it never ran
	shimPID  int      // 0 when there is no shim
	ctl      *os.File // control socket to the shim; nil once the job ended
	reason   string   // timeout or canceled, once requested
	sentKill bool
	sentCtl  bool // a control byte went to the shim: it is not reused
	timers   []*time.Timer
	exit     *agentproto.ExitResult
}

func newBGJob(id string, maxOut int64, now time.Time) *bgJob {
	return &bgJob{id: id, started: now, out: newOutput(maxOut, maxOut), done: make(chan struct{})}
}

// info is the job's JobInfo now.
func (j *bgJob) info() agentproto.JobInfo {
	total, _, trunc := j.out.counts()
	j.mu.Lock()
	defer j.mu.Unlock()
	in := agentproto.JobInfo{
		JobID:           j.id,
		PID:             j.pid,
		Running:         j.exit == nil,
		StdoutBytes:     total[streamStdout],
		StderrBytes:     total[streamStderr],
		StdoutTruncated: trunc[streamStdout],
		StderrTruncated: trunc[streamStderr],
		StdinOpen:       j.stdin != nil && j.stdin.open(),
	}
	if j.exit != nil {
		x := *j.exit
		in.Exit = &x
	}
	return in
}

// exitResult returns the exit once the job has ended.
func (j *bgJob) exitResult() (agentproto.ExitResult, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.exit == nil {
		return agentproto.ExitResult{}, false
	}
	return *j.exit, true
}

func (j *bgJob) running() bool {
	select {
	case <-j.done:
		return false
	default:
		return true
	}
}

// terminate ends the job's whole tree: SIGTERM now and SIGKILL after grace,
// or SIGKILL at once without grace. reason ("timeout", "canceled" or "" for
// a plain signal) is reported unless an earlier request set one.
func (j *bgJob) terminate(reason string, grace time.Duration) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.exit != nil || j.ctl == nil {
		return
	}
	if j.reason == "" {
		j.reason = reason
	}
	if grace <= 0 {
		j.killLocked()
		return
	}
	j.send(shimCmdTerm)
	j.timers = append(j.timers, time.AfterFunc(grace, j.kill))
}

func (j *bgJob) kill() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.killLocked()
}

func (j *bgJob) killLocked() {
	if j.exit != nil || j.ctl == nil || j.sentKill {
		return
	}
	j.sentKill = true
	j.send(shimCmdKill)
	syscall.Kill(j.shimPID, syscall.SIGCONT) // a stopped shim cannot obey
	j.timers = append(j.timers, time.AfterFunc(hardKillAfter, j.hardKill))
}

// hardKill is the last resort when the shim did not finish the job: it
// kills the command's group and the shim (escaped descendants may survive).
func (j *bgJob) hardKill() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.exit != nil || j.ctl == nil {
		return
	}
	if j.pid > 0 {
		syscall.Kill(-j.pid, syscall.SIGKILL)
	}
	syscall.Kill(j.shimPID, syscall.SIGKILL)
}

// send writes one control byte to the shim. Called with mu held.
func (j *bgJob) send(c byte) {
	j.sentCtl = true
	j.ctl.SetWriteDeadline(time.Now().Add(time.Second))
	j.ctl.Write([]byte{c}) // EPIPE: the shim is exiting anyway
}

// finish records the exit, stops timers and completes the output, which
// wakes the streams so they send the exit frame.
func (j *bgJob) finish(x agentproto.ExitResult) {
	j.mu.Lock()
	j.exit = &x
	for _, t := range j.timers {
		t.Stop()
	}
	j.timers = nil
	j.ctl = nil // the shim's socket: retired or reused by whoever ended the job
	close(j.done)
	j.mu.Unlock()
	j.out.close()
}

// jobTable holds the background jobs the agent knows.
type jobTable struct {
	mu       sync.Mutex
	jobs     map[string]*bgJob
	finished []*bgJob // in the order they finished, for eviction
	closed   bool
}

func (t *jobTable) init() { t.jobs = make(map[string]*bgJob) }

// add registers j; its id must be new.
func (t *jobTable) add(j *bgJob, maxRunning int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return fmt.Errorf("agent is shutting down: %w", errdefs.ErrUnavailable)
	}
	if _, ok := t.jobs[j.id]; ok {
		return fmt.Errorf("job %s already exists: %w", j.id, errdefs.ErrConflict)
	}
	if len(t.jobs)-len(t.finished) >= maxRunning {
		return fmt.Errorf("%d background jobs are running, the agent's limit: %w", maxRunning, errdefs.ErrResourceExhausted)
	}
	t.jobs[j.id] = j
	return nil
}

func (t *jobTable) get(id string) (*bgJob, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	j, ok := t.jobs[id]
	if !ok {
		return nil, fmt.Errorf("job %s: %w", id, errdefs.ErrNotFound)
	}
	return j, nil
}

// remove drops a job that never started.
func (t *jobTable) remove(j *bgJob) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.jobs[j.id] == j {
		delete(t.jobs, j.id)
	}
}

func (t *jobTable) list() []*bgJob {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*bgJob, 0, len(t.jobs))
	for _, j := range t.jobs {
		out = append(out, j)
	}
	slices.SortFunc(out, func(a, b *bgJob) int {
		if c := a.started.Compare(b.started); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	return out
}

// running returns the jobs that have not finished.
func (t *jobTable) running() []*bgJob {
	var out []*bgJob
	for _, j := range t.list() {
		if j.running() {
			out = append(out, j)
		}
	}
	return out
}

// markFinished records that j ended and evicts the oldest finished jobs
// beyond maxFinished, or while their kept output exceeds budget (the job
// that just finished is always kept).
func (t *jobTable) markFinished(j *bgJob, maxFinished int, budget int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.jobs[j.id] != j {
		return
	}
	t.finished = append(t.finished, j)
	var kept int64
	for _, f := range t.finished {
		kept += f.keptBytes()
	}
	for len(t.finished) > 1 && (len(t.finished) > maxFinished || kept > budget) {
		old := t.finished[0]
		t.finished = t.finished[1:]
		kept -= old.keptBytes()
		delete(t.jobs, old.id)
	}
}

// forget drops a finished job.
func (t *jobTable) forget(id string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	j, ok := t.jobs[id]
	if !ok {
		return fmt.Errorf("job %s: %w", id, errdefs.ErrNotFound)
	}
	i := slices.Index(t.finished, j)
	if i < 0 {
		return fmt.Errorf("job %s is still running; cancel it first: %w", id, errdefs.ErrConflict)
	}
	t.finished = slices.Delete(t.finished, i, i+1)
	delete(t.jobs, id)
	return nil
}

// close refuses further jobs.
func (t *jobTable) close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
}

// keptBytes is the memory the job's output holds.
func (j *bgJob) keptBytes() int64 { return j.out.resident() }

// validJobID checks that id can be used as one path segment.
func validJobID(id string) error {
	if id == "" {
		return errdefs.Invalid("job_id is required for a background job")
	}
	if len(id) > maxJobIDLen || id == "." || id == ".." {
		return errdefs.Invalid("job_id %.40q is not usable", id)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
			return errdefs.Invalid("job_id %.40q may only hold letters, digits and -_.", id)
		}
	}
	return nil
}

// startJob validates req, registers the job and starts it under a shim. It
// returns once the command runs (or could not be started, which ends the
// job like a shell would, with 126 or 127).
func (s *Server) startJob(req *agentproto.JobStartRequest) (*bgJob, error) {
	if err := validJobID(req.JobID); err != nil {
		return nil, err
	}
	er := req.ExecRequest
	maxOut := er.MaxOutputBytes
	if maxOut < 0 {
		return nil, errdefs.Invalid("max_output_bytes must not be negative")
	}
	if maxOut > s.cfg.JobOutputLimit {
		return nil, errdefs.Invalid("max_output_bytes %d exceeds the agent's job limit %d", maxOut, s.cfg.JobOutputLimit)
	}
	er.MaxOutputBytes = 0 // checked above against the job limit, not the exec limit
	spec, re, err := s.prepare(&er)
	if err != nil {
		return nil, err
	}
	if maxOut <= 0 {
		maxOut = s.cfg.DefaultMaxOutputBytes
	}
	j := newBGJob(req.JobID, maxOut, time.Now())
	j.stdinStreamed = er.StdinStream
	// The stdin pipe exists before the job is visible, so a write that
	// races the start finds it.
	var stdinR *os.File
	if er.StdinStream && re == nil {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, fmt.Errorf("stdin pipe: %v: %w", err, errdefs.ErrInternal)
		}
		setPipeSize(w, jobPipeSize)
		stdinR, j.stdin = r, &jobStdin{w: w}
	}
	if err := s.jobs.add(j, s.cfg.MaxRunningJobs); err != nil {
		if stdinR != nil {
			stdinR.Close()
			j.stdin.close()
		}
		return nil, err
	}
	if re != nil {
		s.finishUnstarted(j, re)
		return j, nil
	}
	if err := s.launch(j, spec, stdinR); err != nil {
		s.jobs.remove(j)
		if j.stdin != nil {
			j.stdin.close()
		}
		return nil, err
	}
	return j, nil
}

// finishUnstarted ends a job whose program could not be run.
func (s *Server) finishUnstarted(j *bgJob, re *runError) {
	res := runErrorResult(re, time.Since(j.started))
	if blk := j.out.grow(streamStderr); blk != nil {
		n := copy(blk, res.Stderr)
		j.out.publish(streamStderr, n)
		if n < len(res.Stderr) {
			j.out.drop(streamStderr, len(res.Stderr)-n)
		}
	}
	total, _, trunc := j.out.counts()
	j.finish(agentproto.ExitResult{
		ExitCode:        res.ExitCode,
		ExitReason:      res.ExitReason,
		StderrBytes:     total[streamStderr],
		StderrTruncated: trunc[streamStderr],
		DurationMS:      res.DurationMS,
	})
	s.jobs.markFinished(j, s.cfg.MaxFinishedJobs, s.cfg.FinishedJobsMemory)
}

// shimStatus is what the status pipe told about the command.
type shimStatus struct {
	started chan struct{} // closed at "pid N"
	done    chan struct{} // closed at the exit line or the pipe's end
	pid     int
	exited  bool // an exit line came
	idle    bool // ... saying the shim waits for another job
	at      time.Time
	ws      syscall.WaitStatus
}

// launch starts the shim for j and the goroutines that capture its output
// and wait for it, and waits until the command runs. stdinR, if not nil,
// is the read end of the job's streamed stdin; launch closes it.
func (s *Server) launch(j *bgJob, spec *job, stdinR *os.File) (err error) {
	var parentEnds, childEnds []*os.File
	defer func() {
		for _, f := range childEnds {
			f.Close()
		}
		if err != nil {
			for _, f := range parentEnds {
				f.Close()
			}
		}
	}()
	pipe := func(what string) (*os.File, *os.File, error) {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, nil, fmt.Errorf("%s pipe: %v: %w", what, err, errdefs.ErrInternal)
		}
		return r, w, nil
	}
	stdin := s.devNull
	var stdinW *os.File
	if stdinR != nil {
		stdin = stdinR
		childEnds = append(childEnds, stdinR)
	} else if len(spec.stdin) > 0 {
		r, w, err := pipe("stdin")
		if err != nil {
			return err
		}
		stdin, stdinW = r, w
		childEnds, parentEnds = append(childEnds, r), append(parentEnds, w)
	}
	outR, outW, err := pipe("stdout")
	if err != nil {
		return err
	}
	childEnds, parentEnds = append(childEnds, outW), append(parentEnds, outR)
	errR, errW, err := pipe("stderr")
	if err != nil {
		return err
	}
	childEnds, parentEnds = append(childEnds, errW), append(parentEnds, errR)
	setPipeSize(outR, jobPipeSize)
	setPipeSize(errR, jobPipeSize)

	ss := shimSpecOf(spec)
	ss.LatePID = spec.sync
	stdio := [3]*os.File{stdin, outW, errW}
	oomBefore, oomOK := s.oom.read()
	sp, err := s.handToShim(j.id, ss, stdio)
	if err != nil {
		return err
	}
	j.mu.Lock()
	j.shimPID, j.ctl = sp.pid, sp.ctl
	j.mu.Unlock()

	var capture sync.WaitGroup
	capture.Add(2)
	go func() { defer capture.Done(); j.out.capture(streamStdout, outR, &s.discard) }()
	go func() { defer capture.Done(); j.out.capture(streamStderr, errR, &s.discard) }()
	if stdinW != nil {
		go func(data []byte) {
			stdinW.Write(data) // EPIPE when the job does not read it all: fine
			stdinW.Close()
		}(spec.stdin)
	}
	st := &shimStatus{started: make(chan struct{}), done: make(chan struct{})}
	go s.readShimStatus(j.id, sp.lines, st, func(pid int) {
		j.mu.Lock()
		j.pid = pid
		j.mu.Unlock()
	})

	go func() {
		ws, at, died := awaitShim(sp, st)
		if died {
			j.mu.Lock()
			if j.pid > 0 {
				syscall.Kill(-j.pid, syscall.SIGKILL)
			}
			j.mu.Unlock()
		}
		// The shim holds none of the output pipes now; they end as soon as
		// the kernel buffers are read, unless processes that survived the
		// shim's kill (or escaped a shim that died) still hold them.
		drainBy := time.Now().Add(s.cfg.DrainTimeout)
		outR.SetReadDeadline(drainBy)
		errR.SetReadDeadline(drainBy)
		capture.Wait()
		outR.Close()
		errR.Close()

		if j.stdin != nil {
			j.stdin.close() // the job is over: a writer gets job_not_running
		}
		j.mu.Lock()
		sentKill, reason := j.sentKill, j.reason
		// The shim serves the next job only when it said it is idle and
		// got no control byte that the next job could mistake for its
		// header. No byte is sent once ctl is cleared.
		reuse := !j.sentCtl
		j.ctl = nil
		j.mu.Unlock()
		// Back in the idle set before the exit is visible, so that a caller
		// that starts its next job on seeing it finds the shim.
		s.releaseShim(sp, st, reuse)
		total, _, trunc := j.out.counts()
		x := agentproto.ExitResult{
			StdoutBytes:     total[streamStdout],
			StderrBytes:     total[streamStderr],
			StdoutTruncated: trunc[streamStdout],
			StderrTruncated: trunc[streamStderr],
			DurationMS:      at.Sub(j.started).Milliseconds(),
		}
		x.ExitCode, x.ExitReason, x.Signal = s.classifyExit(ws, sentKill, oomBefore, oomOK)
		if reason != "" {
			x.ExitReason = reason
		}
		j.finish(x)
		s.jobs.markFinished(j, s.cfg.MaxFinishedJobs, s.cfg.FinishedJobsMemory)
		if s.log.Enabled(context.Background(), slog.LevelDebug) {
			s.log.Debug("job finished", "job", j.id, "pid", j.pid, "reason", x.ExitReason, "code", x.ExitCode, "ms", x.DurationMS)
		}
	}()

	if spec.timeout > 0 {
		t := time.AfterFunc(spec.timeout, func() { j.terminate(agentproto.ExitReasonTimeout, spec.grace) })
		j.mu.Lock()
		if j.exit == nil {
			j.timers = append(j.timers, t)
		} else {
			t.Stop()
		}
		j.mu.Unlock()
	}

	if spec.sync {
		return nil // its caller waits for the end, which carries the pid
	}
	// Answer once the command runs, or the job is over (exec failed).
	wait := time.NewTimer(shimStartTimeout)
	defer wait.Stop()
	select {
	case <-st.started:
	case <-j.done:
	case <-wait.C:
		s.log.Warn("job shim did not report the command's start", "job", j.id, "shim", sp.pid)
	}
	return nil
}

// awaitShim waits until the command handed to sp ends and returns its wait
// status and when it ended. died reports that the shim itself died
// without an exit line; its own status stands in.
func awaitShim(sp *spareShim, st *shimStatus) (ws syscall.WaitStatus, at time.Time, died bool) {
	<-st.done
	if st.exited {
		return st.ws, st.at, false
	}
	// No exit line: the shim died, and with it its status pipe.
	ei := <-sp.done
	sp.dead = true
	return ei.status, ei.at, true
}

// releaseShim puts sp back into the idle set when it said it is idle and
// reuse allows (no control byte went to it that the next job could take
// for its header), and retires it otherwise. A shim that did not end idle
// may have left part of its tree to the agent.
func (s *Server) releaseShim(sp *spareShim, st *shimStatus, reuse bool) {
	if !st.idle {
		s.noteStrays()
	}
	if reuse && st.idle && sp.alive() {
		s.returnSpare(sp)
	} else {
		s.retireAndWait(sp)
	}
}

// shimSpecOf is what a shim needs of j. The shim is the agent binary:
// agent-internal variables from the request would steer it, so commands
// under shims never get them.
func shimSpecOf(j *job) shimSpec {
	env := make([]string, 0, len(j.env))
	for _, kv := range j.env {
		if !strings.HasPrefix(kv, internalEnvPrefix) {
			env = append(env, kv)
		}
	}
	return shimSpec{Path: j.argv0, Argv: j.argv, Env: env, Dir: j.dir}
}

// handToShim hands a command to a warm shim. A shim can die while idle (a
// signal from inside the sandbox): such a one refuses its job, and the next
// idle one or a new one gets it. id names the job in logs.
func (s *Server) handToShim(id string, ss shimSpec, stdio [3]*os.File) (*spareShim, error) {
	for attempt := 0; ; attempt++ {
		sp, err := s.takeSpare()
		if err != nil {
			return nil, err
		}
		// Forwarded signals reach it from here on: its job may start now.
		s.sup.setQuiet(sp.pid, false)
		if err = sp.hand(ss, stdio, time.Now().Add(shimStartTimeout)); err == nil {
			return sp, nil
		}
		syscall.Kill(sp.pid, syscall.SIGKILL)
		sp.retire()
		if attempt == maxIdleSpares {
			return nil, err
		}
		s.log.Warn("job shim did not take its job; trying another", "job", id, "err", err)
	}
}

// readShimStatus parses the shim's status lines until the job's exit line
// or the pipe's end; setPID learns the command's pid before st.started
// closes. id names the job in logs.
func (s *Server) readShimStatus(id string, r *bufio.Reader, st *shimStatus, setPID func(int)) {
	defer close(st.done)
	startedClosed := false
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		kind, arg, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		switch kind {
		case "pid":
			pid, err := strconv.Atoi(arg)
			if err != nil || startedClosed {
				continue
			}
			setPID(pid)
			st.pid = pid
			startedClosed = true
			close(st.started)
		case "exit":
			code, flag, _ := strings.Cut(arg, " ")
			ws, err := strconv.ParseUint(code, 10, 32)
			if err != nil {
				s.log.Warn("job shim: malformed exit line", "job", id, "line", line)
				continue
			}
			st.exited, st.idle, st.at, st.ws = true, flag == "idle", time.Now(), syscall.WaitStatus(ws)
			return
		case "warn":
			s.log.Warn("job shim: "+arg, "job", id)
		}
	}
}

// jobPipeSize is the pipe buffer asked for a background job's output, so
// the job and the agent trade large chunks (best effort).
const jobPipeSize = 1 << 20

// setPipeSize asks for a larger pipe buffer; failures are ignored (the
// per-user limit may be reached, or the runtime may not support it).
func setPipeSize(f *os.File, size int) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		unix.FcntlInt(fd, unix.F_SETPIPE_SZ, size)
	})
}

// terminateAll asks every running job's tree to stop: SIGTERM now, SIGKILL
// after grace.
func (t *jobTable) terminateAll(grace time.Duration) int {
	js := t.running()
	for _, j := range js {
		j.terminate("", grace)
	}
	return len(js)
}

// killAll SIGKILLs every running job's tree.
func (t *jobTable) killAll() {
	for _, j := range t.running() {
		j.kill()
	}
}
