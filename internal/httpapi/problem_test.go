package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/errdefs"
)

func TestProblemForContextErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err      error
		status   int
		code     string
		logError bool
	}{
		{fmt.Errorf("exec: agent: %w", context.Canceled), errdefs.StatusClientClosed, "client_closed", false},
		{fmt.Errorf("exec: agent: %w", context.DeadlineExceeded), http.StatusGatewayTimeout, "deadline_exceeded", false},
		{errors.New("boom"), http.StatusInternalServerError, "internal", true},
	}
	for _, c := range cases {
		var logs bytes.Buffer
		s := &Server{log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))}
		w := httptest.NewRecorder()
		s.writeProblem(w, httptest.NewRequest(http.MethodPost, "/v1/sandboxes/x/exec", nil), c.err)
		var p client.Problem
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
			t.Fatalf("%v: body %q: %v", c.err, w.Body, err)
		}
		if w.Code != c.status || p.Status != c.status || p.Code != c.code || p.Title == "" {
			t.Errorf("%v: %d %+v; want %d %s with a title", c.err, w.Code, p, c.status, c.code)
		}
		if logged := strings.Contains(logs.String(), "internal error"); logged != c.logError {
			t.Errorf("%v: logged as internal error = %v; want %v (log %q)", c.err, logged, c.logError, logs.String())
		}
	}
}
