package mcpserve

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"genesis.dev/sandbox/internal/agent/agentclient"
	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/files"
	"genesis.dev/sandbox/internal/joblog"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/tenant"
)

// Sandboxes creates and destroys a tenant's sandboxes (control.Service).
type Sandboxes interface {
	CreateSandbox(ctx context.Context, in control.CreateSandboxInput) (*sandbox.Sandbox, error)
	DeleteSandbox(ctx context.Context, tenant, id string) error
}

// Jobs runs commands, background jobs and code contexts (jobs.Manager).
type Jobs interface {
	Exec(ctx context.Context, in jobs.ExecInput) (*jobs.ExecOutput, error)
	StartJob(ctx context.Context, in jobs.ExecInput) (*sandbox.Job, error)
	JobLog(ctx context.Context, tenant, jobID string) (*sandbox.Job, *joblog.Log, error)
	CreateContext(ctx context.Context, tenant, sandboxID, language string) (*sandbox.Session, error)
	RunCode(ctx context.Context, tenant, contextID, code string, timeoutMS int64) (*jobs.RunResult, error)
}

// Files reads, writes and lists a sandbox's files (files.Gateway).
type Files interface {
	WriteFile(ctx context.Context, in files.WriteFileInput) (agentproto.FileWriteResult, error)
	ReadFile(ctx context.Context, tenant, id, method, path string, cond http.Header) (*agentclient.FileResponse, context.CancelFunc, error)
	ListFiles(ctx context.Context, tenant, id, path string, depth, limit int) (agentproto.FileList, error)
	SearchFiles(ctx context.Context, tenant, id string, req agentproto.SearchRequest) (agentproto.SearchResult, error)
}

// Config wires a Server.
type Config struct {
	Sandboxes Sandboxes
	Jobs      Jobs
	Files     Files
	// Browser, when set, serves the browser tool.
	Browser Browser
	// Desktop, when set, serves the computer tool.
	Desktop Desktop
	// Snapshots, when set, serves the snapshot and fork tools and
	// create_sandbox's snapshot_id.
	Snapshots Snapshots
	// Audit records one tool call; nil: calls are not recorded.
	Audit func(ctx context.Context, rec *tenant.AuditRecord)
	// Version is the server's version in the MCP handshake.
	Version string
	// SessionTimeout closes a session idle this long (and destroys its
	// sandboxes); 0 takes 30 minutes.
	SessionTimeout time.Duration
	// ProgressInterval is how often a long call (exec, run_code, a
	// waiting job_logs, browser, snapshot, fork) tells a caller that asked
	// for progress that it still runs; 0 takes 5 s.
	ProgressInterval time.Duration
	// MaxReadBytes bounds the file read_file returns; 0 takes 1 MiB.
	MaxReadBytes int64
	// Now is the clock of the audit records; nil: time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Server is the MCP server of the sandbox tools. Close it to end every
// session (and the sandboxes they own).
type Server struct {
	cfg Config
	log *slog.Logger

	// built counts the session servers built (a request of an existing
	// session builds none).
	built atomic.Int64

	mu sync.Mutex
	// sessions are the sessions that own sandboxes.
	sessions map[*session]bool
	ends     sync.WaitGroup
}

// New builds a Server; it starts nothing.
func New(cfg Config) (*Server, error) {
	if cfg.Sandboxes == nil || cfg.Jobs == nil || cfg.Files == nil {
		return nil, errdefs.Invalid("mcpserve: sandboxes, jobs and files are required")
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = 30 * time.Minute
	}
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = 5 * time.Second
	}
	if cfg.MaxReadBytes <= 0 {
		cfg.MaxReadBytes = 1 << 20
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Version == "" {
		cfg.Version = "1"
	}
	return &Server{cfg: cfg, log: cfg.Logger, sessions: map[*session]bool{}}, nil
}

// Edge is what the HTTP edge gives the handler.
type Edge struct {
	// PrincipalOf gives the caller the edge authenticated.
	PrincipalOf func(*http.Request) tenant.Principal
	// PreviewLink, when set, serves the preview_link tool.
	PreviewLink PreviewLinker
}

// Handler serves the MCP Streamable HTTP transport behind the edge's key
// check; a session answers only requests of the tenant that opened it.
func (s *Server) Handler(edge Edge) http.Handler {
	principalOf := edge.PrincipalOf
	// The SDK asks for a server on every request, to learn the protocol
	// versions it speaks, but starts a session only for a POST without a
	// session id: only that gets a session's server, with its tools (their
	// schemas cost milliseconds to build); the others get a bare one.
	bare := s.newServer()
	h := sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server {
		if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" {
			return bare
		}
		return s.newSession(principalOf(r), edge.PreviewLink).srv
	}, &sdk.StreamableHTTPOptions{JSONResponse: false, SessionTimeout: s.cfg.SessionTimeout,
		// The edge authenticates every request with the tenant's key, a
		// bearer token no browser sends by itself; the Host check would
		// refuse a service behind a proxy on loopback.
		DisableLocalhostProtection: true,
		Logger:                     s.log})
	// The SDK binds a session to the user that opened it and refuses its
	// id from another (403); the edge checked the key already.
	bind := auth.RequireBearerToken(func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		return &auth.TokenInfo{UserID: principalOf(r).Tenant}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})
	return bind(h)
}

