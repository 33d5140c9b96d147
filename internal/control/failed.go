package control

import (
	"context"
	"fmt"

	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/sandbox"
)

// FailIfGone inspects the container of sb, a sandbox whose agent stopped
// answering: when the container is gone or stopped, the sandbox is marked
// failed and torn down, and why says what happened.
func (s *Service) FailIfGone(ctx context.Context, sb *sandbox.Sandbox) (why string, failed bool) {
	st, err := s.driver.Inspect(ctx, sb.ContainerID)
	if err == nil && notEnded(st) {
		return "", false
	}
	why = "container is gone"
	if err == nil {
		why = fmt.Sprintf("container exited with code %d (oom_killed=%v)", st.ExitCode, st.OOMKilled)
	}
	s.markFailed(ctx, sb, why)
	return why, true
}

// notEnded says whether the container of a started sandbox has not ended:
// it runs, or it is not reported running yet, which a started container
// never goes back to: the backend's status lags (a Pod's, until the
// kubelet writes that its container runs, while its agent already
// answers).
func notEnded(st driver.Status) bool { return st.Running || st.State == "created" }

// markFailed moves a sandbox to failed and removes its remains.
func (s *Service) markFailed(ctx context.Context, sb *sandbox.Sandbox, why string) {
	if _, err := s.setState(ctx, sb.ID, sandbox.StateFailed, func(x *sandbox.Sandbox) { x.FailureReason = why }); err != nil {
		s.log.Error("marking sandbox failed", "sandbox", sb.ID, "err", err)
	}
	s.teardown(ctx, sb.ID, sb.ContainerID)
	s.sandboxEnding(ctx, sb.ID, "failed: "+why)
	s.log.Warn("sandbox failed", "sandbox", sb.ID, "reason", why)
}
