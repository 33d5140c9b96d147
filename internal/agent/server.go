package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// Config configures a Server. Zero fields take the documented defaults.
type Config struct {
	// SocketPath is where the agent listens (required), for example
	// /run/genesis/agent.sock.
	SocketPath string
	// Listen, when set, is a TCP address the agent listens on instead of
	// the socket (a sandbox reached over a cluster network); TokenSHA256
	// is then required: every connection must open with the token whose
	// SHA-256 it is (tcp.go).
	Listen      string
	TokenSHA256 []byte
	// SocketMode is the permission of the socket file (default 0660).
	SocketMode fs.FileMode
	// Version is the agent build version reported by /v1/ping.
	Version string
	// Environ is the environment passed through to jobs, normally
	// os.Environ(); GENESIS_AGENT_* variables are dropped.
	Environ []string
	// DefaultWorkdir is a job's cwd when none is given and it exists
	// (default /workspace; otherwise / is used).
	DefaultWorkdir string
	// DefaultMaxOutputBytes caps each output stream when the request does
	// not (default agentproto.DefaultMaxOutputBytes).
	DefaultMaxOutputBytes int64
	// MaxOutputLimit is the largest max_output_bytes a request may ask for
	// (default 64 MiB).
	MaxOutputLimit int64
	// MaxRequestBytes bounds the JSON body of a request (default 80 MiB).
	MaxRequestBytes int64
	// DrainTimeout bounds how long output is still read after a job's main
	// process exited, when escaped descendants hold its pipes (default 100 ms).
	DrainTimeout time.Duration
	// SpareRefillDelay is how long after a job start that took the last idle
	// job shim another is started, unless a shim came back meanwhile
	// (default 50 ms; see spare.go).
	SpareRefillDelay time.Duration
	// ShutdownGrace is how long jobs get between SIGTERM and SIGKILL when
	// the agent shuts down (default 2 s).
	ShutdownGrace time.Duration
	// OOMCounterFiles are candidate files holding the memory cgroup's
	// oom_kill counter (default DefaultOOMCounterFiles()).
	OOMCounterFiles []string
	// JobOutputLimit is the largest max_output_bytes a background job may
	// ask for (default 256 MiB): its output is streamed, not returned in
	// one answer, so it may exceed MaxOutputLimit.
	JobOutputLimit int64
	// MaxRunningJobs bounds the background jobs running at once (default 1024).
	MaxRunningJobs int
	// MaxFinishedJobs bounds the finished background jobs kept until they
	// are forgotten; the oldest are evicted first (default 256).
	MaxFinishedJobs int
	// FinishedJobsMemory bounds the output kept by finished background
	// jobs; the oldest are evicted first, never the newest (default 512 MiB).
	FinishedJobsMemory int64
	// ShimPath is the agent binary that background jobs run under as their
	// shim (default: this executable, else /.genesis/genesis-agent).
	ShimPath string
	// ResetDirs are the directories a reset empties when the agent is not
	// the container's init (a host process in tests). Inside a container
	// the agent finds them itself (reset.go); nil outside one refuses resets.
	ResetDirs []string
	// CheckpointFile and SpecEnvironFile are gVisor's files of saves
	// (defaults /proc/gvisor/checkpoint and /proc/gvisor/spec_environ;
	// checkpoint.go); tests point them elsewhere.
	CheckpointFile, SpecEnvironFile string
	// IdentityFile, if set, is where the agent writes the sandbox's
	// identity at start and after every restore
	// (agentproto.IdentityFile inside a container).
	IdentityFile string
}

