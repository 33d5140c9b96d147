package httpapi

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/apiwire"
	"genesis.dev/sandbox/internal/browser"
	"genesis.dev/sandbox/internal/errdefs"
)

// Browser routes of a browser profile's sandbox. The root
// /v1/sandboxes/{id}/browser is a DevTools endpoint as Chromium serves it,
// so chromium.connectOverCDP(root, {headers}) and CDP clients work on it:
//
//	GET  /v1/sandboxes/{id}/browser                  status: ready, versions, URLs
//	ANY  /v1/sandboxes/{id}/browser/json[/{path...}] Chromium's /json endpoints, WebSocket URLs rewritten
//	GET  /v1/sandboxes/{id}/browser/devtools/{path...} CDP WebSocket (browser or page)
//	GET  /v1/sandboxes/{id}/browser/playwright       Playwright protocol WebSocket (browserType.connect)
//	POST /v1/sandboxes/{id}/browser/actions          run actions (navigate, click, fill, screenshot, ...)
//	GET  /v1/sandboxes/{id}/browser/downloads        downloaded files with their sha256
//	POST /v1/sandboxes/{id}/browser/downloads/keep   keep downloads as artifacts {names?}
//	POST /v1/sandboxes/{id}/browser/profile/save     save the browser profile as an artifact {name?}
//	POST /v1/sandboxes/{id}/browser/profile/load     load a saved profile {artifact_id}
//	POST|GET|DELETE /v1/sandboxes/{id}/browser/recording  record the active tab's screencast into the trace's video segments
//	POST /v1/sandboxes/{id}/browser/links            a capability URL {ttl_seconds} for clients that cannot send headers
//	ANY  /v1/browsers/{token}/...                    what a capability URL opens (no API key)
func (s *Server) browserRoutes() {
	if s.browser == nil {
		return
	}
	s.handle("GET", "/v1/sandboxes/{id}/browser", true, serveGet(s, http.StatusOK, s.browserStatus))
	s.handleAny("/v1/sandboxes/{id}/browser/json", true, s.browserJSON)
	s.handleAny("/v1/sandboxes/{id}/browser/json/{path...}", true, s.browserJSON)
	s.handle("GET", "/v1/sandboxes/{id}/browser/devtools/{path...}", true, s.browserDevtools)
	s.handle("GET", "/v1/sandboxes/{id}/browser/playwright", true, s.browserPlaywright)
	s.handle("POST", "/v1/sandboxes/{id}/browser/actions", true, serveBodyHeaded(s, http.StatusOK, s.browserActions))
	s.handle("POST", "/v1/sandboxes/{id}/browser/links", true, serveBody(s, http.StatusCreated, s.browserLink))
	s.handle("GET", "/v1/sandboxes/{id}/browser/downloads", true, serveGet(s, http.StatusOK, func(r *http.Request) (api.BrowserDownloadList, error) {
		return s.downloads(r, false, nil)
	}))
	s.handle("POST", "/v1/sandboxes/{id}/browser/downloads/keep", true, serveBody(s, http.StatusOK, func(r *http.Request, req *api.KeepBrowserDownloadsRequest) (api.BrowserDownloadList, error) {
		return s.downloads(r, true, req.Names)
	}))
	s.handle("POST", "/v1/sandboxes/{id}/browser/profile/save", true, serveBody(s, http.StatusOK, func(r *http.Request, req *api.SaveBrowserProfileRequest) (api.BrowserProfile, error) {
		return wired(apiwire.BrowserProfile)(s.browser.SaveProfile(r.Context(), tenantOf(r), r.PathValue("id"), req.Name))
	}))
	s.handle("POST", "/v1/sandboxes/{id}/browser/profile/load", true, serveBody(s, http.StatusOK, func(r *http.Request, req *api.LoadBrowserProfileRequest) (api.BrowserProfile, error) {
		return wired(apiwire.BrowserProfile)(s.browser.LoadProfile(r.Context(), tenantOf(r), r.PathValue("id"), req.ArtifactID))
	}))
	s.recordingRoutes("/v1/sandboxes/{id}/browser/recording", s.browser)
	s.handleAny("/v1/browsers/{token}/json", false, s.browserJSON)
	s.handleAny("/v1/browsers/{token}/json/{path...}", false, s.browserJSON)
	s.handle("GET", "/v1/browsers/{token}/devtools/{path...}", false, s.browserDevtools)
	s.handle("GET", "/v1/browsers/{token}/playwright", false, s.browserPlaywright)
}

