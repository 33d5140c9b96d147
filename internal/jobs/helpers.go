package jobs

import (
	"context"
	"io"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/sandbox"
)

// Helper jobs are the processes the service itself starts in a sandbox for
// a workload — a program a desktop batch launches, a recording's ffmpeg —
// recorded as background jobs like any other: a job_ id that GET
// /v1/jobs/{id} answers, a durable log, job.started and job.finished in
// the trace (the system's, so a replay does not run them again), an end
// recorded as lost when the sandbox or the service goes. They do not hold
// a leased sandbox busy and an abort does not cancel them (they are not the
// agent's jobs). Their methods take and return the agent protocol's job
// types, which the workloads that start them already speak.

// StartHelper starts req as a helper job in tenant's running sandbox
// sandboxID and returns its job: JobID is the job's id (req.JobID is
// ignored). Command or Script, Cwd, Env, StdinStream, TimeoutMS and
// MaxOutputBytes are taken from req and validated as a job's.
func (s *Manager) StartHelper(ctx context.Context, tenant, sandboxID string, req agentproto.JobStartRequest) (agentproto.JobInfo, error) {
	in := ExecInput{Tenant: tenant, SandboxID: sandboxID, Command: req.Command, Script: req.Script, Cwd: req.Cwd, Env: req.Env,
		StdinStream: req.StdinStream, TimeoutMS: req.TimeoutMS, MaxOutputBytes: req.MaxOutputBytes}
	if err := s.validateExec(&in, true); err != nil {
		return agentproto.JobInfo{}, err
	}
	j, err := s.startJob(ctx, in, false)
	if err != nil {
		return agentproto.JobInfo{}, err
	}
	return helperInfo(j), nil
}

// HelperInfo reports a helper job of tenant from its record: Running until
// its final state is recorded, then Exit.
func (s *Manager) HelperInfo(ctx context.Context, tenant, jobID string) (agentproto.JobInfo, error) {
	j, err := s.GetJob(ctx, tenant, jobID)
	if err != nil {
		return agentproto.JobInfo{}, err
	}
	return helperInfo(j), nil
}

// CancelHelper ends a helper job of tenant: SIGTERM to its process tree,
// SIGKILL after grace. Its end is recorded when its exit arrives.
func (s *Manager) CancelHelper(ctx context.Context, tenant, jobID string, grace time.Duration) error {
	_, err := s.cancelJob(ctx, tenant, "", jobID, grace)
	return err
}

// OpenHelperStdin opens the streamed stdin of a helper job of tenant
// started with StdinStream.
func (s *Manager) OpenHelperStdin(ctx context.Context, tenant, jobID string) (io.WriteCloser, error) {
	return s.OpenStdinAs(ctx, tenant, "", jobID)
}

// helperInfo is j as the agent protocol reports a job.
func helperInfo(j *sandbox.Job) agentproto.JobInfo {
	info := agentproto.JobInfo{JobID: j.ID, Running: !j.State.Final(), StdoutBytes: j.StdoutBytes, StderrBytes: j.StderrBytes,
		StdoutTruncated: j.StdoutTruncated, StderrTruncated: j.StderrTruncated}
	if !info.Running {
		x := &agentproto.ExitResult{ExitCode: -1, ExitReason: string(j.ExitReason), Signal: j.Signal,
			StdoutBytes: j.StdoutBytes, StderrBytes: j.StderrBytes, StdoutTruncated: j.StdoutTruncated, StderrTruncated: j.StderrTruncated}
		if j.ExitCode != nil {
			x.ExitCode = *j.ExitCode
		}
		if x.Signal == "" && j.Error != "" {
			x.Signal = j.Error // a lost job's why, as the agent's lost exit carries it
		}
		info.Exit = x
	}
	return info
}
