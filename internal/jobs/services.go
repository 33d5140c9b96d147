package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// Services runs the profile services of each sandbox (config.ServiceSpec):
// long-running commands started as background jobs once the sandbox is
// ready, restarted with backoff when they exit (by their restart policy),
// until the sandbox leaves its holder or stops. Their output is kept like
// any background job's (GET /v1/jobs/{id}/logs), and a service job does not
// hold a leased sandbox busy.
//
// It implements control's SandboxReady, SandboxEnding and Recover hooks:
// register it after the Manager. After a restart of the service process,
// Recover resumes supervising the services of the sandboxes that still
// run, adopting a service job that still runs instead of starting another.
type Services struct {
	m   *Manager
	log *slog.Logger

	mu   sync.Mutex
	sbx  map[string]*sandboxServices // sandbox id →
	done bool
}

// sandboxServices is the supervision of one sandbox's services.
type sandboxServices struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	specs  []config.ServiceSpec
	mu     sync.Mutex
	state  []ServiceState
	// held[i] keeps service i stopped (Hold) until it is resumed.
	held []bool
	// changed is closed (and replaced) at every change of state.
	changed chan struct{}
}

// ServiceState is how one profile service of a sandbox is doing.
type ServiceState struct {
	Name string `json:"name"`
	// State is starting, running, ready (its ready port answers),
	// backoff (waiting to restart), exited (not restarted), failed
	// (could not be started) or held (stopped for an operation on its
	// files, such as saving a browser profile; it starts again after).
	State    string     `json:"state"`
	JobID    string     `json:"job_id,omitempty"`
	Restarts int        `json:"restarts"`
	LastExit *int       `json:"last_exit_code,omitempty"`
	Error    string     `json:"error,omitempty"`
	Since    time.Time  `json:"since"`
	Ready    *time.Time `json:"ready_at,omitempty"`
}

// Restart backoff of a service: doubling from serviceBackoffMin up to
// serviceBackoffMax; a run longer than serviceStableRun resets it.
const (
	serviceBackoffMin = time.Second
	serviceBackoffMax = 30 * time.Second
	serviceStableRun  = time.Minute
	serviceReadyWait  = 60 * time.Second
)

// NewServices returns the profile-service supervisor over m.
func NewServices(m *Manager) *Services {
	return &Services{m: m, log: m.log.With("component", "services"), sbx: map[string]*sandboxServices{}}
}

// Name is the hook name.
func (v *Services) Name() string { return "services" }

// SandboxReady starts supervising the sandbox's profile services. For a
// sandbox about to be an idle pool member (a.Warm) it returns once every
// service with a ready port answers on it, so that a warm lease finds its
// browser or server already up; a service that cannot get there fails the
// member.
func (v *Services) SandboxReady(ctx context.Context, a *control.Attachment) error {
	if a.Profile == nil || len(a.Profile.Services) == 0 {
		return nil
	}
	ss := v.supervise(a.Sandbox, a.Profile.Services, nil)
	if !a.Warm || ss == nil {
		return nil
	}
	return ss.waitReady(ctx, a.Profile.Services)
}

// waitReady waits until every service of specs with a ready port is
// ready; one that exited and is not restarted fails it at once.
func (ss *sandboxServices) waitReady(ctx context.Context, specs []config.ServiceSpec) error {
	for {
		ss.mu.Lock()
		changed := ss.changed
		var pending *ServiceState
		port := 0
		for i, spec := range specs {
			if spec.ReadyPort > 0 && ss.state[i].State != "ready" {
				st := ss.state[i]
				pending, port = &st, spec.ReadyPort
				break
			}
		}
		ss.mu.Unlock()
		if pending == nil {
			return nil
		}
		why := fmt.Sprintf("profile service %s is %s, not answering on port %d", pending.Name, pending.State, port)
		if pending.Error != "" {
			why += ": " + pending.Error
		}
		if pending.State == "exited" {
			return fmt.Errorf("%s, and it is not restarted: %w", why, errdefs.ErrUnavailable)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", why, errdefs.ErrUnavailable)
		}
	}
}

