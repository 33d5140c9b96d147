package desktop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/interactive"
	"genesis.dev/sandbox/internal/ports"
	"genesis.dev/sandbox/internal/recording"
	"genesis.dev/sandbox/internal/trace"
)

// Error codes of the desktop routes.
const (
	CodeNotDesktop = "not_a_desktop_profile"
	CodeNotReady   = "desktop_not_ready"
)

// Target is a running desktop sandbox as the desktop routes need it.
type Target struct {
	Tenant    string
	SandboxID string
	Spec      config.DesktopSpec
	// Dial connects to 127.0.0.1:port inside the sandbox; it stays usable
	// after Release while the sandbox runs.
	Dial func(ctx context.Context, port int) (net.Conn, error)
	// Launch starts a program in the background inside the sandbox as a
	// recorded job (its JobInfo.JobID is the job's id; the request's is
	// not used); JobInfo and CancelJob follow and end it.
	Launch    func(ctx context.Context, req agentproto.JobStartRequest) (agentproto.JobInfo, error)
	JobInfo   func(ctx context.Context, id string) (agentproto.JobInfo, error)
	CancelJob func(ctx context.Context, id string, grace time.Duration) error
	// ReadFile opens and RemoveFile deletes a file of the sandbox (the
	// recordings' segments, below the workspace).
	ReadFile   func(ctx context.Context, path string) (io.ReadCloser, error)
	RemoveFile func(ctx context.Context, path string, recursive bool) error
	Release    func()
}

// Sandboxes finds a caller's running desktop sandbox (ErrNotFound, or code
// sandbox_not_running); a sandbox whose profile has no desktop is refused
// with code not_a_desktop_profile.
type Sandboxes interface {
	AttachDesktop(ctx context.Context, tenant, sandboxID string) (*Target, error)
}

// Config wires a Manager.
type Config struct {
	Sandboxes Sandboxes
	// ReadyWait bounds how long a request waits for a sandbox's X server
	// to start answering (default 30 s).
	ReadyWait time.Duration
	// Trace, if set, records the actions, the control changes and a
	// human's input in the sandbox's trace; Gate, if set, is asked before
	// each request of actions (pause and abort). Artifacts keeps the
	// trace's screenshots, taken as Screenshots says (off, after, both;
	// default after).
	Trace       trace.Recorder
	Gate        trace.Gate
	Artifacts   Keeper
	Screenshots string
	// Ready waits for the X server's port to answer; without it the port
	// must answer at once.
	Ready  Readiness
	Logger *slog.Logger
}

// Manager serves the desktop routes. It is safe for concurrent use.
type Manager struct {
	cfg Config

	mu       sync.Mutex
	sessions map[string]*session // sandbox id → its X connection
	ctl      controlLeases
	hub      *interactive.Hub // the live view's controllers, per sandbox
	encoders chan struct{}    // slots of the trace's screenshot encoders
	// recs are the display recordings.
	recs *recording.Set
}

// New returns a Manager.
func New(cfg Config) (*Manager, error) {
	if cfg.Sandboxes == nil {
		return nil, errdefs.Invalid("desktop: Sandboxes is required")
	}
	if cfg.ReadyWait <= 0 {
		cfg.ReadyWait = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	shots, err := recording.CheckShots(cfg.Screenshots)
	if err != nil {
		return nil, fmt.Errorf("desktop: %w", err)
	}
	cfg.Screenshots = shots
	return &Manager{cfg: cfg, sessions: map[string]*session{}, ctl: controlLeases{leases: map[string]*lease{}}, hub: interactive.NewHub(),
		encoders: make(chan struct{}, maxEncoders), recs: recording.NewSet(cfg.Trace, cfg.Artifacts)}, nil
}

// Name is the manager's hook name.
func (m *Manager) Name() string { return "desktop" }

// SandboxEnding closes the sandbox's X connection.
func (m *Manager) SandboxEnding(_ context.Context, sandboxID, _ string) {
	m.mu.Lock()
	s := m.sessions[sandboxID]
	delete(m.sessions, sandboxID)
	m.mu.Unlock()
	if s != nil {
		s.close()
	}
	m.dropControl(sandboxID)
	m.recs.End(sandboxID)
}

// Drain ends the recordings in progress as their stop does, each keeping
// its last segment, and refuses new ones: the service is stopping, and its
// sandboxes are about to be drained or handed over.
func (m *Manager) Drain(ctx context.Context) { m.recs.Drain(ctx) }

// Close closes every X connection and ends every recording (as Drain).
func (m *Manager) Close() {
	m.mu.Lock()
	all := m.sessions
	m.sessions = map[string]*session{}
	m.mu.Unlock()
	for _, s := range all {
		s.close()
	}
	m.recs.Close()
}

// session is the service's X connection to one sandbox's display; mu
// serialises the batches run on it (one batch at a time per display).
type session struct {
	mu     sync.Mutex
	d      *display
	broken bool
}

func (s *session) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.d != nil {
		s.d.close()
		s.d = nil
	}
	s.broken = true
}

