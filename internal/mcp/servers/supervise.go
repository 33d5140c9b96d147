package servers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/mcp"
	"genesis.dev/sandbox/internal/sandbox"
)

// supervise restarts the server when it ends (up to maxRestarts, never
// after a protocol breach) and renews its own lease.
func (m *Manager) supervise(ctx context.Context, in *instance) {
	defer m.wg.Done()
	defer close(in.done)
	renew := time.NewTicker(m.cfg.LeaseTTL / 3)
	defer renew.Stop()
	for {
		in.mu.Lock()
		p := in.proxy
		in.mu.Unlock()
		if p != nil {
			select {
			case <-ctx.Done():
				return
			case <-renew.C:
				if !m.renew(ctx, in) {
					return
				}
				continue
			case <-p.Done():
			}
			if m.ended(ctx, in, p) {
				return
			}
		}
		if in.rollover.Swap(false) {
			// planned: its output log is full, not a failure
			in.mu.Lock()
			in.view.OutputRestarts++
			in.view.State = StateRestarting
			in.mu.Unlock()
			sctx, cancel := context.WithTimeout(ctx, time.Minute)
			err := m.start(sctx, ctx, in)
			cancel()
			if err == nil || ctx.Err() != nil {
				continue
			}
			in.mu.Lock()
			in.view.LastError = err.Error()
			in.mu.Unlock()
		}
		in.mu.Lock()
		restarts := in.view.Restarts
		if restarts >= maxRestarts {
			why := in.view.LastError
			in.mu.Unlock()
			m.halt(in, StateFailed, fmt.Sprintf("%s (after %d restarts)", why, restarts))
			return
		}
		in.view.Restarts++
		in.view.State = StateRestarting
		in.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(250<<restarts) * time.Millisecond):
		}
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		err := m.start(sctx, ctx, in)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			m.log.Warn("restarting an MCP server", "instance", in.view.ID, "err", err)
			in.mu.Lock()
			in.view.LastError = err.Error()
			in.mu.Unlock()
			if errdefs.Code(err) == "mcp_protocol_breach" || errors.Is(err, errdefs.ErrFailedPrecondition) || errors.Is(err, errdefs.ErrNotFound) {
				// a breach, or its sandbox has ended: starting again cannot help
				m.halt(in, StateFailed, err.Error())
				return
			}
		}
	}
}

// renew renews an instance's own lease; false when the lease has ended
// (and with it the instance).
func (m *Manager) renew(ctx context.Context, in *instance) bool {
	if !in.view.OwnLease {
		return true
	}
	ttl := int64(m.cfg.LeaseTTL / time.Second)
	_, err := m.cfg.Leases.RenewLease(ctx, in.view.Tenant, in.view.LeaseID, &ttl)
	if err == nil || ctx.Err() != nil {
		return true
	}
	m.log.Warn("renewing an MCP server's lease", "instance", in.view.ID, "err", err)
	if errors.Is(err, errdefs.ErrNotFound) || errors.Is(err, errdefs.ErrFailedPrecondition) {
		m.halt(in, StateFailed, "its lease ended: "+err.Error())
		return false
	}
	return true
}

// ended handles the end of a server's connection: true when the instance
// is over (a protocol breach, or a process that hung up but still runs).
func (m *Manager) ended(ctx context.Context, in *instance, p *mcp.Proxy) bool {
	why := "the server ended"
	if err := p.Err(); err != nil {
		why += ": " + err.Error()
	}
	in.mu.Lock()
	jobID, stdio := in.view.JobID, in.stdio
	in.proxy, in.handler = nil, nil
	in.mu.Unlock()
	p.Close()
	over := false
	if stdio != nil {
		if b := stdio.Breach(); b != nil {
			why, over = "protocol breach: "+b.Error(), true
		}
	}
	// The process's end is recorded just after its output ends.
	jctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// A server being killed (a breach) is not waited for.
	var j *sandbox.Job
	var err error
	if over {
		j, err = m.cfg.Jobs.GetJob(jctx, in.view.Tenant, jobID)
	} else {
		j, err = m.cfg.Jobs.Wait(jctx, in.view.Tenant, jobID)
	}
	switch {
	case err == nil && j.State.Final():
		if !over {
			why += fmt.Sprintf(" (job %s %s, exit code %s)", jobID, j.State, exitCode(j))
		}
		in.mu.Lock()
		in.view.LastExitCode = j.ExitCode
		in.mu.Unlock()
	case over || jctx.Err() != nil:
		// it is being killed, or it closed its stdout and still runs
		_, _ = m.cfg.Jobs.CancelJobAs(context.WithoutCancel(jctx), in.view.Tenant, in.reservation, jobID)
		if !over {
			why, over = why+" (it closed its stdout but kept running)", true
		}
	}
	in.mu.Lock()
	in.view.LastError = why
	in.mu.Unlock()
	if over {
		m.halt(in, StateFailed, why)
	}
	return over
}

// halt ends an instance: its proxy, its process and its own lease.
func (m *Manager) halt(in *instance, state, why string) {
	in.mu.Lock()
	if in.view.State == StateStopped || in.view.State == StateFailed {
		in.mu.Unlock()
		return
	}
	in.view.State = state
	if why != "" && state == StateFailed {
		in.view.LastError = why
	}
	p, jobID := in.proxy, in.view.JobID
	in.proxy, in.handler = nil, nil
	in.mu.Unlock()
	in.cancel()
	if p != nil {
		p.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if jobID != "" {
		_, _ = m.cfg.Jobs.CancelJobAs(ctx, in.view.Tenant, in.reservation, jobID)
	}
	if in.view.OwnLease {
		m.release(in.view.Tenant, in.view.LeaseID)
	}
}
