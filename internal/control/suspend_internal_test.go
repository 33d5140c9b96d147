package control

import (
	"testing"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// TestSuspendedErrorReads: a call into a sandbox during one of its
// operations is 409 operation_in_progress with a detail that reads as a
// sentence for each operation's name ("is snapshotting", not "is being
// snapshotting").
func TestSuspendedErrorReads(t *testing.T) {
	t.Parallel()
	for _, op := range []string{"pausing", "hibernating", "snapshotting", "rolling back", "waking"} {
		sb := &sandbox.Sandbox{ID: "sbx_a", State: sandbox.StatePaused, Suspension: &sandbox.Suspension{Operation: op}}
		err := suspendedError(sb)
		if errdefs.Code(err) != CodeOperationInProgress || errdefs.HTTPStatus(err) != 409 {
			t.Fatalf("%s: %v, want 409 %s", op, err, CodeOperationInProgress)
		}
		if want := "sandbox sbx_a is " + op + "; try again when it is done"; errdefs.Detail(err) != want {
			t.Errorf("detail %q, want %q", errdefs.Detail(err), want)
		}
	}
}
