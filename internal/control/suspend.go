package control

import (
	"context"
	"errors"
	"fmt"
	"time"

	"genesis.dev/sandbox/internal/agent/agentclient"
	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/nofollow"
	"genesis.dev/sandbox/internal/sandbox"
)

// Suspending a sandbox: the lifecycle's part of pause, hibernation, wake
// and rollback (internal/snapshots orchestrates them). A suspension
// starts by moving the sandbox to paused — from then on nothing new
// reaches inside it — with what it returns to and the operation under way
// recorded in the same update (sandbox.Suspension), so that a crash leaves
// a record the snapshots package's Recover hook can finish or undo. The
// reconciler leaves such a sandbox's container (or its absence) to that
// hook.

// Codes of a call that reaches a suspended sandbox.
const (
	CodePaused     = "sandbox_paused"
	CodeHibernated = "sandbox_hibernated"
	// CodeOperationInProgress: a pause, hibernation, wake, snapshot or
	// rollback of the sandbox is under way.
	CodeOperationInProgress = "operation_in_progress"
)

// Waker wakes hibernated sandboxes: implemented by the package that
// hibernates them, registered with AddHook. Attach calls it for a call
// that needs a hibernated sandbox running.
type Waker interface {
	Wake(ctx context.Context, tenant, id string) (*sandbox.Sandbox, error)
}

// suspendedError is the answer of Attach for a suspended sandbox.
func suspendedError(sb *sandbox.Sandbox) error {
	if sb.Suspension != nil && sb.Suspension.Operation != "" {
		return errdefs.WithCode(CodeOperationInProgress, errdefs.Mark(fmt.Errorf("sandbox %s is %s; try again when it is done", sb.ID, sb.Suspension.Operation), errdefs.ErrConflict))
	}
	if sb.State == sandbox.StateHibernated {
		return errdefs.WithCode(CodeHibernated, errdefs.Mark(fmt.Errorf("sandbox %s is hibernated; resume it: genesis sandbox resume %s (POST /v1/sandboxes/%s/resume)", sb.ID, sb.ID, sb.ID), errdefs.ErrConflict))
	}
	return errdefs.WithCode(CodePaused, errdefs.Mark(fmt.Errorf("sandbox %s is paused; resume it: genesis sandbox resume %s (POST /v1/sandboxes/%s/resume)", sb.ID, sb.ID, sb.ID), errdefs.ErrConflict))
}

