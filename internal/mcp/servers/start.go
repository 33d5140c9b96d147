package servers

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/mcp"
	"genesis.dev/sandbox/internal/sandbox"
)

// httpSpec is where a server of transport http listens in its sandbox.
type httpSpec struct {
	port int
	path string
}

// startHTTP waits until the server's port accepts (within the init
// timeout, failing at once if the job ends) and returns a Streamable HTTP
// client transport to it over the port primitive. Every message still
// passes through the bridge, parsed for policy and audit.
func (m *Manager) startHTTP(ctx context.Context, in *instance, jobID string) (sdk.Transport, error) {
	tenant, sandboxID, spec := in.cmd.Tenant, in.view.SandboxID, *in.http
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		return m.cfg.DialPort(ctx, tenant, sandboxID, in.reservation, spec.port)
	}
	wait := in.cfg.InitTimeout
	if wait <= 0 {
		wait = mcp.DefaultInitTimeout
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var err error
	if m.cfg.Ready != nil {
		err = m.cfg.Ready.WaitListening(wctx, sandboxID, jobID, spec.port)
	} else if c, derr := dial(wctx, "", ""); derr == nil {
		c.Close()
	} else {
		err = derr
	}
	if errdefs.Code(err) == jobs.CodeJobEnded {
		if j, gerr := m.cfg.Jobs.GetJob(ctx, tenant, jobID); gerr == nil && j.State.Final() {
			return nil, errdefs.WithCode("mcp_server_exited", fmt.Errorf(
				"the MCP server exited before it listened on port %d (%s, exit code %s; its output: GET /v1/jobs/%s/logs): %w",
				spec.port, j.State, exitCode(j), jobID, errdefs.ErrBadGateway))
		}
	}
	if err != nil {
		return nil, errdefs.WithCode("mcp_init_timeout", fmt.Errorf(
			"the MCP server did not listen on port %d within %s: %v: %w", spec.port, wait, err, errdefs.ErrUnavailable))
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: dial, MaxIdleConnsPerHost: 16, IdleConnTimeout: time.Minute}}
	return &sdk.StreamableClientTransport{Endpoint: "http://127.0.0.1:" + strconv.Itoa(spec.port) + spec.path, HTTPClient: hc, MaxRetries: 3}, nil
}

// callSpec is how an ephemeral instance's call servers are placed (they
// run the instance's command).
type callSpec struct {
	profile  string
	decision Decision
	runtime  sandbox.Runtime
}

// callServer starts one call's server (scope ephemeral) in a sandbox of its
// own, leased with the instance's decision; done kills it and releases the
// lease, so nothing of one call is left for the next.
func (m *Manager) callServer(ctx context.Context, in *instance) (sdk.Transport, string, func(), error) {
	tenant, id, spec := in.cmd.Tenant, in.view.ID, in.callSpec
	out, err := m.ownLease(ctx, tenant, "mcp:"+id+":call", spec.profile, spec.decision, spec.runtime,
		map[string]string{"mcp_server": id, "mcp_scope": "ephemeral"}, in.reservation)
	if err != nil {
		return nil, "", nil, err
	}
	sb := out.Sandbox
	release := func() { m.release(tenant, out.Lease.ID) }
	cmd := in.cmd
	cmd.SandboxID = sb.ID
	job, err := m.cfg.Jobs.StartServer(ctx, cmd)
	if err != nil {
		release()
		return nil, sb.ID, nil, err
	}
	jctx, stop := context.WithCancel(m.ctx)
	kill := func(string) {
		kctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = m.cfg.Jobs.CancelJobAs(kctx, tenant, in.reservation, job.ID)
	}
	stdin, err := m.cfg.Jobs.OpenStdinAs(jctx, tenant, in.reservation, job.ID)
	if err != nil {
		stop()
		kill("")
		release()
		return nil, sb.ID, nil, err
	}
	pr, pw := io.Pipe()
	go func() {
		err := m.cfg.Jobs.CopyOutput(jctx, tenant, job.ID, pw)
		if err == nil {
			err = io.EOF
		}
		pw.CloseWithError(err)
	}()
	done := func() {
		_ = stdin.Close()
		kill("")
		stop()
		release()
	}
	return mcp.NewStdio(pr, stdin, 0, kill), sb.ID, done, nil
}

// outputMeter counts a server's stdout on its way to the bridge. Past soft
// bytes, at the end of a line (an answer is whole), or past hard bytes in
// any case, it calls full once: the server is stopped and started again
// before the agent's output limit would silence it.
//
// It passes whole lines only: the end of the output that is not a line
// yet waits for its newline. The stop that full asks for may cut a line
// (the process killed mid-write, or its log full); that line never reaches
// the bridge, which would judge it a protocol breach, so the stop stays a
// planned restart. Without a planned stop, a last line without newline is
// passed on at the end (the bridge judges it like any other).
type outputMeter struct {
	w          io.Writer
	soft, hard int64
	full       func()
	n          int64
	done       bool
	partial    []byte
}

// maxPartial is the most the meter holds back of one line: a longer line
// passes on as it comes, and the bridge refuses it as too long.
const maxPartial = mcp.DefaultMaxLine + 1

func (o *outputMeter) Write(p []byte) (int, error) {
	size := len(p)
	o.n += int64(size)
	var err error
	if i := bytes.LastIndexByte(p, '\n'); i >= 0 {
		if len(o.partial) > 0 {
			_, err = o.w.Write(o.partial)
			o.partial = o.partial[:0]
		}
		if err == nil {
			_, err = o.w.Write(p[:i+1])
		}
		p = p[i+1:]
	}
	o.partial = append(o.partial, p...)
	if err == nil && len(o.partial) > maxPartial {
		_, err = o.w.Write(o.partial)
		o.partial = o.partial[:0]
	}
	if !o.done && (o.n >= o.hard || (o.n >= o.soft && len(o.partial) == 0)) {
		o.done = true
		o.full()
	}
	if err != nil {
		return 0, err
	}
	return size, nil
}

