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
	s.handle("GET", "/v1/sandboxes/{id}/browser", true, s.browserStatus)
	s.handleAny("/v1/sandboxes/{id}/browser/json", true, s.browserJSON)
	s.handleAny("/v1/sandboxes/{id}/browser/json/{path...}", true, s.browserJSON)
	s.handle("GET", "/v1/sandboxes/{id}/browser/devtools/{path...}", true, s.browserDevtools)
	s.handle("GET", "/v1/sandboxes/{id}/browser/playwright", true, s.browserPlaywright)
	s.handle("POST", "/v1/sandboxes/{id}/browser/actions", true, s.browserActions)
	s.handle("POST", "/v1/sandboxes/{id}/browser/links", true, s.browserLink)
	s.handle("GET", "/v1/sandboxes/{id}/browser/downloads", true, s.browserDownloads)
	s.handle("POST", "/v1/sandboxes/{id}/browser/downloads/keep", true, s.keepBrowserDownloads)
	s.handle("POST", "/v1/sandboxes/{id}/browser/profile/save", true, s.saveBrowserProfile)
	s.handle("POST", "/v1/sandboxes/{id}/browser/profile/load", true, s.loadBrowserProfile)
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

func (s *Server) browserStatus(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	st, err := s.browser.Status(r.Context(), tenantOf(r), id)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiwire.BrowserStatus(st, s.publicURL+"/v1/sandboxes/"+url.PathEscape(id)+"/browser"))
}

func (s *Server) browserActions(w http.ResponseWriter, r *http.Request) {
	var req api.BrowserActionsRequest
	if err := s.decode(w, r, &req); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	res, err := s.browser.Run(r.Context(), tenantOf(r), r.PathValue("id"), &req)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiwire.BrowserActions(res))
}

func (s *Server) browserLink(w http.ResponseWriter, r *http.Request) {
	var req api.CreatePortLinkRequest
	if err := s.decode(w, r, &req); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	id := r.PathValue("id")
	st, err := s.browser.Status(r.Context(), tenantOf(r), id)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	token, exp, err := s.ports.NewLink(r.Context(), principalOf(r), id, st.CDPPort, time.Duration(req.TTLSeconds)*time.Second)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	base := s.publicURL + "/v1/browsers/" + token
	out := api.BrowserLink{CDPURL: base, SandboxID: id, ExpiresAt: exp.UTC()}
	if st.Playwright {
		out.PlaywrightURL = "ws" + strings.TrimPrefix(base, "http") + "/playwright"
	}
	writeJSON(w, http.StatusCreated, out)
}

func (s *Server) browserDownloads(w http.ResponseWriter, r *http.Request) {
	s.writeDownloads(w, r, false, nil)
}

func (s *Server) keepBrowserDownloads(w http.ResponseWriter, r *http.Request) {
	var req api.KeepBrowserDownloadsRequest
	if err := s.decode(w, r, &req); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	s.writeDownloads(w, r, true, req.Names)
}

func (s *Server) writeDownloads(w http.ResponseWriter, r *http.Request, keep bool, names []string) {
	list, err := s.browser.Downloads(r.Context(), tenantOf(r), r.PathValue("id"), keep, names)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	out := api.BrowserDownloadList{Items: make([]api.BrowserDownload, len(list))}
	for i, d := range list {
		out.Items[i] = apiwire.BrowserDownload(d)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) saveBrowserProfile(w http.ResponseWriter, r *http.Request) {
	var req api.SaveBrowserProfileRequest
	if err := s.decode(w, r, &req); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	res, err := s.browser.SaveProfile(r.Context(), tenantOf(r), r.PathValue("id"), req.Name)
	s.writeBrowserProfile(w, r, res, err)
}

func (s *Server) loadBrowserProfile(w http.ResponseWriter, r *http.Request) {
	var req api.LoadBrowserProfileRequest
	if err := s.decode(w, r, &req); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	res, err := s.browser.LoadProfile(r.Context(), tenantOf(r), r.PathValue("id"), req.ArtifactID)
	s.writeBrowserProfile(w, r, res, err)
}

func (s *Server) writeBrowserProfile(w http.ResponseWriter, r *http.Request, res *browser.ProfileResult, err error) {
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiwire.BrowserProfile(res))
}