// SandboxEnding stops supervising (the Manager cancels the jobs).
func (v *Services) SandboxEnding(_ context.Context, sandboxID, _ string) {
	v.mu.Lock()
	ss := v.sbx[sandboxID]
	delete(v.sbx, sandboxID)
	v.mu.Unlock()
	if ss != nil {
		ss.cancel()
	}
}

// Recover resumes supervision of the services of running sandboxes.
func (v *Services) Recover(ctx context.Context) error {
	list, err := v.m.sbx.ListSandboxes(ctx, control.SandboxFilter{})
	if err != nil {
		return err
	}
	for _, sb := range list {
		if !sb.State.Running() && !sb.State.Suspended() {
			continue // a suspended sandbox's services come back with it
		}
		p, ok := v.m.sbx.ProfileConfig(sb.Profile)
		if !ok || len(p.Services) == 0 {
			continue
		}
		running, err := v.m.store.ListJobs(ctx, store.JobFilter{SandboxID: sb.ID, States: []sandbox.JobState{sandbox.JobRunning}})
		if err != nil {
			return err
		}
		v.supervise(sb, p.Services, running)
	}
	return nil
}

// Close stops every supervisor and waits for them.
func (v *Services) Close() {
	v.mu.Lock()
	v.done = true
	all := v.sbx
	v.sbx = map[string]*sandboxServices{}
	v.mu.Unlock()
	for _, ss := range all {
		ss.cancel()
		ss.wg.Wait()
	}
}

