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

// AttachOptions says how a caller uses the sandbox it attaches to.
type AttachOptions struct {
	// Busy holds a leased sandbox busy (leased → busy) until Release: for
	// work that runs in the sandbox, such as a job.
	Busy bool
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

// Attach checks that sandbox id belongs to tenant ("" for any tenant) and
// is running, and returns what working inside it needs. A sandbox of
// another tenant is errdefs.ErrNotFound; one that is not running is
// errdefs.ErrFailedPrecondition with the code CodeNotRunning.
func (s *Service) Attach(ctx context.Context, tenant, id string, o AttachOptions) (*Attachment, error) {
	sb, err := s.GetSandbox(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if !sb.State.Running() {
		return nil, errdefs.WithCode(CodeNotRunning, fmt.Errorf(
			"sandbox %s is %s; jobs, files and terminals are reachable only in running sandboxes: %w", sb.ID, sb.State, errdefs.ErrFailedPrecondition))
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
