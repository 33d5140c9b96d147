package agent

import (
	"encoding/binary"
	"encoding/json"
	"net/http"
	"strconv"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

func (s *Server) handleTerminalList(w http.ResponseWriter, _ *http.Request) {
	infos := []agentproto.TerminalInfo{}
	for _, t := range s.terms.list() {
		infos = append(infos, t.info())
	}
	writeJSON(w, http.StatusOK, infos)
}

func (s *Server) handleTerminalResize(w http.ResponseWriter, r *http.Request, t *terminal) {
	var req agentproto.TerminalResize
	if err := s.decodeBody(w, r, &req, false); err != nil {
		writeError(w, err)
		return
	}
	if err := validSize(req.Cols, req.Rows, false); err != nil {
		writeError(w, err)
		return
	}
	if err := t.resize(req.Cols, req.Rows); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, t.info())
}

func (s *Server) handleTerminalStart(w http.ResponseWriter, r *http.Request) {
	var req agentproto.TerminalStartRequest
	if err := s.decodeBody(w, r, &req, false); err != nil {
		writeError(w, err)
		return
	}
	// The terminal outlives this request: nothing below uses its context.
	t, err := s.startTerminal(&req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, t.info())
}

// attachStart reads where an attach stream starts: offset=N, else the
// oldest kept byte with replay=1, else the current end.
func attachStart(r *http.Request, t *terminal) (int64, error) {
	q := r.URL.Query()
	if v := q.Get(agentproto.AttachOffsetQ); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, errdefs.Invalid("query %s=%q is not an output offset", agentproto.AttachOffsetQ, v)
		}
		return min(n, t.end()), nil
	}
	replay := false
	if v := q.Get(agentproto.AttachReplayQ); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return 0, errdefs.Invalid("query %s=%q is not a boolean", agentproto.AttachReplayQ, v)
		}
		replay = b
	}
	if replay {
		return 0, nil // clamped to the oldest kept byte
	}
	return t.end(), nil
}

// handleTerminalAttach copies the request body into the terminal and the
// terminal's output into the response, as frames, until the process has
// exited (exit frame) or the client goes away.
func (s *Server) handleTerminalAttach(w http.ResponseWriter, r *http.Request, t *terminal) {
	off, err := attachStart(r, t)
	if err != nil {
		writeError(w, err)
		return
	}
	rc := http.NewResponseController(w)
	rc.EnableFullDuplex() // HTTP/1 only; HTTP/2 streams are full duplex anyway
	w.Header().Set("Content-Type", agentproto.ContentTypeRaw)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return
	}
	// Input: the body as it arrives. The goroutine may outlive the handler
	// while a write to a terminal that reads nothing blocks; it ends when
	// the process exits (the master is closed) or the body is closed.
	go func() {
		buf := make([]byte, 4<<10)
		for {
			n, err := r.Body.Read(buf)
			if n > 0 {
				t.mu.Lock()
				m := t.master
				t.mu.Unlock()
				if m == nil {
					return
				}
				if _, werr := m.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	ctx := r.Context()
	b := make([]byte, 0, agentproto.FrameHeaderSize+agentproto.TerminalBufferBytes)
	for {
		b = agentproto.AppendFrame(b[:0], agentproto.Frame{Type: agentproto.FrameStdout})
		from, nb, changed, ended := t.read(b, off, agentproto.TerminalBufferBytes)
		b = nb
		n := len(b) - agentproto.FrameHeaderSize
		switch {
		case n > 0:
			binary.BigEndian.PutUint32(b[4:8], uint32(n))
			binary.BigEndian.PutUint64(b[8:16], uint64(from))
			off = from + int64(n)
		case ended:
			x, _ := t.exitResult()
			payload, _ := json.Marshal(x)
			b = agentproto.AppendFrame(b[:0], agentproto.Frame{Type: agentproto.FrameExit, Payload: payload})
		default:
			select {
			case <-changed:
				continue
			case <-ctx.Done():
				return
			}
		}
		if _, err := w.Write(b); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		if n == 0 {
			return // the exit frame went out
		}
	}
}

// exitResult returns how the terminal's process ended, once it has.
func (t *terminal) exitResult() (agentproto.ExitResult, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.exit == nil {
		return agentproto.ExitResult{}, false
	}
	return *t.exit, true
}
