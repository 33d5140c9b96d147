package mcp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"genesis.dev/sandbox/internal/errdefs"
)

// Defaults of a proxy's timeouts.
const (
	DefaultInitTimeout = 30 * time.Second
	DefaultCallTimeout = 60 * time.Second
	DefaultCallCeiling = 10 * time.Minute
)

// statelessProtocol is the first protocol revision without sessions.
const statelessProtocol = "2026-07-28"

// codeRequestTimeout is the JSON-RPC error code of a call the proxy ended
// for its timeout (the code the reference SDKs use for a timed-out request).
const codeRequestTimeout = -32001

// Config configures a Proxy.
type Config struct {
	// Backend is the transport to the MCP server (Stdio.Transport).
	Backend sdk.Transport
	// CallBackend, if set, starts a server of its own for each tools/call
	// (scope ephemeral): the call is sent to it after its initialize, and
	// done is called when the call ends, whatever its outcome. Backend
	// still serves the lists, resources and prompts. where names the
	// call's server in its record (its sandbox).
	CallBackend func(ctx context.Context) (t sdk.Transport, where string, done func(), err error)
	// Policy is the tool policy; nil allows every tool and blocks changed
	// definitions.
	Policy *Policy
	// InitTimeout bounds the backend's initialize handshake.
	InitTimeout time.Duration
	// CallTimeout ends a call that gets neither an answer nor progress for
	// this long; each progress notification starts it again.
	CallTimeout time.Duration
	// CallCeiling ends a call after this long, progress or not.
	CallCeiling time.Duration
	// OnCall, if set, receives a record of every tools/call,
	// resources/read and prompts/get (audit). It must not block.
	OnCall func(CallRecord)
	// Approver, if set, decides the calls the policy holds for approval;
	// without it such calls are refused.
	Approver Approver
	// Gate, if set, is asked before each allowed tools/call (the trace's
	// pause and abort): an error refuses the call as a tool error.
	Gate func(ctx context.Context) error
	// AllowedOrigins are the Origin header values a browser-based client
	// may send; a request with any other Origin is refused (403). A request
	// without Origin is not a browser's and passes.
	AllowedOrigins []string
	// SessionTimeout closes a downstream session idle this long (0: never).
	SessionTimeout time.Duration
	Logger         *slog.Logger
	Now            func() time.Time
}

// ApprovalRequest is one held call: what a reviewer sees and decides on.
type ApprovalRequest struct {
	Tool       string
	Args       json.RawMessage
	ArgsDigest string
	Session    string
	Client     string
}

// Approver decides held calls. Approve blocks until the call is approved
// (nil), denied or expired (an error saying so, shown to the client), or
// ctx ends.
type Approver interface {
	Approve(ctx context.Context, req ApprovalRequest) (by string, err error)
}

// CallRecord is the audit record of one call through the proxy.
type CallRecord struct {
	Time       time.Time `json:"time"`
	Session    string    `json:"session,omitempty"`
	Client     string    `json:"client,omitempty"` // name/version the client gave
	Method     string    `json:"method"`
	Tool       string    `json:"tool,omitempty"` // the tool, resource URI or prompt
	ArgsDigest string    `json:"args_digest,omitempty"`
	ArgsBytes  int       `json:"args_bytes"`
	// Decision is allowed, refused (a rule said no, with a message) or
	// hidden (answered as a missing tool).
	Decision    string `json:"decision"`
	Rule        string `json:"rule,omitempty"`
	DurationMS  int64  `json:"duration_ms"`
	Outcome     string `json:"outcome"` // ok, tool_error, error, timeout, cancelled, refused
	Error       string `json:"error,omitempty"`
	ResultBytes int    `json:"result_bytes"`
	// Secrets names the secrets the server holds or reaches (set by the
	// instance's manager; never their values).
	Secrets []string `json:"secrets,omitempty"`
	// SandboxID is the sandbox of the server that served the call when it
	// was one of its own (scope ephemeral).
	SandboxID string `json:"sandbox_id,omitempty"`
}

// Call outcomes.
const (
	OutcomeOK        = "ok"
	OutcomeToolError = "tool_error"
	OutcomeError     = "error"
	OutcomeTimeout   = "timeout"
	OutcomeCancelled = "cancelled"
	OutcomeRefused   = "refused"
)

// Proxy serves one backend MCP server to many downstream clients.
type Proxy struct {
	cfg    Config
	log    *slog.Logger
	cs     *sdk.ClientSession
	srv    *sdk.Server
	events *sdk.MemoryEventStore
	init   *sdk.InitializeResult

	seq   atomic.Uint64
	mu    sync.Mutex
	calls map[string]*pending // by the progress token sent to the backend
	tools []*sdk.Tool         // the backend's last full list

	done chan struct{}
	err  error
}

