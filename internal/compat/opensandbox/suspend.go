package opensandbox

import (
	"context"
	"fmt"
	"net/http"

	"genesis.dev/sandbox/internal/compat/shared"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// Pause and resume (docs/compat-opensandbox.md): OpenSandbox's pause
// freezes a sandbox's processes and keeps its memory, as its Docker
// runtime's `docker pause` does; here it is the service's pause
// (snapshots.Manager.Pause), and resume thaws it — or wakes a sandbox the
// service hibernated (an idle profile, /v1).

// Snapshots is what the adapter translates pause and resume onto:
// snapshots.Manager.
type Snapshots interface {
	Pause(ctx context.Context, tenant, id string) (*sandbox.Sandbox, error)
	// Resume says, of a hibernated sandbox's wake, whether its memory
	// came back (nil for a thaw).
	Resume(ctx context.Context, tenant, id string) (*sandbox.Sandbox, *bool, error)
}

// suspendedState is a paused or hibernated sandbox's state in the SDK's
// words: Pausing or Resuming while that is under way, Paused otherwise
// (also while a snapshot of it is taken).
func suspendedState(sb *sandbox.Sandbox) string {
	if sb.Suspension != nil {
		switch sb.Suspension.Operation {
		case "pausing", "hibernating":
			return "Pausing"
		case "resuming", "waking":
			return "Resuming"
		}
	}
	return "Paused"
}

// pauseSandbox serves POST /v1/sandboxes/{id}/pause: the sandbox's
// processes are frozen, its memory kept; 202 (done when it answers:
// the SDK then reads Paused). Pausing a paused sandbox succeeds.
func (a *Adapter) pauseSandbox(w http.ResponseWriter, r *http.Request) {
	a.suspendStep(w, r, "pause", func(ctx context.Context, tenant string, sb *sandbox.Sandbox) error {
		if sb.State == sandbox.StateHibernated && (sb.Suspension == nil || sb.Suspension.Operation == "") {
			return nil // paused already: hibernated, which holds less still
		}
		if !shared.Running(sb.State) && sb.State != sandbox.StatePaused {
			return errdefs.WithCode("sandbox_not_running", errdefs.Mark(fmt.Errorf("sandbox %s is %s; only a running sandbox pauses", sb.ID, sb.State), errdefs.ErrConflict))
		}
		_, err := a.snaps.Pause(ctx, tenant, sb.ID)
		return err
	})
}

// resumeSandbox serves POST /v1/sandboxes/{id}/resume: a paused sandbox
// is thawed, a hibernated one woken; 202 (done when it answers: the SDK
// then reads Running). Resuming a running sandbox succeeds.
func (a *Adapter) resumeSandbox(w http.ResponseWriter, r *http.Request) {
	a.suspendStep(w, r, "resume", func(ctx context.Context, tenant string, sb *sandbox.Sandbox) error {
		if shared.Running(sb.State) {
			return nil
		}
		_, _, err := a.snaps.Resume(ctx, tenant, sb.ID)
		if err != nil && errdefs.Is(err, errdefs.ErrFailedPrecondition) {
			// A hibernation under way when Resume looked ended meanwhile:
			// once more, now that it is hibernated.
			if cur, gerr := a.ctl.GetSandbox(ctx, tenant, sb.ID); gerr == nil && cur.State == sandbox.StateHibernated {
				_, _, err = a.snaps.Resume(ctx, tenant, sb.ID)
			}
		}
		return err
	})
}

// wakes says whether an execd call to sb wakes it first: a sandbox the
// service hibernated (an idle profile, /v1), which wakes at the next call
// that needs it, as everywhere in the service. A frozen one (paused)
// answers 409 until it is resumed.
func (a *Adapter) wakes(sb *sandbox.Sandbox) bool {
	return a.snaps != nil && sb.State == sandbox.StateHibernated && (sb.Suspension == nil || sb.Suspension.Operation == "")
}

// suspendStep runs a pause or resume of the caller's sandbox and answers
// 202: 404 for a sandbox that is not the caller's or is gone, 501 without
// snapshot support.
func (a *Adapter) suspendStep(w http.ResponseWriter, r *http.Request, what string, step func(ctx context.Context, tenant string, sb *sandbox.Sandbox) error) {
	sb, err := a.sandboxOfCaller(r)
	if err == nil && (sb.State.Final() || sb.State == sandbox.StateFailed || sb.State == sandbox.StateDraining) {
		err = errdefs.WithCode("sandbox_not_found", fmt.Errorf("sandbox %s is %s: %w", sb.ID, sb.State, errdefs.ErrNotFound))
	}
	if err == nil && a.snaps == nil {
		err = errdefs.WithCode("not_supported", errdefs.Mark(fmt.Errorf("%s is not available on this service (no snapshot support)", what), errdefs.ErrNotImplemented))
	}
	if err == nil {
		err = step(r.Context(), tenantOf(r.Context()), sb)
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}
