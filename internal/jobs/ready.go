package jobs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// readyPoll is how often a port that does not answer yet is dialed again.
const readyPoll = 100 * time.Millisecond

// CodeJobEnded is the code of WaitReady's error when the process that was
// to listen ended first.
const CodeJobEnded = "job_ended"

// WaitReady waits until port answers inside sandbox sandboxID, or ctx
// ends (ErrUnavailable then). It is the one readiness wait of the
// workloads (the browser's DevTools port, the desktop's X server): when a
// profile service of the sandbox supervised here has port as its ready
// port, it waits for that service's ready state, which the supervisor's
// own probe sets (a service that exited and is not restarted fails it at
// once); otherwise it dials the port itself until a connect succeeds. The
// caller has checked the sandbox is its caller's.
func (v *Services) WaitReady(ctx context.Context, sandboxID string, port int) error {
	if ss, i := v.tracking(sandboxID, port); ss != nil {
		return ss.waitFor(ctx, i, func(st ServiceState, _ config.ServiceSpec) (bool, error) {
			if st.State == "exited" {
				return false, fmt.Errorf("profile service %s (port %d) exited and is not restarted: %w", st.Name, port, errdefs.ErrUnavailable)
			}
			return st.State == "ready", nil
		})
	}
	return v.WaitListening(ctx, sandboxID, "", port)
}

// WaitListening waits until port answers inside sandbox sandboxID, where
// job jobID (if set) is to listen: the job's end fails the wait at once
// (ErrFailedPrecondition, code job_ended); ctx's end fails it with
// ErrUnavailable.
func (v *Services) WaitListening(ctx context.Context, sandboxID, jobID string, port int) error {
	var ended <-chan struct{}
	if jobID != "" {
		jctx, cancel := context.WithCancel(ctx)
		defer cancel()
		ch := make(chan struct{})
		go func() {
			if _, err := v.m.Wait(jctx, "", jobID); err == nil {
				close(ch)
			}
		}()
		ended = ch
	}
	err := v.dialUntil(ctx, sandboxID, port, "", ended)
	switch {
	case errors.Is(err, errJobEnded):
		return errdefs.WithCode(CodeJobEnded, fmt.Errorf("job %s ended before port %d answered: %w", jobID, port, errdefs.ErrFailedPrecondition))
	case err != nil && ctx.Err() != nil:
		return fmt.Errorf("port %d of sandbox %s did not answer: %v: %w", port, sandboxID, err, errdefs.ErrUnavailable)
	}
	return err
}

// tracking returns the supervision of sandboxID and the index of its
// service whose ready port is port, or nil.
func (v *Services) tracking(sandboxID string, port int) (*sandboxServices, int) {
	v.mu.Lock()
	ss := v.sbx[sandboxID]
	v.mu.Unlock()
	if ss == nil || port <= 0 {
		return nil, 0
	}
	for i, spec := range ss.specs {
		if spec.ReadyPort == port {
			return ss, i
		}
	}
	return nil, 0
}

var errJobEnded = errors.New("the job ended")

// dialUntil connects to port inside the sandbox (and, with a path, wants
// a 2xx or 3xx answer to GET path) until it succeeds, ctx ends, ended is
// closed (errJobEnded) or the sandbox no longer runs. It returns the last
// dial's error when ctx ends.
func (v *Services) dialUntil(ctx context.Context, sandboxID string, port int, path string, ended <-chan struct{}) error {
	for {
		att, err := v.m.sbx.Attach(ctx, "", sandboxID, control.AttachOptions{Reservation: control.AnyReservation})
		if err != nil {
			return err
		}
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		c, err := att.Agent.DialPort(dctx, port)
		if err == nil {
			if path != "" {
				err = probeHTTP(dctx, c, port, path)
			}
			c.Close()
		}
		cancel()
		att.Release()
		if err == nil {
			return nil
		}
		t := time.NewTimer(readyPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-ended:
			t.Stop()
			return errJobEnded
		case <-t.C:
		}
	}
}

// watchReady marks the service ready once its port accepts a connection
// or, with a path, answers an HTTP GET of it with a 2xx or 3xx status.
func (v *Services) watchReady(ctx context.Context, ss *sandboxServices, i int, sb *sandbox.Sandbox, jobID string, port int, path string) {
	ctx, cancel := context.WithTimeout(ctx, serviceReadyWait)
	defer cancel()
	if v.dialUntil(ctx, sb.ID, port, path, nil) != nil {
		return
	}
	now := v.m.now()
	ss.set(i, func(s *ServiceState) {
		if s.JobID == jobID && s.State == "running" {
			s.State, s.Ready = "ready", &now
		}
	})
}

// probeHTTP sends GET path over c and wants a 2xx or 3xx answer before
// ctx ends.
func probeHTTP(ctx context.Context, c net.Conn, port int, path string) error {
	if d, ok := ctx.Deadline(); ok {
		c.SetDeadline(d)
	}
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUser-Agent: genesis-ready-probe\r\nConnection: close\r\n\r\n", path, port); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("GET %s answered %s", path, resp.Status)
	}
	return nil
}