// pending is a call in flight that may get progress.
type pending struct {
	notify func(*sdk.ProgressNotificationParams)
	reset  func()
}

// Connect initializes the backend and returns a proxy for it. A backend
// that does not answer initialize within InitTimeout is an error (the
// caller kills it).
func Connect(ctx context.Context, cfg Config) (*Proxy, error) {
	if cfg.Backend == nil {
		return nil, errdefs.Invalid("mcp proxy: no backend")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.InitTimeout <= 0 {
		cfg.InitTimeout = DefaultInitTimeout
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.CallCeiling <= 0 {
		cfg.CallCeiling = DefaultCallCeiling
	}
	if cfg.CallCeiling < cfg.CallTimeout {
		cfg.CallCeiling = cfg.CallTimeout
	}
	if cfg.Policy == nil {
		pol, err := NewPolicy(Rules{}, PinBlock, nil, cfg.Now, nil)
		if err != nil {
			return nil, err
		}
		cfg.Policy = pol
	}
	p := &Proxy{cfg: cfg, log: cfg.Logger, calls: map[string]*pending{}, done: make(chan struct{})}
	// Progress is forwarded from the backend's stdout in order, before the
	// answer it precedes (the SDK would hand it over concurrently, so a
	// last step could arrive after the answer and be lost).
	if st, ok := cfg.Backend.(*Stdio); ok {
		st.setObserver(p.onLine)
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "genesis-sandbox", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: p.onProgress,
	})
	ictx, cancel := context.WithTimeout(ctx, cfg.InitTimeout)
	defer cancel()
	cs, err := client.Connect(ictx, cfg.Backend, nil)
	if err != nil {
		if ictx.Err() != nil && ctx.Err() == nil {
			return nil, errdefs.WithCode("mcp_init_timeout", fmt.Errorf(
				"the MCP server did not answer initialize within %s: %w", cfg.InitTimeout, errdefs.ErrUnavailable))
		}
		return nil, errdefs.WithCode("mcp_init_failed", fmt.Errorf("the MCP server's initialize failed: %v: %w", err, errdefs.ErrUnavailable))
	}
	p.cs = cs
	p.init = cs.InitializeResult()
	go func() {
		p.err = cs.Wait()
		close(p.done)
	}()

	info := &sdk.Implementation{Name: "mcp-server", Version: "0"}
	caps := &sdk.ServerCapabilities{}
	var instructions string
	if p.init != nil {
		if p.init.ServerInfo != nil {
			info = p.init.ServerInfo
		}
		instructions = p.init.Instructions
		if c := p.init.Capabilities; c != nil {
			if c.Tools != nil {
				caps.Tools = &sdk.ToolCapabilities{}
			}
			if c.Resources != nil {
				caps.Resources = &sdk.ResourceCapabilities{}
			}
			if c.Prompts != nil {
				caps.Prompts = &sdk.PromptCapabilities{}
			}
			if c.Completions != nil {
				caps.Completions = &sdk.CompletionCapabilities{}
			}
		}
	}
	p.srv = sdk.NewServer(info, &sdk.ServerOptions{Capabilities: caps, Instructions: instructions, Logger: cfg.Logger})
	p.srv.AddReceivingMiddleware(p.forward)
	p.events = sdk.NewMemoryEventStore(nil)
	return p, nil
}

// ServerInfo is what the backend said it is.
func (p *Proxy) ServerInfo() *sdk.Implementation {
	if p.init == nil {
		return nil
	}
	return p.init.ServerInfo
}

// ProtocolVersion is the version the backend agreed.
func (p *Proxy) ProtocolVersion() string {
	if p.init == nil {
		return ""
	}
	return p.init.ProtocolVersion
}

// Done is closed when the backend connection has ended; Err says why.
func (p *Proxy) Done() <-chan struct{} { return p.done }

// Err is why the backend connection ended (after Done).
func (p *Proxy) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Close ends the downstream sessions (their open streams end) and the
// backend session (closing the server's stdin).
func (p *Proxy) Close() error {
	for ss := range p.srv.Sessions() {
		_ = ss.Close()
	}
	return p.cs.Close()
}

// Policy is the proxy's tool policy.
func (p *Proxy) Policy() *Policy { return p.cfg.Policy }

// Handler is the Streamable HTTP endpoint. Authentication is the caller's;
// the handler checks Origin.
func (p *Proxy) Handler() http.Handler {
	server := func(*http.Request) *sdk.Server { return p.srv }
	// The 2025-11-25 protocol: sessions, the GET stream, DELETE, and
	// streams resumable by Last-Event-ID from the event store.
	sessions := sdk.NewStreamableHTTPHandler(server, &sdk.StreamableHTTPOptions{
		EventStore:     p.events,
		SessionTimeout: p.cfg.SessionTimeout,
		// Host and Origin are checked here and by the service's own
		// authentication (a bearer token no browser sends by itself).
		DisableLocalhostProtection: true,
		Logger:                     p.log,
	})
	// The 2026-07-28 protocol: each POST is a whole request, and a dropped
	// POST cancels its call (at the backend too).
	stateless := sdk.NewStreamableHTTPHandler(server, &sdk.StreamableHTTPOptions{
		Stateless:                    true,
		PropagateRequestCancellation: true,
		DisableLocalhostProtection:   true,
		Logger:                       p.log,
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o != "" && !slices.Contains(p.cfg.AllowedOrigins, o) {
			http.Error(w, "origin "+strconv.Quote(o)+" is not allowed", http.StatusForbidden)
			return
		}
		if r.Header.Get("Mcp-Protocol-Version") >= statelessProtocol && r.Header.Get("Mcp-Session-Id") == "" {
			stateless.ServeHTTP(w, r)
			return
		}
		sessions.ServeHTTP(w, r)
	})
}

// Tools lists the backend's tools as the policy shows them.
func (p *Proxy) Tools(ctx context.Context) ([]*sdk.Tool, error) {
	all, err := p.listAll(ctx)
	if err != nil {
		return nil, err
	}
	return p.cfg.Policy.Filter(all), nil
}

func (p *Proxy) listAll(ctx context.Context) ([]*sdk.Tool, error) {
	var all []*sdk.Tool
	params := &sdk.ListToolsParams{}
	for range 1000 {
		res, err := p.cs.ListTools(ctx, params)
		if err != nil {
			return nil, p.backendErr(err)
		}
		all = append(all, res.Tools...)
		if res.NextCursor == "" {
			p.mu.Lock()
			p.tools = all
			p.mu.Unlock()
			return all, nil
		}
		params = &sdk.ListToolsParams{Cursor: res.NextCursor}
	}
	return nil, fmt.Errorf("the MCP server's tools/list does not end (1000 pages): %w", ErrProtocol)
}

// backendErr keeps a JSON-RPC error from the backend as it is, and says
// why when the backend has gone.
func (p *Proxy) backendErr(err error) error {
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return err
	}
	select {
	case <-p.done:
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the MCP server has ended: " + err.Error()}
	default:
	}
	return err
}

