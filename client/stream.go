package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"genesis.dev/sandbox/api"
)

// StreamOptions configures StreamLogs and ExecStream.
type StreamOptions struct {
	// Cursor starts the stream after the event with this id ("" or "0":
	// from the beginning). StreamLogs only.
	Cursor string
	// Follow waits for new events until the job's exit event; without it
	// the stream ends at the current end of the log. StreamLogs only:
	// ExecStream always follows.
	Follow bool
	// Resume reconnects after a dropped connection, with backoff, sending
	// Last-Event-ID = the id of the last event delivered, until the exit
	// event (or, without Follow, the end of the log) or the end of ctx. The
	// callback sees every event once, without gaps.
	Resume bool
	// IdleTimeout treats a connection that delivers no byte for this long
	// as dropped. The service sends a keepalive at least every 15 s. Zero
	// means 60 s; negative disables the check.
	IdleTimeout time.Duration
	// Encoding is EncodingText (the default) or EncodingBase64.
	Encoding string
}

// encoding returns the value of the service's encoding parameter.
func (o StreamOptions) encoding() (string, error) {
	switch o.Encoding {
	case "", EncodingText:
		return EncodingText, nil
	case EncodingBase64:
		return EncodingBase64, nil
	}
	return "", fmt.Errorf("stream encoding %q: want %q or %q", o.Encoding, EncodingText, EncodingBase64)
}

// Reconnection backoff of resumed streams.
const (
	defaultRetryMin    = 100 * time.Millisecond
	defaultRetryMax    = 5 * time.Second
	defaultIdleTimeout = 60 * time.Second
)

// errIdle cancels a connection that went quiet for longer than the idle
// timeout.
var errIdle = errors.New("no data from the server within the idle timeout")

// errNoExit is a followed stream that ended cleanly before the exit event.
var errNoExit = errors.New("stream ended before the exit event")

