package agentclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// frameReader reads a job stream's body. Reads of at least
// directReadSize bytes (frame payloads) bypass its buffer; smaller ones
// (headers, small payloads) are served from a buffered chunk of the body.
type frameReader struct {
	body io.Reader
	buf  [directReadSize]byte
	r, w int
}

// directReadSize is the read size from which frameReader copies straight
// into the caller's buffer.
const directReadSize = 32 << 10

func (f *frameReader) Read(p []byte) (int, error) {
	if f.r < f.w {
		n := copy(p, f.buf[f.r:f.w])
		f.r += n
		return n, nil
	}
	if len(p) >= directReadSize {
		return f.body.Read(p)
	}
	n, err := f.body.Read(f.buf[:])
	f.r, f.w = 0, n
	m := copy(p, f.buf[:n])
	f.r = m
	if m < n {
		err = nil // the rest is delivered first; the error comes again
	}
	return m, err
}

func jobPath(id, action string) string {
	p := strings.Replace(agentproto.PathJob, "{id}", url.PathEscape(id), 1)
	if action != "" {
		p += "/" + action
	}
	return p
}

// StartJob starts a background job and returns once its command runs (or
// could not be started, which ends the job with exit code 126 or 127). The
// job is detached: canceling ctx or dropping the connection does not stop
// it. An existing job id yields errdefs.ErrConflict, an invalid request
// errdefs.ErrInvalidArgument.
func (c *Client) StartJob(ctx context.Context, req agentproto.JobStartRequest) (agentproto.JobInfo, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return agentproto.JobInfo{}, fmt.Errorf("agentclient: encode job request: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	var info agentproto.JobInfo
	err = c.do(ctx, http.MethodPost, agentproto.PathJobs, body, &info)
	return info, err
}

// JobInfo returns what the agent knows about a job; errdefs.ErrNotFound if
// it does not know it (never started, forgotten or evicted).
func (c *Client) JobInfo(ctx context.Context, id string) (agentproto.JobInfo, error) {
	var info agentproto.JobInfo
	err := c.do(ctx, http.MethodGet, jobPath(id, ""), nil, &info)
	return info, err
}

// ListJobs returns every job the agent knows, running or finished, oldest
// first: what a restarted service re-attaches to.
func (c *Client) ListJobs(ctx context.Context) ([]agentproto.JobInfo, error) {
	var infos []agentproto.JobInfo
	err := c.do(ctx, http.MethodGet, agentproto.PathJobs, nil, &infos)
	return infos, err
}

// CancelJob stops a job's whole process tree: SIGTERM now, SIGKILL after
// grace (at once when grace is 0). It returns when the agent has accepted
// the request; the job's exit (reason "canceled") arrives on its stream.
// Canceling a finished job changes nothing.
func (c *Client) CancelJob(ctx context.Context, id string, grace time.Duration) error {
	if grace < 0 {
		return fmt.Errorf("agentclient: negative cancel grace %v: %w", grace, errdefs.ErrInvalidArgument)
	}
	body, err := json.Marshal(agentproto.JobCancelRequest{GraceMS: grace.Milliseconds()})
	if err != nil {
		return fmt.Errorf("agentclient: encode cancel request: %v: %w", err, errdefs.ErrInternal)
	}
	return c.do(ctx, http.MethodPost, jobPath(id, "cancel"), body, nil)
}

// ReleaseJob tells the agent that the caller has stored the job's output
// before the given offsets, so the agent may drop it and reuse its memory.
// Streams asked from below those offsets fail afterwards with
// errdefs.ErrFailedPrecondition.
func (c *Client) ReleaseJob(ctx context.Context, id string, stdoutOff, stderrOff int64) error {
	return c.do(ctx, http.MethodPost, jobPath(id, "release")+offsetQuery(stdoutOff, stderrOff), nil, nil)
}

func offsetQuery(stdoutOff, stderrOff int64) string {
	return "?" + agentproto.StreamStdoutQ + "=" + strconv.FormatInt(stdoutOff, 10) +
		"&" + agentproto.StreamStderrQ + "=" + strconv.FormatInt(stderrOff, 10)
}

// ForgetJob drops a finished job and its kept output from the agent;
// errdefs.ErrConflict while it still runs, errdefs.ErrNotFound if unknown.
func (c *Client) ForgetJob(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, jobPath(id, ""), nil, nil)
}