// Server is the agent: a process supervisor with an HTTP/2 front end.
type Server struct {
	cfg     Config
	splices splices // raw port connections open now (ports.go)
	log     *slog.Logger
	sup     *supervisor
	env     *baseEnv
	oom     oomCounter
	devNull *os.File
	kernel  string
	started time.Time
	bufs    sync.Pool

	jobs     jobTable   // background jobs
	execs    execSet    // synchronous execs running under shims (job.go)
	direct   directSlot // the one synchronous exec that runs without a shim (direct.go)
	discard  sync.Pool  // *[]byte of discardBuf bytes: output beyond a cap
	frames   sync.Pool  // *[]byte: encoded frames of job streams
	shimPath string
	spares   spareSet // job shims started ahead of their jobs (spare.go)
	// firstSpare starts the first spare once (firstSpareLater).
	firstSpare sync.Once

	terms terminalTable // processes on pseudo-terminals (pty.go)

	roots func() ([]string, error) // the allowed file roots, worked out once (files.go)
	ckpt  checkpointState          // saves of the sandbox (checkpoint.go)

	resetMu  sync.Mutex // one reset at a time (reset.go)
	rootDirs []string   // the root's directories the user can write to, found by the first reset

	tokens *tokenListener // the TCP listener (tcp.go); nil on a Unix socket. Set before serving.

	sock socketState // the Unix socket served on (socket.go)

	idMu     sync.Mutex
	identity []byte // what was last written to IdentityFile (checkpoint.go)
}