// StartJob calls POST /v1/sandboxes/{id}/exec with background set: the job
// starts and the call returns at once with the job record (202). Read its
// output with StreamLogs and its end with GetJob.
func (c *Client) StartJob(ctx context.Context, sandboxID string, req ExecRequest) (*Job, error) {
	p, err := idPath("/v1/sandboxes/", sandboxID)
	if err != nil {
		return nil, err
	}
	req.Background = true
	var v Job
	if err := c.do(ctx, request{method: http.MethodPost, path: p + "/exec", auth: true, body: req}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// CancelJob calls POST /v1/jobs/{id}/cancel: the job's whole process tree
// is killed and it ends canceled. Canceling a finished job changes nothing;
// a synchronous job fails with an *APIError of status 409 and code
// not_cancelable.
func (c *Client) CancelJob(ctx context.Context, jobID string) (*Job, error) {
	p, err := idPath("/v1/jobs/", jobID)
	if err != nil {
		return nil, err
	}
	var v Job
	if err := c.do(ctx, request{method: http.MethodPost, path: p + "/cancel", auth: true}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// StreamLogs reads GET /v1/jobs/{id}/logs and calls fn for each stdout,
// stderr, truncated and exit event, in order; events of unknown names are
// skipped. It returns nil after the exit event, or, without opts.Follow, at
// the end of what the log holds now. An error returned by fn stops the
// stream and is returned as is. See StreamOptions.Resume for reconnection.
func (c *Client) StreamLogs(ctx context.Context, jobID string, opts StreamOptions, fn func(LogEvent) error) error {
	p, err := idPath("/v1/jobs/", jobID)
	if err != nil {
		return err
	}
	if err := ValidateBaseURL(c.baseURL); err != nil {
		return err
	}
	if _, err := opts.encoding(); err != nil {
		return err
	}
	return c.followLogs(ctx, jobID, p+"/logs", opts, newLogStream(fn))
}

// ExecStream calls POST /v1/sandboxes/{id}/exec with Accept:
// text/event-stream: the job starts in the background and its events
// arrive live, first a job event (LogEvent.Job) and then its output up to
// the exit event, each passed to fn. The job does not stop when the
// connection drops; with opts.Resume the stream continues through
// StreamLogs from the last event seen (if the connection broke inside the
// job event, the job record is fetched with GetJob so that fn still sees
// it first). The POST itself is never repeated. Only opts.Resume and
// opts.IdleTimeout apply. It returns nil after the exit event.
func (c *Client) ExecStream(ctx context.Context, sandboxID string, req ExecRequest, opts StreamOptions, fn func(LogEvent) error) error {
	p, err := idPath("/v1/sandboxes/", sandboxID)
	if err != nil {
		return err
	}
	if err := ValidateBaseURL(c.baseURL); err != nil {
		return err
	}
	enc, err := opts.encoding()
	if err != nil {
		return err
	}
	req.Background = false
	s := newLogStream(fn)
	r := request{method: http.MethodPost, path: p + "/exec", auth: true, body: req,
		query: url.Values{"encoding": {enc}}, header: http.Header{"Accept": {"text/event-stream"}}}
	jobID, done, err := c.streamOnce(ctx, r, opts, s)
	if done {
		return err
	}
	if err == nil {
		err = errNoExit
	}
	if !opts.Resume || jobID == "" || ctx.Err() != nil {
		return fmt.Errorf("streamed exec in sandbox %s: %w", sandboxID, err)
	}
	jp, _ := idPath("/v1/jobs/", jobID)
	if s.job == nil {
		// The connection broke inside the job event (only the header named
		// the job): fetch the record so that fn still sees the job first.
		// Best effort: the log resumes from the start either way.
		if j, err := c.GetJob(ctx, jobID); err == nil {
			if err := s.deliver(LogEvent{ID: "0", Event: EventJob, Job: j}); err != nil {
				var ce *callbackError
				if errors.As(err, &ce) {
					return ce.err
				}
				return err
			}
		}
	}
	opts.Follow, opts.Cursor = true, ""
	return c.followLogs(ctx, jobID, jp+"/logs", opts, s)
}

// followLogs reads the log at path until s is done, reconnecting with
// backoff when opts.Resume is set and the failure is transient.
func (c *Client) followLogs(ctx context.Context, jobID, path string, opts StreamOptions, s *logStream) error {
	retryMin, retryMax := c.retryMin, c.retryMax
	if retryMin <= 0 {
		retryMin = defaultRetryMin
	}
	if retryMax < retryMin {
		retryMax = max(defaultRetryMax, retryMin)
	}
	wait := retryMin
	var lastErr error         // of the previous attempt, for the report when ctx ends
	enc, _ := opts.encoding() // checked by the callers
	for {
		q := url.Values{"follow": {strconv.FormatBool(opts.Follow)}, "encoding": {enc}}
		h := http.Header{"Accept": {"text/event-stream"}}
		// The service prefers ?cursor= over Last-Event-ID: send one only.
		if s.lastID != "" {
			h.Set("Last-Event-ID", s.lastID)
		} else if opts.Cursor != "" {
			q.Set("cursor", opts.Cursor)
		}
		before := s.delivered
		_, done, err := c.streamOnce(ctx, request{method: http.MethodGet, path: path, query: q, header: h, auth: true}, opts, s)
		if done {
			if err != nil && lastErr != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				return fmt.Errorf("log stream of job %s: %w (last error: %v)", jobID, ctx.Err(), lastErr)
			}
			return err
		}
		if !opts.Follow && err == nil {
			return nil // the end of what the log holds now
		}
		if err == nil {
			err = errNoExit
		}
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			return fmt.Errorf("log stream of job %s: %w (last error: %v)", jobID, ctx.Err(), err)
		}
		if !opts.Resume || ctx.Err() != nil {
			return fmt.Errorf("log stream of job %s: %w", jobID, err)
		}
		lastErr = err
		if s.delivered != before {
			wait = retryMin // it made progress: not a server in trouble
		}
		// Full jitter over the upper half keeps reconnecting clients apart.
		d := wait/2 + rand.N(wait/2+1)
		wait = min(2*wait, retryMax)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("log stream of job %s: %w (last error: %v)", jobID, ctx.Err(), err)
		case <-t.C:
		}
	}
}

// streamOnce sends r and feeds its event stream to s. It returns the job id
// the answer names (header or job event), done when nothing is left to
// retry (success, a callback error, a non-transient failure), and the
// error. A transient failure (dropped connection, 429, 502-504, network
// error, idle timeout) comes back with done false.
func (c *Client) streamOnce(ctx context.Context, r request, opts StreamOptions, s *logStream) (jobID string, done bool, err error) {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := opts.IdleTimeout
	if idle == 0 {
		idle = defaultIdleTimeout
	}
	var timer *time.Timer
	if idle > 0 {
		timer = time.AfterFunc(idle, func() { cancel(errIdle) })
		defer timer.Stop()
	}
	if r.header == nil {
		r.header = http.Header{}
	}
	r.header.Set("Cache-Control", "no-cache")
	resp, err := c.send(actx, r)
	if err != nil {
		if cause := context.Cause(actx); errors.Is(cause, errIdle) {
			err = fmt.Errorf("%s %s: %w", r.method, r.path, cause)
		}
		// A POST may have started a job whose id we never learnt: do not
		// let the caller resume what it cannot name.
		return "", ctx.Err() != nil || r.method != http.MethodGet, err
	}
	defer resp.Body.Close() // a live stream must not be drained
	jobID = resp.Header.Get(api.HeaderJobID)
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
		e := newAPIError(resp.StatusCode, resp.Header, body)
		switch resp.StatusCode {
		case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return jobID, r.method != http.MethodGet, e
		}
		return jobID, true, e
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return jobID, true, fmt.Errorf("%s %s: answer is %q, not text/event-stream", r.method, r.path, resp.Header.Get("Content-Type"))
	}
	var body io.Reader = resp.Body
	if timer != nil {
		body = &idleReader{r: resp.Body, timer: timer, d: idle}
	}
	err = s.consume(body)
	if s.job != nil {
		jobID = s.job.ID
	}
	switch {
	case s.exited:
		return jobID, true, nil
	case err == nil:
		return jobID, false, nil
	}
	var ce *callbackError
	if errors.As(err, &ce) {
		return jobID, true, ce.err
	}
	var pe *protocolError
	if errors.As(err, &pe) {
		return jobID, true, fmt.Errorf("%s %s: %w", r.method, r.path, err)
	}
	if cause := context.Cause(actx); errors.Is(cause, errIdle) {
		err = cause
	}
	return jobID, ctx.Err() != nil, fmt.Errorf("%s %s: connection lost: %w", r.method, r.path, err)
}

