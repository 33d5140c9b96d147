package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"

	"github.com/coder/websocket"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/jobs"
)

// Streamed stdin of background jobs started with "stdin_stream": true:
//
//	PUT  /v1/jobs/{id}/stdin        the body (any length, chunked) goes into the
//	                                job's stdin as it arrives → 200 {"bytes": N}
//	POST /v1/jobs/{id}/stdin/close  the process reads end of file → 204
//	GET  /v1/jobs/{id}/attach       WebSocket: stdin in, stdout/stderr and exit out
//
// Attach protocol. Client → server: binary messages are stdin bytes, in
// order; the text message {"type":"close_stdin"} closes stdin. Server →
// client: first {"type":"hello","job":"<id>","stdin":true}; then binary
// messages whose first byte is 1 (stdout) or 2 (stderr) followed by the
// bytes, from the job's start (or from ?cursor=N, an event id of the SSE
// log); last {"type":"exit","exit_code":N,"exit_reason":"…","signal":"…",
// "cursor":N} and a close with status 1000. A job without streamed stdin
// can be attached to for its output; its stdin messages are refused with
// close status 1008. The connection never holds more than one message per
// direction in the service: a peer that does not read stops the reading
// of the log, one that does not write costs nothing.
func (s *Server) stdinRoutes() {
	s.handle("PUT", "/v1/jobs/{id}/stdin", true, serveGet(s, http.StatusOK, func(r *http.Request) (api.StdinWritten, error) {
		n, err := s.jobs.WriteStdin(r.Context(), tenantOf(r), r.PathValue("id"), r.Body)
		return api.StdinWritten{Bytes: n}, err
	}))
	s.handle("POST", "/v1/jobs/{id}/stdin/close", true, serveNoContent(s, func(r *http.Request) error {
		return s.jobs.CloseStdin(r.Context(), tenantOf(r), r.PathValue("id"))
	}))
	s.handle("GET", "/v1/jobs/{id}/attach", true, s.attachJob)
}

func (s *Server) attachJob(w http.ResponseWriter, r *http.Request) {
	cursor, err := parseCursor(r)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	if !isWebSocketUpgrade(r) {
		s.writeProblem(w, r, errdefs.WithCode("websocket_required",
			invalidArg("this endpoint speaks WebSocket only (Connection: Upgrade, Upgrade: websocket)")))
		return
	}
	tenant, id := tenantOf(r), r.PathValue("id")
	_, log, err := s.jobs.JobLogFrom(r.Context(), tenant, id, cursor)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	// Open stdin before the upgrade, so that a job without streamed stdin
	// is known at once; an ended job is attached for its output only.
	stdin, serr := s.jobs.OpenStdin(r.Context(), tenant, id)
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		if stdin != nil {
			stdin.Close()
		}
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer ws.CloseNow()
	ws.SetReadLimit(1 << 20)
	var wmu sync.Mutex
	send := func(typ websocket.MessageType, b []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		wctx, c := context.WithTimeout(ctx, terminalWriteWait)
		defer c()
		return ws.Write(wctx, typ, b)
	}
	sendJSON := func(m api.AttachMessage) error {
		b, _ := json.Marshal(m)
		return send(websocket.MessageText, b)
	}
	hasStdin := serr == nil
	if err := sendJSON(api.AttachMessage{Type: "hello", Job: id, Stdin: &hasStdin}); err != nil {
		if stdin != nil {
			stdin.Close()
		}
		return
	}

	// Client → stdin.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() {
			if stdin != nil {
				stdin.Close()
			}
		}()
		for {
			typ, b, err := ws.Read(ctx)
			if err != nil {
				return
			}
			switch typ {
			case websocket.MessageBinary:
				if stdin == nil {
					reason := "this job has no streamed stdin"
					if serr != nil {
						reason = errdefs.Code(serr) + ": " + serr.Error()
					}
					ws.Close(websocket.StatusPolicyViolation, truncateReason(reason))
					cancel()
					return
				}
				if _, err := stdin.Write(b); err != nil {
					sendJSON(api.AttachMessage{Type: "error", Error: err.Error()})
					stdin.Close()
					stdin = nil
				}
			case websocket.MessageText:
				var m api.AttachMessage
				if json.Unmarshal(b, &m) != nil || m.Type != "close_stdin" {
					ws.Close(websocket.StatusUnsupportedData, "unknown control message")
					cancel()
					return
				}
				if stdin != nil {
					stdin.Close()
					stdin = nil
				}
				if err := s.jobs.CloseStdin(ctx, tenant, id); err != nil {
					sendJSON(api.AttachMessage{Type: "error", Error: err.Error()})
				}
			}
		}
	}()

	// Log → client.
	buf := make([]byte, 0, 64<<10)
	var last int64 = cursor
	err = log.Read(ctx, cursor, true, func(e jobs.LogEvent) error {
		last = e.Cursor
		switch e.Type {
		case jobs.FrameStdout, jobs.FrameStderr:
			tag := api.AttachStdout
			if e.Type == jobs.FrameStderr {
				tag = api.AttachStderr
			}
			buf = append(append(buf[:0], tag), e.Payload...)
			return send(websocket.MessageBinary, buf)
		case jobs.FrameExit:
			x, err := e.Exit()
			if err != nil {
				return err
			}
			code := x.ExitCode
			c := last
			return sendJSON(api.AttachMessage{Type: "exit", ExitCode: &code, ExitReason: x.ExitReason, Signal: x.Signal, Cursor: &c})
		}
		return nil
	})
	if err == nil {
		ws.Close(websocket.StatusNormalClosure, "")
	} else if !errors.Is(err, context.Canceled) {
		s.log.Debug("attach ended", "job", id, "request_id", requestID(r), "err", err)
		ws.Close(websocket.StatusInternalError, "log read failed")
	}
	cancel()
	wg.Wait()
}

// truncateReason fits a close reason into a WebSocket control frame.
func truncateReason(s string) string {
	if len(s) > 120 {
		return s[:120]
	}
	return s
}
