package control

import (
	"context"
	"time"
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

type leaseTimingsKey struct{}

// WithLeaseTimings returns ctx with t, which AcquireLease fills in.
func WithLeaseTimings(ctx context.Context, t *LeaseTimings) context.Context {
	return context.WithValue(ctx, leaseTimingsKey{}, t)
}

// leaseLaps fills a LeaseTimings lap by lap; without timings asked for it
// does nothing.
type leaseLaps struct {
	t    *LeaseTimings
	last time.Time
}

func startLeaseLaps(ctx context.Context) leaseLaps {
	t, _ := ctx.Value(leaseTimingsKey{}).(*LeaseTimings)
	if t == nil {
		return leaseLaps{}
	}
	return leaseLaps{t: t, last: time.Now()}
}

// lap adds the time since the previous lap to *field(t).
func (w *leaseLaps) lap(field func(*LeaseTimings) *time.Duration) {
	if w.t == nil {
		return
	}
	now := time.Now()
	*field(w.t) += now.Sub(w.last)
	w.last = now
}

func lapCheck(t *LeaseTimings) *time.Duration  { return &t.Check }
func lapPolicy(t *LeaseTimings) *time.Duration { return &t.Policy }
func lapClaim(t *LeaseTimings) *time.Duration  { return &t.Claim }
