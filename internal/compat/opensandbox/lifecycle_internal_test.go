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
