package control

import (
	"context"
	"time"

	"genesis.dev/sandbox/internal/stopwatch"
)

// LeaseTimings are where a lease's time went inside AcquireLease, on the
// service's wall clock: a diagnosis for a caller that asks
// (WithLeaseTimings), never part of an answer by default.
type LeaseTimings struct {
	// Check is the request's validation, the tenant's record and the
	// runtime's selection.
	Check time.Duration
	// Policy is the network policy the lease asks for and the pool's
	// choice.
	Policy time.Duration
	// Claim is the quota check and the claim's store transaction (a warm
	// lease), or the cold create and its claim.
	Claim time.Duration
}

// WithLeaseTimings returns ctx with t, which AcquireLease fills in.
func WithLeaseTimings(ctx context.Context, t *LeaseTimings) context.Context {
	return stopwatch.With(ctx, t)
}

func lapCheck(t *LeaseTimings) *time.Duration  { return &t.Check }
func lapPolicy(t *LeaseTimings) *time.Duration { return &t.Policy }
func lapClaim(t *LeaseTimings) *time.Duration  { return &t.Claim }
