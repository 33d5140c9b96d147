package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/stopwatch"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/trace"
)

// ExecInput is one command or script to run in a sandbox.
type ExecInput struct {
	Tenant    string
	SandboxID string
	Command   []string
	Script    string
	Cwd       string
	Env       map[string]string
	// wrapped, if set, is the script the agent runs instead of Command or
	// Script, Cwd and Env (a shell session's wrapper, which applies them
	// itself); the job record keeps what the caller asked for.
	wrapped string
	Stdin   []byte
	// StdinStream (background jobs) gives the job a pipe as stdin that
	// OpenStdin writes into and CloseStdin closes; Stdin must be empty.
	StdinStream bool
	// TimeoutMS bounds the job; 0 takes the default: the configured
	// limits.default_exec_timeout_ms for a synchronous or streamed exec,
	// none for a background job (it runs until it ends, is cancelled, or
	// its sandbox ends).
	TimeoutMS      int64
	MaxOutputBytes int64
	// Artifacts, if set, names files to keep when the job ends.
	Artifacts *sandbox.ArtifactSpec
	// Streamed marks a job StartJob starts for a streamed exec: its caller
	// follows it live as a synchronous exec's caller waits, so it takes the
	// synchronous default timeout.
	Streamed bool
	// Reservation is the reservation of the workload the job belongs to
	// (control.AttachOptions.Reservation): a sandbox reserved to it is
	// reachable. Empty for every job a tenant starts.
	Reservation string
	// Secrets are values the job's output must not show: each occurrence
	// (and its JSON-escaped form) in stdout or stderr is overwritten with
	// '*' before the output is stored or answered (maskOutput).
	Secrets []string
}

// agentRequest is what the agent runs for in: Command or Script in Cwd
// with Env over the sandbox's, or in's wrapper.
func agentRequest(sb *sandbox.Sandbox, in ExecInput) agentproto.ExecRequest {
	if in.wrapped != "" {
		return agentproto.ExecRequest{Script: in.wrapped, Env: mergeEnv(sb, nil)}
	}
	return agentproto.ExecRequest{Command: in.Command, Script: in.Script, Cwd: in.Cwd, Env: mergeEnv(sb, in.Env)}
}

// ExecOutput is a finished job and its captured output.
type ExecOutput struct {
	Job    *sandbox.Job
	Stdout []byte
	Stderr []byte
	// DurationMS is measured by the agent inside the sandbox.
	DurationMS int64
}

// killGrace is how long a timed-out job gets between SIGTERM and SIGKILL.
const killGrace = 200 * time.Millisecond

// execSlack is how long a synchronous exec may take beyond its timeout
// and killGrace before it answers 504 deadline_exceeded, saying what it
// was waiting for: the way to the agent and back, and the records on
// either side. (A job that runs into its own timeout is no error: it
// answers 200 with exit_reason timeout.)
const execSlack = 10 * time.Second

// execBudget is the longest a synchronous exec of timeoutMS waits for its
// result, from its arrival.
func execBudget(timeoutMS int64) time.Duration {
	return time.Duration(timeoutMS)*time.Millisecond + killGrace + execSlack
}

// errExecDeadline is the cause of a synchronous exec's context when its
// own deadline, not its caller, ended it.
var errExecDeadline = errors.New("the exec's deadline passed")

