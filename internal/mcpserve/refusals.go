package mcpserve

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"genesis.dev/sandbox/internal/errdefs"
)

// RefusalsAsProblems serves h and hands what the MCP SDK's transport
// refuses in plain text (an unknown session, another tenant's session, a
// malformed message) to problem, as an error of its class, so that the edge
// answers it as every other error of the API. Everything else, the event
// streams included, passes through.
func RefusalsAsProblems(h http.Handler, problem func(http.ResponseWriter, *http.Request, error)) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		rw := &refusalWriter{ResponseWriter: w}
		h.ServeHTTP(rw, r)
		if rw.class != nil {
			problem(w, r, transportError(rw.class, rw.status, strings.TrimSpace(string(rw.text)), r.Header.Get("Mcp-Session-Id")))
		}
	}
}

// transportClasses are the error classes of the statuses the MCP SDK's
// transport refuses a request with (in plain text, before any MCP
// exchange): an unknown session, another tenant's session, a malformed
// message. They are answered as problems, as every other error of the API.
var transportClasses = map[int]error{
	http.StatusBadRequest:            errdefs.ErrInvalidArgument,
	http.StatusForbidden:             errdefs.ErrPermissionDenied,
	http.StatusNotFound:              errdefs.ErrNotFound,
	http.StatusMethodNotAllowed:      errdefs.ErrMethodNotAllowed,
	http.StatusConflict:              errdefs.ErrConflict,
	http.StatusRequestEntityTooLarge: errdefs.ErrTooLarge,
}

// refusalWriter holds back an error the MCP SDK writes in plain text
// (its status and text), so that it can be answered as a problem instead;
// everything else passes through.
type refusalWriter struct {
	http.ResponseWriter
	class  error // the held error's class; nil: nothing held
	status int
	text   []byte
}

func (w *refusalWriter) WriteHeader(status int) {
	if class, ok := transportClasses[status]; ok && w.class == nil &&
		strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		w.class, w.status = class, status
		w.Header().Del("Content-Type")
		w.Header().Del("X-Content-Type-Options")
		return
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *refusalWriter) Write(b []byte) (int, error) {
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
func (w *refusalWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// transportError is the problem of a request the MCP SDK's transport
// refused: its words, except for a session that is not there or is
// another tenant's, which say what to do.
func transportError(class error, status int, text, session string) error {
	switch status {
	case http.StatusNotFound:
		text = fmt.Sprintf("MCP session %q is not open here (it ended, timed out or was opened on another replica); initialize a new one", session)
	case http.StatusForbidden:
		text = fmt.Sprintf("MCP session %q was opened with another tenant's API key", session)
	case http.StatusBadRequest:
		// The SDK's words name its decoder ("json: …") and echo the body.
		text = "the MCP transport refused the request: " + strings.ReplaceAll(text[:min(len(text), 200)], "json: ", "")
	}
	if text == "" {
		text = http.StatusText(status)
	}
	return errdefs.Mark(errors.New(text), class)
}
