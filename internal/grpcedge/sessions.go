package grpcedge

import (
	"context"
	"encoding/base64"

	"connectrpc.com/connect"

	sandboxv1 "genesis.dev/sandbox/gen/genesis/sandbox/v1"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/sandbox"
)

// sessionService serves genesis.sandbox.v1.SessionService over jobs, as
// httpapi's sessions.go serves the same routes: a session id is not a
// context id and the other way round (NOT_FOUND, as over HTTP).
type sessionService struct{ edge *Edge }

// session is the tenant's session or context id of kind (jobs.GetSessionOf,
// the check both edges make).
func (s *sessionService) session(ctx context.Context, id string, kind sandbox.SessionKind) (*sandbox.Session, error) {
	return s.edge.jobs.GetSessionOf(ctx, tenantOf(ctx), id, kind)
}

func (s *sessionService) CreateSession(ctx context.Context, req *connect.Request[sandboxv1.CreateSessionRequest]) (*connect.Response[sandboxv1.Session], error) {
	se, err := s.edge.jobs.CreateSession(ctx, tenantOf(ctx), req.Msg.SandboxId)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(sessionPB(se)), nil
}

func (s *sessionService) GetSession(ctx context.Context, req *connect.Request[sandboxv1.GetSessionRequest]) (*connect.Response[sandboxv1.Session], error) {
	se, err := s.session(ctx, req.Msg.SessionId, sandbox.SessionShell)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(sessionPB(se)), nil
}

func (s *sessionService) DeleteSession(ctx context.Context, req *connect.Request[sandboxv1.DeleteSessionRequest]) (*connect.Response[sandboxv1.DeleteSessionResponse], error) {
	if err := s.edge.jobs.CloseSessionOf(ctx, tenantOf(ctx), req.Msg.SessionId, sandbox.SessionShell); err != nil {
		return nil, err
	}
	return connect.NewResponse(&sandboxv1.DeleteSessionResponse{}), nil
}

func (s *sessionService) ExecInSession(ctx context.Context, req *connect.Request[sandboxv1.ExecInSessionRequest]) (*connect.Response[sandboxv1.ExecResult], error) {
	m := req.Msg
	in := jobs.ExecInput{
		Tenant: tenantOf(ctx), Command: m.Command, Script: m.Script, Cwd: m.Cwd, Env: m.Env,
		Stdin: m.Stdin, TimeoutMS: m.TimeoutMs, MaxOutputBytes: m.MaxOutputBytes,
	}
	// ctx ends with the call: the command is canceled with it.
	out, err := s.edge.jobs.SessionExec(ctx, m.SessionId, in)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(execResultPB(out)), nil
}

func (s *sessionService) CreateContext(ctx context.Context, req *connect.Request[sandboxv1.CreateContextRequest]) (*connect.Response[sandboxv1.Session], error) {
	se, err := s.edge.jobs.CreateContext(ctx, tenantOf(ctx), req.Msg.SandboxId, req.Msg.Language)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(sessionPB(se)), nil
}

func (s *sessionService) GetContext(ctx context.Context, req *connect.Request[sandboxv1.GetContextRequest]) (*connect.Response[sandboxv1.Session], error) {
	se, err := s.session(ctx, req.Msg.ContextId, sandbox.SessionPython)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(sessionPB(se)), nil
}

func (s *sessionService) DeleteContext(ctx context.Context, req *connect.Request[sandboxv1.DeleteContextRequest]) (*connect.Response[sandboxv1.DeleteContextResponse], error) {
	if err := s.edge.jobs.CloseSessionOf(ctx, tenantOf(ctx), req.Msg.ContextId, sandbox.SessionPython); err != nil {
		return nil, err
	}
	return connect.NewResponse(&sandboxv1.DeleteContextResponse{}), nil
}

func (s *sessionService) RunCode(ctx context.Context, req *connect.Request[sandboxv1.RunCodeRequest]) (*connect.Response[sandboxv1.RunCodeResult], error) {
	res, err := s.edge.jobs.RunCode(ctx, tenantOf(ctx), req.Msg.ContextId, req.Msg.Code, req.Msg.TimeoutMs)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(runCodePB(res)), nil
}

func sessionPB(se *sandbox.Session) *sandboxv1.Session {
	return &sandboxv1.Session{Id: se.ID, SandboxId: se.SandboxID, Kind: string(se.Kind), State: string(se.State),
		LastJobId: se.LastJobID, Runs: se.Runs, CreateTime: ts(se.CreatedAt), UpdateTime: ts(se.UpdatedAt)}
}

func runCodePB(res *jobs.RunResult) *sandboxv1.RunCodeResult {
	out := &sandboxv1.RunCodeResult{
		JobId: res.Exec.Job.ID, Status: res.Status, Stdout: res.Exec.Stdout, Stderr: res.Exec.Stderr,
		Value: res.Value, DurationMs: res.Exec.DurationMS, Warnings: res.Warnings,
	}
	if res.Error != nil {
		out.Error = &sandboxv1.CodeError{Name: res.Error.Name, Value: res.Error.Value, Traceback: res.Error.Traceback}
	}
	for _, o := range res.Outputs {
		// The kernel hands rich outputs over base64-encoded (HTTP keeps
		// that form); here they are the bytes. One that does not decode is
		// passed as it came.
		data, err := base64.StdEncoding.DecodeString(o.Data)
		if err != nil {
			data = []byte(o.Data)
		}
		out.Outputs = append(out.Outputs, &sandboxv1.RichOutput{Mime: o.MIME, Data: data})
	}
	return out
}
