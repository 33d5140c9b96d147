package jobs

import (
	"context"
	"fmt"
	"io"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/joblog"
	"genesis.dev/sandbox/internal/sandbox"
)

// stdinAgent finds the agent of a running background job of tenant for a
// stdin call of the workload of reservation ("" for the tenant's own); the
// follower's attachment is used when this instance follows the job.
func (s *Manager) stdinAgent(ctx context.Context, tenant, reservation, jobID string) (*control.Attachment, error) {
	j, err := s.GetJob(ctx, tenant, jobID)
	if err != nil {
		return nil, err
	}
	if j.State.Final() {
		return nil, errdefs.WithCode("job_not_running", fmt.Errorf("job %s has ended (%s): %w", jobID, j.State, errdefs.ErrFailedPrecondition))
	}
	if j.Mode != sandbox.JobModeBackground {
		return nil, errdefs.WithCode("stdin_not_streamed", fmt.Errorf(
			"job %s runs synchronously; its stdin is the request's stdin: %w", jobID, errdefs.ErrFailedPrecondition))
	}
	if att := s.followed(jobID); att != nil {
		if err := control.CheckReservation(att.Sandbox, reservation); err != nil {
			return nil, err
		}
		return att, nil
	}
	att, err := s.sbx.Attach(ctx, tenant, j.SandboxID, control.AttachOptions{Reservation: reservation})
	if err != nil {
		return nil, err
	}
	att.Release()
	return att, nil
}

// OpenStdin streams into the stdin of a running background job of tenant
// started with StdinStream: what is written reaches the process in order.
// Close of the writer ends this stream only; CloseStdin closes the job's
// stdin. A job without a streamed stdin is code stdin_not_streamed, an
// ended one job_not_running (both failed preconditions); a second
// concurrent stream is stdin_busy (conflict).
func (s *Manager) OpenStdin(ctx context.Context, tenant, jobID string) (io.WriteCloser, error) {
	return s.OpenStdinAs(ctx, tenant, "", jobID)
}

// OpenStdinAs is OpenStdin for the workload of reservation
// (control.AttachOptions.Reservation): a job of a server in a sandbox
// reserved to it.
func (s *Manager) OpenStdinAs(ctx context.Context, tenant, reservation, jobID string) (io.WriteCloser, error) {
	att, err := s.stdinAgent(ctx, tenant, reservation, jobID)
	if err != nil {
		return nil, err
	}
	return att.Agent.OpenStdin(ctx, jobID)
}

// WriteStdin copies r into the job's stdin over one stream and reports how
// many bytes the agent took.
func (s *Manager) WriteStdin(ctx context.Context, tenant, jobID string, r io.Reader) (int64, error) {
	w, err := s.OpenStdin(ctx, tenant, jobID)
	if err != nil {
		return 0, err
	}
	n, cerr := io.CopyBuffer(w, r, make([]byte, 64<<10))
	if err := w.Close(); err != nil {
		return n, err
	}
	if cerr != nil {
		return n, fmt.Errorf("reading the stdin body: %v: %w", cerr, errdefs.ErrInvalidArgument)
	}
	return n, nil
}

// CloseStdin closes a job's streamed stdin: the process reads end of file
// after what was written. Closing it again, or after the job ended,
// succeeds.
func (s *Manager) CloseStdin(ctx context.Context, tenant, jobID string) error {
	j, err := s.GetJob(ctx, tenant, jobID)
	if err != nil {
		return err
	}
	if j.State.Final() {
		return nil
	}
	att, err := s.stdinAgent(ctx, tenant, "", jobID)
	if err == nil {
		err = att.Agent.CloseStdin(ctx, jobID)
	}
	// The job may end between the state read above and the agent's answer
	// (a cat exits as soon as its stdin is closed): its stdin is closed.
	if errdefs.Code(err) == agentproto.CodeJobNotRunning {
		return nil
	}
	return err
}

// serverOutputLimit is the most a server job's output may be: the agent's
// limit of a background job's output.
const serverOutputLimit = 256 << 20

// ServerOutputLimit is the most output a server job's log keeps (the
// configured limits.max_output_bytes, at most 256 MiB); past it the agent
// drops the server's output, so its supervisor restarts it first.
func (s *Manager) ServerOutputLimit() int64 { return min(s.lim.MaxOutputBytes, serverOutputLimit) }

// StartServer starts a long-running server process (a stdio MCP server) as
// a background job: its stdin is streamed (OpenStdin), it has no timeout,
// its output is kept up to the largest output limit, and it does not hold
// a leased sandbox busy. It ends when it exits, is cancelled, or its
// sandbox ends.
func (s *Manager) StartServer(ctx context.Context, in ExecInput) (*sandbox.Job, error) {
	in.StdinStream, in.Stdin, in.TimeoutMS = true, nil, 0
	if err := s.validateExec(&in, true); err != nil {
		return nil, err
	}
	in.TimeoutMS, in.MaxOutputBytes = 0, s.ServerOutputLimit()
	return s.startJob(ctx, in, false)
}

// CopyOutput writes a job's standard output, from its start, to stdout as
// it is recorded, and returns when the job has exited (its exit frame is
// in the log) or ctx ends. Standard error stays in the job's log.
func (s *Manager) CopyOutput(ctx context.Context, tenant, jobID string, stdout io.Writer) error {
	_, log, err := s.JobLog(ctx, tenant, jobID)
	if err != nil {
		return err
	}
	return log.Read(ctx, 0, true, func(e joblog.Event) error {
		if e.Type != agentproto.FrameStdout {
			return nil
		}
		_, err := stdout.Write(e.Payload)
		return err
	})
}
