package jobs

import (
	"context"
	"time"
)

// ExecTimings are where a synchronous exec's time went inside the jobs
// manager, on the service's wall clock: a diagnosis for a caller that asks
// (WithExecTimings), never part of an answer by default.
type ExecTimings struct {
	// Attach is the gate's admission and control's Attach (the sandbox's
	// record and, for a leased sandbox, its busy hold).
	Attach time.Duration
	// Record is the job's record, its trace event, its artifact request
	// and its log, before the agent is called.
	Record time.Duration
	// Agent is the agent call: the request to the agent, the process it
	// runs and the answer.
	Agent time.Duration
	// Finish is the job's final record, its trace event, its artifacts
	// and its log.
	Finish time.Duration
	// The parts of Record and Finish: the job's row (its insert, its
	// final update), its trace events and its log (the log's opening, the
	// output's append and the log's release). The rest of each lap is
	// bookkeeping.
	RecordJob, RecordTrace, RecordLog time.Duration
	FinishJob, FinishTrace, FinishLog time.Duration
}

type timingsKey struct{}

// WithExecTimings returns ctx with t, which Exec fills in.
func WithExecTimings(ctx context.Context, t *ExecTimings) context.Context {
	return context.WithValue(ctx, timingsKey{}, t)
}

// stopwatch fills an ExecTimings lap by lap; its zero value (no timings
// asked for) does nothing.
type stopwatch struct {
	t    *ExecTimings
	last time.Time // the previous lap
	part time.Time // the previous lap or part
}

func startStopwatch(ctx context.Context) stopwatch {
	t, _ := ctx.Value(timingsKey{}).(*ExecTimings)
	if t == nil {
		return stopwatch{}
	}
	now := time.Now()
	return stopwatch{t: t, last: now, part: now}
}

// lap adds the time since the previous lap to *field(t).
func (w *stopwatch) lap(field func(*ExecTimings) *time.Duration) {
	if w.t == nil {
		return
	}
	now := time.Now()
	*field(w.t) += now.Sub(w.last)
	w.last, w.part = now, now
}

// split adds the time since the previous lap or split to *field(t), a
// part of the lap under way.
func (w *stopwatch) split(field func(*ExecTimings) *time.Duration) {
	if w.t == nil {
		return
	}
	now := time.Now()
	*field(w.t) += now.Sub(w.part)
	w.part = now
}

func lapAttach(t *ExecTimings) *time.Duration { return &t.Attach }
func lapRecord(t *ExecTimings) *time.Duration { return &t.Record }
func lapAgent(t *ExecTimings) *time.Duration  { return &t.Agent }
func lapFinish(t *ExecTimings) *time.Duration { return &t.Finish }

func partRecordJob(t *ExecTimings) *time.Duration   { return &t.RecordJob }
func partRecordTrace(t *ExecTimings) *time.Duration { return &t.RecordTrace }
func partRecordLog(t *ExecTimings) *time.Duration   { return &t.RecordLog }
func partFinishJob(t *ExecTimings) *time.Duration   { return &t.FinishJob }
func partFinishTrace(t *ExecTimings) *time.Duration { return &t.FinishTrace }
func partFinishLog(t *ExecTimings) *time.Duration   { return &t.FinishLog }
