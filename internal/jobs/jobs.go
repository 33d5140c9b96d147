package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"genesis.dev/sandbox/internal/agent/agentclient"
	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/joblog"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/trace"
)

// releaseEvery is how much newly stored output lets the agent drop its copy.
const releaseEvery = 8 << 20

// cancelGrace is how long a canceled job's processes get between SIGTERM
// and SIGKILL.
const cancelGrace = 2 * time.Second

// StartJob starts a background job: it returns as soon as the agent has
// started the process. The output is copied into the job's durable log by a
// follower goroutine that survives client disconnects and re-attaches after
// a service restart. Without a TimeoutMS the job runs until it ends, is
// cancelled or its sandbox ends; a Streamed one takes the synchronous
// default.
func (s *Manager) StartJob(ctx context.Context, in ExecInput) (*sandbox.Job, error) {
	if err := s.validateExec(&in, !in.Streamed); err != nil {
		return nil, err
	}
	if err := s.admit(ctx, in, "job"); err != nil {
		return nil, err
	}
	return s.startJob(ctx, in, true)
}

// startJob starts a validated background job; busy holds a leased sandbox
// busy while it runs (a profile service does not).
func (s *Manager) startJob(ctx context.Context, in ExecInput, busy bool) (*sandbox.Job, error) {
	// The start answers within jobStartTimeout of its arrival, whatever it
	// waits for: the sandbox's and the job's records here, the agent's
	// start of the command in the follower.
	startBy := time.Now().Add(jobStartTimeout)
	pctx, pcancel := context.WithDeadlineCause(ctx, startBy, errStartDeadline)
	defer pcancel()
	phase := "the sandbox"
	late := func(err error) error {
		if ctx.Err() != nil || !errors.Is(context.Cause(pctx), errStartDeadline) {
			return err
		}
		s.log.Warn("job start got no answer within its deadline", "sandbox", in.SandboxID, "waiting_for", phase, "err", err)
		return fmt.Errorf("sandbox %s: the job's start got no answer within %v; it was waiting for %s: %w",
			in.SandboxID, jobStartTimeout, phase, errdefs.ErrDeadlineExceeded)
	}
	att, err := s.sbx.Attach(pctx, in.Tenant, in.SandboxID, control.AttachOptions{Busy: busy, Reservation: in.Reservation})
	if err != nil {
		return nil, late(err)
	}
	sb := att.Sandbox
	now := s.now()
	job := &sandbox.Job{
		ID: sandbox.NewID("job"), Tenant: in.Tenant, SandboxID: sb.ID, Command: in.Command, Script: in.Script,
		Cwd: in.Cwd, State: sandbox.JobRunning, TimeoutMS: in.TimeoutMS, Mode: sandbox.JobModeBackground,
		CreatedAt: now, StartedAt: &now,
	}
	phase = "the job's record"
	if err := s.store.CreateJob(pctx, job); err != nil {
		att.Release()
		return nil, late(err)
	}
	actor := trace.ActorAgent
	if !busy {
		actor = trace.ActorSystem
	} else {
		s.agentJobs.Store(job.ID, struct{}{})
	}
	s.traceJob(ctx, job, trace.KindJobStarted, actor)
	phase = "the job's artifact request"
	if err := s.arts.Plan(pctx, job, in.Artifacts); err != nil {
		att.Release()
		fctx, cancel := cleanupCtx(ctx, 10*time.Second)
		defer cancel()
		if ferr := s.finishJob(fctx, job.ID, lostExit("cannot record the artifact request: "+err.Error())); ferr != nil {
			return nil, ferr
		}
		return nil, late(err)
	}
	if _, err := s.logs.Get(job.ID, true); err != nil {
		att.Release()
		fctx, cancel := cleanupCtx(ctx, 10*time.Second)
		defer cancel()
		if ferr := s.finishJob(fctx, job.ID, lostExit("cannot create the job log: "+err.Error())); ferr != nil {
			return nil, ferr
		}
		return nil, err
	}
	req := agentproto.JobStartRequest{ExecRequest: agentRequest(sb, in)}
	req.JobID, req.Stdin, req.StdinStream = job.ID, in.Stdin, in.StdinStream
	req.TimeoutMS, req.KillGraceMS, req.MaxOutputBytes = in.TimeoutMS, killGrace.Milliseconds(), in.MaxOutputBytes
	// One agent request starts the job and streams it to the follower, so
	// the first output does not wait for a second request. The request
	// belongs to the follower, not to the caller: a caller that goes away
	// neither stops the job nor its recording.
	started := make(chan error, 1)
	following := s.followJob(att, job.ID, newMasker(in.Secrets), func(ctx context.Context, fn func(agentproto.Frame) error) error {
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		deadline := time.AfterFunc(time.Until(startBy), cancel)
		ok := false
		start, output := time.Now(), false // wall time for the first-output metric
		err := att.Agent.StartJobFollow(sctx, req, func(agentproto.JobInfo) {
			ok = true
			deadline.Stop()
			started <- nil
		}, func(f agentproto.Frame) error {
			if !output && (f.Type == agentproto.FrameStdout || f.Type == agentproto.FrameStderr) {
				output = true
				s.obs.ObserveFirstOutput(sb.Runtime, time.Since(start))
			}
			return fn(f)
		})
		if !ok {
			deadline.Stop()
			if err == nil {
				err = fmt.Errorf("the agent's answer ended before the job started: %w", errdefs.ErrInternal)
			}
			started <- err
			return errNotStarted
		}
		return err
	})
	phase = "the sandbox's agent"
	if !following {
		err = fmt.Errorf("the service is shutting down: %w", errdefs.ErrUnavailable)
	} else {
		// The follower answers on started (by startBy: its own deadline
		// cancels the start); the deadline is here too for a follower that
		// ended before it began the start.
		select {
		case err = <-started:
		case <-pctx.Done():
			err = late(context.Cause(pctx))
		}
	}
	if err != nil {
		fctx, cancel := cleanupCtx(ctx, 10*time.Second)
		defer cancel()
		x := lostExit("the agent could not start the job: " + err.Error())
		if errors.Is(err, errdefs.ErrInvalidArgument) {
			x.ExitReason = string(sandbox.ExitExited)
			x.ExitCode = 127
		}
		if ferr := s.finishJob(fctx, job.ID, x); ferr != nil {
			s.log.Error("recording failed job start", "job", job.ID, "err", ferr)
		}
		return nil, err
	}
	return job, nil
}