func (p *Proxy) forward(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		switch r := req.(type) {
		case *sdk.ListToolsRequest:
			if r.Params != nil && r.Params.Cursor != "" {
				return &sdk.ListToolsResult{Tools: []*sdk.Tool{}}, nil // one page holds all
			}
			tools, err := p.Tools(ctx)
			if err != nil {
				return nil, err
			}
			if tools == nil {
				tools = []*sdk.Tool{}
			}
			return &sdk.ListToolsResult{Tools: tools}, nil
		case *sdk.CallToolRequest:
			return p.callTool(ctx, r)
		case *sdk.ListResourcesRequest:
			return relay(ctx, p, r.Params, p.cs.ListResources)
		case *sdk.ListResourceTemplatesRequest:
			return relay(ctx, p, r.Params, p.cs.ListResourceTemplates)
		case *sdk.ReadResourceRequest:
			if r.Params == nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "missing params"}
			}
			return p.recorded(ctx, r.Session, method, r.Params.URI, nil, func(ctx context.Context) (sdk.Result, error) {
				return relay(ctx, p, r.Params, p.cs.ReadResource)
			})
		case *sdk.ListPromptsRequest:
			return relay(ctx, p, r.Params, p.cs.ListPrompts)
		case *sdk.GetPromptRequest:
			if r.Params == nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "missing params"}
			}
			args, _ := json.Marshal(r.Params.Arguments)
			return p.recorded(ctx, r.Session, method, r.Params.Name, args, func(ctx context.Context) (sdk.Result, error) {
				return relay(ctx, p, r.Params, p.cs.GetPrompt)
			})
		case *sdk.CompleteRequest:
			return relay(ctx, p, r.Params, p.cs.Complete)
		}
		return next(ctx, method, req)
	}
}

// relay sends params to the backend with call and answers its result.
func relay[P any, R sdk.Result](ctx context.Context, p *Proxy, params P, call func(context.Context, P) (R, error)) (sdk.Result, error) {
	res, err := call(ctx, params)
	if err != nil {
		return nil, p.backendErr(err)
	}
	return res, nil
}