// New validates cfg and returns a Server. It has no side effects; Run
// starts everything.
func New(cfg Config, log *slog.Logger) (*Server, error) {
	if cfg.SocketPath == "" && cfg.Listen == "" {
		return nil, errdefs.Invalid("agent: a socket path or a TCP address is required")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.SocketMode == 0 {
		cfg.SocketMode = 0o660
	}
	if cfg.DefaultWorkdir == "" {
		cfg.DefaultWorkdir = defaultWorkdir
	}
	if cfg.DefaultMaxOutputBytes <= 0 {
		cfg.DefaultMaxOutputBytes = agentproto.DefaultMaxOutputBytes
	}
	if cfg.MaxOutputLimit <= 0 {
		cfg.MaxOutputLimit = 64 << 20
	}
	if cfg.MaxOutputLimit < cfg.DefaultMaxOutputBytes {
		return nil, fmt.Errorf("agent: MaxOutputLimit %d below DefaultMaxOutputBytes %d: %w",
			cfg.MaxOutputLimit, cfg.DefaultMaxOutputBytes, errdefs.ErrInvalidArgument)
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = 80 << 20
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = 100 * time.Millisecond
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = 2 * time.Second
	}
	if cfg.CheckpointFile == "" {
		cfg.CheckpointFile = checkpointFile
	}
	if cfg.SpecEnvironFile == "" {
		cfg.SpecEnvironFile = "/proc/gvisor/spec_environ"
	}
	if cfg.SpareRefillDelay <= 0 {
		cfg.SpareRefillDelay = 50 * time.Millisecond
	}
	if cfg.OOMCounterFiles == nil {
		cfg.OOMCounterFiles = DefaultOOMCounterFiles()
	}
	if cfg.JobOutputLimit <= 0 {
		cfg.JobOutputLimit = 256 << 20
	}
	if cfg.JobOutputLimit < cfg.DefaultMaxOutputBytes {
		return nil, fmt.Errorf("agent: JobOutputLimit %d below DefaultMaxOutputBytes %d: %w",
			cfg.JobOutputLimit, cfg.DefaultMaxOutputBytes, errdefs.ErrInvalidArgument)
	}
	if cfg.MaxRunningJobs <= 0 {
		cfg.MaxRunningJobs = 1024
	}
	if cfg.MaxFinishedJobs <= 0 {
		cfg.MaxFinishedJobs = 256
	}
	if cfg.FinishedJobsMemory <= 0 {
		cfg.FinishedJobsMemory = 512 << 20
	}
	s := &Server{cfg: cfg, log: log}
	s.roots = sync.OnceValues(s.loadRoots)
	return s, nil
}

// Run makes the process a reaper, listens on the socket and serves until ctx
// ends or SIGTERM arrives; SIGINT and SIGHUP are forwarded to running jobs'
// process groups. On the way out it terminates every job (SIGTERM, then
// SIGKILL after ShutdownGrace), removes the socket and returns.
func (s *Server) Run(ctx context.Context) error {
	// The agent's oom_score_adj is writable only while the process is
	// dumpable (its /proc files then belong to its user): the file is
	// opened first and kept.
	adj, err := openOOMScoreAdj(oomScoreAdjPath, func(err error) {
		s.log.Warn("out-of-memory priority of a child", "err", err)
	})
	if err != nil {
		s.log.Warn("children start with the agent's out-of-memory priority: an out-of-memory workload may kill the agent", "err", err)
	}
	defer adj.close()
	// Then, before anything else: the workload runs as the agent's user,
	// and must not attach to it or read its memory or environment.
	if err := makeUndumpable(); err != nil {
		return err
	}
	// Listen next: the socket's name is what the service waits for. Its
	// first connection waits in the listener's backlog while the rest of
	// the start-up runs (under gVisor the costlier part of an agent's
	// start), and is taken the moment the server starts, instead of the
	// dial and its request following the listen.
	if s.cfg.SocketPath != "" {
		defer os.Remove(s.cfg.SocketPath)
	}
	ln, where, err := s.listen()
	if err != nil {
		return err
	}
	served := false
	defer func() {
		if !served {
			ln.Close()
		}
	}()
	s.started = time.Now()
	s.kernel = KernelRelease()
	s.env = newBaseEnv(s.cfg.Environ, defaultHome(s.cfg.DefaultWorkdir))
	s.oom = newOOMCounter(s.cfg.OOMCounterFiles)
	defer s.oom.close()
	s.bufs.New = func() any { b := make([]byte, 32<<10); return &b }
	s.discard.New = func() any { b := make([]byte, discardBuf); return &b }
	s.frames.New = func() any { b := make([]byte, 0, streamBuffer); return &b }
	s.jobs.init()
	s.shimPath = resolveShimPath(s.cfg.ShimPath)

	devNull, err := os.Open(os.DevNull)
	if err != nil {
		return fmt.Errorf("agent: open %s: %v: %w", os.DevNull, err, errdefs.ErrInternal)
	}
	defer devNull.Close()
	s.devNull = devNull

	// Signals before the server serves (no job can start before), so none
	// meant for a job or for the agent's shutdown is lost.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)

	s.sup = newSupervisor(s.log)
	s.sup.adj = adj
	s.initDirect(s.sup.run())
	defer s.sup.shutdown()
	if s.direct.children == nil {
		s.refillSpare() // every exec needs a shim: have one ready
	}
	// The file roots (read by the first ping) are worked out beside the
	// rest of the start-up instead of after it.
	go s.roots()

	s.ckpt.quiesce = make(chan quiesceOrder, 1)
	s.takeIdentity(false)
	srv, serveErr := s.serveOnNew(ln, where)
	served = true
	s.firstSpareLater()
	var runErr error
loop:
	for {
		select {
		case <-ctx.Done():
			s.log.Info("agent stopping", "reason", ctx.Err())
			break loop
		case err := <-serveErr:
			runErr = fmt.Errorf("agent: serve: %v: %w", err, errdefs.ErrInternal)
			break loop
		case sig := <-sigs:
			n := s.sup.signalJobs(sig.(syscall.Signal))
			s.log.Info("forwarded signal", "signal", sig, "jobs", n)
			if sig == syscall.SIGTERM {
				break loop
			}
		case q := <-s.ckpt.quiesce:
			// A save is coming: serve nobody until it is done. The prepare
			// request's answer is let out first. The listener closes, then
			// the socket's name goes (a name gone says nothing bound is
			// left to save), then the connections: under gVisor
			// (--host-uds=create) the host socket outlives a closed
			// listener while its name is there, and takes connections
			// nobody ever answers or resets. Named through the grace below
			// (a stream held it open), it let the service's first dial
			// after the save land on it.
			s.sock.stopped()
			os.Remove(s.cfg.SocketPath)
			closeServer(srv, 500*time.Millisecond)
			select {
			case <-q.done:
			case <-ctx.Done():
				break loop
			}
			if srv, serveErr, err = s.serve(); err != nil {
				return err
			}
		}
	}
	s.terminateJobs()
	closeServer(srv, 2*time.Second)
	return runErr
}

// serve listens (on the socket, or TCP) and serves on a new server until
// it is closed; a serving error goes to the channel.
func (s *Server) serve() (*http.Server, <-chan error, error) {
	ln, where, err := s.listen()
	if err != nil {
		return nil, nil, err
	}
	srv, serveErr := s.serveOnNew(ln, where)
	return srv, serveErr, nil
}

// listen opens the listener a server is to serve: the Unix socket, or
// TCP (where names it for the log).
func (s *Server) listen() (net.Listener, string, error) {
	if s.cfg.Listen != "" {
		sum := s.cfg.TokenSHA256
		if s.tokens != nil { // listening again after a save: the token now in force
			s.tokens.mu.Lock()
			sum = bytes.Clone(s.tokens.sum[:])
			s.tokens.mu.Unlock()
		}
		tl, err := listenTCP(s.cfg.Listen, sum, s.log)
		if err != nil {
			return nil, "", err
		}
		s.tokens = tl
		return tl, "tcp " + tl.Addr().String(), nil
	}
	ul, err := listenUnix(s.cfg.SocketPath, s.cfg.SocketMode)
	if err != nil {
		return nil, "", err
	}
	return ul, s.cfg.SocketPath, nil
}

// serveOnNew serves ln on a new server until either is closed; a serving
// error goes to the channel.
func (s *Server) serveOnNew(ln net.Listener, where string) (*http.Server, <-chan error) {
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true)
	srv := &http.Server{
		Handler:           s.Handler(),
		Protocols:         &protos,
		ReadHeaderTimeout: 10 * time.Second,
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: 1000},
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		// A token change keeps the connection that asked for it.
		ConnContext: func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) },
	}
	serveErr := make(chan error, 1)
	if ul, ok := ln.(*net.UnixListener); ok {
		s.sock.serving(srv, ul, serveErr)
	}
	go s.serveOn(srv, ln, serveErr)
	s.log.Info("agent serving", "on", where, "pid", os.Getpid(), "uid", os.Getuid(), "kernel", s.kernel,
		"oom_counter", s.oom.path)
	return srv, serveErr
}

