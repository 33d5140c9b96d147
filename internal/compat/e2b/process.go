package e2b

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"connectrpc.com/connect"

	pb "genesis.dev/sandbox/internal/compat/e2b/gen/process"
	"genesis.dev/sandbox/internal/compat/e2b/gen/process/processconnect"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/sandbox"
)

// proc is one command started through the process service: the SDK's pid
// names a background job of the sandbox.
type proc struct {
	pid    uint32
	jobID  string
	tag    string
	config *pb.ProcessConfig
}

type sandboxProcs struct {
	next  uint32
	byPID map[uint32]*proc
}

// processTable keeps the pid → job mapping of each sandbox (in memory: a
// restart forgets the pids, the jobs themselves live on in /v1).
type processTable struct {
	mu        sync.Mutex
	bySandbox map[string]*sandboxProcs
}

func (t *processTable) add(sandboxID string, p *proc) uint32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	sp := t.bySandbox[sandboxID]
	if sp == nil {
		sp = &sandboxProcs{next: 1000, byPID: map[uint32]*proc{}}
		t.bySandbox[sandboxID] = sp
	}
	sp.next++
	p.pid = sp.next
	sp.byPID[p.pid] = p
	return p.pid
}

func (t *processTable) find(sandboxID string, sel *pb.ProcessSelector) (*proc, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if sp := t.bySandbox[sandboxID]; sp != nil && sel != nil {
		switch s := sel.Selector.(type) {
		case *pb.ProcessSelector_Pid:
			if p := sp.byPID[s.Pid]; p != nil {
				return p, nil
			}
		case *pb.ProcessSelector_Tag:
			for _, p := range sp.byPID {
				if p.tag != "" && p.tag == s.Tag {
					return p, nil
				}
			}
		}
	}
	return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process %v not found", sel))
}

func (t *processTable) all(sandboxID string) []*proc {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*proc
	if sp := t.bySandbox[sandboxID]; sp != nil {
		for _, p := range sp.byPID {
			out = append(out, p)
		}
	}
	return out
}

// Name names the adapter as a control hook.
func (a *Adapter) Name() string { return "e2b" }

// SandboxEnding (control's hook) drops the pids and the default code
// context the adapter keeps of a sandbox that ended, however it ended.
func (a *Adapter) SandboxEnding(_ context.Context, sandboxID, _ string) { a.forget(sandboxID) }

// forget drops what the adapter keeps of a sandbox that ended.
func (a *Adapter) forget(sandboxID string) {
	a.procs.mu.Lock()
	delete(a.procs.bySandbox, sandboxID)
	a.procs.mu.Unlock()
	a.ctxMu.Lock()
	delete(a.contexts, sandboxID)
	a.ctxMu.Unlock()
}

// connectCode maps an error class (by its HTTP status in errdefs' table)
// to a Connect code, so that the SDKs raise their own error types.
func connectError(err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	code := connect.CodeInternal
	switch errdefs.HTTPStatus(err) {
	case http.StatusBadRequest:
		code = connect.CodeInvalidArgument
	case http.StatusUnauthorized:
		code = connect.CodeUnauthenticated
	case http.StatusForbidden:
		code = connect.CodePermissionDenied
	case http.StatusNotFound:
		code = connect.CodeNotFound
	case http.StatusConflict, http.StatusPreconditionFailed:
		code = connect.CodeFailedPrecondition
	case http.StatusRequestEntityTooLarge, http.StatusTooManyRequests:
		code = connect.CodeResourceExhausted
	case http.StatusNotImplemented:
		code = connect.CodeUnimplemented
	case http.StatusServiceUnavailable, http.StatusBadGateway:
		code = connect.CodeUnavailable
	case http.StatusGatewayTimeout:
		code = connect.CodeDeadlineExceeded
	}
	return connect.NewError(code, err)
}

// processService serves process.Process over the sandbox's jobs.
type processService struct {
	processconnect.UnimplementedProcessHandler
	a *Adapter
}

