package browser

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/egress"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/ports"
	"genesis.dev/sandbox/internal/recording"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/trace"
)

// Error codes of the browser routes.
const (
	CodeNotBrowser      = "not_a_browser_profile"
	CodeNotReady        = "browser_not_ready"
	CodeVersionMismatch = "playwright_version_mismatch"
	CodeNoPlaywright    = "playwright_not_served"
)

// Target is a running browser sandbox as the browser routes need it.
type Target struct {
	Tenant    string
	SandboxID string
	Image     string
	Spec      config.BrowserSpec
	// Dial connects to 127.0.0.1:port inside the sandbox; it stays usable
	// after Release while the sandbox runs.
	Dial func(ctx context.Context, port int) (net.Conn, error)
	// DialRaw, if set, is Dial over a connection of its own to the
	// sandbox's agent (agentclient.DialPortRaw): cheaper per message, for
	// the actions session's long-lived DevTools connection. An agent that
	// cannot answers errdefs.ErrNotImplemented, and Dial is used.
	DialRaw func(ctx context.Context, port int) (net.Conn, error)
	Files   Files
	Jobs    Jobs
	// Offline reports whether the sandbox has no network (mode none): its
	// browser reaches only servers inside the sandbox. It is asked only to
	// explain a failed load (it may read the sandbox's network record, a
	// store read no action pays for). Profile is its profile.
	Offline func(ctx context.Context) bool
	Profile string
	Release func()
}

// Sandboxes finds a caller's running sandbox (ErrNotFound, or code
// sandbox_not_running); a sandbox whose profile has no browser is
// refused by the Manager.
type Sandboxes interface {
	AttachBrowser(ctx context.Context, tenant, sandboxID string) (*Target, error)
}

// Images reads the labels of a local image (driver.LabelVersionPrefix).
type Images interface {
	ImageLabels(ctx context.Context, ref string) (map[string]string, bool, error)
}

// Keeper keeps bytes as an artifact of a sandbox (screenshots, downloads).
type Keeper interface {
	KeepBytes(ctx context.Context, tenant, sandboxID, name string, r io.Reader) (*sandbox.Artifact, error)
}

// Config wires a Manager.
type Config struct {
	Sandboxes Sandboxes
	// Ports proxies the CDP and Playwright connections (its connection
	// tracking closes them when the sandbox ends).
	Ports     *ports.Proxy
	Images    Images
	Artifacts Keeper
	// ArtifactSource opens a saved profile to load; Services stops the
	// browser's service around a profile save or load. Without them
	// profiles are neither saved nor loaded.
	ArtifactSource ArtifactSource
	Services       ServiceHolder
	// Ready waits for a port inside a sandbox to answer (the browser's
	// DevTools port, a Playwright port); without it a port must answer at
	// once.
	Ready Readiness
	// ReadyWait bounds how long a request waits for a sandbox's browser
	// to start answering (default 30 s).
	ReadyWait time.Duration
	// Trace, if set, records the actions in the sandbox's trace; Gate, if
	// set, is asked before each request of actions (pause and abort).
	// Artifacts keeps the trace's screenshots of the actions that change
	// the page, taken as Screenshots says (off, after, both; default
	// after).
	Trace       trace.Recorder
	Gate        trace.Gate
	Screenshots string
	Logger      *slog.Logger
}

// Manager serves the browser routes. It is safe for concurrent use.
type Manager struct {
	cfg Config

	mu       sync.Mutex
	sessions map[string]*session // sandbox id → the actions API's session
	encoders chan struct{}       // slots of the trace's screenshot keepers
	recs     *recording.Set      // the screencast recordings
	// downloads are the downloads the trace has: sandbox, name and sha256
	// → 1 seen, 2 kept.
	downloads map[string]int
}

