package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// defaultWorkdir is a job's working directory when the request names none
// and the directory exists.
const defaultWorkdir = "/workspace"

// job is a validated request, ready to start.
type job struct {
	argv0   string
	argv    []string
	dir     string
	env     []string
	stdin   []byte
	timeout time.Duration
	grace   time.Duration
	maxOut  int64
	// sync is set for a synchronous exec: its caller waits for the whole
	// job, so the start is not waited for and the shim reports the pid
	// with the exit (shimSpec.LatePID).
	sync bool
}

// runError is a failure to start the program that is reported to the caller
// as a normal result (exit code 126 or 127), like a shell would.
type runError struct {
	code int
	msg  string
}

// prepare validates req and resolves the program, directory and environment.
// Invalid requests yield an error wrapping errdefs.ErrInvalidArgument; a
// program or directory that cannot be used yields a *runError.
func (s *Server) prepare(req *agentproto.ExecRequest) (*job, *runError, error) {
	hasCmd, hasScript := len(req.Command) > 0, req.Script != ""
	switch {
	case hasCmd && hasScript:
		return nil, nil, errdefs.Invalid("exactly one of command and script must be set, got both")
	case !hasCmd && !hasScript:
		if req.Command != nil {
			return nil, nil, errdefs.Invalid("command is an empty argv")
		}
		return nil, nil, errdefs.Invalid("exactly one of command and script must be set, got neither")
	case hasCmd && req.Command[0] == "":
		return nil, nil, errdefs.Invalid("command[0] is empty")
	case req.TimeoutMS < 0 || req.KillGraceMS < 0 || req.MaxOutputBytes < 0:
		return nil, nil, errdefs.Invalid("timeout_ms, kill_grace_ms and max_output_bytes must not be negative")
	case req.StdinStream && len(req.Stdin) > 0:
		return nil, nil, errdefs.Invalid("stdin and stdin_stream exclude each other")
	case req.MaxOutputBytes > s.cfg.MaxOutputLimit:
		return nil, nil, errdefs.Invalid("max_output_bytes %d exceeds the agent limit %d", req.MaxOutputBytes, s.cfg.MaxOutputLimit)
	}
	argv := req.Command
	if hasScript {
		sh := req.Shell
		if sh == "" {
			sh = "/bin/sh"
		}
		argv = []string{sh, "-c", req.Script}
	}
	for _, a := range argv {
		if containsNUL(a) {
			return nil, nil, errdefs.Invalid("argument contains a NUL byte")
		}
	}
	if containsNUL(req.Cwd) {
		return nil, nil, errdefs.Invalid("cwd contains a NUL byte")
	}
	env, path, err := s.env.with(req.Env)
	if err != nil {
		return nil, nil, err
	}
	j := &job{
		argv:    argv,
		env:     env,
		stdin:   req.Stdin,
		timeout: time.Duration(req.TimeoutMS) * time.Millisecond,
		grace:   time.Duration(req.KillGraceMS) * time.Millisecond,
		maxOut:  req.MaxOutputBytes,
	}
	if j.maxOut == 0 {
		j.maxOut = s.cfg.DefaultMaxOutputBytes
	}

	// The default directory is one workdir has just found to be a
	// directory; any other is checked here.
	j.dir = req.Cwd
	if j.dir == "" {
		j.dir = s.workdir()
	} else {
		if !filepath.IsAbs(j.dir) {
			j.dir = filepath.Join(s.workdir(), j.dir)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(j.dir, &st); err != nil {
			code := 127
			if err == syscall.EACCES {
				code = 126
			}
			return nil, &runError{code: code, msg: fmt.Sprintf("cwd %s: %v", j.dir, err)}, nil
		}
		if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
			return nil, &runError{code: 126, msg: fmt.Sprintf("cwd %s: not a directory", j.dir)}, nil
		}
	}

	argv0, code, err := lookPath(argv[0], path, j.dir)
	if err != nil {
		return nil, &runError{code: code, msg: err.Error()}, nil
	}
	j.argv0 = argv0
	return j, nil, nil
}

// workdir is the default working directory: /workspace if it is a
// directory, else /.
func (s *Server) workdir() string {
	var st syscall.Stat_t
	if err := syscall.Stat(s.cfg.DefaultWorkdir, &st); err == nil && st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		return s.cfg.DefaultWorkdir
	}
	return "/"
}

func containsNUL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return true
		}
	}
	return false
}

// runErrorResult is the result reported when a program could not be started.
func runErrorResult(re *runError, d time.Duration) agentproto.ExecResult {
	msg := []byte("genesis-agent: " + re.msg + "\n")
	return agentproto.ExecResult{
		ExitCode:    re.code,
		ExitReason:  agentproto.ExitReasonExited,
		Stdout:      []byte{},
		Stderr:      msg,
		StderrBytes: int64(len(msg)),
		DurationMS:  d.Milliseconds(),
	}
}

// pendingLimit bounds what a lateReader still reads after its deadline
// (escaped processes may keep writing).
const pendingLimit = 4 << 20

// lateReader reads an output pipe whose read deadline bounds the wait for
// escaped writers. Past the deadline it still takes what the pipe already
// holds, without waiting, up to limit bytes, and then reports EOF: on a
// loaded machine the reading goroutine may run only after the deadline, and
// output that was written in time must not be lost.
type lateReader struct {
	f     *os.File
	limit int64
	late  bool
}

