// Package stopwatch times the laps of one call on the service's wall
// clock for a caller that asks for them (the Server-Timing knob): a
// diagnosis, never part of an answer by default. A caller puts a *T, a
// struct of time.Durations, in the call's context (With); the code on the
// way fills in its fields (Start, Lap, Split); without one it does nothing.
package stopwatch

import (
	"context"
	"time"
)

type key[T any] struct{}

// With returns ctx carrying t, which a Start[T] under it fills in.
func With[T any](ctx context.Context, t *T) context.Context {
	return context.WithValue(ctx, key[T]{}, t)
}

// Watch fills a *T lap by lap; its zero value (no *T asked for) does
// nothing.
type Watch[T any] struct {
	t    *T
	last time.Time // the previous lap
	part time.Time // the previous lap or split
}

// Start returns a Watch of the *T in ctx (With), started now, or a zero
// Watch when there is none.
func Start[T any](ctx context.Context) Watch[T] {
	t, _ := ctx.Value(key[T]{}).(*T)
	if t == nil {
		return Watch[T]{}
	}
	now := time.Now()
	return Watch[T]{t: t, last: now, part: now}
}

// Lap adds the time since the previous lap to *field(t).
func (w *Watch[T]) Lap(field func(*T) *time.Duration) {
	if w.t == nil {
		return
	}
	now := time.Now()
	*field(w.t) += now.Sub(w.last)
	w.last, w.part = now, now
}

// Split adds the time since the previous lap or split to *field(t): a
// part of the lap under way.
func (w *Watch[T]) Split(field func(*T) *time.Duration) {
	if w.t == nil {
		return
	}
	now := time.Now()
	*field(w.t) += now.Sub(w.part)
	w.part = now
}