// validateExec checks in and fills in its defaults; background jobs get
// no default timeout (see ExecInput.TimeoutMS).
func (s *Manager) validateExec(in *ExecInput, background bool) error {
	lim := s.lim
	switch {
	case len(in.Command) == 0 && in.Script == "":
		return invalid("one of command and script is required")
	case len(in.Command) > 0 && in.Script != "":
		return invalid("command and script are mutually exclusive")
	case len(in.Command) > 0 && in.Command[0] == "":
		return invalid("command[0] must not be empty")
	case in.StdinStream && len(in.Stdin) > 0:
		return invalid("stdin and stdin_stream are mutually exclusive")
	case in.Cwd != "" && !path.IsAbs(in.Cwd) && in.wrapped == "": // a session's cwd may be relative to its own
		return invalid("cwd must be an absolute path, got %q", in.Cwd)
	case in.TimeoutMS < 0 || in.TimeoutMS > lim.MaxExecTimeoutMS:
		return invalid("timeout_ms must be between 1 and %d, got %d", lim.MaxExecTimeoutMS, in.TimeoutMS)
	case in.MaxOutputBytes < 0 || in.MaxOutputBytes > lim.MaxOutputBytes:
		return invalid("max_output_bytes must be between 1 and %d, got %d", lim.MaxOutputBytes, in.MaxOutputBytes)
	}
	for _, a := range in.Command {
		if len(a) > 128<<10 {
			return invalid("a command argument is longer than 128 KiB")
		}
	}
	if in.TimeoutMS == 0 && !background {
		in.TimeoutMS = lim.DefaultExecTimeoutMS
	}
	if in.MaxOutputBytes == 0 {
		in.MaxOutputBytes = lim.DefaultOutputBytes
	}
	if err := s.arts.Validate(in.Artifacts); err != nil {
		return err
	}
	return control.ValidateEnv(in.Env)
}

// Exec runs one job in a sandbox and waits for it. The job is recorded
// before it runs and always ends in exactly one final state.
func (s *Manager) Exec(ctx context.Context, in ExecInput) (*ExecOutput, error) {
	if err := s.validateExec(&in, false); err != nil {
		return nil, err
	}
	if in.StdinStream {
		return nil, errdefs.WithCode("stdin_stream_needs_background", fmt.Errorf(
			"stdin_stream is for background jobs (or a streamed exec); a synchronous exec takes stdin or stdin_base64: %w", errdefs.ErrInvalidArgument))
	}
	sw := stopwatch.Start[ExecTimings](ctx)
	// One deadline bounds the whole exec from its arrival: every wait on
	// the way to the agent (the gate, the sandbox's record, the job's
	// record, trace and log) as well as the agent's answer. The agent
	// enforces the timeout itself; the deadline is the backstop.
	dctx, cancel := context.WithTimeoutCause(ctx, execBudget(in.TimeoutMS), errExecDeadline)
	defer cancel()
	phase := "admission"
	// late is err, or the exec's deadline error when the deadline ended
	// the wait in phase (the caller still waits).
	late := func(err error) error {
		if ctx.Err() != nil || !errors.Is(context.Cause(dctx), errExecDeadline) {
			return err
		}
		s.log.Warn("exec got no answer within its deadline", "sandbox", in.SandboxID, "waiting_for", phase,
			"timeout_ms", in.TimeoutMS, "err", err)
		return fmt.Errorf("sandbox %s: the exec got no answer within its timeout of %d ms plus %v; it was waiting for %s: %w",
			in.SandboxID, in.TimeoutMS, killGrace+execSlack, phase, errdefs.ErrDeadlineExceeded)
	}
	if err := s.admit(dctx, in, "exec"); err != nil {
		return nil, late(err)
	}
	phase = "the sandbox"
	att, err := s.sbx.Attach(dctx, in.Tenant, in.SandboxID, control.AttachOptions{Busy: true, Reservation: in.Reservation})
	if err != nil {
		return nil, late(err)
	}
	defer att.Release()
	sw.Lap(lapAttach)
	sb := att.Sandbox
	now := s.now()
	job := &sandbox.Job{
		ID:        sandbox.NewID("job"),
		Tenant:    in.Tenant,
		SandboxID: sb.ID,
		Command:   in.Command,
		Script:    in.Script,
		Cwd:       in.Cwd,
		State:     sandbox.JobRunning,
		TimeoutMS: in.TimeoutMS,
		Mode:      sandbox.JobModeSync,
		CreatedAt: now,
		StartedAt: &now,
	}
	phase = "the job's record"
	if err := s.store.CreateJob(dctx, job); err != nil {
		return nil, late(err)
	}
	sw.Split(partRecordJob)
	s.traceJob(ctx, job, trace.KindJobStarted, trace.ActorAgent)
	sw.Split(partRecordTrace)
	// The log exists while the job runs, so it can be opened and followed
	// like a background job's; the output is appended when the job ends.
	if _, err := s.logs.Get(job.ID, true); err != nil {
		s.log.Warn("creating job log", "job", job.ID, "err", err)
	}
	sw.Split(partRecordLog)
	s.setExecing(job.ID, true)
	defer s.setExecing(job.ID, false)
	phase = "the job's artifact request"
	if err := s.arts.Plan(dctx, job, in.Artifacts); err != nil {
		fctx, fcancel := cleanupCtx(ctx, 10*time.Second)
		defer fcancel()
		return nil, s.execFailed(fctx, sb, job, late(err), ctx.Err() != nil)
	}
	start := time.Now() // wall time for the latency metric, not the service clock
	req := agentRequest(sb, in)
	req.JobID, req.Stdin, req.TimeoutMS, req.KillGraceMS, req.MaxOutputBytes = job.ID, in.Stdin, in.TimeoutMS, killGrace.Milliseconds(), in.MaxOutputBytes
	sw.Lap(lapRecord)
	phase = "the sandbox's agent"
	res, runErr := att.Agent.Exec(dctx, req)
	sw.Lap(lapAgent)
	fctx, fcancel := cleanupCtx(ctx, 10*time.Second)
	defer fcancel()
	if runErr != nil {
		return nil, s.execFailed(fctx, sb, job, late(runErr), ctx.Err() != nil)
	}
	s.obs.ObserveExec(sb.Runtime, time.Since(start))
	if m := newMasker(in.Secrets); m != nil {
		res.Stdout, res.Stderr = m.all(res.Stdout), m.all(res.Stderr)
	}
	done := s.now()
	code := res.ExitCode
	end := *job
	end.State = sandbox.FinalJobState(sandbox.ExitReason(res.ExitReason), res.ExitCode)
	end.ExitCode = &code
	end.ExitReason = sandbox.ExitReason(res.ExitReason)
	end.Signal = res.Signal
	end.StdoutBytes, end.StderrBytes = res.StdoutBytes, res.StderrBytes
	end.StdoutTruncated, end.StderrTruncated = res.StdoutTruncated, res.StderrTruncated
	end.FinishedAt = &done
	// Only this call ends a synchronous job, so its end is written in one
	// statement, without a transaction that reads the record first.
	final, err := s.store.FinishJob(fctx, &end)
	if err != nil {
		s.logs.Release(job.ID)
		return nil, err
	}
	sw.Split(partFinishJob)
	s.jobEnded(job.ID)
	s.traceJob(ctx, final, trace.KindJobFinished, trace.ActorSystem)
	sw.Split(partFinishTrace)
	// Artifacts are kept, and the log written, after the record is final,
	// so a reader that sees the exit event also sees both. A job that
	// asked for none has no collection record to read.
	if in.Artifacts != nil {
		s.arts.Collect(context.WithoutCancel(ctx), job.ID)
	}
	s.writeSyncLog(job.ID, res)
	sw.Split(partFinishLog)
	sw.Lap(lapFinish)
	return &ExecOutput{Job: final, Stdout: res.Stdout, Stderr: res.Stderr, DurationMS: res.DurationMS}, nil
}

