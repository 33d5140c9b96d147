package agent

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// Stream framing: output is sent in frames of at most streamFrame payload
// bytes, several frames per write and flush, up to streamBatch bytes. Large
// frames keep the per-frame work low all the way to the SSE client (one log
// append, one event); a frame is only as large as the output that is there
// when the reader comes for it, so a trickle still goes out at once.
const (
	streamFrame    = agentproto.MaxFramePayload
	streamBatch    = 2 << 20
	streamSegments = 256 // frames per batch
	// streamDirect is the payload size from which a frame's bytes are
	// written from the output's blocks, not copied into the batch first
	// (a copy of every byte of a bulk stream, in the sandbox's CPU quota).
	streamDirect = 64 << 10
	// streamBuffer holds a whole batch, headers included, so it never grows.
	streamBuffer = streamBatch + (streamSegments+2)*agentproto.FrameHeaderSize + 4<<10
)

// defaultShimPath is where the agent binary is mounted in every sandbox.
const defaultShimPath = "/.genesis/genesis-agent"

// resolveShimPath picks the binary background jobs run under: the
// configured one, else this executable, else the mounted agent.
func resolveShimPath(configured string) string {
	if configured != "" {
		return configured
	}
	if p, err := os.Executable(); err == nil && syscall.Access(p, 1 /* X_OK */) == nil {
		return p
	}
	return defaultShimPath
}

func (s *Server) handleJobList(w http.ResponseWriter, _ *http.Request) {
	infos := []agentproto.JobInfo{}
	for _, j := range s.jobs.list() {
		infos = append(infos, j.info())
	}
	writeJSON(w, http.StatusOK, infos)
}

// handleJobForget drops a finished job.
func (s *Server) handleJobForget(w http.ResponseWriter, r *http.Request) {
	if err := s.jobs.forget(r.PathValue("id")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleJobRelease lets the agent drop output the caller has stored.
func (s *Server) handleJobRelease(w http.ResponseWriter, r *http.Request, j *bgJob) {
	c, err := parseStreamOffsets(r)
	if err != nil {
		writeError(w, err)
		return
	}
	j.out.release(c)
	w.WriteHeader(http.StatusNoContent)
}

// decodeBody decodes exactly one JSON object from the request body; an
// empty body leaves v as it is when emptyOK.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, v any, emptyOK bool) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, s.cfg.MaxRequestBytes))
	if err := dec.Decode(v); err != nil {
		if emptyOK && errors.Is(err, io.EOF) {
			return nil
		}
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return fmt.Errorf("request body over %d bytes: %w", tooBig.Limit, errdefs.ErrTooLarge)
		}
		return fmt.Errorf("decode request: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("decode request: trailing data after the JSON object: %w", errdefs.ErrInvalidArgument)
	}
	return nil
}

func (s *Server) handleJobStart(w http.ResponseWriter, r *http.Request) {
	var req agentproto.JobStartRequest
	if err := s.decodeBody(w, r, &req, false); err != nil {
		writeError(w, err)
		return
	}
	// The job must outlive this request: nothing below uses its context.
	j, err := s.startJob(&req)
	if err != nil {
		writeError(w, err)
		return
	}
	if !req.Follow {
		writeJSON(w, http.StatusCreated, j.info())
		return
	}
	info, err := json.Marshal(j.info())
	if err != nil {
		writeError(w, fmt.Errorf("encode job info: %v: %w", err, errdefs.ErrInternal))
		return
	}
	w.Header().Set(agentproto.HeaderJobInfo, string(info))
	s.streamJob(w, r, j, cursor{}, http.StatusCreated)
}

func (s *Server) handleJobCancel(w http.ResponseWriter, r *http.Request, j *bgJob) {
	var req agentproto.JobCancelRequest
	if err := s.decodeBody(w, r, &req, true); err != nil {
		writeError(w, err)
		return
	}
	if req.GraceMS < 0 {
		writeError(w, errdefs.Invalid("grace_ms must not be negative"))
		return
	}
	j.terminate(agentproto.ExitReasonCanceled, time.Duration(req.GraceMS)*time.Millisecond)
	writeJSON(w, http.StatusAccepted, j.info())
}

// parseStreamOffsets reads the stdout and stderr resume offsets.
func parseStreamOffsets(r *http.Request) (cursor, error) {
	var c cursor
	q := r.URL.Query()
	for i, name := range []string{agentproto.StreamStdoutQ, agentproto.StreamStderrQ} {
		v := q.Get(name)
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return c, errdefs.Invalid("query %s=%q is not a byte offset", name, v)
		}
		c[i] = n
	}
	return c, nil
}