// idleReader resets the idle timer on every read that returns data.
type idleReader struct {
	r     io.Reader
	timer *time.Timer
	d     time.Duration
}

func (ir *idleReader) Read(p []byte) (int, error) {
	n, err := ir.r.Read(p)
	if n > 0 {
		ir.timer.Reset(ir.d)
	}
	return n, err
}

// callbackError carries an error returned by the caller's function.
type callbackError struct{ err error }

func (e *callbackError) Error() string { return e.err.Error() }

// protocolError is an event the client cannot decode.
type protocolError struct{ msg string }

func (e *protocolError) Error() string { return e.msg }

// logStream is the state of one logical stream across connections: the
// last event delivered and the next expected offset of each output
// stream, which drop bytes a server sends twice.
type logStream struct {
	fn        func(LogEvent) error
	lastID    string
	next      [2]int64 // stdout, stderr; -1 until the first event
	truncated [2]bool
	job       *Job
	exited    bool
	delivered int64 // events passed to fn, for backoff resets
}

func newLogStream(fn func(LogEvent) error) *logStream {
	return &logStream{fn: fn, next: [2]int64{-1, -1}}
}

// consume reads events from body until the exit event (s.exited), the end
// of the body (nil), or an error.
func (s *logStream) consume(body io.Reader) error {
	p := newSSEReader(body)
	for {
		ev, err := p.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if errors.Is(err, errEventTooLarge) {
			return &protocolError{msg: err.Error()}
		}
		if err != nil {
			return err
		}
		le, ok, err := decodeLogEvent(ev)
		if err != nil {
			return err
		}
		if ev.detachable && (le.Event == EventStdout || le.Event == EventStderr) {
			p.detach() // le.Data may be ev.Data (see decodeOutput)
		}
		if ok {
			if err := s.deliver(le); err != nil {
				return err
			}
		}
		if ev.ID != "" {
			s.lastID = ev.ID
		}
		if s.exited {
			return nil
		}
	}
}

// deliver passes one event to fn unless it repeats what was delivered.
func (s *logStream) deliver(le LogEvent) error {
	switch le.Event {
	case EventStdout, EventStderr:
		i := 0
		if le.Event == EventStderr {
			i = 1
		}
		if next := s.next[i]; next >= 0 && le.Offset < next {
			end := le.Offset + int64(len(le.Data))
			if end <= next {
				return nil // already delivered
			}
			le.Data = le.Data[next-le.Offset:]
			le.Offset = next
		}
		s.next[i] = le.Offset + int64(len(le.Data))
	case EventTruncated:
		i := 0
		if le.Truncated.Stream == EventStderr {
			i = 1
		}
		if s.truncated[i] {
			return nil
		}
		s.truncated[i] = true
	case EventJob:
		if s.job != nil {
			return nil
		}
		s.job = le.Job
	case EventExit:
		if s.exited {
			return nil
		}
		s.exited = true
	}
	s.delivered++
	if err := s.fn(le); err != nil {
		return &callbackError{err: err}
	}
	return nil
}

// decodeLogEvent decodes the data of a known event; ok is false for events
// of other names.
func decodeLogEvent(ev sseEvent) (LogEvent, bool, error) {
	le := LogEvent{ID: ev.ID, Event: ev.Event}
	bad := func(err error) (LogEvent, bool, error) {
		return le, false, &protocolError{msg: fmt.Sprintf("malformed %s: %v", ev, err)}
	}
	switch ev.Event {
	case EventStdout, EventStderr:
		off, b, err := decodeOutput(ev.Data, ev.detachable)
		if err != nil {
			return bad(err)
		}
		le.Offset, le.Data = off, b
	case EventTruncated:
		le.Truncated = new(TruncatedEvent)
		if err := json.Unmarshal(ev.Data, le.Truncated); err != nil {
			return bad(err)
		}
	case EventExit:
		le.Exit = new(ExitEvent)
		if err := json.Unmarshal(ev.Data, le.Exit); err != nil {
			return bad(err)
		}
	case EventJob:
		le.Job = new(Job)
		if err := json.Unmarshal(ev.Data, le.Job); err != nil {
			return bad(err)
		}
		if le.Job.ID == "" {
			return bad(errors.New("job without id"))
		}
	default:
		return le, false, nil
	}
	return le, true, nil
}
