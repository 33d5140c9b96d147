package control

import (
	"log/slog"
	"time"

	"genesis.dev/sandbox/internal/sandbox"
)

// timeline records how long each step of an operation took, for the one
// debug log line that ends it ("create timeline"): where a cold create's
// time goes, read from the service's log without a profiler.
type timeline struct {
	// runtime is the sandbox's runtime, once chosen (the log line's).
	runtime sandbox.Runtime
	now     func() time.Time
	start   time.Time
	last    time.Time
	attrs   []any
}

func newTimeline(now func() time.Time) *timeline {
	t := now()
	return &timeline{now: now, start: t, last: t}
}

// mark ends the step named step: the time since the previous mark (or the
// start) is recorded under its name.
func (t *timeline) mark(step string) {
	n := t.now()
	t.attrs = append(t.attrs, slog.Duration(step, n.Sub(t.last)))
	t.last = n
}

// log writes the steps and the total at debug level.
func (t *timeline) log(log *slog.Logger, msg string, attrs ...any) {
	all := append(attrs, t.attrs...)
	all = append(all, slog.Duration("total", t.now().Sub(t.start)))
	log.Debug(msg, all...)
}