// jobStartTimeout bounds a job's start, from its arrival to the agent's
// start of its command.
const jobStartTimeout = time.Minute

// errStartDeadline is the cause of a job start's context when its own
// deadline, not its caller, ended it.
var errStartDeadline = errors.New("the job start's deadline passed")

// errNotStarted ends a follower whose job's start failed: StartJob
// records that end.
var errNotStarted = errors.New("job not started")

// streamFunc streams a job's frames to fn; see agentclient.StreamJob.
type streamFunc func(ctx context.Context, fn func(agentproto.Frame) error) error

// agentForgotJob is why a job the sandbox's agent does not know is lost:
// its process went with the container it ran in.
const agentForgotJob = "the sandbox's agent no longer knows the job: its process did not survive " +
	"(a sandbox woken, rolled back or restarted on its files only, as under runc, starts without it)"

func lostExit(why string) agentproto.ExitResult {
	return agentproto.ExitResult{ExitCode: -1, ExitReason: string(sandbox.ExitLost), Signal: why}
}

// followJob starts (once per job) the goroutine that copies the job's output
// from the agent into its log and records the final state. first, if set,
// opens the job's first stream (StartJob's start-and-follow request). The
// goroutine owns att (a busy attachment: the sandbox is busy while the job
// runs) and releases it when it ends. It reports whether the goroutine
// runs: not once the manager is closing, nor when the job is followed
// already; then att is released at once. mask, if set, hides the job's
// secrets in its output before it is stored.
func (s *Manager) followJob(att *control.Attachment, jobID string, mask *masker, first streamFunc) bool {
	s.followMu.Lock()
	defer s.followMu.Unlock()
	if s.following[jobID] != nil || s.closing {
		att.Release()
		return false
	}
	s.following[jobID] = att
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer att.Release()
		defer func() {
			s.followMu.Lock()
			delete(s.following, jobID)
			s.followMu.Unlock()
		}()
		s.follow(att, jobID, mask, first)
	}()
	return true
}

// LogPending reports whether this process will still append to the job's
// log (its exit frame included): a follower copies a background job's
// output, or a synchronous exec's output waits to be written. A job whose
// record is final while its log is pending is not lost: its exit is coming.
func (s *Manager) LogPending(jobID string) bool {
	s.followMu.Lock()
	defer s.followMu.Unlock()
	return s.following[jobID] != nil || s.execing[jobID]
}