// StreamJob reads a job's output from the given stdout and stderr offsets:
// first what the agent kept, then live output, truncation markers and
// finally the exit frame. It calls fn for every frame in order and returns
//
//   - nil after fn has been called with the exit frame;
//   - fn's error, unchanged, if fn fails;
//   - an errdefs.ErrUnavailable error if the stream ends without an exit
//     frame (connection lost, agent gone): resume from the offsets reached;
//   - a ctx error (classes ErrUnavailable or ErrDeadlineExceeded) when ctx
//     ends; errdefs.ErrNotFound for an unknown job.
//
// The Frame's Payload is only valid during the call to fn: it is reused for
// the next frame, so fn must copy what it keeps.
func (c *Client) StreamJob(ctx context.Context, jobID string, stdoutOff, stderrOff int64, fn func(agentproto.Frame) error) error {
	path := jobPath(jobID, "stream") + offsetQuery(stdoutOff, stderrOff)
	resp, err := c.send(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return readFrames(ctx, http.MethodGet, path, jobID, resp, fn)
}

// StartJobFollow starts a background job like StartJob and streams it like
// StreamJob from its start, over one request: started is called with the
// job's JobInfo once its command runs, before any frame. It returns like
// StreamJob; an error before started was called means the job may not have
// started (it did not when the error is of class ErrInvalidArgument or
// ErrConflict). Canceling ctx ends the stream, not the job.
func (c *Client) StartJobFollow(ctx context.Context, req agentproto.JobStartRequest, started func(agentproto.JobInfo), fn func(agentproto.Frame) error) error {
	req.Follow = true
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("agentclient: encode job request: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	resp, err := c.send(ctx, http.MethodPost, agentproto.PathJobs, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var info agentproto.JobInfo
	if err := json.Unmarshal([]byte(resp.Header.Get(agentproto.HeaderJobInfo)), &info); err != nil || info.JobID != req.JobID {
		return fmt.Errorf("agentclient: POST %s: no job info for %s in the answer (%v): %w", agentproto.PathJobs, req.JobID, err, errdefs.ErrInternal)
	}
	started(info)
	return readFrames(ctx, http.MethodPost, agentproto.PathJobs, req.JobID, resp, fn)
}

// readFrames reads the frames of a job stream answer (see StreamJob).
func readFrames(ctx context.Context, method, path, jobID string, resp *http.Response, fn func(agentproto.Frame) error) error {
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != agentproto.ContentTypeRaw {
		return fmt.Errorf("agentclient: %s %s: answer of type %q, want %s: %w", method, path, mt, agentproto.ContentTypeRaw, errdefs.ErrInternal)
	}
	// Frames are read straight from the body: a frame's payload is copied
	// once, from the connection's buffers into buf. Small frames go through
	// a small buffer, so a trickle of output does not cost a read per
	// header.
	r := &frameReader{body: resp.Body}
	var buf []byte
	for {
		fr, b, err := agentproto.ReadFrame(r, buf)
		buf = b
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return ctxError(method, path, ctxErr)
			}
			if errors.Is(err, agentproto.ErrBadFrame) {
				return fmt.Errorf("agentclient: job %s stream: %w: %w", jobID, err, errdefs.ErrInternal)
			}
			if errors.Is(err, io.EOF) {
				err = errors.New("stream ended before the exit frame")
			}
			return fmt.Errorf("agentclient: job %s stream: %v: %w", jobID, err, errdefs.ErrUnavailable)
		}
		if err := fn(fr); err != nil {
			return err
		}
		if fr.Type == agentproto.FrameExit {
			return nil
		}
	}
}