// BeginSuspend moves a running sandbox of tenant to paused for operation
// op ("pausing", "hibernating", "snapshotting", "rolling back"),
// recording the state it returns to; a paused one (no operation under way)
// may go on to a hibernation. A sandbox reserved to a workload is not
// suspended for its tenant (its memory holds operator secrets).
func (s *Service) BeginSuspend(ctx context.Context, tenant, id, op string) (*sandbox.Sandbox, error) {
	sb, err := s.GetSandbox(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if err := CheckReservation(sb, ""); err != nil {
		return nil, err
	}
	now := s.now()
	return s.store.UpdateSandbox(ctx, id, 0, now, func(x *sandbox.Sandbox) error {
		switch {
		case x.Suspension != nil && x.Suspension.Operation != "":
			return suspendedError(x)
		case x.State == sandbox.StatePaused && x.Suspension != nil:
			x.Suspension.Operation = op
			return nil
		case !x.State.Running():
			if x.State.Suspended() {
				return suspendedError(x)
			}
			return errdefs.WithCode(CodeNotRunning, errdefs.Mark(fmt.Errorf("sandbox %s is %s", id, x.State), errdefs.ErrFailedPrecondition))
		}
		back := x.State
		if back == sandbox.StateBusy {
			back = sandbox.StateLeased // busy is recounted from its jobs
		}
		x.State, x.Suspension = sandbox.StatePaused, &sandbox.Suspension{ResumeState: back, Operation: op, Since: now}
		return nil
	})
}

// SetSuspended records the end of a suspending step: the sandbox is in
// state to (paused or hibernated), fn amends its suspension, and no
// operation is under way.
func (s *Service) SetSuspended(ctx context.Context, id string, to sandbox.State, fn func(*sandbox.Suspension)) (*sandbox.Sandbox, error) {
	return s.store.UpdateSandbox(ctx, id, 0, s.now(), func(x *sandbox.Sandbox) error {
		if x.Suspension == nil {
			return errdefs.WithCode("invalid_state", errdefs.Mark(fmt.Errorf("sandbox %s is not suspended", id), errdefs.ErrFailedPrecondition))
		}
		if x.State != to {
			if err := sandbox.Transition(x.State, to); err != nil {
				return err
			}
			x.State = to
		}
		if fn != nil {
			fn(x.Suspension)
		}
		x.Suspension.Operation = ""
		return nil
	})
}

// MarkOperation records that operation op of a suspended sandbox is
// under way (a wake of a hibernated one), refusing a second one.
func (s *Service) MarkOperation(ctx context.Context, tenant, id, op string) (*sandbox.Sandbox, error) {
	if _, err := s.GetSandbox(ctx, tenant, id); err != nil {
		return nil, err
	}
	return s.store.UpdateSandbox(ctx, id, 0, s.now(), func(x *sandbox.Sandbox) error {
		switch {
		case x.Suspension == nil || !x.State.Suspended():
			return errdefs.WithCode("not_suspended", errdefs.Mark(fmt.Errorf("sandbox %s is %s, not paused or hibernated", id, x.State), errdefs.ErrFailedPrecondition))
		case x.Suspension.Operation != "":
			return suspendedError(x)
		}
		x.Suspension.Operation = op
		return nil
	})
}

// EndSuspend returns a suspended sandbox to the state it left (busy
// when jobs it holds still run) and drops its suspension.
func (s *Service) EndSuspend(ctx context.Context, id string) (*sandbox.Sandbox, error) {
	busy := s.busy.Jobs(id) > 0
	if busy {
		s.busy.NoteRecorded(id)
	}
	return s.store.UpdateSandbox(ctx, id, 0, s.now(), func(x *sandbox.Sandbox) error {
		if x.Suspension == nil {
			return nil
		}
		to := x.Suspension.ResumeState
		if to == sandbox.StateLeased && busy {
			to = sandbox.StateBusy
		}
		if x.State != to {
			if err := sandbox.Transition(x.State, to); err != nil {
				return err
			}
			x.State = to
		}
		x.Suspension = nil
		return nil
	})
}

// replacer is the sandboxer's ContainerReplacer, or ErrNotImplemented.
func (s *Service) replacer() (driver.ContainerReplacer, error) {
	r, ok := s.boxes.(driver.ContainerReplacer)
	if !ok {
		return nil, errdefs.WithCode("not_supported", errdefs.Mark(fmt.Errorf("this backend cannot give a sandbox a new container"), errdefs.ErrNotImplemented))
	}
	return r, nil
}

// WorkspaceDir is the host directory of a sandbox's workspace, where the
// backend keeps one.
func (s *Service) WorkspaceDir(id string) (string, error) {
	r, err := s.replacer()
	if err != nil {
		return "", err
	}
	return r.WorkspaceDir(id), nil
}

// RemoveContainer removes a suspended sandbox's container and keeps its
// directories and network (a hibernation).
func (s *Service) RemoveContainer(ctx context.Context, id string) error {
	r, err := s.replacer()
	if err != nil {
		return err
	}
	sb, err := s.store.GetSandbox(ctx, "", id)
	if err != nil {
		return err
	}
	s.dropAgent(id)
	cctx, cancel := cleanupCtx(ctx, s.cfg.Intervals.DockerCallTimeout)
	defer cancel()
	if err := r.RemoveContainer(cctx, id, sb.ContainerID); err != nil {
		return err
	}
	s.releaseCapacity(id) // a hibernated sandbox holds no memory or CPU
	_, err = s.store.UpdateSandbox(cctx, id, 0, s.now(), func(x *sandbox.Sandbox) error {
		x.ContainerID = ""
		return nil
	})
	return err
}

// wakeCapacityWait bounds how long a wake waits for host capacity.
const wakeCapacityWait = 30 * time.Second

// ContainerOptions say how a sandbox's new container comes up.
type ContainerOptions struct {
	// Image, if set, replaces the sandbox's image (a runc snapshot's
	// committed root filesystem).
	Image string
	// Restore brings the container's state back (runsc).
	Restore *driver.RestoreOrder
}

// NewContainer gives a suspended sandbox a new container on its
// directories, as o says, starts it and waits for its agent. A container
// it leaves behind on a failure is removed.
func (s *Service) NewContainer(ctx context.Context, id string, o ContainerOptions) error {
	r, err := s.replacer()
	if err != nil {
		return err
	}
	sb, err := s.store.GetSandbox(ctx, "", id)
	if err != nil {
		return err
	}
	p, err := s.profile(sb.Profile)
	if err != nil {
		return err
	}
	if o.Image != "" {
		sb.Image = o.Image
	}
	if !s.capacity.Held(id) {
		// A hibernated sandbox gave its capacity back: it waits for room
		// again, in its tenant's fair queue.
		release, err := s.admit(ctx, sb.Tenant, sb.Resources, wakeCapacityWait)
		if err != nil {
			return err
		}
		s.holdCapacity(id, release)
	}
	spec, err := s.containerSpec(ctx, sb, p, p.ReadOnlyRoot, nil)
	if err != nil {
		return err
	}
	spec.Container.Restore = o.Restore
	cid, err := r.NewContainer(ctx, spec)
	if err != nil {
		return err
	}
	if _, err := s.store.UpdateSandbox(ctx, id, 0, s.now(), func(x *sandbox.Sandbox) error {
		x.ContainerID = cid
		return nil
	}); err != nil {
		s.removeQuietly(ctx, r, id, cid)
		return err
	}
	s.dropAgent(id) // a client of the old container holds dead connections
	if err := s.startContainer(ctx, id, cid); err != nil {
		s.removeQuietly(ctx, r, id, cid)
		return err
	}
	return nil
}

func (s *Service) removeQuietly(ctx context.Context, r driver.ContainerReplacer, id, cid string) {
	cctx, cancel := cleanupCtx(ctx, s.cfg.Intervals.DockerCallTimeout)
	defer cancel()
	if err := r.RemoveContainer(cctx, id, cid); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		s.log.Warn("removing a failed new container", "sandbox", id, "err", err)
	}
}

// waker is the registered Waker, if any (hooks are fixed at Start).
func (s *Service) waker() Waker {
	for _, h := range s.hooks {
		if w, ok := h.(Waker); ok {
			return w
		}
	}
	return nil
}

// AgentOf is the client of a sandbox's agent, whatever the sandbox's
// state: for the package that suspends sandboxes, which readies the agent
// of a sandbox it has already paused for its save.
func (s *Service) AgentOf(id string) *agentclient.Client { return s.agent(id) }

// ResumeAgent tells a sandbox's agent, closed for a save that left the
// sandbox running, that the save is done (agentproto.ResumeFile).
func (s *Service) ResumeAgent(id string) error {
	r, err := s.replacer()
	if err != nil {
		return err
	}
	// The run directory is the sandbox user's: the name may hold a
	// symlink to a host file, which is replaced, never followed.
	if err := nofollow.CreateFile(r.RunDir(id), agentproto.ResumeFile, 0o644); err != nil {
		return fmt.Errorf("telling the agent of %s that the save is done: %w", id, err)
	}
	return nil
}