// New returns a Manager.
func New(cfg Config) (*Manager, error) {
	if cfg.Sandboxes == nil || cfg.Ports == nil {
		return nil, errdefs.Invalid("browser: Sandboxes and Ports are required")
	}
	if cfg.ReadyWait <= 0 {
		cfg.ReadyWait = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	shots, err := recording.CheckShots(cfg.Screenshots)
	if err != nil {
		return nil, fmt.Errorf("browser: %w", err)
	}
	cfg.Screenshots = shots
	return &Manager{cfg: cfg, sessions: map[string]*session{}, downloads: map[string]int{}, encoders: make(chan struct{}, maxKeepers),
		recs: recording.NewSet(cfg.Trace, cfg.Artifacts)}, nil
}

// Name is the manager's hook name.
func (m *Manager) Name() string { return "browser" }

// SandboxReady warms the browser of a sandbox about to be an idle pool
// member (a.Warm): it opens the actions session and evaluates in the page,
// so that Chromium has finished starting (it answers slowly for a while
// after its DevTools port first does) and a warm lease's first CDP answer
// and first action pay for neither. A browser that cannot do this fails
// the member. Other sandboxes open their session at their first action.
func (m *Manager) SandboxReady(ctx context.Context, a *control.Attachment) error {
	if !a.Warm || a.Profile == nil || a.Profile.Browser == nil {
		return nil
	}
	t := targetOf(a, nil) // it records nothing
	if err := m.waitReady(ctx, t); err != nil {
		return err
	}
	s, err := m.session(ctx, t)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var r ActionResult
	if err := s.do(ctx, "", api.BrowserAction{Type: "evaluate", Expression: "1"}, t.Spec.ActionTimeout, &r, nil); err != nil {
		return fmt.Errorf("warming the browser of sandbox %s: %w", t.SandboxID, err)
	}
	return nil
}

// SandboxEnding ends the actions session of the sandbox (the port proxy
// closes the CDP and Playwright connections).
func (m *Manager) SandboxEnding(_ context.Context, sandboxID, _ string) {
	m.mu.Lock()
	s := m.sessions[sandboxID]
	delete(m.sessions, sandboxID)
	for k := range m.downloads {
		if strings.HasPrefix(k, sandboxID+"\x00") {
			delete(m.downloads, k)
		}
	}
	m.mu.Unlock()
	m.recs.End(sandboxID)
	if s != nil {
		s.close()
	}
}

// Drain ends the recordings in progress as their stop does, each keeping
// its last segment, and refuses new ones: the service is stopping, and its
// sandboxes are about to be drained or handed over.
func (m *Manager) Drain(ctx context.Context) { m.recs.Drain(ctx) }

// Close ends every recording (as Drain) and every actions session.
func (m *Manager) Close() {
	m.mu.Lock()
	all := m.sessions
	m.sessions = map[string]*session{}
	m.mu.Unlock()
	m.recs.Close()
	for _, s := range all {
		s.close()
	}
}

// attach finds a caller's running browser sandbox.
func (m *Manager) attach(ctx context.Context, tenant, id string) (*Target, error) {
	return m.cfg.Sandboxes.AttachBrowser(ctx, tenant, id)
}

// Readiness waits until a port inside a sandbox answers, or ctx ends
// (jobs.Services.WaitReady: a profile service's ready state when one has
// the port as its ready port).
type Readiness interface {
	WaitReady(ctx context.Context, sandboxID string, port int) error
}

// waitReady waits until the browser's CDP port answers, up to ReadyWait
// (a fresh sandbox's Chromium takes a few seconds to start).
func (m *Manager) waitReady(ctx context.Context, t *Target) error {
	return m.waitDial(ctx, t, t.Spec.CDPPort, func() error {
		return fmt.Errorf("the browser of sandbox %s did not answer on its DevTools port within %v (see its chromium service in GET /v1/sandboxes/%s)",
			t.SandboxID, m.cfg.ReadyWait, t.SandboxID)
	})
}

// waitDial waits until port answers, up to ReadyWait; then it fails with
// code browser_not_ready and late()'s message.
func (m *Manager) waitDial(ctx context.Context, t *Target, port int, late func() error) error {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.ReadyWait)
	defer cancel()
	var err error
	if m.cfg.Ready != nil {
		err = m.cfg.Ready.WaitReady(ctx, t.SandboxID, port)
	} else {
		var c net.Conn
		if c, err = t.Dial(ctx, port); err == nil {
			c.Close()
		}
	}
	if err == nil || (ctx.Err() == nil && errdefs.Code(err) != "port_unreachable" && !errors.Is(err, errdefs.ErrUnavailable)) {
		return err
	}
	return errdefs.WithCode(CodeNotReady, fmt.Errorf("%w: %v: %w", late(), err, errdefs.ErrUnavailable))
}