// session returns the sandbox's X session, connecting (and waiting up to
// ReadyWait for the X server) when there is none or the last one broke.
func (m *Manager) session(ctx context.Context, t *Target) (*session, error) {
	m.mu.Lock()
	s := m.sessions[t.SandboxID]
	if s != nil && !s.broken {
		m.mu.Unlock()
		return s, nil
	}
	m.mu.Unlock()
	d, err := m.connect(ctx, t)
	if err != nil {
		return nil, err
	}
	s = &session{d: d}
	m.mu.Lock()
	if old := m.sessions[t.SandboxID]; old != nil && !old.broken {
		m.mu.Unlock()
		d.close()
		return old, nil
	}
	m.sessions[t.SandboxID] = s
	m.mu.Unlock()
	return s, nil
}

// connect waits for the X server's port to answer, up to ReadyWait, and
// opens the display.
func (m *Manager) connect(ctx context.Context, t *Target) (*display, error) {
	c, err := m.dialReady(ctx, t, t.Spec.XPort(), "display")
	if err != nil {
		return nil, err
	}
	d, err := openDisplay(c)
	if err != nil {
		return nil, errdefs.WithCode(CodeNotReady, fmt.Errorf("the display of sandbox %s: %v: %w", t.SandboxID, err, errdefs.ErrUnavailable))
	}
	return d, nil
}

// dialReady waits, up to ReadyWait, for port to answer (what names the
// server in the error) and connects to it.
func (m *Manager) dialReady(ctx context.Context, t *Target, port int, what string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.ReadyWait)
	defer cancel()
	var err error
	if m.cfg.Ready != nil {
		err = m.cfg.Ready.WaitReady(ctx, t.SandboxID, port)
	}
	var c net.Conn
	if err == nil {
		if c, err = t.Dial(ctx, port); err == nil {
			return c, nil
		}
	}
	if ctx.Err() == nil && errdefs.Code(err) != "port_unreachable" && !errors.Is(err, errdefs.ErrUnavailable) {
		return nil, err
	}
	return nil, errdefs.WithCode(CodeNotReady, fmt.Errorf(
		"the %s of sandbox %s did not answer within %v (see its services in GET /v1/sandboxes/%s): %v: %w",
		what, t.SandboxID, m.cfg.ReadyWait, t.SandboxID, err, errdefs.ErrUnavailable))
}

// Readiness waits until a port inside a sandbox answers, or ctx ends
// (jobs.Services.WaitReady: a profile service's ready state when one has
// the port as its ready port).
type Readiness interface {
	WaitReady(ctx context.Context, sandboxID string, port int) error
}

// Helpers runs the processes the desktop starts in a sandbox (launched
// programs, the recorder) as recorded jobs, so each has a job id that
// GET /v1/jobs/{id} answers and a log (jobs.Manager).
type Helpers interface {
	StartHelper(ctx context.Context, tenant, sandboxID string, req agentproto.JobStartRequest) (agentproto.JobInfo, error)
	HelperInfo(ctx context.Context, tenant, jobID string) (agentproto.JobInfo, error)
	CancelHelper(ctx context.Context, tenant, jobID string, grace time.Duration) error
}

// FromControl adapts the lifecycle layer's Attach, starting processes
// through h: a sandbox whose profile has no desktop key is refused with
// code not_a_desktop_profile.
func FromControl(a ports.Attacher, h Helpers) Sandboxes { return controlSandboxes{a, h} }

type controlSandboxes struct {
	a ports.Attacher
	h Helpers
}

func (c controlSandboxes) AttachDesktop(ctx context.Context, tenant, id string) (*Target, error) {
	at, err := c.a.Attach(ctx, tenant, id, control.AttachOptions{})
	if err != nil {
		return nil, err
	}
	if at.Profile == nil || at.Profile.Desktop == nil {
		at.Release()
		return nil, errdefs.WithCode(CodeNotDesktop, fmt.Errorf(
			"sandbox %s runs profile %s, which has no desktop (create it with a desktop profile such as desktop-vnc): %w",
			id, at.Sandbox.Profile, errdefs.ErrFailedPrecondition))
	}
	ag, h, tenant, sandboxID := at.Agent, c.h, at.Sandbox.Tenant, at.Sandbox.ID
	return &Target{
		Tenant: tenant, SandboxID: sandboxID, Spec: *at.Profile.Desktop,
		Dial: ag.DialPort,
		Launch: func(ctx context.Context, req agentproto.JobStartRequest) (agentproto.JobInfo, error) {
			return h.StartHelper(ctx, tenant, sandboxID, req)
		},
		JobInfo: func(ctx context.Context, id string) (agentproto.JobInfo, error) { return h.HelperInfo(ctx, tenant, id) },
		CancelJob: func(ctx context.Context, id string, grace time.Duration) error {
			return h.CancelHelper(ctx, tenant, id, grace)
		},
		ReadFile: func(ctx context.Context, path string) (io.ReadCloser, error) {
			r, err := ag.ReadFile(ctx, http.MethodGet, path, nil)
			if err != nil {
				return nil, err
			}
			return r.Body, nil
		},
		RemoveFile: func(ctx context.Context, path string, recursive bool) error {
			return ag.DeleteFile(ctx, agentproto.DeleteRequest{Path: path, Recursive: recursive})
		},
		Release: at.Release,
	}, nil
}