// Drain ends every session and destroys the sandboxes they own, when the
// service starts to stop (the sessions live in this process's memory and
// end with it).
func (s *Server) Drain(context.Context) { _ = s.Close() }

// Close ends every session and destroys the sandboxes they own.
func (s *Server) Close() error {
	s.mu.Lock()
	var open []*session
	for se := range s.sessions {
		open = append(open, se)
	}
	s.mu.Unlock()
	for _, se := range open {
		se.closeTransport()
		s.end(se)
	}
	s.ends.Wait()
	return nil
}

// session is what one MCP session holds: the sandboxes it owns and its
// code contexts.
type session struct {
	p   tenant.Principal
	srv *sdk.Server

	mu sync.Mutex
	// owned are the sandboxes the session created without keep: destroyed
	// when it ends.
	owned map[string]bool
	// contexts are the session's code contexts by sandbox and language.
	contexts map[contextKey]string
	ss       *sdk.ServerSession
	watching bool
	ended    bool
}

type contextKey struct{ sandbox, language string }

func (s *Server) newSession(p tenant.Principal, previews PreviewLinker) *session {
	se := &session{p: p, owned: map[string]bool{}, contexts: map[contextKey]string{}}
	s.built.Add(1)
	se.srv = s.newServer()
	s.addTools(se)
	s.addOptionalTools(se, previews)
	s.addSnapshotTools(se)
	s.addComputerTool(se)
	s.addResources(se)
	return se
}

// newServer is an MCP server of the service, without tools.
func (s *Server) newServer() *sdk.Server {
	return sdk.NewServer(&sdk.Implementation{Name: "genesis-sandbox", Title: "Genesis Sandbox", Version: s.cfg.Version},
		&sdk.ServerOptions{Instructions: instructions})
}

// own records a sandbox the session created; the first one starts the
// watch that destroys the owned sandboxes when the session ends.
func (s *Server) own(se *session, ss *sdk.ServerSession, id string) {
	se.mu.Lock()
	defer se.mu.Unlock()
	if se.ended {
		// The session ended while the sandbox was made: it ends too.
		s.ends.Add(1)
		go func() {
			defer s.ends.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			err := s.cfg.Sandboxes.DeleteSandbox(ctx, se.p.Tenant, id)
			s.audit(ctx, se.p, "session_end", id, err)
		}()
		return
	}
	se.owned[id] = true
	if se.watching || ss == nil {
		return
	}
	se.watching, se.ss = true, ss
	s.mu.Lock()
	s.sessions[se] = true
	s.mu.Unlock()
	s.ends.Add(1)
	go func() {
		defer s.ends.Done()
		_ = ss.Wait()
		s.end(se)
	}()
}

func (se *session) closeTransport() {
	se.mu.Lock()
	ss := se.ss
	se.mu.Unlock()
	if ss != nil {
		_ = ss.Close()
	}
}

// end destroys what the session owns (once).
func (s *Server) end(se *session) {
	se.mu.Lock()
	if se.ended {
		se.mu.Unlock()
		return
	}
	se.ended = true
	ids := make([]string, 0, len(se.owned))
	for id := range se.owned {
		ids = append(ids, id)
	}
	se.owned = map[string]bool{}
	se.mu.Unlock()
	s.mu.Lock()
	delete(s.sessions, se)
	s.mu.Unlock()
	for _, id := range ids {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		err := s.cfg.Sandboxes.DeleteSandbox(ctx, se.p.Tenant, id)
		cancel()
		s.audit(context.Background(), se.p, "session_end", id, err)
		if err != nil && !errdefs.Is(err, errdefs.ErrNotFound) {
			s.log.Warn("destroying a sandbox of an ended MCP session", "tenant", se.p.Tenant, "sandbox", id, "err", err)
		}
	}
}

// owns reports whether the session destroys the sandbox when it ends.
func (se *session) owns(id string) bool {
	se.mu.Lock()
	defer se.mu.Unlock()
	return se.owned[id]
}

// forgetContexts forgets the session's code contexts of a sandbox whose
// kernels are gone (a rollback or wake without its memory): the next
// run_code starts a new one.
func (se *session) forgetContexts(id string) {
	se.mu.Lock()
	defer se.mu.Unlock()
	for k := range se.contexts {
		if k.sandbox == id {
			delete(se.contexts, k)
		}
	}
}

// disown forgets a sandbox the session no longer owns (destroyed).
func (se *session) disown(id string) {
	se.mu.Lock()
	delete(se.owned, id)
	se.mu.Unlock()
	se.forgetContexts(id)
}

// audit records one tool call as the caller's key.
func (s *Server) audit(ctx context.Context, p tenant.Principal, tool, target string, err error) {
	if s.cfg.Audit == nil {
		return
	}
	rec := &tenant.AuditRecord{Time: s.cfg.Now().UTC(), Actor: p.KeyID, Tenant: p.Tenant, Action: "mcp " + tool, Target: target, Status: http.StatusOK}
	if rec.Actor == "" {
		rec.Actor = tenant.ActorAnonymous
	}
	if err != nil {
		rec.Status, rec.Code = errdefs.HTTPStatus(err), errdefs.Code(err)
	}
	s.cfg.Audit(ctx, rec)
}

// readAll reads at most limit bytes of r and says whether there was more.
func readAll(r io.Reader, limit int64) ([]byte, bool, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, false, err
	}
	if int64(len(b)) > limit {
		return b[:limit], true, nil
	}
	return b, false, nil
}
