package control

import "genesis.dev/sandbox/internal/sandbox"

// Why a sandbox was destroyed, as its record's FailureReason says, for the
// callers that tell the ways apart (the OpenSandbox adapter's status
// reasons). A plain delete leaves the reason empty; a failure, or a reset
// that failed, says more in words of its own.
const (
	EndLeaseReleased = "lease released" // its lease was released (and the sandbox not reset)
	EndLeaseExpired  = "lease expired"  // its lease ran out
	EndTTLExpired    = "ttl expired"    // its own TTL ran out
	EndDrained       = "service drained"
)

// leaseEndReason is why the sandbox of a lease that ended in state st is
// destroyed.
func leaseEndReason(st sandbox.LeaseState) string {
	switch st {
	case sandbox.LeaseReleased:
		return EndLeaseReleased
	case sandbox.LeaseExpired:
		return EndLeaseExpired
	}
	return "lease " + string(st)
}