// closeServer lets srv finish its requests for up to grace, then closes
// every connection still open.
func closeServer(srv *http.Server, grace time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		srv.Close()
	}
}

// terminateJobs refuses new jobs, asks running ones to stop and kills what
// is left after ShutdownGrace.
func (s *Server) terminateJobs() {
	s.jobs.close()
	s.closeSpares()
	s.terms.hangupAll()
	if s.sup.closeStarts() == 0 {
		return
	}
	// Background jobs and execs: their shims signal the whole tree,
	// SIGKILL after the grace; killing a shim itself would orphan the tree.
	s.jobs.terminateAll(s.cfg.ShutdownGrace)
	execs := s.execs.close()
	for _, j := range execs {
		j.terminate("", s.cfg.ShutdownGrace)
	}
	s.sup.signalAll(syscall.SIGTERM)
	if s.waitJobs(s.cfg.ShutdownGrace) {
		return
	}
	s.jobs.killAll()
	for _, j := range execs {
		j.kill()
	}
	if s.waitJobs(time.Second) {
		return
	}
	n := s.sup.signalAll(syscall.SIGKILL)
	s.log.Warn("killed jobs still running at shutdown", "jobs", n)
	s.waitJobs(2 * time.Second)
}

// waitJobs polls until no job is running or d passed.
func (s *Server) waitJobs(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for s.sup.running() > 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// listenUnix creates the socket atomically: it binds a temporary name in the
// same directory, sets its mode and renames it over path, so a client never
// sees a half-made socket and a stale socket is replaced. If the rename is
// refused it falls back to removing path and binding it directly.
func listenUnix(path string, mode fs.FileMode) (*net.UnixListener, error) {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+"."+strconv.Itoa(os.Getpid()))
	ln, err := bindUnix(tmp, mode)
	if err == nil {
		if err = os.Rename(tmp, path); err == nil {
			return ln, nil
		}
		ln.Close()
		os.Remove(tmp)
	}
	if rerr := os.Remove(path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		return nil, fmt.Errorf("agent: remove stale socket %s: %v: %w", path, rerr, errdefs.ErrUnavailable)
	}
	ln, err = bindUnix(path, mode)
	if err != nil {
		return nil, err
	}
	return ln, nil
}

