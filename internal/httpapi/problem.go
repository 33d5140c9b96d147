package httpapi

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/apiwire"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
)

const problemType = "https://genesis.dev/problems/"

// writeProblem writes err as application/problem+json with the status from
// errdefs' class table.
func (s *Server) writeProblem(w http.ResponseWriter, r *http.Request, err error) {
	status := errdefs.HTTPStatus(err)
	code := errdefs.Code(err)
	if ae := auditOf(r); ae != nil {
		ae.code = code
	}
	detail := errdefs.Detail(err)
	switch status {
	case errdefs.StatusClientClosed:
		// The client went away; nobody reads this answer and nothing failed
		// on our side.
		s.log.Debug("client closed request", "request_id", requestID(r), "method", r.Method, "path", r.URL.Path, "err", err)
	case http.StatusInternalServerError:
		s.log.Error("internal error", "request_id", requestID(r), "method", r.Method, "path", r.URL.Path, "err", err)
		detail = "internal error; see the service log for request " + requestID(r)
	}
	if after, ok := errdefs.RetryAfter(err); ok {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int((after+time.Second-1)/time.Second))))
	}
	switch {
	case w.Header().Get("Retry-After") != "":
	case errors.Is(err, errdefs.ErrResourceExhausted):
		w.Header().Set("Retry-After", "5")
	case errors.Is(err, errdefs.ErrUnavailable):
		w.Header().Set("Retry-After", "2")
	case errors.Is(err, errdefs.ErrUnauthenticated):
		w.Header().Set("WWW-Authenticate", `Bearer realm="genesis"`)
	}
	p := api.Problem{
		Type:      problemType + code,
		Title:     errdefs.StatusText(status),
		Status:    status,
		Detail:    detail,
		Code:      code,
		Instance:  apiwire.ProblemInstance(r.URL.Path),
		RequestID: requestID(r),
	}
	if b, ok := control.ImageBuildOf(err); ok {
		p.ImageBuild = apiwire.ImageBuild(&b)
	}
	w.Header().Set("Content-Type", api.ProblemMediaType)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(p)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		slog.Error("encoding response", "err", err)
		http.Error(w, "encoding response", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
