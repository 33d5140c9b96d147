package control

import (
	"context"
	"time"

	"genesis.dev/sandbox/internal/egress"
)

// Hooks let the packages that work inside running sandboxes (jobs, files,
// terminals, ports) follow a sandbox's life without control importing
// them: control declares the interfaces, the workload packages implement
// them, and cmd registers them with AddHook before Start. A hook implements
// Hook and any of the optional interfaces below; control discovers them by
// type assertion.
//
// Hooks run synchronously on the goroutine that changes the sandbox, so
// they must be quick and must not call back into the same sandbox's
// lifecycle (Attach is fine).

// Hook is anything registered with AddHook.
type Hook interface {
	// Name names the hook in logs.
	Name() string
}

// SandboxReadyHook is told when a sandbox has become ready: after its
// agent first answers (a pool member: after its warm-up, before it is
// idle) and after a reset returns it to its pool (then Attachment.Warm is
// set). An error fails the sandbox: a create fails and rolls back, a reset
// destroys the sandbox.
type SandboxReadyHook interface {
	Hook
	SandboxReady(ctx context.Context, a *Attachment) error
}

// SandboxEndingHook is told when a sandbox leaves its holder or stops
// running: its lease ended (before a reset or destroy), it is destroyed,
// it failed, or its create failed. It may be told more than once for one
// sandbox (a released lease's sandbox that is then destroyed) and must be
// idempotent. When told after a destroy, the sandbox's agent is gone.
type SandboxEndingHook interface {
	Hook
	SandboxEnding(ctx context.Context, sandboxID, reason string)
}

// RecoverHook is called once at start-up, after the first reconcile has
// settled the sandboxes a previous process left (they are failed,
// destroyed or still running), so that work the previous process left in
// flight can be resumed or finished.
type RecoverHook interface {
	Hook
	Recover(ctx context.Context) error
}

// SweepHook is called at the end of every reconcile pass (startup reports
// the first pass after start), for retention and garbage collection.
type SweepHook interface {
	Hook
	Sweep(ctx context.Context, now time.Time, startup bool)
}

// NetworkChangeHook may refuse a new network policy for a running
// sandbox: a workload that holds a sandbox to a narrower policy than its
// tenant may ask for (an MCP server's decision). An error refuses the
// change, which is then returned to the caller unmade.
type NetworkChangeHook interface {
	Hook
	NetworkChange(ctx context.Context, sandboxID string, pol egress.Policy) error
}

// networkChange runs the NetworkChange hooks; the first error refuses.
func (s *Service) networkChange(ctx context.Context, id string, pol egress.Policy) error {
	for _, h := range s.hooks {
		if nh, ok := h.(NetworkChangeHook); ok {
			if err := nh.NetworkChange(ctx, id, pol); err != nil {
				return err
			}
		}
	}
	return nil
}

// AddHook registers h. Call it before Start; hooks run in the order added.
// A hook added after Start is refused (logged): the hook list is read
// without a lock once the service runs.
func (s *Service) AddHook(h Hook) {
	if s.started.Load() {
		s.log.Error("hook added after Start; ignored", "hook", h.Name())
		return
	}
	s.hooks = append(s.hooks, h)
}

// hookTimeout bounds one hook call.
const hookTimeout = 30 * time.Second

// sandboxReady runs the SandboxReady hooks for a sandbox that just became
// ready; the first error is returned.
func (s *Service) sandboxReady(ctx context.Context, a *Attachment) error {
	for _, h := range s.hooks {
		if rh, ok := h.(SandboxReadyHook); ok {
			hctx, cancel := context.WithTimeout(ctx, hookTimeout)
			err := rh.SandboxReady(hctx, a)
			cancel()
			if err != nil {
				s.log.Warn("sandbox ready hook failed", "hook", h.Name(), "sandbox", a.Sandbox.ID, "err", err)
				return err
			}
		}
	}
	return nil
}

// sandboxEnding runs the SandboxEnding hooks; they cannot fail.
func (s *Service) sandboxEnding(ctx context.Context, id, reason string) {
	for _, h := range s.hooks {
		if eh, ok := h.(SandboxEndingHook); ok {
			hctx, cancel := cleanupCtx(ctx, hookTimeout)
			eh.SandboxEnding(hctx, id, reason)
			cancel()
		}
	}
}

// recoverHooks runs the Recover hooks; failures are logged.
func (s *Service) recoverHooks(ctx context.Context) {
	for _, h := range s.hooks {
		if rh, ok := h.(RecoverHook); ok {
			if err := rh.Recover(ctx); err != nil {
				s.log.Error("start-up recovery failed", "hook", h.Name(), "err", err)
			}
		}
	}
}

// sweepHooks runs the Sweep hooks.
func (s *Service) sweepHooks(ctx context.Context, now time.Time, startup bool) {
	for _, h := range s.hooks {
		if sh, ok := h.(SweepHook); ok {
			sh.Sweep(ctx, now, startup)
		}
	}
}