// execFailed records the final state of a job whose agent call failed and
// returns the error to show the caller.
func (s *Manager) execFailed(ctx context.Context, sb *sandbox.Sandbox, job *sandbox.Job, runErr error, callerGone bool) error {
	state, reason := sandbox.JobLost, sandbox.ExitLost
	if callerGone {
		state, reason = sandbox.JobCanceled, sandbox.ExitCanceled
	}
	var out error = runErr
	if !callerGone && errors.Is(runErr, errdefs.ErrUnavailable) {
		// Is the sandbox itself gone?
		if why, failed := s.sbx.FailIfGone(ctx, sb); failed {
			out = errdefs.WithCode("sandbox_failed", fmt.Errorf("sandbox %s failed during the job: %s: %w", sb.ID, why, errdefs.ErrFailedPrecondition))
		}
	}
	s.arts.Collect(context.WithoutCancel(ctx), job.ID)
	s.writeSyncLog(job.ID, agentproto.ExecResult{ExitCode: -1, ExitReason: string(reason), Signal: runErr.Error()})
	done := s.now()
	if final, err := s.store.UpdateJob(ctx, job.ID, func(j *sandbox.Job) error {
		j.State, j.ExitReason, j.Error, j.FinishedAt = state, reason, runErr.Error(), &done
		return nil
	}); err != nil {
		s.log.Error("recording job failure", "job", job.ID, "err", err)
	} else {
		s.jobEnded(job.ID)
		s.traceJob(ctx, final, trace.KindJobFinished, trace.ActorSystem)
	}
	return out
}

