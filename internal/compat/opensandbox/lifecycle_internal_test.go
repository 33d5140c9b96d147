package opensandbox

import (
	"testing"
	"time"

	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/sandbox"
)

// TestStatusReasons: a killed sandbox reads Terminated with OpenSandbox's
// reason user_delete, an expired one ttl_expiry; a failed one stays Failed.
func TestStatusReasons(t *testing.T) {
	t.Parallel()
	a := &Adapter{}
	for _, c := range []struct {
		state              sandbox.State
		why                string
		wantState, wantWhy string
	}{
		{sandbox.StateDestroyed, control.EndLeaseReleased, "Terminated", "user_delete"},
		{sandbox.StateDestroyed, "", "Terminated", "user_delete"},
		{sandbox.StateDestroyed, control.EndLeaseExpired, "Terminated", "ttl_expiry"},
		{sandbox.StateDestroyed, control.EndTTLExpired, "Terminated", "ttl_expiry"},
		{sandbox.StateDestroyed, control.EndDrained, "Terminated", "service_shutdown"},
		{sandbox.StateDestroyed, "lease released; reset failed: boom", "Terminated", "terminated"},
		{sandbox.StateFailed, "agent did not answer", "Failed", "Failed"},
		{sandbox.StateReady, "", "Running", ""},
	} {
		got := a.info(&sandbox.Sandbox{ID: "sbx_1", State: c.state, FailureReason: c.why, CreatedAt: time.Unix(0, 0)}, time.Unix(0, 0)).Status
		if got.State != c.wantState || got.Reason != c.wantWhy || got.Message != c.why {
			t.Errorf("%s %q: %+v, want state %s reason %q message %q", c.state, c.why, got, c.wantState, c.wantWhy, c.why)
		}
	}
}

// TestSuspendedStates: a paused or hibernated sandbox reads Paused, and
// Pausing or Resuming while that is under way; a snapshot of it leaves it
// Paused.
func TestSuspendedStates(t *testing.T) {
	t.Parallel()
	a := &Adapter{}
	for _, c := range []struct {
		state sandbox.State
		op    string
		want  string
	}{
		{sandbox.StatePaused, "", "Paused"},
		{sandbox.StateHibernated, "", "Paused"},
		{sandbox.StatePaused, "pausing", "Pausing"},
		{sandbox.StatePaused, "hibernating", "Pausing"},
		{sandbox.StatePaused, "resuming", "Resuming"},
		{sandbox.StateHibernated, "waking", "Resuming"},
		{sandbox.StatePaused, "snapshotting", "Paused"},
	} {
		sb := &sandbox.Sandbox{ID: "sbx_1", State: c.state, Suspension: &sandbox.Suspension{Operation: c.op}}
		if got := a.info(sb, time.Unix(0, 0)).Status.State; got != c.want {
			t.Errorf("%s %q: %s, want %s", c.state, c.op, got, c.want)
		}
	}
}
