package grpcedge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"connectrpc.com/connect"

	sandboxv1 "genesis.dev/sandbox/gen/genesis/sandbox/v1"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/sandbox"
)

// execService serves genesis.sandbox.v1.ExecService over jobs, as
// httpapi's exec, jobs and stdin routes serve the same operations.
type execService struct{ edge *Edge }

func (s *execService) Exec(ctx context.Context, req *connect.Request[sandboxv1.ExecRequest]) (*connect.Response[sandboxv1.ExecResult], error) {
	m := req.Msg
	in := jobs.ExecInput{
		Tenant: tenantOf(ctx), SandboxID: m.SandboxId, Command: m.Command, Script: m.Script, Cwd: m.Cwd, Env: m.Env,
		Stdin: m.Stdin, TimeoutMS: m.TimeoutMs, MaxOutputBytes: m.MaxOutputBytes,
	}
	// ctx ends with the call (the client's cancel or deadline): jobs.Exec
	// then cancels the job, as for a dropped HTTP call.
	out, err := s.edge.jobs.Exec(ctx, in)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(execResultPB(out)), nil
}

func (s *execService) StartJob(ctx context.Context, req *connect.Request[sandboxv1.StartJobRequest]) (*connect.Response[sandboxv1.Job], error) {
	m := req.Msg
	in := jobs.ExecInput{
		Tenant: tenantOf(ctx), SandboxID: m.SandboxId, Command: m.Command, Script: m.Script, Cwd: m.Cwd, Env: m.Env,
		Stdin: m.Stdin, StdinStream: m.StdinStream, TimeoutMS: m.TimeoutMs, MaxOutputBytes: m.MaxOutputBytes,
	}
	j, err := s.edge.jobs.StartJob(ctx, in)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(jobPB(j)), nil
}

func (s *execService) GetJob(ctx context.Context, req *connect.Request[sandboxv1.GetJobRequest]) (*connect.Response[sandboxv1.Job], error) {
	j, err := s.edge.jobs.GetJob(ctx, tenantOf(ctx), req.Msg.JobId)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(jobPB(j)), nil
}

func (s *execService) ListJobs(ctx context.Context, req *connect.Request[sandboxv1.ListJobsRequest]) (*connect.Response[sandboxv1.ListJobsResponse], error) {
	states := make([]sandbox.JobState, len(req.Msg.States))
	for i, st := range req.Msg.States {
		states[i] = sandbox.JobState(st)
	}
	list, err := s.edge.jobs.ListSandboxJobs(ctx, tenantOf(ctx), req.Msg.SandboxId, states, int(req.Msg.Limit))
	if err != nil {
		return nil, err
	}
	out := &sandboxv1.ListJobsResponse{Jobs: make([]*sandboxv1.Job, len(list))}
	for i, j := range list {
		out.Jobs[i] = jobPB(j)
	}
	return connect.NewResponse(out), nil
}

func (s *execService) CancelJob(ctx context.Context, req *connect.Request[sandboxv1.CancelJobRequest]) (*connect.Response[sandboxv1.Job], error) {
	j, err := s.edge.jobs.CancelJob(ctx, tenantOf(ctx), req.Msg.JobId)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(jobPB(j)), nil
}

// logKeepalive is how often a followed log looks at its job's record when
// nothing arrives (jobs.FollowOptions.Keepalive).
const logKeepalive = 15 * time.Second

func invalidCursor(jobID string, cursor int64) error {
	return errdefs.WithCode("invalid_cursor", invalidArg("cursor %d is not an event id of job %s", cursor, jobID))
}

func (s *execService) StreamJobLogs(ctx context.Context, req *connect.Request[sandboxv1.StreamJobLogsRequest], stream *connect.ServerStream[sandboxv1.JobLogEvent]) error {
	m := req.Msg
	if m.Cursor < 0 {
		return invalidCursor(m.JobId, m.Cursor)
	}
	job, log, err := s.edge.jobs.JobLogFrom(ctx, tenantOf(ctx), m.JobId, m.Cursor)
	if err != nil {
		return err
	}
	sink := &logSink{send: stream.Send, jobID: job.ID}
	follow := m.Follow == nil || *m.Follow
	err = s.edge.jobs.FollowLog(ctx, tenantOf(ctx), job.ID, log, m.Cursor, jobs.FollowOptions{Follow: follow, Keepalive: logKeepalive}, sink)
	if sink.invalid {
		return invalidCursor(job.ID, m.Cursor)
	}
	if err != nil && ctx.Err() == nil {
		var ce *connect.Error
		if errors.As(err, &ce) { // the client's stream failed
			return err
		}
		return fmt.Errorf("reading the log of job %s: %w", job.ID, err)
	}
	return ctx.Err()
}

// logSink sends a followed log as JobLogEvents; each Send is flow
// controlled, so a client that does not read holds the reader, not memory.
type logSink struct {
	send    func(*sandboxv1.JobLogEvent) error
	jobID   string
	invalid bool
}

