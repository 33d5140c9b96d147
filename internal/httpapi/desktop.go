package httpapi

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/apiwire"
	"genesis.dev/sandbox/internal/console"
	"genesis.dev/sandbox/internal/desktop"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/recording"
	"genesis.dev/sandbox/internal/slowlog"

	"github.com/coder/websocket"
)

// Desktop routes of a desktop profile's sandbox:
//
//	POST   /v1/sandboxes/{id}/computer/actions   run computer-use actions (screenshot, click, type, key, ...)
//	GET    /v1/sandboxes/{id}/control            who holds control (?after=N&wait_ms=M waits for a change)
//	POST   /v1/sandboxes/{id}/control            take control {holder: agent | human:<who>, reason, allow_screenshots}
//	DELETE /v1/sandboxes/{id}/control            release control
//	POST   /v1/sandboxes/{id}/control/requests   an agent asks for a human {reason}
//	GET    /v1/sandboxes/{id}/display/vnc        live view: RFB over WebSocket, ?role=observer|controller
//	POST   /v1/sandboxes/{id}/display/recording  record the display into the trace's video segments {fps, segment_seconds}
//	GET    /v1/sandboxes/{id}/display/recording  the recording's state
//	DELETE /v1/sandboxes/{id}/display/recording  stop it (answers once the last segment is kept)
//	POST   /v1/sandboxes/{id}/display/links      a short-lived live-view link {role, ttl_seconds} (no API key in it)
//	GET    /v1/displays/{token}/vnc              what a live-view link opens (no API key)
//	GET    /v1/displays/{token}/viewer           the live-view page of a link (noVNC; no API key)
//	GET    /v1/displays/{token}/control          who holds control and the agent's requests, for the page
//	GET    /v1/sandboxes/{id}/display/viewer     a new link's page: 303 to /v1/displays/{token}/viewer
//	GET    /viewer/{file}                        the live-view page's script and style
func (s *Server) desktopRoutes() {
	if s.desktop == nil {
		return
	}
	s.handle("POST", "/v1/sandboxes/{id}/computer/actions", true, serveBody(s, http.StatusOK, s.computerActions))
	s.handle("GET", "/v1/sandboxes/{id}/control", true, s.desktopControl)
	s.handle("POST", "/v1/sandboxes/{id}/control", true, serveBody(s, http.StatusOK, s.takeDesktopControl))
	s.handle("DELETE", "/v1/sandboxes/{id}/control", true, serveGet(s, http.StatusOK, s.releaseDesktopControl))
	s.handle("POST", "/v1/sandboxes/{id}/control/requests", true, serveBody(s, http.StatusCreated, s.requestHuman))
	s.handle("GET", "/v1/sandboxes/{id}/display/vnc", true, s.displayVNC)
	s.recordingRoutes("/v1/sandboxes/{id}/display/recording", s.desktop)
	if s.ports != nil {
		s.handle("POST", "/v1/sandboxes/{id}/display/links", true, serveBody(s, http.StatusCreated, s.displayLink))
		s.handle("GET", "/v1/displays/{token}/vnc", false, s.displayVNC)
		s.handle("GET", "/v1/sandboxes/{id}/display/viewer", true, s.displayViewerRedirect)
		s.handle("GET", "/v1/displays/{token}/viewer", false, s.displayViewer)
		s.handle("GET", "/v1/displays/{token}/control", false, s.desktopControl)
		s.handle("GET", console.ViewerPrefix+"{file}", false, s.viewerAsset)
	}
}

// displayScope prefixes the scope of live-view links; the role follows.
const displayScope = "display:"

// displayRole checks the role of a live-view link.
func displayRole(role string) error {
	if role != desktop.RoleObserver && role != desktop.RoleController {
		return errdefs.WithCode("invalid_role", errdefs.Invalid("role %.40q must be observer or controller", role))
	}
	return nil
}

