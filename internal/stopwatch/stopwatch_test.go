package stopwatch

import (
	"context"
	"testing"
	"time"
)

type laps struct{ A, B, APart time.Duration }

func lapA(t *laps) *time.Duration  { return &t.A }
func lapB(t *laps) *time.Duration  { return &t.B }
func partA(t *laps) *time.Duration { return &t.APart }

func TestWatch(t *testing.T) {
	var got laps
	w := Start[laps](With(context.Background(), &got))
	time.Sleep(2 * time.Millisecond)
	w.Split(partA)
	time.Sleep(time.Millisecond)
	w.Lap(lapA)
	time.Sleep(time.Millisecond)
	w.Lap(lapB)
	if got.APart < 2*time.Millisecond || got.A < 3*time.Millisecond || got.A < got.APart {
		t.Errorf("lap A %v with its part %v: want ≥ 3 ms, ≥ the part's ≥ 2 ms", got.A, got.APart)
	}
	if got.B < time.Millisecond || got.B >= got.A+time.Second {
		t.Errorf("lap B %v: want the time since lap A only (≥ 1 ms)", got.B)
	}
}

func TestWatchWithoutTimings(t *testing.T) {
	type other struct{ A time.Duration }
	var got laps
	ctx := With(context.Background(), &other{}) // another type's timings only
	w := Start[laps](ctx)
	w.Lap(lapA)
	w.Split(partA)
	if got != (laps{}) {
		t.Errorf("a Watch without its timings filled in %+v", got)
	}
}