func (k *logSink) Event(e jobs.LogEvent) error {
	ev := &sandboxv1.JobLogEvent{Cursor: e.Cursor}
	switch e.Type {
	case jobs.FrameStdout:
		ev.Event = &sandboxv1.JobLogEvent_Stdout{Stdout: &sandboxv1.Output{Offset: e.Offset, Data: e.Payload}}
	case jobs.FrameStderr:
		ev.Event = &sandboxv1.JobLogEvent_Stderr{Stderr: &sandboxv1.Output{Offset: e.Offset, Data: e.Payload}}
	case jobs.FrameTruncated:
		ev.Event = &sandboxv1.JobLogEvent_Truncated{Truncated: &sandboxv1.Truncated{Stream: jobs.TruncatedStream(e), Kept: e.Offset}}
	case jobs.FrameExit:
		x, err := jobs.ExitOfEvent(k.jobID, e)
		if err != nil {
			return err
		}
		ev.Event = &sandboxv1.JobLogEvent_Exit{Exit: exitPB(x)}
	default:
		return nil
	}
	return k.send(ev)
}

func (k *logSink) Flush() error               { return nil } // Send flushes each message
func (k *logSink) Idle() error                { return nil } // a gone client ends ctx
func (k *logSink) InvalidCursor(cursor int64) { k.invalid = true }

func (k *logSink) RecordExit(j *sandbox.Job, cursor int64) {
	_ = k.send(&sandboxv1.JobLogEvent{Cursor: cursor, Event: &sandboxv1.JobLogEvent_Exit{Exit: exitPB(jobs.ExitOfJob(j))}})
}

func (s *execService) WriteStdin(ctx context.Context, stream *connect.ClientStream[sandboxv1.WriteStdinRequest]) (*connect.Response[sandboxv1.WriteStdinResponse], error) {
	if !stream.Receive() {
		if err := stream.Err(); err != nil {
			return nil, err
		}
		return nil, invalidArg("the stream sent no message: the first names the job (job_id)")
	}
	msg := stream.Msg()
	jobID, tenant := msg.JobId, tenantOf(ctx)
	if jobID == "" {
		return nil, invalidArg("job_id is required on the first message")
	}
	w, err := s.edge.jobs.OpenStdin(ctx, tenant, jobID)
	if err != nil {
		return nil, err
	}
	defer w.Close() // ends this stream only; close_stdin closes the job's stdin
	var n int64
	for {
		if msg.JobId != "" && msg.JobId != jobID {
			return nil, invalidArg("job_id %q differs from the stream's job %s", msg.JobId, jobID)
		}
		if len(msg.Data) > 0 {
			k, err := w.Write(msg.Data)
			n += int64(k)
			if err != nil {
				return nil, err
			}
		}
		if msg.CloseStdin {
			if err := w.Close(); err != nil {
				return nil, err
			}
			if err := s.edge.jobs.CloseStdin(ctx, tenant, jobID); err != nil {
				return nil, err
			}
			if stream.Receive() {
				return nil, invalidArg("a message after close_stdin: the job's stdin is closed")
			}
			break
		}
		if !stream.Receive() {
			break
		}
		msg = stream.Msg()
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return connect.NewResponse(&sandboxv1.WriteStdinResponse{Bytes: n}), nil
}

func (s *execService) AttachJob(ctx context.Context, stream *connect.BidiStream[sandboxv1.AttachJobRequest, sandboxv1.JobLogEvent]) error {
	first, err := stream.Receive()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return invalidArg("the stream sent no message: the first names the job (job_id)")
		}
		return err
	}
	tenant, jobID := tenantOf(ctx), first.JobId
	if jobID == "" {
		return invalidArg("job_id is required on the first message")
	}
	if first.Cursor < 0 {
		return invalidCursor(jobID, first.Cursor)
	}
	job, log, err := s.edge.jobs.JobLogFrom(ctx, tenant, jobID, first.Cursor)
	if err != nil {
		return err
	}
	// Open stdin first, so that a job without streamed stdin is known at
	// once; an ended job is attached for its output only.
	stdin, serr := s.edge.jobs.OpenStdin(ctx, tenant, job.ID)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	// Client → stdin, until the client closes its side or the call ends
	// (a Receive blocked then fails as the handler returns; it is not
	// waited for).
	go func() {
		defer func() {
			if stdin != nil {
				stdin.Close()
			}
		}()
		msg := first
		for {
			if msg.JobId != "" && msg.JobId != job.ID {
				cancel(invalidArg("job_id %q differs from the stream's job %s", msg.JobId, job.ID))
				return
			}
			if len(msg.Data) > 0 {
				if stdin == nil {
					err := serr
					if err == nil {
						err = errdefs.WithCode("stdin_closed", fmt.Errorf("the stdin of job %s is closed: %w", job.ID, errdefs.ErrFailedPrecondition))
					}
					cancel(err)
					return
				}
				if _, err := stdin.Write(msg.Data); err != nil {
					cancel(err)
					return
				}
			}
			if msg.CloseStdin {
				if stdin != nil {
					if err := stdin.Close(); err != nil {
						cancel(err)
						return
					}
					stdin = nil
				}
				if err := s.edge.jobs.CloseStdin(ctx, tenant, job.ID); err != nil {
					cancel(err)
					return
				}
			}
			var err error
			if msg, err = stream.Receive(); err != nil {
				if !errors.Is(err, io.EOF) {
					cancel(err)
				}
				return
			}
		}
	}()

	// Log → client, to the exit.
	sink := &logSink{send: stream.Send, jobID: job.ID}
	err = s.edge.jobs.FollowLog(ctx, tenant, job.ID, log, first.Cursor, jobs.FollowOptions{Follow: true, Keepalive: logKeepalive}, sink)
	stopped := context.Cause(ctx)
	switch {
	case stopped != nil && !errors.Is(stopped, context.Canceled):
		return stopped // the client's stdin failed, or the client's call ended
	case err != nil:
		return err
	}
	return nil
}