// newDisplayLink makes a live-view link of role for the request's
// sandbox, good for ttl.
func (s *Server) newDisplayLink(r *http.Request, role string, ttl time.Duration) (id, token string, exp time.Time, err error) {
	if err = displayRole(role); err != nil {
		return "", "", time.Time{}, err
	}
	if id, err = s.desktop.CheckDesktop(r.Context(), tenantOf(r), r.PathValue("id")); err != nil {
		return "", "", time.Time{}, err
	}
	token, exp, err = s.ports.NewScopedLink(principalOf(r), id, displayScope+role, ttl)
	return id, token, exp, err
}

func (s *Server) displayLink(r *http.Request, req *api.CreateDisplayLinkRequest) (api.DisplayLink, error) {
	id, token, exp, err := s.newDisplayLink(r, req.Role, time.Duration(req.TTLSeconds)*time.Second)
	if err != nil {
		return api.DisplayLink{}, err
	}
	return api.DisplayLink{SandboxID: id, Role: req.Role, ExpiresAt: exp.UTC(),
		VNCURL: "ws" + strings.TrimPrefix(s.publicURL, "http") + "/v1/displays/" + token + "/vnc", ViewerURL: s.publicURL + "/v1/displays/" + token + "/viewer"}, nil
}

// displayViewerRedirect makes a live-view link for the caller (?role=,
// default observer; ?ttl_seconds=, default 600) and answers 303 to its
// page: `genesis desktop view` prints where it leads.
func (s *Server) displayViewerRedirect(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	role := cmp.Or(q.Get("role"), desktop.RoleObserver)
	if err := displayRole(role); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	ttl := 600
	if v := q.Get("ttl_seconds"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			s.writeProblem(w, r, errdefs.Invalid("ttl_seconds %.20q must be a positive integer", v))
			return
		}
		ttl = n
	}
	_, token, _, err := s.newDisplayLink(r, role, time.Duration(ttl)*time.Second)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, s.publicURL+"/v1/displays/"+token+"/viewer", http.StatusSeeOther)
}

// displayViewer serves the live-view page of a link: noVNC connecting to
// the link's /vnc. The link is checked here too, so an expired or
// tampered one is a 404, not a page that cannot connect.
func (s *Server) displayViewer(w http.ResponseWriter, r *http.Request) {
	c, role, err := s.ports.VerifyScopedLink(r.Context(), r.PathValue("token"), displayScope)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	if _, err := s.desktop.CheckDesktop(r.Context(), c.Tenant, c.SandboxID); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	s.viewer.ServePage(w, r, console.ViewerPage{SandboxID: c.SandboxID, Role: role, ExpiresAt: time.Unix(c.Expires, 0).UTC()})
}

// displayVNC serves the live view: the VNC server's RFB over a WebSocket
// (binary messages), with the client's input dropped unless its role is
// controller and it holds the pen.
func (s *Server) displayVNC(w http.ResponseWriter, r *http.Request) {
	tenant, id, role := tenantOf(r), r.PathValue("id"), r.URL.Query().Get("role")
	if role == "" {
		role = desktop.RoleObserver
	}
	if token := r.PathValue("token"); token != "" {
		// A live-view link: its claims name the sandbox and the role.
		c, linkRole, err := s.ports.VerifyScopedLink(r.Context(), token, displayScope)
		if err != nil {
			s.writeProblem(w, r, err)
			return
		}
		tenant, id, role = c.Tenant, c.SandboxID, linkRole
	}
	v, err := s.desktop.OpenVNCAs(r.Context(), tenant, id, role, r.URL.Query().Get("who"))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	// The default origin check stays: the API key never travels in a
	// cookie, so a page of another origin has no ambient authority.
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled, Subprotocols: []string{"binary"}})
	if err != nil {
		v.Close()
		return
	}
	ws.SetReadLimit(-1) // messages are parts of a byte stream; the RFB parser bounds them
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	nc := websocket.NetConn(ctx, ws, websocket.MessageBinary)
	if err := v.Serve(ctx, nc); err != nil {
		s.log.Debug("live view ended", "request_id", requestID(r), "sandbox", v.SandboxID, "err", err)
	}
}