// handleJobStream sends the job's kept output after the requested offsets,
// then live output, truncation markers and finally the exit frame.
func (s *Server) handleJobStream(w http.ResponseWriter, r *http.Request, j *bgJob) {
	c, err := parseStreamOffsets(r)
	if err != nil {
		writeError(w, err)
		return
	}
	s.streamJob(w, r, j, c, http.StatusOK)
}

// streamJob answers with status and j's stream from c.
func (s *Server) streamJob(w http.ResponseWriter, r *http.Request, j *bgJob, c cursor, status int) {
	watch := j.out.watch()
	defer j.out.unwatch(watch)
	kept, trunc, _ := j.out.state()
	for i := range c {
		c[i] = min(c[i], kept[i]) // beyond what exists: from the end
	}
	rp, err := j.out.addReader(c)
	if err != nil {
		writeError(w, err)
		return
	}
	defer j.out.dropReader(rp)
	// A truncation frame comes once per stream, with the last kept byte. A
	// stream resumed at (or beyond) the end of a truncated stream already
	// had it, so it is not repeated into the caller's log; the exit frame
	// carries the flags in any case.
	var truncSent [2]bool
	for i := range c {
		truncSent[i] = trunc[i] && c[i] >= kept[i]
	}

	w.Header().Set("Content-Type", agentproto.ContentTypeRaw)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	rc := http.NewResponseController(w)
	if err := rc.Flush(); err != nil {
		return
	}
	bp := s.frames.Get().(*[]byte)
	defer s.frames.Put(bp)
	for {
		segs, nc := j.out.next(c, streamFrame, streamBatch, streamSegments)
		b := (*bp)[:0]
		for _, g := range segs {
			h := len(b)
			b = agentproto.AppendFrame(b, agentproto.Frame{Type: frameType(g.stream), Offset: g.from})
			// The header's length field (bytes 4-8) gets the payload size.
			binary.BigEndian.PutUint32(b[h+4:h+8], uint32(g.to-g.from))
			if g.to-g.from < streamDirect {
				b = g.appendTo(b)
				continue
			}
			// A bulk segment goes out from the output's blocks, after what
			// the batch holds so far: the reader's position (advanced only
			// once the batch is written) keeps them from being reused.
			if err := g.writeTo(w, b); err != nil {
				return
			}
			b = b[:0]
		}
		c = nc
		// Caps that were hit go out right after the last kept byte, in the
		// same write; once everything is sent and the job is over, its exit.
		kept, trunc, closed := j.out.state()
		for i := range trunc {
			if trunc[i] && !truncSent[i] && c[i] >= kept[i] {
				truncSent[i] = true
				b = agentproto.AppendFrame(b, agentproto.Frame{
					Type: agentproto.FrameTruncated, Offset: kept[i], Payload: []byte{byte(frameType(i))},
				})
			}
		}
		var ended bool
		if len(segs) == 0 && closed {
			x, _ := j.exitResult()
			payload, _ := json.Marshal(x)
			b = agentproto.AppendFrame(b, agentproto.Frame{Type: agentproto.FrameExit, Payload: payload})
			ended = true
		}
		*bp = b
		if len(b) > 0 {
			if _, err := w.Write(b); err != nil {
				return
			}
		}
		if len(b) > 0 || len(segs) > 0 {
			if err := rc.Flush(); err != nil {
				return
			}
		}
		j.out.advance(rp, c) // what it sent from the blocks is written
		if ended {
			return
		}
		if len(segs) > 0 {
			continue
		}
		select {
		case <-watch:
		case <-r.Context().Done():
			return
		}
	}
}
