package jobs

import (
	"context"
	"time"

	"genesis.dev/sandbox/internal/sandbox"
)

// Following a job's log: what the HTTP API's SSE stream and the gRPC
// edge's StreamJobLogs both do, so that a stream resumed from any cursor
// it handed out continues with no gap and no duplicate on either edge.

// FollowOptions say how FollowLog reads a log.
type FollowOptions struct {
	// Follow waits for more until the job ends; false ends at the end of
	// what is logged now.
	Follow bool
	// Keepalive is the period of LogSink.Idle calls while waiting, and of
	// the look at the job's record (default 15 s).
	Keepalive time.Duration
	// Started: the caller started the job just now and follows it live,
	// so its record is first looked at on the first keepalive, not when
	// the reader first catches up.
	Started bool
}

// LogSink receives what FollowLog reads.
type LogSink interface {
	// Event is one record of the log (stdout, stderr, truncated, exit).
	Event(e LogEvent) error
	// Flush follows each batch of events.
	Flush() error
	// Idle is called at each keepalive while nothing arrives; an error
	// ends the stream quietly.
	Idle() error
	// InvalidCursor: the cursor, once the log reached it, is no event
	// boundary. The stream ends after it.
	InvalidCursor(cursor int64)
	// RecordExit: the job's record is final but its log has no exit
	// event (the service died between recording and appending it); the
	// stream ends after it. cursor is where the log ends.
	RecordExit(j *sandbox.Job, cursor int64)
}

// FollowLog sends the events of jobID's log from cursor on to sink, until
// the log's exit event (or the job's final record), the end of what is
// logged (without Follow), or ctx's end. A cursor beyond the current end
// waits (with Follow) until the log reaches it. It returns the error of a
// log read or of the sink's Event and Flush; nil otherwise.
func (s *Manager) FollowLog(ctx context.Context, tenant, jobID string, log *Log, cursor int64, o FollowOptions, sink LogSink) error {
	if o.Keepalive <= 0 {
		o.Keepalive = 15 * time.Second
	}
	keepalive := time.NewTicker(o.Keepalive)
	defer keepalive.Stop()
	for cursor > log.Size() {
		if _, _, done := log.Offsets(); done || !o.Follow {
			return nil
		}
		changed := log.Wait()
		if cursor <= log.Size() {
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-keepalive.C:
			if sink.Idle() != nil {
				return nil
			}
		}
	}
	if ok, err := log.ValidCursor(cursor); err != nil || !ok {
		sink.InvalidCursor(cursor)
		return nil
	}
	rd, err := log.NewReader(cursor)
	if err != nil {
		return err
	}
	defer rd.Close()
	// checkRecord: whether to look at the job record when the reader is at
	// the end of an unfinished log: first at the end, then on keepalives.
	// A job the caller started is being followed right now, so its record
	// waits for the first keepalive.
	checkRecord := !o.Started
	for {
		changed := log.Wait()
		exited, err := rd.ReadAvailable(sink.Event)
		if err == nil {
			err = sink.Flush()
		}
		if err != nil || exited || ctx.Err() != nil {
			return err
		}
		if !o.Follow {
			return nil // nothing more now
		}
		cursor = rd.Cursor()
		if _, _, done := log.Offsets(); !done && checkRecord {
			// A job can be final without an exit frame in its log (the
			// service died between recording and appending it): end the
			// stream with the record's exit rather than waiting forever.
			// The record is read when the reader first catches up and then
			// at each keepalive, not on every append.
			checkRecord = false
			// Not while this process is still to append the log's exit (it
			// records the final state first): the stream would end with
			// an exit whose id is the last event's, and the real one after.
			if j, err := s.GetJob(ctx, tenant, jobID); err == nil && j.State.Final() && cursor >= log.Size() && !s.LogPending(jobID) {
				if _, _, done := log.Offsets(); !done {
					sink.RecordExit(j, cursor)
					return nil
				}
			}
		}
		if _, _, done := log.Offsets(); done && cursor >= log.Size() {
			// The log is complete and the reader is at or past its end
			// (resumed after the exit event): nothing will ever follow.
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-keepalive.C:
			checkRecord = true
			if sink.Idle() != nil {
				return nil
			}
		}
	}
}

// LogExit is a job's end as a log stream reports it.
type LogExit struct {
	JobID string
	State sandbox.JobState
	// ExitCode is nil when the job was lost (ExitReason lost; Error says
	// why).
	ExitCode                         *int
	ExitReason, Signal, Error        string
	StdoutBytes, StderrBytes         int64
	StdoutTruncated, StderrTruncated bool
	DurationMS                       int64
}

// ExitOfEvent decodes the exit event e of jobID's log.
func ExitOfEvent(jobID string, e LogEvent) (LogExit, error) {
	x, err := e.Exit()
	if err != nil {
		return LogExit{}, err
	}
	out := LogExit{
		JobID: jobID, ExitReason: x.ExitReason, Signal: x.Signal,
		StdoutBytes: x.StdoutBytes, StderrBytes: x.StderrBytes,
		StdoutTruncated: x.StdoutTruncated, StderrTruncated: x.StderrTruncated, DurationMS: x.DurationMS,
		State: sandbox.FinalJobState(sandbox.ExitReason(x.ExitReason), x.ExitCode),
	}
	if x.ExitReason == string(sandbox.ExitLost) {
		out.Error, out.Signal = x.Signal, ""
	} else {
		code := x.ExitCode
		out.ExitCode = &code
	}
	return out, nil
}

// TruncatedStream names the stream a truncated event is about: stdout or
// stderr.
func TruncatedStream(e LogEvent) string {
	if len(e.Payload) > 0 && e.Payload[0] == byte(FrameStderr) {
		return "stderr"
	}
	return "stdout"
}

// ExitOfJob is the exit a log stream reports from a job's final record
// (when its log has no exit event).
func ExitOfJob(j *sandbox.Job) LogExit {
	return LogExit{
		JobID: j.ID, State: j.State, ExitCode: j.ExitCode, ExitReason: string(j.ExitReason), Signal: j.Signal, Error: j.Error,
		StdoutBytes: j.StdoutBytes, StderrBytes: j.StderrBytes, StdoutTruncated: j.StdoutTruncated, StderrTruncated: j.StderrTruncated,
	}
}
