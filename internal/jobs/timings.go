package jobs

import (
	"context"
	"time"

	"genesis.dev/sandbox/internal/stopwatch"
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

// WithExecTimings returns ctx with t, which Exec fills in.
func WithExecTimings(ctx context.Context, t *ExecTimings) context.Context {
	return stopwatch.With(ctx, t)
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
