package jobs

import (
	"time"

	"genesis.dev/sandbox/internal/sandbox"
)

// Observer is told how long operations measured inside the service took,
// by runtime; the HTTP API's metrics implement it. Implementations must be
// safe for concurrent use and must not block.
type Observer interface {
	// ObserveExec is the time of a synchronous exec, from the request to
	// the agent until its result (whatever the exit status).
	ObserveExec(rt sandbox.Runtime, d time.Duration)
	// ObserveFirstOutput is the time from asking the agent to start a
	// background (or streamed) job until its first stdout or stderr bytes.
	ObserveFirstOutput(rt sandbox.Runtime, d time.Duration)
}

// noObserver is the Observer of a service configured without one.
type noObserver struct{}

func (noObserver) ObserveExec(sandbox.Runtime, time.Duration)        {}
func (noObserver) ObserveFirstOutput(sandbox.Runtime, time.Duration) {}