// GetJob returns a job of tenant.
func (s *Manager) GetJob(ctx context.Context, tenant, id string) (*sandbox.Job, error) {
	if !sandbox.ValidID("job", id) {
		return nil, fmt.Errorf("job %q: %w", id, errdefs.ErrNotFound)
	}
	return s.store.GetJob(ctx, tenant, id)
}

// writeSyncLog keeps a synchronous job's output in its durable log too, so
// GET /v1/jobs/{id}/logs serves every job the same way. Failures are logged:
// the caller already has the output.
func (s *Manager) writeSyncLog(jobID string, res agentproto.ExecResult) {
	l, err := s.logs.Get(jobID, true)
	if err != nil {
		s.log.Warn("creating job log", "job", jobID, "err", err)
		return
	}
	defer s.logs.Release(jobID)
	var frames []agentproto.Frame
	for _, st := range []struct {
		t         agentproto.FrameType
		data      []byte
		truncated bool
	}{{agentproto.FrameStdout, res.Stdout, res.StdoutTruncated}, {agentproto.FrameStderr, res.Stderr, res.StderrTruncated}} {
		for off := 0; off < len(st.data); off += agentproto.MaxFramePayload {
			end := min(off+agentproto.MaxFramePayload, len(st.data))
			frames = append(frames, agentproto.Frame{Type: st.t, Offset: int64(off), Payload: st.data[off:end]})
		}
		if st.truncated {
			frames = append(frames, agentproto.Frame{Type: agentproto.FrameTruncated, Offset: int64(len(st.data)), Payload: []byte{byte(st.t)}})
		}
	}
	x, _ := json.Marshal(agentproto.ExitResult{
		ExitCode: res.ExitCode, ExitReason: res.ExitReason, Signal: res.Signal,
		StdoutBytes: res.StdoutBytes, StderrBytes: res.StderrBytes,
		StdoutTruncated: res.StdoutTruncated, StderrTruncated: res.StderrTruncated, DurationMS: res.DurationMS,
	})
	frames = append(frames, agentproto.Frame{Type: agentproto.FrameExit, Payload: x})
	if err := l.Append(frames...); err != nil {
		s.log.Warn("writing job log", "job", jobID, "err", err)
	}
}

// MaxJobList bounds a sandbox's job listing.
const MaxJobList = 500

// ListSandboxJobs lists the jobs of tenant's sandbox id, newest first, at
// most limit (1..MaxJobList, default 100), in the given states if any. A
// sandbox of another tenant is not found; a destroyed one still lists its
// jobs while its record is kept.
func (s *Manager) ListSandboxJobs(ctx context.Context, tenant, id string, states []sandbox.JobState, limit int) ([]*sandbox.Job, error) {
	if limit == 0 {
		limit = 100
	}
	if limit < 1 || limit > MaxJobList {
		return nil, errdefs.Invalid("limit %d is not 1..%d", limit, MaxJobList)
	}
	for _, st := range states {
		switch st {
		case sandbox.JobPending, sandbox.JobRunning, sandbox.JobSucceeded, sandbox.JobFailed, sandbox.JobCanceled, sandbox.JobLost:
		default:
			return nil, errdefs.Invalid("unknown job state %q", st)
		}
	}
	if !sandbox.ValidID("sbx", id) {
		return nil, fmt.Errorf("sandbox %q: %w", id, errdefs.ErrNotFound)
	}
	sb, err := s.store.GetSandbox(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	all, err := s.store.ListJobs(ctx, store.JobFilter{Tenant: tenant, SandboxID: sb.ID, States: states})
	if err != nil {
		return nil, err
	}
	slices.Reverse(all)
	return all[:min(limit, len(all))], nil
}