func (s *Manager) setExecing(jobID string, on bool) {
	s.followMu.Lock()
	defer s.followMu.Unlock()
	if on {
		s.execing[jobID] = true
	} else {
		delete(s.execing, jobID)
	}
}

// followed returns the attachment of a job's follower, or nil.
func (s *Manager) followed(jobID string) *control.Attachment {
	s.followMu.Lock()
	defer s.followMu.Unlock()
	return s.following[jobID]
}

// suspendedPoll is how often a job's follower looks whether its paused or
// hibernated sandbox runs again.
const suspendedPoll = 500 * time.Millisecond

func (s *Manager) follow(att *control.Attachment, jobID string, mask *masker, first streamFunc) {
	ctx := s.bgCtx
	sandboxID, ag := att.Sandbox.ID, att.Agent
	log, err := s.logs.Get(jobID, true)
	if err != nil {
		s.log.Error("opening job log", "job", jobID, "err", err)
		_ = s.finishJob(ctx, jobID, lostExit(err.Error()))
		return
	}
	backoff := 100 * time.Millisecond
	lastRecord := time.Now()
	var released int64 // stdout+stderr bytes the agent was told it may drop
	for {
		so, se, exited := log.Offsets()
		if exited {
			s.recordExitFromLog(ctx, ag, jobID, log)
			return
		}
		var storeErr error // the service's own failure, not the agent's
		store := func(fr agentproto.Frame) error {
			if fr.Type == agentproto.FrameExit {
				// Record the final state before the exit event becomes
				// visible to log readers, so GET /v1/jobs/{id} never says
				// running after a reader saw the exit.
				var x agentproto.ExitResult
				if json.Unmarshal(fr.Payload, &x) == nil {
					if storeErr = s.recordExit(ctx, jobID, x); storeErr != nil {
						return storeErr
					}
				}
			}
			if storeErr = log.Append(fr); storeErr != nil {
				return storeErr
			}
			if time.Since(lastRecord) > time.Second {
				lastRecord = time.Now()
				s.recordProgress(ctx, jobID, log)
			}
			// What the log holds, the agent need not keep: telling it lets
			// it reuse that memory for the job's next output.
			if so, se, _ := log.Offsets(); so+se-released >= releaseEvery {
				released = so + se
				rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				if err := ag.ReleaseJob(rctx, jobID, so, se); err != nil {
					s.log.Debug("releasing stored job output", "job", jobID, "err", err)
				}
				cancel()
			}
			return nil
		}
		onFrame := store
		if mask != nil {
			// Each stream from the agent starts where the log ends: what
			// the masker held back of the last one is sent again.
			streams := mask.streams()
			onFrame = func(fr agentproto.Frame) error {
				for _, f := range streams.pass(fr) {
					if err := store(f); err != nil {
						return err
					}
				}
				return nil
			}
		}
		var err error
		if first != nil {
			err, first = first(ctx, onFrame), nil
			if errors.Is(err, errNotStarted) {
				return
			}
		} else {
			err = ag.StreamJob(ctx, jobID, so, se, onFrame)
		}
		if _, _, exited := log.Offsets(); exited {
			s.recordExitFromLog(ctx, ag, jobID, log)
			return
		}
		if ctx.Err() != nil {
			return // service shutting down: the job keeps running; re-attached on restart
		}
		if errors.Is(err, errdefs.ErrNotFound) {
			_ = s.finishJob(ctx, jobID, lostExit(agentForgotJob))
			return
		}
		if storeErr == nil && errors.Is(err, errdefs.ErrFailedPrecondition) {
			_ = s.finishJob(ctx, jobID, lostExit("the agent dropped output the job log does not hold: "+err.Error()))
			return
		}
		sb, gerr := s.store.GetSandbox(ctx, "", sandboxID)
		if gerr == nil && (sb.State == sandbox.StateDraining || sb.State == sandbox.StateDestroyed) {
			x := agentproto.ExitResult{ExitCode: -1, ExitReason: string(sandbox.ExitCanceled), Signal: "SIGKILL"}
			_ = s.finishJob(ctx, jobID, x)
			return
		}
		if gerr == nil && sb.State.Suspended() {
			// Paused or hibernated: its jobs come back with it (a wake from
			// files only finds the agent without them: lost, above).
			select {
			case <-ctx.Done():
				return
			case <-time.After(suspendedPoll):
			}
			continue
		}
		if gerr != nil || !sb.State.Running() {
			_ = s.finishJob(ctx, jobID, lostExit("the sandbox is no longer running"))
			return
		}
		if why, failed := s.sbx.FailIfGone(ctx, sb); failed {
			_ = s.finishJob(ctx, jobID, lostExit("the sandbox failed: "+why))
			return
		}
		s.log.Warn("job output stream interrupted; resuming", "job", jobID, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

func (s *Manager) recordProgress(ctx context.Context, jobID string, log *joblog.Log) {
	so, se, _ := log.Offsets()
	_, err := s.store.UpdateJob(ctx, jobID, func(j *sandbox.Job) error {
		if j.State.Final() {
			return nil
		}
		j.StdoutBytes, j.StderrBytes = max(j.StdoutBytes, so), max(j.StderrBytes, se)
		return nil
	})
	if err != nil {
		s.log.Warn("recording job progress", "job", jobID, "err", err)
	}
}

// recordExitFromLog records the final state from the log's exit frame and
// lets the agent forget the job.
func (s *Manager) recordExitFromLog(ctx context.Context, ag *agentclient.Client, jobID string, log *joblog.Log) {
	var x agentproto.ExitResult
	if p := log.ExitPayload(); p == nil || json.Unmarshal(p, &x) != nil {
		x = lostExit("the job log has no exit record")
	}
	if err := s.recordExit(ctx, jobID, x); err != nil {
		s.log.Error("recording job exit", "job", jobID, "err", err)
		return
	}
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	if ferr := ag.ForgetJob(fctx, jobID); ferr != nil && !errors.Is(ferr, errdefs.ErrNotFound) {
		s.log.Debug("agent forget job", "job", jobID, "err", ferr)
	}
	cancel()
	s.logs.Release(jobID)
}

// finishJob ends a job that has no exit frame yet: it appends x as the exit
// frame (so log followers end) and records the final state.
func (s *Manager) finishJob(ctx context.Context, jobID string, x agentproto.ExitResult) error {
	if log, err := s.logs.Get(jobID, true); err == nil {
		if so, se, exited := log.Offsets(); !exited {
			x.StdoutBytes, x.StderrBytes = max(x.StdoutBytes, so), max(x.StderrBytes, se)
			b, _ := json.Marshal(x)
			if err := log.Append(agentproto.Frame{Type: agentproto.FrameExit, Payload: b}); err != nil {
				s.log.Error("appending exit frame", "job", jobID, "err", err)
			}
		}
		s.logs.Release(jobID)
	}
	return s.recordExit(ctx, jobID, x)
}

func (s *Manager) recordExit(ctx context.Context, jobID string, x agentproto.ExitResult) error {
	s.arts.Collect(ctx, jobID)
	done := s.now()
	ended := false
	final, err := s.store.UpdateJob(ctx, jobID, func(j *sandbox.Job) error {
		if j.State.Final() {
			return nil
		}
		ended = true
		reason := sandbox.ExitReason(x.ExitReason)
		j.State = sandbox.FinalJobState(reason, x.ExitCode)
		j.ExitReason = reason
		if reason == sandbox.ExitLost {
			j.Error = x.Signal
		} else {
			code := x.ExitCode
			j.ExitCode = &code
			j.Signal = x.Signal
		}
		j.StdoutBytes, j.StderrBytes = max(j.StdoutBytes, x.StdoutBytes), max(j.StderrBytes, x.StderrBytes)
		j.StdoutTruncated = j.StdoutTruncated || x.StdoutTruncated
		j.StderrTruncated = j.StderrTruncated || x.StderrTruncated
		j.FinishedAt = &done
		return nil
	})
	s.agentJobs.Delete(jobID)
	if err == nil {
		s.jobEnded(jobID)
	}
	if err == nil && ended {
		s.traceJob(ctx, final, trace.KindJobFinished, trace.ActorSystem)
		s.rememberEnded(final)
	}
	return err
}

// CancelJob asks the agent to kill the whole process tree of a running job.
// The job's final state (canceled) is recorded when its exit arrives. A
// job in a sandbox reserved to a workload is refused (control.CodeReserved).
func (s *Manager) CancelJob(ctx context.Context, tenant, jobID string) (*sandbox.Job, error) {
	return s.CancelJobAs(ctx, tenant, "", jobID)
}

// CancelJobAs is CancelJob for the workload of reservation
// (control.AttachOptions.Reservation), or control.AnyReservation for the
// service's own ends of jobs.
func (s *Manager) CancelJobAs(ctx context.Context, tenant, reservation, jobID string) (*sandbox.Job, error) {
	return s.cancelJob(ctx, tenant, reservation, jobID, cancelGrace)
}

// cancelJob is CancelJobAs with grace between SIGTERM and SIGKILL.
func (s *Manager) cancelJob(ctx context.Context, tenant, reservation, jobID string, grace time.Duration) (*sandbox.Job, error) {
	j, err := s.GetJob(ctx, tenant, jobID)
	if err != nil {
		return nil, err
	}
	if j.State.Final() {
		return j, nil // canceling a finished job changes nothing
	}
	if j.Mode != sandbox.JobModeBackground {
		return nil, errdefs.WithCode("not_cancelable", fmt.Errorf(
			"job %s runs synchronously; it ends when its caller disconnects or its timeout passes: %w", jobID, errdefs.ErrFailedPrecondition))
	}
	// The follower's attachment reaches the agent; a job nobody follows
	// here (another instance's) is reached through a new attachment.
	att := s.followed(jobID)
	if att == nil {
		if att, err = s.sbx.Attach(ctx, tenant, j.SandboxID, control.AttachOptions{Reservation: reservation}); err != nil {
			return nil, err
		}
		att.Release()
	} else if err := control.CheckReservation(att.Sandbox, reservation); err != nil {
		return nil, err
	}
	err = att.Agent.CancelJob(ctx, jobID, grace)
	if errors.Is(err, errdefs.ErrNotFound) {
		return j, s.finishJob(ctx, jobID, lostExit(agentForgotJob))
	}
	if err != nil {
		return nil, err
	}
	return j, nil
}

// JobLog returns a job of tenant and its log.
func (s *Manager) JobLog(ctx context.Context, tenant, jobID string) (*sandbox.Job, *joblog.Log, error) {
	j, err := s.GetJob(ctx, tenant, jobID)
	if err != nil {
		return nil, nil, err
	}
	l, err := s.logs.View(jobID)
	if err != nil {
		return nil, nil, err
	}
	return j, l, nil
}

// JobLogFrom is JobLog for a reader that starts at cursor (an event id of
// the log, 0 for its start): a cursor that is none is an invalid argument
// with code invalid_cursor, on every edge.
func (s *Manager) JobLogFrom(ctx context.Context, tenant, jobID string, cursor int64) (*sandbox.Job, *joblog.Log, error) {
	j, l, err := s.JobLog(ctx, tenant, jobID)
	if err != nil {
		return nil, nil, err
	}
	if ok, err := l.ValidCursor(cursor); err != nil || !ok {
		return nil, nil, errdefs.WithCode("invalid_cursor", fmt.Errorf(
			"cursor %d is not an event id of job %s: %w", cursor, j.ID, errdefs.ErrInvalidArgument))
	}
	return j, l, nil
}

// StartedJobLog returns the log of a job that StartJob just returned to the
// same caller, without reading the job's record again.
func (s *Manager) StartedJobLog(j *sandbox.Job) (*joblog.Log, error) {
	return s.logs.View(j.ID)
}

// reattachJobs, at start-up, resumes following the background jobs that
// were running when the service stopped; jobs that cannot be followed are
// finished as lost. It returns how many were lost.
func (s *Manager) reattachJobs(ctx context.Context) int {
	jobs, err := s.store.ListJobs(ctx, jobFilterRunning)
	if err != nil {
		s.log.Error("listing running jobs", "err", err)
		return 0
	}
	lost := 0
	for _, j := range jobs {
		if j.Mode == sandbox.JobModeBackground {
			if att, err := s.sbx.Attach(ctx, "", j.SandboxID, control.AttachOptions{Busy: true, Reservation: control.AnyReservation}); err == nil {
				s.followJob(att, j.ID, nil, nil)
				continue
			}
		}
		if err := s.finishJob(ctx, j.ID, lostExit("the service restarted while the job was running")); err == nil {
			lost++
		}
	}
	return lost
}
