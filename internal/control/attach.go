package control

import (
	"context"
	"fmt"
	"sync"

	"genesis.dev/sandbox/internal/agent/agentclient"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// CodeNotRunning is the problem code of a call that needs a running
// sandbox and found it in another state; Attach is the one place that
// produces it.
const CodeNotRunning = "sandbox_not_running"

// CodeReserved is the problem code of a call that reaches into a sandbox
// reserved to a service workload (sandbox.Sandbox.Reserved: an MCP server
// that holds operator secrets) without being that workload; Attach is the
// one place that produces it.
const CodeReserved = "sandbox_reserved"

// AnyReservation, as AttachOptions.Reservation, is the service's own
// supervision of what already runs in a sandbox (a job's output followed
// again after a restart, a profile service's readiness and restarts): it
// reaches a reserved sandbox too. Never for a call a tenant makes.
const AnyReservation = "*"

// AttachOptions says how a caller uses the sandbox it attaches to.
type AttachOptions struct {
	// Busy holds a leased sandbox busy (leased → busy) until Release: for
	// work that runs in the sandbox, such as a job.
	Busy bool
	// Reservation is the reservation the caller works for: a sandbox
	// reserved to a workload (sandbox.Sandbox.Reserved) is reachable only
	// by a caller that names exactly that reservation, or AnyReservation.
	// Empty for every call made for a tenant.
	Reservation string
	// Network fills Attachment.Sandbox.Network (one more store read):
	// only for a caller that reads it.
	Network bool
}

// CheckReservation refuses a caller working for reservation ("" for a
// tenant's call) a sandbox reserved to something else: 403 with the code
// CodeReserved. Attach applies it; a caller holding an attachment made
// earlier (a job's follower) applies it to the next caller it serves.
func CheckReservation(sb *sandbox.Sandbox, reservation string) error {
	if sb.Reserved == "" || reservation == sb.Reserved || reservation == AnyReservation {
		return nil
	}
	return errdefs.WithCode(CodeReserved, fmt.Errorf(
		"sandbox %s is reserved to %s, which holds operator secrets: no exec, code, session, file, terminal, port, browser, desktop or other server reaches inside it (its lease can be renewed and released; releasing it ends the server): %w",
		sb.ID, sb.Reserved, errdefs.ErrPermissionDenied))
}

// Attachment is a caller's hold on a running sandbox: what it needs to work
// inside it. Release it when done.
type Attachment struct {
	// Sandbox is the record as it was when the attachment was made.
	Sandbox *sandbox.Sandbox
	// Profile is the sandbox's profile; nil if the profile is no longer
	// configured.
	Profile *config.Profile
	// Agent is the client of the sandbox's agent; it stays usable after
	// Release while the sandbox lives.
	Agent *agentclient.Client
	// Warm is set when the sandbox is about to count as an idle pool
	// member (SandboxReady of a new member, or of one a reset returns): a
	// hook returns only once what it started serves, so that a warm lease
	// does not wait for it.
	Warm bool

	once    sync.Once
	release func()
}

// Release ends the attachment's busy accounting. It is idempotent and safe
// on a nil attachment.
func (a *Attachment) Release() {
	if a == nil {
		return
	}
	a.once.Do(func() {
		if a.release != nil {
			a.release()
		}
	})
}

// Attach checks that sandbox id belongs to tenant ("" for any tenant), is
// not reserved to another workload than o.Reservation and is running, and
// returns what working inside it needs. A sandbox of another tenant is
// errdefs.ErrNotFound; a reserved one errdefs.ErrPermissionDenied with the
// code CodeReserved (CheckReservation); one that is not running is
// errdefs.ErrFailedPrecondition with the code CodeNotRunning.
func (s *Service) Attach(ctx context.Context, tenant, id string, o AttachOptions) (*Attachment, error) {
	sb, err := s.lookup(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if err := CheckReservation(sb, o.Reservation); err != nil {
		return nil, err
	}
	if sb.State == sandbox.StateHibernated && (sb.Suspension == nil || sb.Suspension.Operation == "") {
		// The next call that needs it wakes it.
		if w := s.waker(); w != nil {
			if sb, err = w.Wake(ctx, tenant, id); err != nil {
				return nil, err
			}
		}
	}
	if sb.State.Suspended() {
		return nil, suspendedError(sb)
	}
	if !sb.State.Running() {
		return nil, errdefs.WithCode(CodeNotRunning, fmt.Errorf(
			"sandbox %s is %s; jobs, files and terminals are reachable only in running sandboxes: %w", sb.ID, sb.State, errdefs.ErrFailedPrecondition))
	}
	if o.Network {
		s.withNetwork(ctx, sb)
	}
	a := s.attachment(sb)
	if o.Busy {
		a.release = s.jobRunning(ctx, sb)
	}
	return a, nil
}

// attachment is an attachment to sb without any check, for control's own
// callers (hooks at ready time, when no tenant holds the sandbox yet).
func (s *Service) attachment(sb *sandbox.Sandbox) *Attachment {
	a := &Attachment{Sandbox: sb, Agent: s.agent(sb.ID)}
	if p, ok := s.cfg.Profile(sb.Profile); ok {
		a.Profile = p
	}
	return a
}