func (l *lateReader) Read(p []byte) (int, error) {
	if !l.late {
		n, err := l.f.Read(p)
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return n, err
		}
		l.late = true
		if n > 0 {
			return n, nil
		}
	}
	if l.limit <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > l.limit {
		p = p[:l.limit]
	}
	n, err := readPending(l.f, p)
	l.limit -= int64(n)
	return n, err
}

// readPending reads what the non-blocking pipe f holds now; io.EOF when it
// holds nothing (or its writers are gone).
func readPending(f *os.File, p []byte) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var rerr error
	if err := rc.Control(func(fd uintptr) {
		for {
			n, rerr = syscall.Read(int(fd), p)
			if rerr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return 0, err
	}
	switch {
	case rerr == syscall.EAGAIN || rerr == nil && n <= 0:
		return 0, io.EOF
	case rerr != nil:
		return 0, rerr
	}
	return n, nil
}

// run runs j under a subreaper — the agent itself when the direct slot is
// free (direct.go), else a warm shim as a background job runs (shim.go) —
// so that its whole tree, including descendants that left its process
// group or session, is killed at its timeout, when ctx ends, and when its
// main process exits; then it collects the result. The job is not
// registered in the job table: it lives as long as the request. The
// returned error wraps an errdefs class and means no result exists.
func (s *Server) run(ctx context.Context, id string, spec *job) (agentproto.ExecResult, error) {
	if s.takeDirect() {
		defer s.releaseDirect()
		return s.runDirect(ctx, spec)
	}
	j := newBGJob(id, spec.maxOut, time.Now())
	spec.sync = true
	if !s.execs.add(j) {
		return agentproto.ExecResult{}, fmt.Errorf("agent is shutting down: %w", errdefs.ErrUnavailable)
	}
	defer s.execs.remove(j)
	if err := s.launch(j, spec, nil); err != nil {
		return agentproto.ExecResult{}, err
	}
	select {
	case <-j.done:
	case <-ctx.Done():
		j.terminate(agentproto.ExitReasonCanceled, 0)
		<-j.done
	}
	x, _ := j.exitResult()
	j.mu.Lock()
	pid := j.pid
	j.mu.Unlock()
	return agentproto.ExecResult{
		ExitCode:        x.ExitCode,
		ExitReason:      x.ExitReason,
		Signal:          x.Signal,
		Stdout:          j.out.keptBytes(streamStdout),
		Stderr:          j.out.keptBytes(streamStderr),
		StdoutBytes:     x.StdoutBytes,
		StderrBytes:     x.StderrBytes,
		StdoutTruncated: x.StdoutTruncated,
		StderrTruncated: x.StderrTruncated,
		DurationMS:      x.DurationMS,
		PID:             pid,
	}, nil
}

// execSet holds the synchronous execs that run, so that a shutdown ends
// their trees through their shims as it does for background jobs.
type execSet struct {
	mu     sync.Mutex
	jobs   map[*bgJob]struct{}
	closed bool
}

func (e *execSet) add(j *bgJob) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	if e.jobs == nil {
		e.jobs = make(map[*bgJob]struct{})
	}
	e.jobs[j] = struct{}{}
	return true
}

func (e *execSet) remove(j *bgJob) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.jobs, j)
}

// close refuses further execs and returns the running ones.
func (e *execSet) close() []*bgJob {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	out := make([]*bgJob, 0, len(e.jobs))
	for j := range e.jobs {
		out = append(out, j)
	}
	return out
}

// classifyExit turns a wait status into exit code, reason and signal name.
// A SIGKILL the agent did not send is reported as oom when the memory
// cgroup's OOM-kill counter grew since oomBefore was read.
func (s *Server) classifyExit(ws syscall.WaitStatus, sentKill bool, oomBefore uint64, oomOK bool) (int, string, string) {
	if !ws.Signaled() {
		return ws.ExitStatus(), agentproto.ExitReasonExited, ""
	}
	sig := ws.Signal()
	reason := agentproto.ExitReasonSignal
	if sig == syscall.SIGKILL && !sentKill && oomOK {
		if after, ok := s.oom.read(); ok && after > oomBefore {
			reason = agentproto.ExitReasonOOM
		}
	}
	return 128 + int(sig), reason, signalName(sig)
}

// signalName returns the conventional name of sig, such as "SIGKILL".
func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	case syscall.SIGILL:
		return "SIGILL"
	case syscall.SIGTRAP:
		return "SIGTRAP"
	case syscall.SIGABRT:
		return "SIGABRT"
	case syscall.SIGBUS:
		return "SIGBUS"
	case syscall.SIGFPE:
		return "SIGFPE"
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGUSR1:
		return "SIGUSR1"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGUSR2:
		return "SIGUSR2"
	case syscall.SIGPIPE:
		return "SIGPIPE"
	case syscall.SIGALRM:
		return "SIGALRM"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGXCPU:
		return "SIGXCPU"
	case syscall.SIGXFSZ:
		return "SIGXFSZ"
	case syscall.SIGSYS:
		return "SIGSYS"
	}
	return "SIG" + strconv.Itoa(int(sig))
}
