package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"genesis.dev/sandbox/client"
)

// This file holds a minimal Server-Sent Events reader and raw HTTP calls
// for the job, session and context endpoints. They go over net/http on
// purpose: the tests check the wire format itself, not a client's reading
// of it.

// sseItem is one thing read from an event stream: an event, or a comment
// line (Comment set, the other fields empty).
type sseItem struct {
	ID      string
	HasID   bool
	Event   string
	Data    string
	Comment string
}

// isComment reports whether the item is a comment line.
func (it sseItem) isComment() bool { return it.Event == "" && !it.HasID && it.Data == "" }

// sseReader parses text/event-stream (the subset the service writes: LF or
// CRLF line ends, id, event, data and comment lines).
type sseReader struct {
	r *bufio.Reader
}

func newSSEReader(r io.Reader) *sseReader { return &sseReader{r: bufio.NewReaderSize(r, 64<<10)} }

// next returns the next event or comment. An event cut off by the end of
// the body is dropped and the read error (io.EOF at a clean end) returned.
func (s *sseReader) next() (sseItem, error) {
	var it sseItem
	var data []string
	started := false
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			if err == io.EOF && line != "" {
				err = io.ErrUnexpectedEOF
			}
			return sseItem{}, err
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if line == "" {
			if !started {
				continue
			}
			it.Data = strings.Join(data, "\n")
			return it, nil
		}
		if strings.HasPrefix(line, ":") {
			if started {
				continue // a comment inside an event: ignored, as browsers do
			}
			return sseItem{Comment: strings.TrimPrefix(strings.TrimPrefix(line, ":"), " ")}, nil
		}
		started = true
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			it.ID, it.HasID = value, true
		case "event":
			it.Event = value
		case "data":
			data = append(data, value)
		}
	}
}

// sseOutput is the data of stdout and stderr events.
type sseOutput struct {
	Offset int64  `json:"offset"`
	Data   string `json:"data"`
}

// sseTruncated is the data of truncated events.
type sseTruncated struct {
	Stream string `json:"stream"`
	Kept   int64  `json:"kept"`
}

