package httpapi

import "net/http"

// Previews: see ports.Proxy.ServePreview. A preview host serves the
// sandbox's port and nothing else of the service.

// previewTarget reads r's Host as a preview host.
func (s *Server) previewTarget(r *http.Request) (sandboxID string, port int, ok bool) {
	if s.origins == nil || s.ports == nil {
		return "", 0, false
	}
	return s.origins.Match(r.Host)
}

// PreviewHandler serves previews only (the preview listener): any other
// host is 404.
func (s *Server) PreviewHandler() http.Handler {
	return s.handler(previewsOnly)
}

// previewURL is the URL a preview link of token opens.
func (s *Server) previewURL(sandboxID string, port int, path, rawQuery, token string) string {
	return s.origins.LinkURL(sandboxID, port, path, rawQuery, token)
}

// servePreview serves a request to a preview host.
func (s *Server) servePreview(w http.ResponseWriter, r *http.Request, sandboxID string, port int) {
	s.ports.ServePreview(w, r, s.origins, sandboxID, port, s.writeProblem)
}

// IsPreviewHost reports whether r came to a preview host (for what serves
// beside the API, such as the console, which must never answer there).
func (s *Server) IsPreviewHost(r *http.Request) bool {
	_, _, ok := s.previewTarget(r)
	return ok
}