// maxControlWait bounds GET …/control?after=N's wait.
const maxControlWait = 60 * time.Second

func (s *Server) desktopControl(w http.ResponseWriter, r *http.Request) {
	after, wait := int64(-1), 30*time.Second
	q := r.URL.Query()
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			s.writeProblem(w, r, errdefs.Invalid("after %q is not a version", v))
			return
		}
		after = n
	}
	if v := q.Get("wait_ms"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || time.Duration(n)*time.Millisecond > maxControlWait {
			s.writeProblem(w, r, errdefs.Invalid("wait_ms %q is not 0..%d", v, maxControlWait.Milliseconds()))
			return
		}
		wait = time.Duration(n) * time.Millisecond
	}
	slowlog.Of(r.Context()).Allow(wait) // a long poll the caller asked for
	tenant, id := tenantOf(r), r.PathValue("id")
	if token := r.PathValue("token"); token != "" {
		// A live-view link's page shows who holds control and the agent's
		// requests for a person; either role may read them.
		c, _, err := s.ports.VerifyScopedLink(r.Context(), token, displayScope)
		if err != nil {
			s.writeProblem(w, r, err)
			return
		}
		tenant, id = c.Tenant, c.SandboxID
	}
	st, err := s.desktop.Control(r.Context(), tenant, id, after, wait)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) takeDesktopControl(r *http.Request, req *api.TakeDesktopControlRequest) (*api.DesktopControl, error) {
	return s.desktop.TakeControl(r.Context(), tenantOf(r), r.PathValue("id"), *req)
}

func (s *Server) releaseDesktopControl(r *http.Request) (*api.DesktopControl, error) {
	return s.desktop.ReleaseControl(r.Context(), tenantOf(r), r.PathValue("id"))
}

func (s *Server) requestHuman(r *http.Request, req *api.RequestHumanRequest) (*api.DesktopControl, error) {
	return s.desktop.RequestHuman(r.Context(), tenantOf(r), r.PathValue("id"), req.Reason)
}

func (s *Server) computerActions(r *http.Request, req *api.ComputerActionsRequest) (*api.ComputerActionsResult, error) {
	return s.desktop.Run(r.Context(), tenantOf(r), r.PathValue("id"), req)
}

// viewerAsset serves the live-view page's script and style.
func (s *Server) viewerAsset(w http.ResponseWriter, r *http.Request) {
	if !s.viewer.HasAsset(r.PathValue("file")) {
		s.writeProblem(w, r, errdefs.WithCode("not_found", fmt.Errorf("no file %.60q of the live-view page (run make build if the page is not built): %w", r.PathValue("file"), errdefs.ErrNotFound)))
		return
	}
	s.viewer.ServeAsset(w, r)
}

// recorder is a workload that records a sandbox's screen (the desktop's
// display, the browser's screencast).
type recorder interface {
	StartRecording(ctx context.Context, tenant, id string, o recording.Options) (*recording.Recording, error)
	GetRecording(ctx context.Context, tenant, id string) (*recording.Recording, error)
	StopRecording(ctx context.Context, tenant, id string) (*recording.Recording, error)
}

// recordingRoutes serves POST (start), GET (state) and DELETE (stop) of
// path for m.
func (s *Server) recordingRoutes(path string, m recorder) {
	s.handle("POST", path, true, serveBody(s, http.StatusCreated, func(r *http.Request, req *api.RecordingRequest) (api.Recording, error) {
		o := recording.Options{FPS: req.FPS, SegmentSeconds: req.SegmentSeconds}
		return wired(apiwire.Recording)(m.StartRecording(r.Context(), tenantOf(r), r.PathValue("id"), o))
	}))
	for method, f := range map[string]func(context.Context, string, string) (*recording.Recording, error){"GET": m.GetRecording, "DELETE": m.StopRecording} {
		s.handle(method, path, true, serveGet(s, http.StatusOK, func(r *http.Request) (api.Recording, error) {
			return wired(apiwire.Recording)(f(r.Context(), tenantOf(r), r.PathValue("id")))
		}))
	}
}
