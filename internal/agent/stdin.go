package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// jobStdin is the agent's write end of the stdin pipe of a job started
// with stdin_stream. One PUT at a time writes into it; the close route or
// the job's end closes it.
type jobStdin struct {
	mu   sync.Mutex
	w    *os.File // nil once closed
	busy bool     // a PUT holds the writer
	gen  uint64   // bumped per writer, so a late interrupt of an old one does nothing
}

// acquire takes the writer for one PUT. It returns the pipe and the
// writer's generation.
func (st *jobStdin) acquire(id string) (*os.File, uint64, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.w == nil {
		return nil, 0, errdefs.WithCode(agentproto.CodeStdinClosed,
			fmt.Errorf("job %s: stdin is closed: %w", id, errdefs.ErrFailedPrecondition))
	}
	if st.busy {
		return nil, 0, errdefs.WithCode(agentproto.CodeStdinBusy,
			fmt.Errorf("job %s: another request is writing its stdin: %w", id, errdefs.ErrConflict))
	}
	st.busy = true
	st.gen++
	st.w.SetWriteDeadline(time.Time{})
	return st.w, st.gen, nil
}

// release gives the writer back.
func (st *jobStdin) release() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.busy = false
	st.gen++
}

// interrupt ends a blocked write of writer gen (its caller went away).
func (st *jobStdin) interrupt(gen uint64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.gen == gen && st.w != nil {
		st.w.SetWriteDeadline(time.Now())
	}
}

// close closes the pipe: the process reads EOF once it read what was
// written. A write in progress fails. Idempotent.
func (st *jobStdin) close() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.w != nil {
		st.w.Close()
		st.w = nil
	}
}

func (st *jobStdin) open() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.w != nil
}

// stdinFor returns the job's stdin, or why it has none to write to.
func (j *bgJob) stdinFor() (*jobStdin, error) {
	if !j.stdinStreamed {
		return nil, errdefs.WithCode(agentproto.CodeStdinNotStreamed,
			fmt.Errorf("job %s was not started with stdin_stream: %w", j.id, errdefs.ErrFailedPrecondition))
	}
	if !j.running() || j.stdin == nil {
		return nil, j.notRunning()
	}
	return j.stdin, nil
}

func (j *bgJob) notRunning() error {
	return errdefs.WithCode(agentproto.CodeJobNotRunning,
		fmt.Errorf("job %s has ended: %w", j.id, errdefs.ErrFailedPrecondition))
}

// handleJobStdin streams the request body into the job's stdin (see
// agentproto.PathJobStdin).
func (s *Server) handleJobStdin(w http.ResponseWriter, r *http.Request, j *bgJob) {
	st, err := j.stdinFor()
	if err != nil {
		writeError(w, err)
		return
	}
	f, gen, err := st.acquire(j.id)
	if err != nil {
		if !j.running() {
			err = j.notRunning()
		}
		writeError(w, err)
		return
	}
	defer st.release()
	// A caller that goes away must not hold the writer while the process
	// reads nothing.
	stop := context.AfterFunc(r.Context(), func() { st.interrupt(gen) })
	defer stop()

	rc := http.NewResponseController(w)
	rc.EnableFullDuplex() // HTTP/1 only; HTTP/2 streams are full duplex anyway
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return
	}
	b := s.getBuf()
	defer s.putBuf(b)
	var res agentproto.JobStdinResult
	for {
		n, rerr := r.Body.Read(b)
		if n > 0 {
			m, werr := f.Write(b[:n])
			res.Written += int64(m)
			if werr != nil {
				if r.Context().Err() != nil {
					return // nobody to answer
				}
				e := s.stdinWriteError(j, werr)
				res.Error = &agentproto.Error{Code: errdefs.Code(e), Message: e.Error()}
				break
			}
		}
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) {
				return // the caller went away
			}
			break
		}
	}
	writeJSONBody(w, res)
}

// stdinWriteError explains a failed write into a job's stdin.
func (s *Server) stdinWriteError(j *bgJob, err error) error {
	if !j.running() {
		return j.notRunning()
	}
	if errors.Is(err, syscall.EPIPE) {
		return errdefs.WithCode(agentproto.CodeStdinClosed,
			fmt.Errorf("job %s: the process closed its stdin: %w", j.id, errdefs.ErrFailedPrecondition))
	}
	if errors.Is(err, os.ErrClosed) {
		return errdefs.WithCode(agentproto.CodeStdinClosed,
			fmt.Errorf("job %s: stdin was closed during the write: %w", j.id, errdefs.ErrFailedPrecondition))
	}
	return fmt.Errorf("job %s: write stdin: %v: %w", j.id, err, errdefs.ErrInternal)
}

// handleJobStdinClose closes the job's stdin (idempotent).
func (s *Server) handleJobStdinClose(w http.ResponseWriter, j *bgJob) {
	if !j.stdinStreamed {
		writeError(w, errdefs.WithCode(agentproto.CodeStdinNotStreamed,
			fmt.Errorf("job %s was not started with stdin_stream: %w", j.id, errdefs.ErrFailedPrecondition)))
		return
	}
	if j.stdin != nil {
		j.stdin.close()
	}
	w.WriteHeader(http.StatusNoContent)
}

// writeJSONBody writes v as the rest of an answer whose headers are sent.
func writeJSONBody(w io.Writer, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	w.Write(b)
}