// recorded runs fn as one audited call.
func (p *Proxy) recorded(ctx context.Context, ss *sdk.ServerSession, method, target string, args json.RawMessage,
	fn func(context.Context) (sdk.Result, error)) (sdk.Result, error) {
	rec := p.newRecord(ss, method, target, args)
	start := time.Now()
	res, err := fn(ctx)
	rec.Decision, rec.Rule = "allowed", "allowed"
	p.finish(&rec, start, res, err, "")
	return res, err
}

func (p *Proxy) newRecord(ss *sdk.ServerSession, method, target string, args json.RawMessage) CallRecord {
	rec := CallRecord{Time: p.cfg.Now().UTC(), Method: method, Tool: target, ArgsBytes: len(args)}
	if len(args) > 0 {
		sum := sha256.Sum256(args)
		rec.ArgsDigest = "sha256:" + hex.EncodeToString(sum[:])
	}
	if ss != nil {
		rec.Session = ss.ID()
		if ip := ss.InitializeParams(); ip != nil && ip.ClientInfo != nil {
			rec.Client = ip.ClientInfo.Name + "/" + ip.ClientInfo.Version
		}
	}
	return rec
}

func (p *Proxy) finish(rec *CallRecord, start time.Time, res sdk.Result, err error, why string) {
	rec.DurationMS = time.Since(start).Milliseconds()
	switch {
	case why != "":
		rec.Outcome, rec.Error = why, errString(err)
	case err != nil:
		rec.Outcome, rec.Error = OutcomeError, err.Error()
		if errors.Is(err, context.Canceled) {
			rec.Outcome = OutcomeCancelled
		}
	default:
		rec.Outcome = OutcomeOK
		if ctr, ok := res.(*sdk.CallToolResult); ok && ctr.IsError {
			rec.Outcome = OutcomeToolError
		}
	}
	if res != nil {
		if b, merr := json.Marshal(res); merr == nil {
			rec.ResultBytes = len(b)
		}
	}
	if p.cfg.OnCall != nil {
		p.cfg.OnCall(*rec)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// unknownTool is the answer to a call of a tool that is hidden or does not
// exist: the same for both.
func unknownTool(name string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", name)}
}

func (p *Proxy) callTool(ctx context.Context, r *sdk.CallToolRequest) (sdk.Result, error) {
	if r.Params == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "missing params"}
	}
	name, args := r.Params.Name, r.Params.Arguments
	rec := p.newRecord(r.Session, "tools/call", name, args)
	start := time.Now()
	pol := p.cfg.Policy
	d := pol.Check(name, args)
	if d.Hidden && d.Rule == "not listed by the server" {
		// A client may call without listing: list (and pin) first.
		if _, err := p.Tools(ctx); err != nil {
			rec.Decision = "allowed"
			p.finish(&rec, start, nil, err, "")
			return nil, err
		}
		d = pol.Check(name, args)
	}
	rec.Rule = d.Rule
	switch {
	case d.Hidden:
		rec.Decision = "hidden"
		err := unknownTool(name)
		p.finish(&rec, start, nil, err, OutcomeRefused)
		return nil, err
	case !d.Allowed:
		rec.Decision = "refused"
		res := &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: d.Err.Error()}}}
		p.finish(&rec, start, res, d.Err, OutcomeRefused)
		return res, nil
	}
	if p.cfg.Gate != nil {
		if err := p.cfg.Gate(ctx); err != nil {
			rec.Decision, rec.Rule = "refused", "interrupt: "+errdefs.Code(err)
			res := &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: err.Error()}}}
			p.finish(&rec, start, res, err, OutcomeRefused)
			return res, nil
		}
	}
	if d.NeedsApproval {
		var err error
		by := ""
		if p.cfg.Approver == nil {
			err = fmt.Errorf("tool %q needs an approval of each call and this server has no approver: %w", name, errdefs.ErrFailedPrecondition)
		} else {
			// The wait is bounded by the call's ceiling, not its idle timeout.
			actx, cancel := context.WithTimeout(ctx, p.cfg.CallCeiling)
			by, err = p.cfg.Approver.Approve(actx, ApprovalRequest{Tool: name, Args: args, ArgsDigest: rec.ArgsDigest, Session: rec.Session, Client: rec.Client})
			cancel()
		}
		if err != nil {
			rec.Decision, rec.Rule = "refused", "approval: "+err.Error()
			res := &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: err.Error()}}}
			p.finish(&rec, start, res, err, OutcomeRefused)
			return res, nil
		}
		rec.Rule = "approved by " + by
	}
	rec.Decision = "allowed"

	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := time.AfterFunc(p.cfg.CallTimeout, func() {
		cancel(fmt.Errorf("no answer and no progress for %s", p.cfg.CallTimeout))
	})
	defer idle.Stop()
	ceiling := time.AfterFunc(p.cfg.CallCeiling, func() {
		cancel(fmt.Errorf("the call ran past its ceiling of %s", p.cfg.CallCeiling))
	})
	defer ceiling.Stop()

	out := &sdk.CallToolParams{Name: name}
	if len(args) > 0 {
		out.Arguments = args
	}
	if m := r.Params.Meta; len(m) > 0 {
		out.Meta = sdk.Meta{}
		for k, v := range m {
			if k != "progressToken" {
				out.Meta[k] = v
			}
		}
	}
	token := "gs-" + strconv.FormatUint(p.seq.Add(1), 10)
	out.SetProgressToken(token)
	orig := r.Params.GetProgressToken()
	ss := r.Session
	p.mu.Lock()
	p.calls[token] = &pending{
		notify: func(n *sdk.ProgressNotificationParams) {
			if orig == nil || ss == nil {
				return
			}
			fwd := *n
			fwd.ProgressToken = orig
			if err := ss.NotifyProgress(ctx, &fwd); err != nil {
				p.log.Debug("forwarding progress", "err", err)
			}
		},
		reset: func() { idle.Reset(p.cfg.CallTimeout) },
	}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.calls, token)
		p.mu.Unlock()
	}()

	cs := p.cs
	if p.cfg.CallBackend != nil {
		ecs, where, done, err := p.callSession(cctx)
		rec.SandboxID = where
		if err != nil {
			p.finish(&rec, start, nil, err, "")
			return nil, err
		}
		defer done()
		defer ecs.Close()
		cs = ecs
	}
	res, err := cs.CallTool(cctx, out)
	if err != nil {
		if cause := context.Cause(cctx); cctx.Err() != nil && ctx.Err() == nil && cause != nil {
			terr := &jsonrpc.Error{Code: codeRequestTimeout, Message: fmt.Sprintf("tool %q timed out: %v (the server was told to cancel)", name, cause)}
			p.finish(&rec, start, nil, terr, OutcomeTimeout)
			return nil, terr
		}
		err = p.backendErr(err)
		p.finish(&rec, start, nil, err, "")
		return nil, err
	}
	p.finish(&rec, start, res, nil, "")
	return res, nil
}

