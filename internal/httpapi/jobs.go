package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/apiwire"
	"genesis.dev/sandbox/internal/b64"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/sandbox"
)

// parseCursor reads the resume cursor from Last-Event-ID or ?cursor=.
func parseCursor(r *http.Request) (int64, error) {
	v := r.Header.Get("Last-Event-ID")
	if q := r.URL.Query().Get("cursor"); q != "" {
		v = q
	}
	if v == "" {
		return 0, nil
	}
	c, err := strconv.ParseInt(v, 10, 64)
	if err != nil || c < 0 {
		return 0, errdefs.WithCode("invalid_cursor", errdefs.Invalid("cursor %q is not a non-negative event id", v))
	}
	return c, nil
}

// parseTextEncoding reads ?encoding=, how stdout and stderr events carry
// their bytes: base64 (the default) or text (see sseWriter.output).
func parseTextEncoding(r *http.Request) (bool, error) {
	switch v := r.URL.Query().Get("encoding"); v {
	case "", "base64":
		return false, nil
	case "text":
		return true, nil
	default:
		return false, errdefs.WithCode("invalid_encoding", fmt.Errorf(
			"encoding=%q: want base64 or text: %w", v, errdefs.ErrInvalidArgument))
	}
}

func parseBool(r *http.Request, name string, def bool) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, errdefs.Invalid("%s=%q is not a boolean", name, v)
	}
	return b, nil
}

// jobLogs serves GET /v1/jobs/{id}/logs as Server-Sent Events.
func (s *Server) jobLogs(w http.ResponseWriter, r *http.Request) {
	cursor, err := parseCursor(r)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	follow, err := parseBool(r, "follow", true)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	text, err := parseTextEncoding(r)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	job, log, err := s.jobs.JobLogFrom(r.Context(), tenantOf(r), r.PathValue("id"), cursor)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	s.streamLog(w, r, job.ID, log, cursor, follow, text, nil)
}

// streamLog writes the events of log from cursor on, output as text where
// it can be (see sseWriter.output). first, if set, is sent before anything
// else (the job event of a streamed exec).
func (s *Server) streamLog(w http.ResponseWriter, r *http.Request, jobID string, log *jobs.Log, cursor int64, follow, text bool, first func(*sseWriter) error) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Set(api.HeaderJobID, jobID)
	w.WriteHeader(http.StatusOK)
	sw := &sseWriter{w: w, rc: http.NewResponseController(w), text: text}
	if first != nil {
		if first(sw) != nil {
			return
		}
	}
	ctx := r.Context()
	sink := &sseSink{sw: sw, jobID: jobID}
	err := s.jobs.FollowLog(ctx, tenantOf(r), jobID, log, cursor, jobs.FollowOptions{Follow: follow, Keepalive: s.keepalive, Started: first != nil}, sink)
	if err != nil && ctx.Err() == nil {
		s.log.Warn("log stream ended", "job", jobID, "err", err)
	}
}

// sseSink writes a followed log as Server-Sent Events.
type sseSink struct {
	sw    *sseWriter
	jobID string
}

func (k *sseSink) Event(e jobs.LogEvent) error { return k.sw.frame(e, k.jobID) }
func (k *sseSink) Flush() error                { return k.sw.flush() }
func (k *sseSink) Idle() error                 { return k.sw.comment("keepalive") }

func (k *sseSink) InvalidCursor(cursor int64) {
	_ = k.sw.event("", "error", map[string]string{"code": "invalid_cursor",
		"detail": fmt.Sprintf("cursor %d is not an event id of job %s", cursor, k.jobID)})
	_ = k.sw.flush()
}

func (k *sseSink) RecordExit(j *sandbox.Job, cursor int64) {
	_ = k.sw.event(strconv.FormatInt(cursor, 10), "exit", apiwire.ExitEvent(j))
	_ = k.sw.flush()
}

type sseWriter struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	buf  []byte
	text bool // output events as text where the bytes allow it
}

func (sw *sseWriter) event(id, name string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	if id != "" {
		sw.buf = append(sw.buf, "id: "...)
		sw.buf = append(sw.buf, id...)
		sw.buf = append(sw.buf, '\n')
	}
	sw.buf = append(sw.buf, "event: "...)
	sw.buf = append(sw.buf, name...)
	sw.buf = append(sw.buf, "\ndata: "...)
	sw.buf = append(sw.buf, b...)
	sw.buf = append(sw.buf, "\n\n"...)
	if len(sw.buf) >= 256<<10 {
		return sw.flush()
	}
	return nil
}