// Start runs cmd with args (the SDK sends /bin/bash -l -c CMD) as a
// background job and streams start, its output and its end.
func (s *processService) Start(ctx context.Context, req *connect.Request[pb.StartRequest], stream *connect.ServerStream[pb.StartResponse]) error {
	a := s.a
	m := req.Msg
	if m.Pty != nil {
		return connect.NewError(connect.CodeUnimplemented, errors.New("PTY processes are not supported by this service's E2B adapter; use /v1/sandboxes/{id}/terminal"))
	}
	cfg := m.GetProcess()
	if cfg.GetCmd() == "" {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("process.cmd is required"))
	}
	cwd, err := sandboxPath(cfg.GetCwd())
	if err != nil {
		return connectError(err)
	}
	timeout := a.maxJob
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, max(1, time.Until(dl).Milliseconds()))
	}
	tenant, sbID := tenantOf(ctx), sandboxOf(ctx)
	job, err := a.jobs.StartJob(ctx, jobs.ExecInput{
		Tenant: tenant, SandboxID: sbID, Command: append([]string{cfg.GetCmd()}, cfg.GetArgs()...),
		Cwd: cwd, Env: cfg.GetEnvs(), StdinStream: m.GetStdin(), TimeoutMS: timeout,
	})
	if err != nil {
		return connectError(err)
	}
	pid := a.procs.add(sbID, &proc{jobID: job.ID, tag: m.GetTag(), config: cfg})
	send := func(ev *pb.ProcessEvent) error { return stream.Send(&pb.StartResponse{Event: ev}) }
	return a.streamJob(ctx, tenant, job.ID, pid, keepaliveOf(req.Header()), false, send)
}

// Connect streams a started process's output from now on and its end.
func (s *processService) Connect(ctx context.Context, req *connect.Request[pb.ConnectRequest], stream *connect.ServerStream[pb.ConnectResponse]) error {
	p, err := s.a.procs.find(sandboxOf(ctx), req.Msg.GetProcess())
	if err != nil {
		return err
	}
	send := func(ev *pb.ProcessEvent) error { return stream.Send(&pb.ConnectResponse{Event: ev}) }
	return s.a.streamJob(ctx, tenantOf(ctx), p.jobID, p.pid, keepaliveOf(req.Header()), true, send)
}

// keepaliveOf reads the SDK's Keepalive-Ping-Interval (seconds).
func keepaliveOf(h http.Header) time.Duration {
	if n, err := strconv.Atoi(h.Get("Keepalive-Ping-Interval")); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return 50 * time.Second
}

// streamJob sends start, then the job's output from its durable log, then
// its end; keepalive events while it is quiet. skipOld leaves out output
// written before the call (Connect).
func (a *Adapter) streamJob(ctx context.Context, tenant, jobID string, pid uint32, every time.Duration, skipOld bool, send func(*pb.ProcessEvent) error) error {
	_, log, err := a.jobs.JobLog(ctx, tenant, jobID)
	if err != nil {
		return connectError(err)
	}
	if err := send(&pb.ProcessEvent{Event: &pb.ProcessEvent_Start{Start: &pb.ProcessEvent_StartEvent{Pid: pid}}}); err != nil {
		return err
	}
	var from int64
	if skipOld {
		from = log.Size()
	}
	rd, err := log.NewReader(0)
	if err != nil {
		return connectError(err)
	}
	defer rd.Close()
	tick := time.NewTicker(every)
	defer tick.Stop()
	fn := func(e jobs.LogEvent) error {
		switch e.Type {
		case jobs.FrameStdout, jobs.FrameStderr:
			if e.Cursor <= from {
				return nil
			}
			d := &pb.ProcessEvent_DataEvent{}
			if e.Type == jobs.FrameStdout {
				d.Output = &pb.ProcessEvent_DataEvent_Stdout{Stdout: bytes.Clone(e.Payload)}
			} else {
				d.Output = &pb.ProcessEvent_DataEvent_Stderr{Stderr: bytes.Clone(e.Payload)}
			}
			return send(&pb.ProcessEvent{Event: &pb.ProcessEvent_Data{Data: d}})
		case jobs.FrameExit:
			x, err := e.Exit()
			if err != nil {
				return err
			}
			return send(&pb.ProcessEvent{Event: &pb.ProcessEvent_End{End: endEvent(x.ExitCode, x.ExitReason, x.Signal)}})
		}
		return nil
	}
	for {
		changed := log.Wait()
		exited, err := rd.ReadAvailable(fn)
		if err != nil {
			return connectError(err)
		}
		if exited {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-tick.C:
			if err := send(&pb.ProcessEvent{Event: &pb.ProcessEvent_Keepalive{Keepalive: &pb.ProcessEvent_KeepAlive{}}}); err != nil {
				return err
			}
		}
	}
}

