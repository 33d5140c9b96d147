package busy

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// writes records a Tracker's writes.
type writes struct {
	mu  sync.Mutex
	got []bool
}

func (w *writes) write(_ context.Context, _ string, busy bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, busy)
}

func (w *writes) list() []bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.got)
}

func TestShortJobWritesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w writes
		tr := New(Config{Write: w.write})
		done := tr.Running(context.Background(), "sbx", false)
		if n := tr.Jobs("sbx"); n != 1 {
			t.Fatalf("jobs while one runs: %d", n)
		}
		time.Sleep(After / 2)
		done()
		done() // a second call does nothing
		time.Sleep(2 * After)
		synctest.Wait()
		tr.Wait()
		if got := w.list(); len(got) != 0 {
			t.Errorf("a job shorter than After wrote %v", got)
		}
		if n := tr.Jobs("sbx"); n != 0 {
			t.Errorf("jobs after the end: %d", n)
		}
	})
}

func TestLongJobsWriteBusyThenLeased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w writes
		tr := New(Config{Write: w.write})
		one := tr.Running(context.Background(), "sbx", false)
		two := tr.Running(context.Background(), "sbx", false)
		time.Sleep(After + time.Millisecond)
		synctest.Wait()
		if got := w.list(); !slices.Equal(got, []bool{true}) {
			t.Fatalf("after After with jobs running: writes %v, want [busy]", got)
		}
		one()
		synctest.Wait()
		if got := w.list(); !slices.Equal(got, []bool{true}) {
			t.Fatalf("one of two jobs ended: writes %v, want still [busy]", got)
		}
		two()
		synctest.Wait()
		tr.Wait()
		if got := w.list(); !slices.Equal(got, []bool{true, false}) {
			t.Errorf("the last job ended: writes %v, want [busy leased]", got)
		}
	})
}

func TestRecordedBusyEndsLeased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w writes
		tr := New(Config{Write: w.write})
		// A record left busy by a job before (or a suspension's end):
		// the last job's end moves it back, however short.
		done := tr.Running(context.Background(), "a", true)
		done()
		other := tr.Running(context.Background(), "b", false)
		tr.NoteRecorded("b")
		other()
		synctest.Wait()
		tr.Wait()
		if got := w.list(); !slices.Equal(got, []bool{false, false}) {
			t.Errorf("writes %v, want [leased leased]", got)
		}
	})
}