// sseExit is the data of the final exit event.
type sseExit struct {
	JobID           string `json:"job_id"`
	State           string `json:"state"`
	ExitCode        *int   `json:"exit_code"`
	ExitReason      string `json:"exit_reason"`
	Signal          string `json:"signal"`
	Error           string `json:"error"`
	StdoutBytes     int64  `json:"stdout_bytes"`
	StderrBytes     int64  `json:"stderr_bytes"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
}

func (x *sseExit) String() string {
	code := "none"
	if x.ExitCode != nil {
		code = strconv.Itoa(*x.ExitCode)
	}
	return fmt.Sprintf("state %s reason %s code %s signal %q error %q stdout %d (trunc %v) stderr %d (trunc %v)",
		x.State, x.ExitReason, code, x.Signal, x.Error, x.StdoutBytes, x.StdoutTruncated, x.StderrBytes, x.StderrTruncated)
}

// jobLog is a job's output reassembled from its events. apply checks the
// stream invariants as it goes: ids strictly grow, each output event starts
// exactly where its stream ended (no gap, no duplicate), nothing follows the
// exit event.
type jobLog struct {
	stdout, stderr []byte
	truncated      []sseTruncated
	exit           *sseExit
	cursor         int64     // id of the last event applied ("0": none yet)
	marks          []logMark // every event boundary seen, in order
	// text: the connection asked for ?encoding=text; textEvents counts the
	// output events that came in the text form, outputEvents all of them.
	text         bool
	textEvents   int
	outputEvents int
}

// textQualifies is the service's rule for the text form of an output
// event: valid UTF-8 without CR (short lines too).
func textQualifies(b []byte) bool {
	return bytes.IndexByte(b, '\r') < 0 && utf8.Valid(b)
}

// logMark is the reassembly state right after one event.
type logMark struct {
	cursor         int64
	stdout, stderr int
	truncated      int
}

// rewind forgets everything after mark i (i = -1: back to the start), so a
// resume from that mark's cursor can be applied again.
func (l *jobLog) rewind(i int) {
	m := logMark{}
	if i >= 0 {
		m = l.marks[i]
	}
	l.stdout, l.stderr = l.stdout[:m.stdout], l.stderr[:m.stderr]
	l.truncated = l.truncated[:m.truncated]
	l.exit = nil
	l.cursor = m.cursor
	l.marks = l.marks[:i+1]
}

func (l *jobLog) apply(it sseItem) error {
	if it.isComment() {
		return nil
	}
	if !it.HasID {
		return fmt.Errorf("event %q has no id", it.Event)
	}
	id, err := strconv.ParseInt(it.ID, 10, 64)
	if err != nil {
		return fmt.Errorf("event %q id %q is not a number", it.Event, it.ID)
	}
	if it.Event == "job" {
		if id != 0 {
			return fmt.Errorf("job event has id %d, want 0", id)
		}
		return nil
	}
	if l.exit != nil {
		return fmt.Errorf("event %s id %d after the exit event", it.Event, id)
	}
	if id <= l.cursor {
		return fmt.Errorf("event %s id %d does not follow id %d", it.Event, id, l.cursor)
	}
	switch it.Event {
	case "stdout", "stderr":
		var o sseOutput
		var b []byte
		if head, text, ok := strings.Cut(it.Data, "\n"); ok && !strings.HasPrefix(it.Data, "{") {
			// The text form: "<offset>\n<bytes>".
			if !l.text {
				return fmt.Errorf("%s event %d is in the text form, which was not asked for", it.Event, id)
			}
			if o.Offset, err = strconv.ParseInt(head, 10, 64); err != nil || head[0] == '+' || head[0] == '-' {
				return fmt.Errorf("%s event %d: text form without an offset line: %.200q", it.Event, id, it.Data)
			}
			b = []byte(text)
			if !textQualifies(b) {
				return fmt.Errorf("%s event %d: text form of bytes that do not qualify for it (CR or not UTF-8): %.200q", it.Event, id, text)
			}
			l.textEvents++
		} else {
			if err := json.Unmarshal([]byte(it.Data), &o); err != nil {
				return fmt.Errorf("%s event %d: %v in %.200q", it.Event, id, err, it.Data)
			}
			if b, err = base64.StdEncoding.DecodeString(o.Data); err != nil {
				return fmt.Errorf("%s event %d: data is not base64: %v", it.Event, id, err)
			}
			if l.text && textQualifies(b) {
				return fmt.Errorf("%s event %d: text was asked for and its %d bytes qualify, but it came as base64", it.Event, id, len(b))
			}
		}
		l.outputEvents++
		buf := &l.stdout
		if it.Event == "stderr" {
			buf = &l.stderr
		}
		if o.Offset != int64(len(*buf)) {
			return fmt.Errorf("%s event %d starts at offset %d, but %d bytes of the stream were delivered (gap or duplicate)", it.Event, id, o.Offset, len(*buf))
		}
		if len(b) == 0 {
			return fmt.Errorf("%s event %d carries no bytes", it.Event, id)
		}
		*buf = append(*buf, b...)
	case "truncated":
		var tr sseTruncated
		if err := json.Unmarshal([]byte(it.Data), &tr); err != nil {
			return fmt.Errorf("truncated event %d: %v", id, err)
		}
		l.truncated = append(l.truncated, tr)
	case "exit":
		var x sseExit
		if err := json.Unmarshal([]byte(it.Data), &x); err != nil {
			return fmt.Errorf("exit event %d: %v", id, err)
		}
		l.exit = &x
	default:
		return fmt.Errorf("unknown event %q (id %d)", it.Event, id)
	}
	l.cursor = id
	l.marks = append(l.marks, logMark{cursor: id, stdout: len(l.stdout), stderr: len(l.stderr), truncated: len(l.truncated)})
	return nil
}

// logRequest is one connection to GET /v1/jobs/{id}/logs.
type logRequest struct {
	cursor   string // "" for none
	query    bool   // send the cursor as ?cursor= instead of Last-Event-ID
	noFollow bool   // ?follow=false
	// stop, if set, is asked after each applied item and ends the
	// connection (a client-side disconnect) when it returns true.
	stop func(l *jobLog) bool
	// cutAfter, if positive, ends the connection after that many body
	// bytes, possibly mid-event (a dropped connection).
	cutAfter int64
	text     bool // ?encoding=text
}

// errCut is returned by a body reader that simulates a dropped connection.
var errCut = errors.New("connection cut by the test")

type cutReader struct {
	r    io.Reader
	left int64
}

func (c *cutReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errCut
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// openLogs sends GET /v1/jobs/{id}/logs and returns the response; the
// caller closes its body.
func (a *rawAPI) openLogs(ctx context.Context, jobID string, req logRequest) (*http.Response, error) {
	q := url.Values{}
	if req.query && req.cursor != "" {
		q.Set("cursor", req.cursor)
	}
	if req.noFollow {
		q.Set("follow", "false")
	}
	if req.text {
		q.Set("encoding", "text")
	}
	u := a.base + "/v1/jobs/" + url.PathEscape(jobID) + "/logs"
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Authorization", "Bearer "+a.key)
	hr.Header.Set("Accept", "text/event-stream")
	if !req.query && req.cursor != "" {
		hr.Header.Set("Last-Event-ID", req.cursor)
	}
	return a.hc.Do(hr)
}

// readLogs makes one connection and applies its events to l. It returns
// nil when the stream ended by itself or by req.stop/cutAfter, and an error
// for a broken invariant, a non-200 answer or a transport failure.
func (a *rawAPI) readLogs(ctx context.Context, jobID string, l *jobLog, req logRequest) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resp, err := a.openLogs(ctx, jobID, req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return fmt.Errorf("GET logs of %s (cursor %q): %d %s", jobID, req.cursor, resp.StatusCode, b)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return fmt.Errorf("GET logs of %s: content type %q, want text/event-stream", jobID, mt)
	}
	l.text = req.text
	var body io.Reader = resp.Body
	if req.cutAfter > 0 {
		body = &cutReader{r: body, left: req.cutAfter}
	}
	return l.consume(newSSEReader(body), req.stop)
}

// consume applies items from r until the stream ends, stop says so, or the
// exit event has been applied.
func (l *jobLog) consume(r *sseReader, stop func(*jobLog) bool) error {
	for {
		it, err := r.next()
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, errCut) {
				return nil
			}
			return err
		}
		if err := l.apply(it); err != nil {
			return err
		}
		if l.exit != nil || (stop != nil && stop(l)) {
			return nil
		}
	}
}

// followLogs reads a job's log from l's cursor until the exit event,
// reconnecting when a stream ends without one; it fails t on any error or
// when timeout passes.
func (a *rawAPI) followLogs(t *testing.T, jobID string, l *jobLog, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for l.exit == nil {
		err := a.readLogs(ctx, jobID, l, logRequest{cursor: strconv.FormatInt(l.cursor, 10)})
		if ctx.Err() != nil {
			t.Fatalf("job %s: no exit event within %v (%d stdout, %d stderr bytes so far; last error %v)", jobID, timeout, len(l.stdout), len(l.stderr), err)
		}
		if err != nil {
			t.Fatalf("job %s: reading its log: %v", jobID, err)
		}
	}
}

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// rawAPI calls the service over plain net/http with one API key.
type rawAPI struct {
	base, key string
	hc        *http.Client
}

// raw returns a rawAPI for the service with the env's key.
func (s *service) raw() *rawAPI { return s.rawWithKey(s.e.apiKey) }

func (s *service) rawWithKey(key string) *rawAPI {
	return &rawAPI{base: s.url(), key: key, hc: &http.Client{}}
}

// call sends a JSON request (body nil: none) and decodes a 2xx JSON answer
// into out (if not nil). It returns the status and, for an error answer,
// the problem. Transport failures fail t.
func (a *rawAPI) call(t *testing.T, method, path string, body, out any) (int, client.Problem) {
	t.Helper()
	status, p, err := a.try(method, path, body, out)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return status, p
}

// try is call without t, for goroutines and calls expected to fail.
func (a *rawAPI) try(method, path string, body, out any) (int, client.Problem, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, client.Problem{}, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return 0, client.Problem{}, err
	}
	req.Header.Set("Authorization", "Bearer "+a.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return 0, client.Problem{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, client.Problem{}, err
	}
	var p client.Problem
	if resp.StatusCode >= 300 {
		mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		if mt != "application/problem+json" || json.Unmarshal(b, &p) != nil {
			return resp.StatusCode, p, fmt.Errorf("%d answer is %q, not problem+json: %.300q", resp.StatusCode, mt, b)
		}
		return resp.StatusCode, p, nil
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, p, fmt.Errorf("decoding the %d answer: %v: %.300q", resp.StatusCode, err, b)
		}
	}
	return resp.StatusCode, p, nil
}

// execBody is the exec request body with the background flag.
type execBody struct {
	Command        []string `json:"command,omitempty"`
	Script         string   `json:"script,omitempty"`
	TimeoutMS      int64    `json:"timeout_ms,omitempty"`
	MaxOutputBytes int64    `json:"max_output_bytes,omitempty"`
	Background     bool     `json:"background,omitempty"`
}

// startJob starts a background job and returns it (202 expected).
func (a *rawAPI) startJob(t *testing.T, sandboxID string, req execBody) client.Job {
	t.Helper()
	req.Background = true
	var j client.Job
	status, p := a.call(t, http.MethodPost, "/v1/sandboxes/"+sandboxID+"/exec", req, &j)
	if status != http.StatusAccepted {
		t.Fatalf("background exec %.80q in %s: %d %s %s, want 202", req.Script+strings.Join(req.Command, " "), sandboxID, status, p.Code, p.Detail)
	}
	if j.ID == "" || j.Mode != "background" {
		t.Fatalf("background exec answered job %+v", j)
	}
	return j
}

// getJob returns a job (200 expected).
func (a *rawAPI) getJob(t *testing.T, id string) client.Job {
	t.Helper()
	var j client.Job
	if status, p := a.call(t, http.MethodGet, "/v1/jobs/"+id, nil, &j); status != http.StatusOK {
		t.Fatalf("GET job %s: %d %s %s", id, status, p.Code, p.Detail)
	}
	return j
}

// waitJob polls a job until it has a final state.
func (a *rawAPI) waitJob(t *testing.T, id string, timeout time.Duration) client.Job {
	t.Helper()
	var j client.Job
	eventually(t, timeout, "job "+id+" finished", func() (bool, string) {
		j = a.getJob(t, id)
		return j.FinishedAt != nil, j.State
	})
	return j
}

// exec runs a synchronous exec and returns its result (200 expected).
func (a *rawAPI) exec(t *testing.T, sandboxID, script string) client.ExecResult {
	t.Helper()
	var res client.ExecResult
	status, p := a.call(t, http.MethodPost, "/v1/sandboxes/"+sandboxID+"/exec", execBody{Script: script, TimeoutMS: 60_000}, &res)
	if status != http.StatusOK {
		t.Fatalf("exec %.80q in %s: %d %s %s", script, sandboxID, status, p.Code, p.Detail)
	}
	return res
}