// Request is one proxied browser request as the HTTP layer parsed it.
type Request struct {
	Tenant    string
	SandboxID string
	// Path below the browser's root ("json/version", "devtools/page/ID").
	Path string
	// Prefix is the URL path of the browser's root as the caller used it
	// (for the WebSocket URLs in /json answers), without a trailing slash.
	Prefix string
	// WSBase is "ws://host" or "wss://host" as the caller reached the
	// service.
	WSBase string
	// Query is appended to rewritten WebSocket URLs ("token=..."), or "".
	Query string
	// Port, if set, is the port a capability token was made for: it must
	// be the browser's CDP port.
	Port int
	// Refuse, if set, is the answer once the sandbox is known to be the
	// caller's (a plain GET of a WebSocket-only path): a sandbox of
	// another tenant is not found first, as for any route.
	Refuse error
}

// ServeCDP proxies Chromium's DevTools HTTP endpoints (/json/version,
// /json/list, /json/new, ...) and its WebSocket endpoints (/devtools/...),
// rewriting the WebSocket URLs Chromium reports to the service's. The
// caller's Origin is dropped: the service authenticated the caller, and
// Chromium refuses a WebSocket whose Origin it was not started to allow
// (and must not allow one: pages inside the sandbox could then drive it).
func (m *Manager) ServeCDP(w http.ResponseWriter, r *http.Request, br Request, fail ports.ErrorWriter) {
	t, err := m.attach(r.Context(), br.Tenant, br.SandboxID)
	if err != nil {
		fail(w, r, err)
		return
	}
	if br.Refuse != nil {
		t.Release()
		fail(w, r, br.Refuse)
		return
	}
	err = m.waitReady(r.Context(), t)
	t.Release()
	if err == nil {
		err = checkPort(br, t)
	}
	if err != nil {
		fail(w, r, err)
		return
	}
	upstream := "127.0.0.1:" + strconv.Itoa(t.Spec.CDPPort)
	rewrite := func(resp *http.Response) error {
		if !strings.HasPrefix(br.Path, "json") || resp.StatusCode != http.StatusOK {
			return nil
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
		resp.Body.Close()
		if err != nil {
			return err
		}
		body = rewriteDevtoolsURLs(body, upstream, br)
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
		return nil
	}
	m.cfg.Ports.ServeHTTP(w, r, ports.Request{
		Tenant: br.Tenant, SandboxID: br.SandboxID, Port: t.Spec.CDPPort, Path: br.Path, Prefix: br.Prefix,
		StripOrigin: true, ModifyResponse: rewrite,
	}, fail)
}

// rewriteDevtoolsURLs turns Chromium's own WebSocket addresses
// (ws://127.0.0.1:9222/devtools/..., and ws=127.0.0.1:9222/devtools/... in
// devtoolsFrontendUrl) into the service's.
func rewriteDevtoolsURLs(body []byte, upstream string, br Request) []byte {
	hostPath := strings.TrimPrefix(strings.TrimPrefix(br.WSBase, "wss://"), "ws://") + br.Prefix
	ws := br.WSBase + br.Prefix + "/devtools/"
	out := bytes.ReplaceAll(body, []byte("ws://"+upstream+"/devtools/"), []byte(ws))
	out = bytes.ReplaceAll(out, []byte("ws="+upstream+"/devtools/"), []byte("ws="+hostPath+"/devtools/"))
	if br.Query == "" {
		return out
	}
	// Each webSocketDebuggerUrl ends at its closing quote: carry the query.
	var b bytes.Buffer
	for {
		i := bytes.Index(out, []byte(ws))
		if i < 0 {
			b.Write(out)
			return b.Bytes()
		}
		j := bytes.IndexByte(out[i:], '"')
		if j < 0 {
			b.Write(out)
			return b.Bytes()
		}
		b.Write(out[:i+j])
		b.WriteString("?" + br.Query)
		out = out[i+j:]
	}
}

// ServePlaywright proxies a Playwright client's connection
// (browserType.connect) to the sandbox's Playwright server, after checking
// that the client's version matches the image's: Playwright's protocol
// changes between minor versions, and a mismatch otherwise surfaces as an
// opaque WebSocket failure.
func (m *Manager) ServePlaywright(w http.ResponseWriter, r *http.Request, br Request, fail ports.ErrorWriter) {
	t, err := m.attach(r.Context(), br.Tenant, br.SandboxID)
	if err != nil {
		fail(w, r, err)
		return
	}
	t.Release()
	if err := checkPort(br, t); err != nil {
		fail(w, r, err)
		return
	}
	if br.Refuse != nil {
		fail(w, r, br.Refuse)
		return
	}
	if t.Spec.PlaywrightPort == 0 {
		fail(w, r, errdefs.WithCode(CodeNoPlaywright, fmt.Errorf(
			"the profile of sandbox %s serves no Playwright server; connect over CDP at %s (chromium.connectOverCDP): %w",
			t.SandboxID, br.Prefix, errdefs.ErrFailedPrecondition)))
		return
	}
	server := m.versions(r.Context(), t)["playwright"]
	if client, ok := playwrightClientVersion(r.Header.Get("User-Agent")); ok && server != "" && !sameMinor(client, server) {
		fail(w, r, errdefs.WithCode(CodeVersionMismatch, fmt.Errorf(
			"your Playwright client is %s, the sandbox's Playwright server is %s: install playwright-core@%s on your side (its major.minor must match), or connect over CDP at %s with chromium.connectOverCDP, which works across versions: %w",
			client, server, server, br.Prefix, errdefs.ErrFailedPrecondition)))
		return
	}
	if err := m.waitPort(r.Context(), t, t.Spec.PlaywrightPort); err != nil {
		fail(w, r, err)
		return
	}
	m.cfg.Ports.ServeHTTP(w, r, ports.Request{
		Tenant: br.Tenant, SandboxID: br.SandboxID, Port: t.Spec.PlaywrightPort, Path: "playwright", Prefix: br.Prefix,
		StripOrigin: true,
	}, fail)
}

// checkPort refuses a capability token made for another port of the
// sandbox (a preview link of some port is not a browser link).
func checkPort(br Request, t *Target) error {
	if br.Port != 0 && br.Port != t.Spec.CDPPort {
		return errdefs.WithCode("link_not_for_browser", fmt.Errorf(
			"this link opens port %d of sandbox %s, not its browser: make one with POST /v1/sandboxes/%s/browser/links: %w",
			br.Port, t.SandboxID, t.SandboxID, errdefs.ErrPermissionDenied))
	}
	return nil
}

// waitPort waits for the browser, then for port.
func (m *Manager) waitPort(ctx context.Context, t *Target, port int) error {
	if err := m.waitReady(ctx, t); err != nil {
		return err
	}
	return m.waitDial(ctx, t, port, func() error {
		return fmt.Errorf("port %d of sandbox %s did not answer within %v", port, t.SandboxID, m.cfg.ReadyWait)
	})
}

// versions are the component versions of the sandbox's image.
func (m *Manager) versions(ctx context.Context, t *Target) map[string]string {
	if m.cfg.Images == nil || t.Image == "" {
		return nil
	}
	labels, ok, err := m.cfg.Images.ImageLabels(ctx, t.Image)
	if err != nil || !ok {
		return nil
	}
	out := map[string]string{}
	for k, v := range labels {
		if name, ok := strings.CutPrefix(k, driver.LabelVersionPrefix); ok {
			out[name] = v
		}
	}
	return out
}

// playwrightClientVersion reads "Playwright/1.65.1 (...)" from a
// Playwright client's User-Agent.
func playwrightClientVersion(ua string) (string, bool) {
	for _, f := range strings.Fields(ua) {
		if v, ok := strings.CutPrefix(f, "Playwright/"); ok && v != "" {
			return v, true
		}
	}
	return "", false
}

// sameMinor reports whether two versions share major.minor.
func sameMinor(a, b string) bool {
	mm := func(v string) string {
		parts := strings.SplitN(v, ".", 3)
		if len(parts) < 2 {
			return v
		}
		return parts[0] + "." + parts[1]
	}
	return mm(a) == mm(b)
}

// Status is what GET /v1/sandboxes/{id}/browser reports.
type Status struct {
	SandboxID string            `json:"sandbox_id"`
	Ready     bool              `json:"ready"`
	Versions  map[string]string `json:"versions,omitempty"`
	// Browser is Chromium's /json/version "Browser" field once ready.
	Browser string `json:"browser,omitempty"`
	// Playwright reports whether the Playwright protocol is served.
	Playwright   bool   `json:"playwright"`
	CDPPort      int    `json:"cdp_port"`
	DownloadsDir string `json:"downloads_dir"`
	// Session reports whether the actions API holds a session open.
	Session bool `json:"session"`
}

// Status reports a browser sandbox's browser without waiting for it.
func (m *Manager) Status(ctx context.Context, tenant, id string) (*Status, error) {
	t, err := m.attach(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	defer t.Release()
	st := &Status{SandboxID: t.SandboxID, Versions: m.versions(ctx, t), Playwright: t.Spec.PlaywrightPort != 0, CDPPort: t.Spec.CDPPort, DownloadsDir: t.Spec.DownloadsDir}
	m.mu.Lock()
	st.Session = m.sessions[t.SandboxID] != nil
	m.mu.Unlock()
	if v, err := fetchVersion(ctx, t); err == nil {
		st.Ready, st.Browser = true, v.Browser
	}
	return st, nil
}

// FromControl adapts the lifecycle layer's Attach, running the recorder
// through jobs: a sandbox whose profile has no browser key is refused with
// code not_a_browser_profile.
func FromControl(a ports.Attacher, jobs Jobs) Sandboxes { return controlSandboxes{a, jobs} }

type controlSandboxes struct {
	a    ports.Attacher
	jobs Jobs
}

func (c controlSandboxes) AttachBrowser(ctx context.Context, tenant, id string) (*Target, error) {
	at, err := c.a.Attach(ctx, tenant, id, control.AttachOptions{})
	if err != nil {
		return nil, err
	}
	if at.Profile == nil || at.Profile.Browser == nil {
		at.Release()
		return nil, errdefs.WithCode(CodeNotBrowser, fmt.Errorf(
			"sandbox %s runs profile %s, which has no browser (create it with a browser profile such as browser-playwright): %w",
			id, at.Sandbox.Profile, errdefs.ErrFailedPrecondition))
	}
	t := targetOf(at, c.jobs)
	// The network mode is read only when a failed load needs it
	// explained: an attachment with Network reads the store once more.
	t.Offline = func(ctx context.Context) bool {
		an, err := c.a.Attach(ctx, tenant, id, control.AttachOptions{Network: true})
		if err != nil {
			return false
		}
		defer an.Release()
		return offlineOf(an)
	}
	return t, nil
}

// offlineOf reports whether an attachment's sandbox has no network.
func offlineOf(at *control.Attachment) bool {
	return at.Sandbox.Network == nil || at.Sandbox.Network.Mode == egress.ModeNone
}

// targetOf is the browser of a browser profile's attachment, running its
// helper processes through jobs.
func targetOf(at *control.Attachment, jobs Jobs) *Target {
	return &Target{
		Tenant: at.Sandbox.Tenant, SandboxID: at.Sandbox.ID, Image: at.Sandbox.Image, Spec: *at.Profile.Browser,
		Dial: at.Agent.DialPort, DialRaw: at.Agent.DialPortRaw, Files: at.Agent, Jobs: jobs, Release: at.Release,
		Offline: func(context.Context) bool { return offlineOf(at) }, Profile: at.Sandbox.Profile,
	}
}