// browserRequest reads who is asking for which sandbox: an API key's
// tenant and the path's sandbox, or a capability token's claims.
func (s *Server) browserRequest(w http.ResponseWriter, r *http.Request, sub string) (browser.Request, bool) {
	br := browser.Request{WSBase: "ws" + strings.TrimPrefix(s.publicURL, "http")}
	if token := r.PathValue("token"); token != "" {
		c, err := s.ports.VerifyLink(r.Context(), token)
		if err != nil {
			s.writeProblem(w, r, err)
			return br, false
		}
		br.Tenant, br.SandboxID, br.Prefix, br.Port = c.Tenant, c.SandboxID, "/v1/browsers/"+token, c.Port
	} else {
		id := r.PathValue("id")
		br.Tenant, br.SandboxID, br.Prefix = tenantOf(r), id, "/v1/sandboxes/"+url.PathEscape(id)+"/browser"
	}
	br.Path = sub
	if p := r.PathValue("path"); p != "" {
		br.Path += "/" + p
	} else if strings.HasSuffix(r.URL.Path, "/") && sub == "json" {
		br.Path += "/"
	}
	return br, true
}

func (s *Server) browserJSON(w http.ResponseWriter, r *http.Request) {
	if br, ok := s.browserRequest(w, r, "json"); ok {
		s.browser.ServeCDP(w, r, br, s.writeProblem)
	}
}

func (s *Server) browserDevtools(w http.ResponseWriter, r *http.Request) {
	if br, ok := s.browserRequest(w, r, "devtools"); ok {
		if !isWebSocketUpgrade(r) {
			br.Refuse = errdefs.WithCode("websocket_required",
				invalidArg("this endpoint speaks WebSocket only (Connection: Upgrade, Upgrade: websocket)"))
		}
		s.browser.ServeCDP(w, r, br, s.writeProblem)
	}
}

func (s *Server) browserPlaywright(w http.ResponseWriter, r *http.Request) {
	br, ok := s.browserRequest(w, r, "playwright")
	if !ok {
		return
	}
	if !isWebSocketUpgrade(r) {
		br.Refuse = errdefs.WithCode("websocket_required",
			invalidArg("this endpoint speaks WebSocket only: connect with Playwright's browserType.connect(wsEndpoint)"))
	}
	s.browser.ServePlaywright(w, r, br, s.writeProblem)
}

func (s *Server) browserStatus(r *http.Request) (api.BrowserStatus, error) {
	id := r.PathValue("id")
	st, err := s.browser.Status(r.Context(), tenantOf(r), id)
	if err != nil {
		return api.BrowserStatus{}, err
	}
	return apiwire.BrowserStatus(st, s.publicURL+"/v1/sandboxes/"+url.PathEscape(id)+"/browser"), nil
}

func (s *Server) browserActions(h http.Header, r *http.Request, req *api.BrowserActionsRequest) (api.BrowserActionsResult, error) {
	ctx, timed := s.browserTimings(r)
	out, err := s.browser.Run(ctx, tenantOf(r), r.PathValue("id"), req)
	if err == nil {
		timed(h)
	}
	return wired(apiwire.BrowserActions)(out, err)
}

func (s *Server) browserLink(r *http.Request, req *api.CreatePortLinkRequest) (api.BrowserLink, error) {
	id := r.PathValue("id")
	st, err := s.browser.Status(r.Context(), tenantOf(r), id)
	if err != nil {
		return api.BrowserLink{}, err
	}
	token, exp, err := s.ports.NewLink(r.Context(), principalOf(r), id, st.CDPPort, time.Duration(req.TTLSeconds)*time.Second)
	if err != nil {
		return api.BrowserLink{}, err
	}
	base := s.publicURL + "/v1/browsers/" + token
	out := api.BrowserLink{CDPURL: base, SandboxID: id, ExpiresAt: exp.UTC()}
	if st.Playwright {
		out.PlaywrightURL = "ws" + strings.TrimPrefix(base, "http") + "/playwright"
	}
	return out, nil
}

// downloads lists the browser's downloads, keeping those named (all when
// names is empty) as artifacts when keep.
func (s *Server) downloads(r *http.Request, keep bool, names []string) (api.BrowserDownloadList, error) {
	return wired(apiwire.BrowserDownloads)(s.browser.Downloads(r.Context(), tenantOf(r), r.PathValue("id"), keep, names))
}