func bindUnix(path string, mode fs.FileMode) (*net.UnixListener, error) {
	os.Remove(path)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("agent: listen on %s: %v: %w", path, err, errdefs.ErrUnavailable)
	}
	// The file is removed by Run (it may have been renamed since).
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(path, mode); err != nil {
		ln.Close()
		os.Remove(path)
		return nil, fmt.Errorf("agent: chmod %s: %v: %w", path, err, errdefs.ErrUnavailable)
	}
	return ln, nil
}

func (s *Server) handlePing(w http.ResponseWriter) {
	roots, _ := s.fileRoots() // a bad roots variable fails each file call with its reason
	writeJSON(w, http.StatusOK, agentproto.Ping{
		Protocol:  agentproto.Version,
		Agent:     s.cfg.Version,
		PID:       os.Getpid(),
		UID:       os.Getuid(),
		Kernel:    s.kernel,
		UptimeMS:  time.Since(s.started).Milliseconds(),
		FileRoots: roots,
	})
}

func (s *Server) handleExec(w http.ResponseWriter, r *http.Request) {
	var req agentproto.ExecRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, s.cfg.MaxRequestBytes))
	if err := dec.Decode(&req); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, fmt.Errorf("request body over %d bytes: %w", tooBig.Limit, errdefs.ErrTooLarge))
			return
		}
		writeError(w, fmt.Errorf("decode exec request: %v: %w", err, errdefs.ErrInvalidArgument))
		return
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		writeError(w, fmt.Errorf("decode exec request: trailing data after the JSON object: %w", errdefs.ErrInvalidArgument))
		return
	}
	if req.StdinStream {
		writeError(w, errdefs.Invalid("stdin_stream needs a background job (POST %s)", agentproto.PathJobs))
		return
	}
	started := time.Now()
	j, re, err := s.prepare(&req)
	if err != nil {
		writeError(w, err)
		return
	}
	var res agentproto.ExecResult
	if re != nil {
		res = runErrorResult(re, time.Since(started))
	} else if res, err = s.run(r.Context(), req.JobID, j); err != nil {
		writeError(w, err)
		return
	}
	if s.log.Enabled(r.Context(), slog.LevelDebug) {
		s.log.Debug("exec", "job", req.JobID, "pid", res.PID, "reason", res.ExitReason, "code", res.ExitCode, "ms", res.DurationMS)
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) getBuf() []byte  { return *(s.bufs.Get().(*[]byte)) }
func (s *Server) putBuf(b []byte) { s.bufs.Put(&b) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = marshalError(agentproto.Error{Code: "internal", Message: err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

// writeError answers with the class status and an agentproto.Error body.
func writeError(w http.ResponseWriter, err error) {
	writeJSON(w, errdefs.HTTPStatus(err), agentproto.Error{Code: errdefs.Code(err), Message: err.Error()})
}

// marshalError encodes an error body.
func marshalError(e agentproto.Error) []byte {
	b, _ := json.Marshal(e)
	return b
}