// output appends a stdout/stderr event without intermediate allocations:
// this is the hot path of log streaming. The data is the api.OutputEvent JSON,
// or, in text mode where textForm allows, the offset and the bytes
// themselves: the first data line is the offset and each further line one
// line of the bytes, so that the event's data (lines joined with LF) is
// "<offset>\n<bytes>". Text saves the base64 work at both ends and, for
// all but very short lines, bytes on the wire; a caller who asked for text
// gets it for short lines too.
func (sw *sseWriter) output(id, name string, offset int64, payload []byte) error {
	sw.appendOutput(id, name, offset, payload)
	if len(sw.buf) >= 256<<10 {
		return sw.flush()
	}
	return nil
}

// appendOutput appends the event output writes to the buffer.
func (sw *sseWriter) appendOutput(id, name string, offset int64, payload []byte) {
	sw.buf = append(sw.buf, "id: "...)
	sw.buf = append(sw.buf, id...)
	sw.buf = append(sw.buf, "\nevent: "...)
	sw.buf = append(sw.buf, name...)
	if sw.text && textForm(payload) {
		sw.buf = append(sw.buf, "\ndata: "...)
		sw.buf = strconv.AppendInt(sw.buf, offset, 10)
		for {
			sw.buf = append(sw.buf, "\ndata: "...)
			i := bytes.IndexByte(payload, '\n')
			if i < 0 {
				sw.buf = append(sw.buf, payload...)
				break
			}
			sw.buf = append(sw.buf, payload[:i]...)
			payload = payload[i+1:]
		}
		sw.buf = append(sw.buf, "\n\n"...)
	} else {
		sw.buf = append(sw.buf, "\ndata: {\"offset\":"...)
		sw.buf = strconv.AppendInt(sw.buf, offset, 10)
		sw.buf = append(sw.buf, `,"data":"`...)
		sw.buf = b64.AppendEncode(sw.buf, payload)
		sw.buf = append(sw.buf, "\"}\n\n"...)
	}
}

// textForm reports whether b goes as SSE data lines in text mode: it must
// be valid UTF-8 (the stream's encoding) without CR (a line end to SSE
// parsers; LF is carried by the line structure). Short lines qualify too,
// although each costs "data: " (6 bytes) and base64 would be smaller: a
// person who asked for text reads it.
func textForm(b []byte) bool {
	return bytes.IndexByte(b, '\r') < 0 && utf8.Valid(b)
}

func (sw *sseWriter) comment(text string) error {
	sw.buf = append(sw.buf, ": "+text+"\n\n"...)
	return sw.flush()
}

func (sw *sseWriter) flush() error {
	if len(sw.buf) > 0 {
		if _, err := sw.w.Write(sw.buf); err != nil {
			return err
		}
		sw.buf = sw.buf[:0]
	}
	return sw.rc.Flush()
}

func (sw *sseWriter) frame(e jobs.LogEvent, jobID string) error {
	id := strconv.FormatInt(e.Cursor, 10)
	switch e.Type {
	case jobs.FrameStdout, jobs.FrameStderr:
		name := "stdout"
		if e.Type == jobs.FrameStderr {
			name = "stderr"
		}
		return sw.output(id, name, e.Offset, e.Payload)
	case jobs.FrameTruncated:
		return sw.event(id, "truncated", api.TruncatedEvent{Stream: jobs.TruncatedStream(e), Kept: e.Offset})
	case jobs.FrameExit:
		x, err := jobs.ExitOfEvent(jobID, e)
		if err != nil {
			return err
		}
		return sw.event(id, "exit", apiwire.LogExit(x))
	}
	return nil
}

// cancelJob serves POST /v1/jobs/{id}/cancel.
func (s *Server) cancelJob(r *http.Request) (api.Job, error) {
	return wired(apiwire.Job)(s.jobs.CancelJob(r.Context(), tenantOf(r), r.PathValue("id")))
}

// wantsEventStream reports whether the client asked for SSE.
func wantsEventStream(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// execStream starts a background job and streams its events live.
func (s *Server) execStream(w http.ResponseWriter, r *http.Request, in jobs.ExecInput) {
	text, err := parseTextEncoding(r)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	in.Streamed = true // the synchronous default timeout applies
	job, err := s.jobs.StartJob(r.Context(), in)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	log, err := s.jobs.StartedJobLog(job)
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			err = fmt.Errorf("job %s has no log: %w", job.ID, errdefs.ErrInternal)
		}
		s.writeProblem(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/jobs/"+job.ID)
	s.streamLog(w, r, job.ID, log, 0, true, text, func(sw *sseWriter) error {
		if err := sw.event("0", "job", apiwire.Job(job)); err != nil {
			return err
		}
		return sw.flush()
	})
}
