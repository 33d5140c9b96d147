package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/mcpserve"
	"genesis.dev/sandbox/internal/tenant"
)

// mcpServeRoutes mounts the service's own MCP server, its sandbox tools
// (internal/mcpserve), over Streamable HTTP with the tenant's API key:
//
//	POST|GET|DELETE /v1/mcp/sandbox   the sandbox tools MCP server (the tenant's API key)
//
// A missing or wrong key is a 401 problem before any MCP exchange.
func (s *Server) mcpServeRoutes() {
	if s.mcpServe == nil {
		return
	}
	edge := mcpserve.Edge{PrincipalOf: principalOf}
	if s.ports != nil {
		edge.PreviewLink = func(ctx context.Context, by tenant.Principal, sandboxID string, port int, ttl time.Duration) (string, time.Time, error) {
			if ttl == 0 {
				ttl = min(time.Hour, s.ports.MaxLinkTTL())
			}
			token, exp, err := s.ports.NewLink(ctx, by, sandboxID, port, ttl)
			if err != nil {
				return "", time.Time{}, err
			}
			return s.previewURL(sandboxID, port, "/", "", token), exp, nil
		}
	}
	h := s.mcpServe.Handler(edge)
	serve := func(w http.ResponseWriter, r *http.Request) {
		pw := &mcpProblemWriter{ResponseWriter: w}
		h.ServeHTTP(pw, r)
		if pw.class != nil {
			s.writeProblem(w, r, mcpTransportError(pw.class, pw.status, strings.TrimSpace(string(pw.text)), r.Header.Get("Mcp-Session-Id")))
		}
	}
	for _, m := range []string{"POST", "GET", "DELETE"} {
		s.handle(m, "/v1/mcp/sandbox", true, serve)
	}
}

// mcpTransportClasses are the error classes of the statuses the MCP SDK's
// transport refuses a request with (in plain text, before any MCP
// exchange): an unknown session, another tenant's session, a malformed
// message. They are answered as problems, as every other error of the API.
var mcpTransportClasses = map[int]error{
	http.StatusBadRequest:            errdefs.ErrInvalidArgument,
	http.StatusForbidden:             errdefs.ErrPermissionDenied,
	http.StatusNotFound:              errdefs.ErrNotFound,
	http.StatusMethodNotAllowed:      errdefs.ErrMethodNotAllowed,
	http.StatusConflict:              errdefs.ErrConflict,
	http.StatusRequestEntityTooLarge: errdefs.ErrTooLarge,
}

// mcpProblemWriter holds back an error the MCP SDK writes in plain text
// (its status and text), so that it can be answered as a problem instead;
// everything else passes through.
type mcpProblemWriter struct {
	http.ResponseWriter
	class  error // the held error's class; nil: nothing held
	status int
	text   []byte
}

func (w *mcpProblemWriter) WriteHeader(status int) {
	if class, ok := mcpTransportClasses[status]; ok && w.class == nil &&
		strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		w.class, w.status = class, status
		w.Header().Del("Content-Type")
		w.Header().Del("X-Content-Type-Options")
		return
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *mcpProblemWriter) Write(b []byte) (int, error) {
	if w.class != nil {
		if len(w.text) < 1024 {
			w.text = append(w.text, b[:min(len(b), 1024-len(w.text))]...)
		}
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (flushes of
// the event streams).
func (w *mcpProblemWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// mcpTransportError is the problem of a request the MCP SDK's transport
// refused: its words, except for a session that is not there or is
// another tenant's, which say what to do.
func mcpTransportError(class error, status int, text, session string) error {
	switch status {
	case http.StatusNotFound:
		return fmt.Errorf("MCP session %q is not open here (it ended, timed out or was opened on another replica); initialize a new one: %w",
			session, class)
	case http.StatusForbidden:
		return fmt.Errorf("MCP session %q was opened with another tenant's API key: %w", session, class)
	}
	if text == "" {
		text = http.StatusText(status)
	}
	return fmt.Errorf("%s: %w", text, class)
}