// endEvent is a job's exit as the SDK reads it: exit code, and a status
// in the words of Go's os/exec (the agent E2B ships is written in Go).
func endEvent(code int, reason, signal string) *pb.ProcessEvent_EndEvent {
	ev := &pb.ProcessEvent_EndEvent{ExitCode: int32(code), Exited: true, Status: "exit status " + strconv.Itoa(code)}
	switch sandbox.ExitReason(reason) {
	case sandbox.ExitSignal, sandbox.ExitCanceled:
		ev.Exited = false
		ev.Status = "signal: " + signal
		if code == 0 {
			ev.ExitCode = -1
		}
	case sandbox.ExitTimeout, sandbox.ExitOOM, sandbox.ExitLost:
		msg := reason
		ev.Error = &msg
		if code == 0 {
			ev.ExitCode = -1
		}
	}
	return ev
}

// List lists the processes started through the adapter that still run.
func (s *processService) List(ctx context.Context, _ *connect.Request[pb.ListRequest]) (*connect.Response[pb.ListResponse], error) {
	out := &pb.ListResponse{}
	for _, p := range s.a.procs.all(sandboxOf(ctx)) {
		j, err := s.a.jobs.GetJob(ctx, tenantOf(ctx), p.jobID)
		if err != nil || j.State != sandbox.JobRunning {
			continue
		}
		info := &pb.ProcessInfo{Config: p.config, Pid: p.pid}
		if p.tag != "" {
			info.Tag = &p.tag
		}
		out.Processes = append(out.Processes, info)
	}
	return connect.NewResponse(out), nil
}

// SendInput writes to a process's stdin (it must have been started with
// stdin: true).
func (s *processService) SendInput(ctx context.Context, req *connect.Request[pb.SendInputRequest]) (*connect.Response[pb.SendInputResponse], error) {
	p, err := s.a.procs.find(sandboxOf(ctx), req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	in := req.Msg.GetInput()
	if in.GetPty() != nil {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("PTY input is not supported"))
	}
	if _, err := s.a.jobs.WriteStdin(ctx, tenantOf(ctx), p.jobID, bytes.NewReader(in.GetStdin())); err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&pb.SendInputResponse{}), nil
}

// CloseStdin closes a process's stdin.
func (s *processService) CloseStdin(ctx context.Context, req *connect.Request[pb.CloseStdinRequest]) (*connect.Response[pb.CloseStdinResponse], error) {
	p, err := s.a.procs.find(sandboxOf(ctx), req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := s.a.jobs.CloseStdin(ctx, tenantOf(ctx), p.jobID); err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&pb.CloseStdinResponse{}), nil
}

// SendSignal ends a process: SIGTERM and SIGKILL both cancel its job
// (SIGTERM to the whole process tree, SIGKILL after the jobs' grace).
func (s *processService) SendSignal(ctx context.Context, req *connect.Request[pb.SendSignalRequest]) (*connect.Response[pb.SendSignalResponse], error) {
	p, err := s.a.procs.find(sandboxOf(ctx), req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	j, err := s.a.jobs.GetJob(ctx, tenantOf(ctx), p.jobID)
	if err != nil {
		return nil, connectError(err)
	}
	if j.State != sandbox.JobRunning {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process %d has ended", p.pid))
	}
	if _, err := s.a.jobs.CancelJob(ctx, tenantOf(ctx), p.jobID); err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(&pb.SendSignalResponse{}), nil
}
