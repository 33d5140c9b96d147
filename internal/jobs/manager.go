package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/artifacts"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/joblog"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/trace"
)

// sandboxes is what jobs need of the control layer.
type sandboxes interface {
	Attach(ctx context.Context, tenant, id string, o control.AttachOptions) (*control.Attachment, error)
	FailIfGone(ctx context.Context, sb *sandbox.Sandbox) (why string, failed bool)
	// For profile services: which sandboxes run and their profiles.
	ListSandboxes(ctx context.Context, f control.SandboxFilter) ([]*sandbox.Sandbox, error)
	ProfileConfig(name string) (*config.Profile, bool)
}

// records is what jobs need of the store: job and session records, and
// the sandbox record a follower checks when its stream breaks.
type records interface {
	GetSandbox(ctx context.Context, tenant, id string) (*sandbox.Sandbox, error)
	CreateJob(ctx context.Context, j *sandbox.Job) error
	GetJob(ctx context.Context, tenant, id string) (*sandbox.Job, error)
	UpdateJob(ctx context.Context, id string, fn func(*sandbox.Job) error) (*sandbox.Job, error)
	FinishJob(ctx context.Context, j *sandbox.Job) (*sandbox.Job, error)
	ListJobs(ctx context.Context, f store.JobFilter) ([]*sandbox.Job, error)
	CreateSession(ctx context.Context, se *sandbox.Session) error
	GetSession(ctx context.Context, tenant, id string) (*sandbox.Session, error)
	UpdateSession(ctx context.Context, id string, fn func(*sandbox.Session) error) (*sandbox.Session, error)
	ListSandboxSessions(ctx context.Context, sandboxID string) ([]*sandbox.Session, error)
}