// end is the end of the output: a last line without newline is passed on,
// unless the planned stop may have cut it.
func (o *outputMeter) end() error {
	if o.done || len(o.partial) == 0 {
		return nil
	}
	_, err := o.w.Write(o.partial)
	o.partial = nil
	return err
}

// start starts the server process and initializes it. ctx bounds the
// start; rctx is the instance's life.
func (m *Manager) start(ctx, rctx context.Context, in *instance) error {
	tenant := in.cmd.Tenant
	job, err := m.cfg.Jobs.StartServer(ctx, in.cmd)
	if err != nil {
		return err
	}
	kill := func(reason string) {
		m.log.Warn("killing an MCP server", "instance", in.view.ID, "job", job.ID, "reason", reason)
		kctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = m.cfg.Jobs.CancelJobAs(kctx, tenant, in.reservation, job.ID)
	}
	if in.http != nil {
		return m.startHTTPInstance(ctx, in, job.ID, kill)
	}
	// The stdin stream lives as long as the instance, not the request
	// that started it.
	stdin, err := m.cfg.Jobs.OpenStdinAs(rctx, tenant, in.reservation, job.ID)
	if err != nil {
		kill("its stdin could not be opened: " + err.Error())
		return err
	}
	pr, pw := io.Pipe()
	limit := m.cfg.Jobs.ServerOutputLimit()
	margin := min(limit/4, 4<<20)
	out := &outputMeter{w: pw, soft: limit - margin, hard: limit - min(margin/4, 64<<10), full: func() {
		in.rollover.Store(true)
		kill(fmt.Sprintf("its stdout neared its output limit of %d bytes; it is started again", limit))
	}}
	go func() {
		err := m.cfg.Jobs.CopyOutput(rctx, tenant, job.ID, out)
		if err == nil {
			err = cmp.Or(out.end(), io.EOF)
		}
		pw.CloseWithError(err)
	}()
	stdio := mcp.NewStdio(pr, stdin, 0, kill)
	p, err := mcp.Connect(ctx, m.bridgeConfig(in, stdio, job.ID))
	if err != nil {
		kill("it did not initialize: " + err.Error())
		_ = stdin.Close()
		if b := stdio.Breach(); b != nil {
			err = errdefs.WithCode("mcp_protocol_breach", fmt.Errorf("%v: %w", b, errdefs.ErrBadGateway))
		} else if j, gerr := m.cfg.Jobs.GetJob(context.Background(), tenant, job.ID); gerr == nil && j.State.Final() {
			err = errdefs.WithCode("mcp_server_exited", fmt.Errorf(
				"the MCP server exited before it initialized (%s, exit code %s; its stderr: GET /v1/jobs/%s/logs): %w",
				j.State, exitCode(j), job.ID, errdefs.ErrBadGateway))
		}
		return err
	}
	m.ready(in, p, stdio)
	return nil
}

// bridgeConfig is the instance's bridge configuration for a backend of
// job jobID (which it records as the instance's job).
func (m *Manager) bridgeConfig(in *instance, backend sdk.Transport, jobID string) mcp.Config {
	cfg := in.cfg
	cfg.Backend = backend
	cfg.Policy = in.policy
	cfg.OnCall = func(rec mcp.CallRecord) { m.record(in, rec) }
	if m.cfg.Gate != nil {
		cfg.Gate = func(ctx context.Context) error {
			in.mu.Lock()
			tenant, sandboxID := in.view.Tenant, in.view.SandboxID
			in.mu.Unlock()
			return m.cfg.Gate.Admit(ctx, tenant, sandboxID, "mcp.tool_call")
		}
	}
	in.mu.Lock()
	in.view.JobID = jobID
	in.mu.Unlock()
	return cfg
}

// ready makes p the instance's bridge (stdio nil for an http server).
func (m *Manager) ready(in *instance, p *mcp.Proxy, stdio *mcp.Stdio) {
	now := m.cfg.Now().UTC()
	in.mu.Lock()
	in.proxy, in.handler, in.stdio = p, p.Handler(), stdio
	in.view.State, in.view.ReadyAt, in.view.LastError = StateReady, &now, ""
	in.view.Server, in.view.ProtocolVersion = p.ServerInfo(), p.ProtocolVersion()
	in.mu.Unlock()
}

// startHTTPInstance connects the bridge to a server of transport http.
func (m *Manager) startHTTPInstance(ctx context.Context, in *instance, jobID string, kill func(string)) error {
	t, err := m.startHTTP(ctx, in, jobID)
	if err != nil {
		kill(err.Error())
		return err
	}
	p, err := mcp.Connect(ctx, m.bridgeConfig(in, t, jobID))
	if err != nil {
		kill("it did not initialize: " + err.Error())
		return err
	}
	m.ready(in, p, nil)
	// An HTTP connection does not end with the process: the job's end
	// closes the bridge, and supervise takes it from there.
	wctx, cancel := context.WithCancel(m.ctx)
	go func() {
		<-p.Done()
		cancel()
	}()
	go func() {
		if _, err := m.cfg.Jobs.Wait(wctx, in.cmd.Tenant, jobID); err == nil {
			p.Close()
		}
	}()
	return nil
}

func exitCode(j *sandbox.Job) string {
	if j.ExitCode == nil {
		return "none"
	}
	return strconv.Itoa(*j.ExitCode)
}
