package agentclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// OpenStdin starts streaming into the stdin of a job started with
// ExecRequest.StdinStream, over one request: what is written to the
// returned writer reaches the process in order, as it is written. A Write
// blocks while the process does not read (the pipe and the stream are
// bounded).
//
// Close ends this stream and reports how it went; it does NOT close the
// job's stdin, so a later OpenStdin appends (CloseStdin closes it). Only one
// stream may be open per job at a time.
//
// Errors carry the agent's problem code (errdefs.Code): a job not started
// with stdin_stream gives agentproto.CodeStdinNotStreamed, a finished one
// agentproto.CodeJobNotRunning, a closed stdin agentproto.CodeStdinClosed
// (all errdefs.ErrFailedPrecondition); a second concurrent stream
// agentproto.CodeStdinBusy (errdefs.ErrConflict); an unknown job
// errdefs.ErrNotFound. OpenStdin reports them at once; a job that ends
// while the stream is open makes Write fail and Close return the reason.
// Canceling ctx aborts the stream.
func (c *Client) OpenStdin(ctx context.Context, jobID string) (io.WriteCloser, error) {
	path := jobPath(jobID, "stdin")
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, baseURL+path, pr)
	if err != nil {
		return nil, fmt.Errorf("agentclient: PUT %s: %v: %w", path, err, errdefs.ErrInternal)
	}
	req.ContentLength = -1
	req.Header.Set("Content-Type", agentproto.ContentTypeStream)
	resp, err := c.http.Do(req)
	if err != nil {
		pw.Close()
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxError(http.MethodPut, path, ctxErr)
		}
		return nil, fmt.Errorf("agentclient: PUT %s via %s: %v: %w", path, c.name, err, errdefs.ErrUnavailable)
	}
	if resp.StatusCode != http.StatusOK {
		err := decodeCodedError(http.MethodPut, path, resp)
		resp.Body.Close()
		pw.Close()
		return nil, err
	}
	st := &stdinStream{ctx: ctx, path: path, pw: pw, resp: resp}
	// The transport does not notice a canceled ctx while the stream waits
	// for the agent to take more (a process that reads nothing): closing
	// the answer resets the stream, which ends a blocked Write here and
	// the agent's write into the pipe.
	st.stop = context.AfterFunc(ctx, func() {
		pw.CloseWithError(ctx.Err())
		resp.Body.Close()
	})
	return st, nil
}

// stdinStream is an open PUT into a job's stdin.
type stdinStream struct {
	ctx  context.Context
	path string
	pw   *io.PipeWriter
	resp *http.Response
	stop func() bool // stops the watch of ctx

	once sync.Once
	err  error // Close's result
}

func (s *stdinStream) Write(p []byte) (int, error) {
	n, err := s.pw.Write(p)
	if err != nil {
		if ctxErr := s.ctx.Err(); ctxErr != nil {
			return n, ctxError(http.MethodPut, s.path, ctxErr)
		}
		return n, fmt.Errorf("agentclient: PUT %s: the stream has ended (Close tells why): %w", s.path, errdefs.ErrUnavailable)
	}
	return n, nil
}

// Close ends the stream and returns the agent's account of it: nil when
// everything written reached the job's stdin.
func (s *stdinStream) Close() error {
	s.once.Do(func() {
		s.pw.Close()
		defer s.resp.Body.Close()
		defer s.stop()
		var res agentproto.JobStdinResult
		if err := json.NewDecoder(io.LimitReader(s.resp.Body, maxErrorBody)).Decode(&res); err != nil {
			if ctxErr := s.ctx.Err(); ctxErr != nil {
				s.err = ctxError(http.MethodPut, s.path, ctxErr)
				return
			}
			s.err = fmt.Errorf("agentclient: PUT %s: no result from the agent: %v: %w", s.path, err, errdefs.ErrUnavailable)
			return
		}
		if res.Error != nil {
			s.err = errdefs.WithCode(res.Error.Code, fmt.Errorf("agentclient: PUT %s: %s (after %d bytes): %w",
				s.path, res.Error.Message, res.Written, classOfCode(res.Error.Code, errdefs.ErrInternal)))
		}
	})
	return s.err
}

// CloseStdin closes the stdin of a job started with StdinStream: the
// process reads EOF after what was written. Idempotent; closing the stdin
// of a finished job succeeds. A job without a streamed stdin gives
// agentproto.CodeStdinNotStreamed.
func (c *Client) CloseStdin(ctx context.Context, jobID string) error {
	path := jobPath(jobID, "stdin/close")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+path, nil)
	if err != nil {
		return fmt.Errorf("agentclient: POST %s: %v: %w", path, err, errdefs.ErrInternal)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxError(http.MethodPost, path, ctxErr)
		}
		return fmt.Errorf("agentclient: POST %s via %s: %v: %w", path, c.name, err, errdefs.ErrUnavailable)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return decodeCodedError(http.MethodPost, path, resp)
	}
	return nil
}