// Of returns the state of a sandbox's services (nil when it has none or
// none are supervised here).
func (v *Services) Of(sandboxID string) []ServiceState {
	v.mu.Lock()
	ss := v.sbx[sandboxID]
	v.mu.Unlock()
	if ss == nil {
		return nil
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return slices.Clone(ss.state)
}

func (v *Services) supervise(sb *sandbox.Sandbox, specs []config.ServiceSpec, running []*sandbox.Job) *sandboxServices {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.done {
		return nil
	}
	if old := v.sbx[sb.ID]; old != nil {
		old.cancel() // a reset sandbox made ready again
	}
	ctx, cancel := context.WithCancel(v.m.bgCtx)
	ss := &sandboxServices{cancel: cancel, specs: specs, state: make([]ServiceState, len(specs)), held: make([]bool, len(specs)), changed: make(chan struct{})}
	v.sbx[sb.ID] = ss
	now := v.m.now()
	for i, spec := range specs {
		ss.state[i] = ServiceState{Name: spec.Name, State: "starting", Since: now}
		var adopt *sandbox.Job
		for _, j := range running {
			if j.Mode == sandbox.JobModeBackground && slices.Equal(j.Command, spec.Command) {
				adopt = j
				break
			}
		}
		ss.wg.Add(1)
		go func() {
			defer ss.wg.Done()
			v.run(ctx, ss, i, sb, spec, adopt)
		}()
	}
	return ss
}

// set updates service i's state.
func (ss *sandboxServices) set(i int, f func(*ServiceState)) {
	ss.mu.Lock()
	f(&ss.state[i])
	close(ss.changed)
	ss.changed = make(chan struct{})
	ss.mu.Unlock()
}

// run keeps one service running until ctx ends.
func (v *Services) run(ctx context.Context, ss *sandboxServices, i int, sb *sandbox.Sandbox, spec config.ServiceSpec, adopt *sandbox.Job) {
	log := v.log.With("sandbox", sb.ID, "service", spec.Name)
	backoff := serviceBackoffMin
	for attempt := 0; ; attempt++ {
		job := adopt
		adopt = nil
		wasHeld := false
		if job == nil {
			var alive bool
			if alive, wasHeld = ss.waitUnheld(ctx, i, v.m.now); !alive {
				return
			}
		}
		if job == nil {
			var err error
			job, err = v.m.startJob(ctx, ExecInput{
				Tenant: sb.Tenant, SandboxID: sb.ID, Command: spec.Command, Cwd: spec.Cwd, Env: spec.Env,
				MaxOutputBytes: v.m.lim.DefaultOutputBytes, Reservation: control.AnyReservation, // the profile's own service
			}, false)
			if err != nil {
				if ctx.Err() != nil || sandboxGone(err) {
					return
				}
				log.Warn("starting a profile service", "err", err)
				ss.set(i, func(s *ServiceState) { s.State, s.Error, s.Since = "failed", err.Error(), v.m.now() })
				if !ss.sleep(ctx, i, backoff) {
					return
				}
				backoff = min(2*backoff, serviceBackoffMax)
				continue
			}
		}
		started := time.Now()
		ss.set(i, func(s *ServiceState) {
			s.State, s.JobID, s.Error, s.Since, s.Ready = "running", job.ID, "", v.m.now(), nil
			if attempt > 0 && !wasHeld {
				s.Restarts++
			}
		})
		if spec.ReadyPort > 0 {
			go v.watchReady(ctx, ss, i, sb, job.ID, spec.ReadyPort, spec.ReadyPath)
		}
		code, ok := v.waitJob(ctx, job.ID)
		if !ok {
			return // ctx ended: the sandbox left its holder or the service stops
		}
		ss.set(i, func(s *ServiceState) { s.LastExit = &code })
		if ss.isHeld(i) {
			continue // stopped by Hold: started again when resumed
		}
		if spec.Restart == config.RestartNever || (spec.Restart == config.RestartOnFailure && code == 0) {
			ss.set(i, func(s *ServiceState) { s.State, s.Since = "exited", v.m.now() })
			return
		}
		if time.Since(started) > serviceStableRun {
			backoff = serviceBackoffMin
		}
		log.Info("profile service exited; restarting", "exit_code", code, "in", backoff)
		ss.set(i, func(s *ServiceState) { s.State, s.Since = "backoff", v.m.now() })
		if !ss.sleep(ctx, i, backoff) {
			return
		}
		backoff = min(2*backoff, serviceBackoffMax)
	}
}

// Hold stops the profile service called name of a sandbox and keeps it
// stopped until resume is called, for an operation on files the service
// must not have open (a browser's profile directory). stop, if set, asks
// the service to end gracefully (Chromium's Browser.close, which writes
// its state); a service that has not ended within holdGrace of it is
// canceled (SIGTERM, then SIGKILL). Hold returns once the service's job
// has ended. resume starts the service again and waits, up to its ctx,
// until it is ready (its ready port, else running). A service already
// held is ErrConflict.
func (v *Services) Hold(ctx context.Context, sandboxID, name string, stop func(context.Context) error) (resume func(context.Context) error, err error) {
	v.mu.Lock()
	ss := v.sbx[sandboxID]
	v.mu.Unlock()
	if ss == nil {
		return nil, fmt.Errorf("sandbox %s has no supervised profile services: %w", sandboxID, errdefs.ErrFailedPrecondition)
	}
	i := slices.IndexFunc(ss.specs, func(s config.ServiceSpec) bool { return s.Name == name })
	if i < 0 {
		return nil, fmt.Errorf("sandbox %s has no profile service %s: %w", sandboxID, name, errdefs.ErrFailedPrecondition)
	}
	ss.mu.Lock()
	if ss.state[i].State == "exited" {
		ss.mu.Unlock()
		return nil, fmt.Errorf("profile service %s of sandbox %s has exited and is not restarted: %w", name, sandboxID, errdefs.ErrFailedPrecondition)
	}
	if ss.held[i] {
		ss.mu.Unlock()
		return nil, errdefs.WithCode("service_held", fmt.Errorf("profile service %s of sandbox %s is already stopped for another operation: %w", name, sandboxID, errdefs.ErrConflict))
	}
	ss.held[i] = true
	jobID := ss.state[i].JobID
	close(ss.changed) // wakes a restart backoff, which then holds
	ss.changed = make(chan struct{})
	ss.mu.Unlock()
	resume = func(ctx context.Context) error {
		ss.mu.Lock()
		ss.held[i] = false
		close(ss.changed)
		ss.changed = make(chan struct{})
		ss.mu.Unlock()
		return ss.waitFor(ctx, i, func(st ServiceState, spec config.ServiceSpec) (bool, error) {
			switch {
			case st.State == "ready" || (st.State == "running" && spec.ReadyPort == 0):
				return true, nil
			case st.State == "exited":
				return false, fmt.Errorf("profile service %s of sandbox %s exited after it was resumed: %w", name, sandboxID, errdefs.ErrUnavailable)
			}
			return false, nil
		})
	}
	fail := func(err error) (func(context.Context) error, error) {
		_ = resume(context.WithoutCancel(ctx)) // best effort: the service runs again
		return nil, err
	}
	ended := func(st ServiceState, _ config.ServiceSpec) (bool, error) {
		return st.State == "held" || st.State == "exited", nil
	}
	if stop != nil && jobID != "" {
		if err := stop(ctx); err != nil {
			v.log.Info("a graceful stop of a profile service failed; canceling it", "sandbox", sandboxID, "service", name, "err", err)
		} else {
			wctx, cancel := context.WithTimeout(ctx, holdGrace)
			err = ss.waitFor(wctx, i, ended)
			cancel()
			if err == nil {
				return resume, nil
			}
		}
	}
	if jobID != "" {
		if _, err := v.m.CancelJobAs(ctx, "", control.AnyReservation, jobID); err != nil && !errors.Is(err, errdefs.ErrNotFound) && errdefs.Code(err) != control.CodeNotRunning {
			return fail(err)
		}
	}
	if err := ss.waitFor(ctx, i, ended); err != nil {
		return fail(fmt.Errorf("stopping profile service %s of sandbox %s: %w", name, sandboxID, err))
	}
	return resume, nil
}

// holdGrace is how long Hold waits for a service asked to stop gracefully.
const holdGrace = 10 * time.Second

// waitFor waits until cond holds for service i (or fails, or ctx ends).
func (ss *sandboxServices) waitFor(ctx context.Context, i int, cond func(ServiceState, config.ServiceSpec) (bool, error)) error {
	for {
		ss.mu.Lock()
		st, changed := ss.state[i], ss.changed
		ss.mu.Unlock()
		if ok, err := cond(st, ss.specs[i]); ok || err != nil {
			return err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("profile service %s is %s: %w", st.Name, st.State, errdefs.ErrUnavailable)
		}
	}
}

func (ss *sandboxServices) isHeld(i int) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.held[i]
}

