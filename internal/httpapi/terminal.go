package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/coder/websocket"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/interactive"
)

// GET /v1/sandboxes/{id}/terminal upgrades to a WebSocket carrying one
// interactive terminal (the protocol: interactive.ServeWebSocket).
// Errors before the upgrade (auth, unknown sandbox or terminal: 404, bad
// query: 400, not a WebSocket request: 400 websocket_required) are
// problem+json answers like everywhere else.

// terminalWriteWait bounds a WebSocket write (stdin streams too).
const terminalWriteWait = interactive.WebSocketWriteWait

// queryInt reads a non-negative integer query parameter (0 when absent).
func queryInt(r *http.Request, name string) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, errdefs.Invalid("%s=%q is not a non-negative integer", name, v)
	}
	return n, nil
}

// isWebSocketUpgrade reports whether r asks for a WebSocket.
func isWebSocketUpgrade(r *http.Request) bool {
	return headerHasToken(r.Header, "Connection", "upgrade") && headerHasToken(r.Header, "Upgrade", "websocket")
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// terminal serves GET /v1/sandboxes/{id}/terminal.
func (s *Server) terminal(w http.ResponseWriter, r *http.Request) {
	opts := interactive.TerminalOptions{Tenant: tenantOf(r), SandboxID: r.PathValue("id"), TerminalID: r.URL.Query().Get("terminal")}
	var err error
	if opts.Cols, err = queryInt(r, "cols"); err == nil {
		if opts.Rows, err = queryInt(r, "rows"); err == nil {
			opts.Takeover, err = parseBool(r, "takeover", false)
		}
	}
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	if !isWebSocketUpgrade(r) {
		s.writeProblem(w, r, errdefs.WithCode("websocket_required", fmt.Errorf(
			"this endpoint speaks WebSocket only (Connection: Upgrade, Upgrade: websocket): %w", errdefs.ErrInvalidArgument)))
		return
	}
	conn, err := s.terms.Open(r.Context(), opts)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		// Accept has answered the client already.
		s.log.Debug("terminal websocket upgrade failed", "request_id", requestID(r), "err", err)
		conn.Abort(r.Context())
		return
	}
	interactive.ServeWebSocket(r.Context(), ws, conn, s.log.With("request_id", requestID(r), "terminal", conn.ID()))
}