// callSession starts and initializes a server for one call.
func (p *Proxy) callSession(ctx context.Context) (*sdk.ClientSession, string, func(), error) {
	t, where, done, err := p.cfg.CallBackend(ctx)
	if err != nil {
		return nil, where, nil, errdefs.WithCode("mcp_call_server_failed", fmt.Errorf("starting the call's own MCP server: %v: %w", err, errdefs.ErrUnavailable))
	}
	if st, ok := t.(*Stdio); ok {
		st.setObserver(p.onLine)
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "genesis-sandbox", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: p.onProgress,
	})
	ictx, cancel := context.WithTimeout(ctx, p.cfg.InitTimeout)
	defer cancel()
	cs, err := client.Connect(ictx, t, nil)
	if err != nil {
		done()
		return nil, where, nil, errdefs.WithCode("mcp_init_failed", fmt.Errorf("the call's own MCP server did not initialize: %v: %w", err, errdefs.ErrUnavailable))
	}
	return cs, where, done, nil
}

// onProgress forwards progress from a backend whose lines the proxy does
// not see first.
func (p *Proxy) onProgress(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
	if req != nil && req.Params != nil {
		p.progress(req.Params)
	}
}

func (p *Proxy) progress(n *sdk.ProgressNotificationParams) bool {
	tok, _ := n.ProgressToken.(string)
	p.mu.Lock()
	c := p.calls[tok]
	p.mu.Unlock()
	if c == nil {
		return false
	}
	c.reset()
	c.notify(n)
	return true
}

// onLine takes a backend's progress notification for a call in flight.
func (p *Proxy) onLine(line []byte) bool {
	if !bytes.Contains(line, []byte(`"notifications/progress"`)) {
		return false
	}
	var msg struct {
		ID     json.RawMessage                 `json:"id"`
		Method string                          `json:"method"`
		Params *sdk.ProgressNotificationParams `json:"params"`
	}
	if json.Unmarshal(line, &msg) != nil || msg.ID != nil || msg.Method != "notifications/progress" || msg.Params == nil {
		return false
	}
	return p.progress(msg.Params)
}