// waitUnheld marks service i held and waits while Hold keeps it so. It
// reports whether ctx is still alive, and whether the service was held.
func (ss *sandboxServices) waitUnheld(ctx context.Context, i int, now func() time.Time) (alive, wasHeld bool) {
	for {
		ss.mu.Lock()
		if !ss.held[i] {
			ss.mu.Unlock()
			return true, wasHeld
		}
		wasHeld = true
		if st := &ss.state[i]; st.State != "held" {
			st.State, st.Since, st.Ready = "held", now(), nil
			close(ss.changed)
			ss.changed = make(chan struct{})
		}
		changed := ss.changed
		ss.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return false, wasHeld
		}
	}
}

// sleep waits d, or less when service i is held meanwhile; false when
// ctx ended first.
func (ss *sandboxServices) sleep(ctx context.Context, i int, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		ss.mu.Lock()
		held, changed := ss.held[i], ss.changed
		ss.mu.Unlock()
		if held {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		case <-changed:
		}
	}
}

// sandboxGone reports whether err says the sandbox no longer runs, so
// supervision ends.
func sandboxGone(err error) bool {
	return errdefs.Code(err) == control.CodeNotRunning || errors.Is(err, errdefs.ErrNotFound)
}

// waitJob waits until job id ends and returns its exit code (-1 without
// one); false when ctx ended first.
func (v *Services) waitJob(ctx context.Context, id string) (int, bool) {
	j, err := v.m.Wait(ctx, "", id)
	switch {
	case ctx.Err() != nil:
		return 0, false
	case err != nil:
		v.log.Debug("waiting for a service job's end", "job", id, "err", err)
		return -1, true
	case j.ExitCode == nil:
		return -1, true
	}
	return *j.ExitCode, true
}