// Config wires a Manager.
type Config struct {
	// Sandboxes attaches to running sandboxes (a *control.Service).
	Sandboxes sandboxes
	// Store holds the job and session records.
	Store records
	// Logs holds the jobs' durable output.
	Logs *joblog.Store
	// Artifacts keeps the files jobs ask for.
	Artifacts *artifacts.Keeper
	// Limits are the limits of the configuration (exec timeouts and output).
	Limits config.Limits
	// LogRetention is how long a finished job's log is kept.
	LogRetention time.Duration
	// Metrics, if set, is told exec and first-output latencies.
	Metrics Observer
	// Trace, if set, is told when jobs start and finish (the sandbox's
	// operation trace).
	Trace trace.Recorder
	// Gate, if set, is asked before an agent's exec or job starts (the
	// trace's pause and abort).
	Gate trace.Gate
	// Now is the clock; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Manager runs jobs in sandboxes: synchronous execs, background jobs whose
// output followers copy into durable logs, shell sessions and code
// contexts. It implements control's SandboxEnding, Recover and Sweep
// hooks; register it with AddHook before the service starts, and Close it
// before the service.
type Manager struct {
	sbx   sandboxes
	store records
	logs  *joblog.Store
	arts  *artifacts.Keeper
	lim   config.Limits
	ret   time.Duration
	now   func() time.Time
	log   *slog.Logger
	obs   Observer
	trace trace.Recorder
	gate  trace.Gate
	// agentJobs holds the ids of background jobs callers started (not
	// services), which an abort cancels.
	agentJobs sync.Map

	sessionLocks sync.Map // session id → *sync.Mutex

	followMu  sync.Mutex
	following map[string]*control.Attachment // job id → its follower's attachment
	// execing are the synchronous execs whose log this process has yet to
	// write (it is written once the job's record is final).
	execing map[string]bool
	closing bool
	bgCtx   context.Context // followers; canceled by Close

	waitMu sync.Mutex
	waits  map[string]*jobWait // job id → who waits for its end (Wait)

	endedMu sync.Mutex
	ended   map[string][]endedJob // sandbox id → its last background jobs that ended (PortHint)
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// New validates cfg and returns a Manager.
func New(cfg Config) (*Manager, error) {
	switch {
	case cfg.Sandboxes == nil:
		return nil, fmt.Errorf("jobs: nil sandboxes: %w", errdefs.ErrInvalidArgument)
	case cfg.Store == nil:
		return nil, fmt.Errorf("jobs: nil store: %w", errdefs.ErrInvalidArgument)
	case cfg.Logs == nil:
		return nil, fmt.Errorf("jobs: nil job logs: %w", errdefs.ErrInvalidArgument)
	case cfg.Artifacts == nil:
		return nil, fmt.Errorf("jobs: nil artifact keeper: %w", errdefs.ErrInvalidArgument)
	case cfg.Limits.MaxExecTimeoutMS <= 0 || cfg.Limits.MaxOutputBytes <= 0:
		return nil, errdefs.Invalid("jobs: exec limits must be positive")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = noObserver{}
	}
	now := cfg.Now
	bg, cancel := context.WithCancel(context.Background())
	return &Manager{
		sbx: cfg.Sandboxes, store: cfg.Store, logs: cfg.Logs, arts: cfg.Artifacts, lim: cfg.Limits, ret: cfg.LogRetention,
		now: func() time.Time { return now().UTC() }, log: cfg.Logger, obs: cfg.Metrics, trace: cfg.Trace, gate: cfg.Gate,
		following: map[string]*control.Attachment{}, execing: map[string]bool{}, bgCtx: bg, cancel: cancel,
		ended: map[string][]endedJob{}, waits: map[string]*jobWait{},
	}, nil
}

// Close stops the followers; the jobs keep running in their sandboxes and
// a restarted service follows them again (Recover).
func (s *Manager) Close() {
	s.followMu.Lock()
	s.closing = true
	s.followMu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// Name names the manager's control hooks.
func (s *Manager) Name() string { return "jobs" }

// SandboxEnding cancels the running background jobs of a sandbox that
// leaves its holder, so that they end as canceled rather than lost (a
// reset would kill them unrecorded), and drops the locks of its sessions.
// For a sandbox already torn down the cancels fail fast, and the followers
// record the jobs' end themselves.
func (s *Manager) SandboxEnding(ctx context.Context, sandboxID, _ string) {
	s.followMu.Lock()
	var ids []string
	for id, att := range s.following {
		if att.Sandbox.ID == sandboxID {
			ids = append(ids, id)
		}
	}
	s.followMu.Unlock()
	for _, id := range ids {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if _, err := s.CancelJobAs(cctx, "", control.AnyReservation, id); err != nil {
			s.log.Debug("canceling a job of an ending sandbox", "job", id, "sandbox", sandboxID, "err", err)
		}
		cancel()
	}
	s.forgetEnded(sandboxID)
	if list, err := s.store.ListSandboxSessions(ctx, sandboxID); err == nil {
		for _, se := range list {
			if se.State != sandbox.SessionActive {
				s.sessionLocks.Delete(se.ID)
			}
		}
	}
}

// Recover, at start-up, follows again the background jobs the previous
// process left running, and finishes as lost those it cannot follow.
func (s *Manager) Recover(ctx context.Context) error {
	if n := s.reattachJobs(ctx); n > 0 {
		s.log.Info("jobs of the previous process lost", "jobs_lost", n)
	}
	return nil
}

// Sweep removes the logs of finished jobs past the retention, and forgets
// the ended jobs PortHint tells of after a day.
func (s *Manager) Sweep(ctx context.Context, now time.Time, _ bool) {
	if n := s.expireLogs(ctx, now); n > 0 {
		s.log.Info("job logs expired", "logs_expired", n)
	}
	s.expireEnded(now.Add(-endedKeptFor))
}

// expireLogs deletes the logs of finished jobs older than the retention.
func (s *Manager) expireLogs(ctx context.Context, now time.Time) int {
	n := 0
	for _, id := range s.logs.Expired(now.Add(-s.ret)) {
		j, err := s.store.GetJob(ctx, "", id)
		if err == nil && !j.State.Final() {
			continue
		}
		if s.logs.Remove(id) == nil {
			n++
		}
	}
	return n
}

var jobFilterRunning = store.JobFilter{States: []sandbox.JobState{sandbox.JobPending, sandbox.JobRunning}}

// mergeEnv lays a job's env over the sandbox's (given at create or claim).
func mergeEnv(sb *sandbox.Sandbox, env map[string]string) map[string]string {
	if len(sb.Env) == 0 {
		return env
	}
	out := maps.Clone(sb.Env)
	maps.Copy(out, env)
	return out
}

func invalid(format string, args ...any) error {
	return errdefs.Invalid(format, args...)
}

// cleanupCtx returns a context for work that must run even when the
// caller's context is already canceled.
func cleanupCtx(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}
