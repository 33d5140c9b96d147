package control

import (
	"context"
	"errors"
	"fmt"
	"time"

	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// resetTimeout bounds the agent's reset of one sandbox (its process sweep
// and job kills have their own shorter deadlines inside).
const resetTimeout = 90 * time.Second

// recycle disposes of the sandbox of an ended lease: the SandboxEnding
// hooks are told first (the jobs hook cancels its running jobs), then it is reset and returned to its pool where the profile
// says so (lease.on_release: reset) and the sandbox is still like the
// pool's members; otherwise, or when any step of the reset fails, it is
// destroyed and the pool makes a fresh member.
func (s *Service) recycle(ctx context.Context, l *sandbox.Lease) error {
	sb, err := s.store.GetSandbox(ctx, "", l.SandboxID)
	if err != nil {
		return err
	}
	s.sandboxEnding(ctx, sb.ID, "lease "+string(l.State))
	pl := s.pool(sb.Profile, sb.Runtime)
	reason := leaseEndReason(l.State)
	if why := s.resetRefusal(ctx, l, sb, pl); why != "" {
		s.log.Debug("destroying instead of resetting", "sandbox", sb.ID, "lease", l.ID, "why", why)
	} else if err := s.resetMember(ctx, pl, l, sb); err != nil {
		s.log.Warn("reset failed; destroying the sandbox", "sandbox", sb.ID, "lease", l.ID, "err", err)
		reason += "; reset failed: " + err.Error()
		pl.resetFailed.Add(1)
	} else {
		pl.recycled.Add(1)
		return nil
	}
	cctx, cancel := cleanupCtx(ctx, 2*time.Minute)
	defer cancel()
	cur, gerr := s.store.GetSandbox(cctx, "", sb.ID)
	if gerr != nil {
		cur = sb
	}
	err = s.destroy(cctx, cur, reason)
	if pl != nil {
		pl.wake()
	}
	return err
}

// resetRefusal says why the sandbox of lease l must be destroyed rather
// than reset, or "" when it may be reset: it was not reserved to a
// workload, the profile resets, the sandbox came from pl (a warm claim: the pool's runtime, resources and env at
// create), it has no network of its own (its policy and egress events
// belong to the holder), and neither the pool nor the service drains.
func (s *Service) resetRefusal(ctx context.Context, l *sandbox.Lease, sb *sandbox.Sandbox, pl *pool) string {
	p, err := s.profile(sb.Profile)
	switch {
	case err != nil:
		return "unknown profile"
	case sb.Reserved != "":
		return "the sandbox was reserved to " + sb.Reserved + " (it held operator secrets)"
	case !p.Lease.Resets():
		return "the profile destroys released sandboxes"
	case pl == nil:
		return "no pool of this profile and runtime"
	case !l.Warm:
		return "the sandbox was created for the lease, not taken from the pool"
	case sb.Instance != s.instance && !s.sharedPools():
		return "another instance's sandbox"
	case sb.State != sandbox.StateLeased && sb.State != sandbox.StateBusy:
		return "the sandbox is " + string(sb.State)
	case pl.draining.Load() || s.draining.Load():
		return "draining"
	}
	if _, err := s.store.GetSandboxNetwork(ctx, "", sb.ID); !errors.Is(err, errdefs.ErrNotFound) {
		return "the sandbox has its own network"
	}
	return ""
}

// resetMember wipes the sandbox of the ended lease l and returns it to pl.
// Each step fails closed: on any error the caller destroys the sandbox.
//  1. The sandbox leaves the holder's hands: draining refuses every new
//     exec, file, session or terminal call (a crash from here on leaves it
//     draining, and the next start-up destroys it).
//  2. The holder's sessions and code contexts end.
//  3. The agent kills everything but itself, forgets its jobs and
//     terminals and empties every writable place. Where the agent admits
//     connections by a token (driver.AgentRekeyer), the token is replaced:
//     one the previous holder might have learnt opens nothing.
//  4. One store update clears the holder's env and metadata and makes the
//     sandbox nobody's again, ready but not claimable.
//  5. The ready hooks run as for a new member (profile services start and
//     answer); only then is it idle, and a claim can take it.
func (s *Service) resetMember(ctx context.Context, pl *pool, l *sandbox.Lease, sb *sandbox.Sandbox) error {
	ctx, cancel := cleanupCtx(ctx, resetTimeout+30*time.Second)
	defer cancel()
	// Another instance's member (shared pools) becomes this one's first:
	// should this process die mid-reset, the leader adopts the draining
	// record from it and destroys it at once.
	if err := s.takeToEnd(ctx, sb); err != nil {
		return err
	}
	if _, err := s.store.UpdateSandbox(ctx, sb.ID, 0, s.now(), func(x *sandbox.Sandbox) error {
		if x.Tenant != l.Tenant || (x.State != sandbox.StateLeased && x.State != sandbox.StateBusy) {
			return fmt.Errorf("sandbox %s is %s of tenant %q: %w", x.ID, x.State, x.Tenant, errdefs.ErrConflict)
		}
		x.State = sandbox.StateDraining
		return nil
	}); err != nil {
		return err
	}
	if err := s.endSessions(ctx, sb.ID); err != nil {
		return err
	}
	actx, acancel := context.WithTimeout(ctx, resetTimeout)
	res, err := s.agent(sb.ID).Reset(actx)
	acancel()
	if err != nil {
		return fmt.Errorf("agent reset: %w", err)
	}
	if err := s.rekeyAgent(ctx, sb.ID); err != nil {
		return fmt.Errorf("agent token: %w", err)
	}
	if pl.draining.Load() || s.draining.Load() {
		return fmt.Errorf("pool %s started draining during the reset: %w", pl.key.name(), errdefs.ErrConflict)
	}
	// The record a fresh member has (makeMember): nobody's, trusted until
	// a claim sets the holder's risk level; ready, not yet idle, while the
	// ready hooks start its profile services as nobody's.
	back, err := s.store.ReturnSandbox(ctx, store.Return{SandboxID: sb.ID, Tenant: l.Tenant, From: sandbox.StateDraining,
		To: sandbox.StateReady, RiskLevel: sandbox.RiskTrusted, Now: s.now()})
	if err != nil {
		return err
	}
	a := s.attachment(back)
	a.Warm = true
	if err := s.sandboxReady(ctx, a); err != nil {
		return fmt.Errorf("after the reset: %w", err)
	}
	if pl.draining.Load() || s.draining.Load() {
		return fmt.Errorf("pool %s started draining during the reset: %w", pl.key.name(), errdefs.ErrConflict)
	}
	if _, err := s.store.UpdateSandbox(ctx, sb.ID, 0, s.now(), func(x *sandbox.Sandbox) error {
		if x.Tenant != "" || x.State != sandbox.StateReady {
			return fmt.Errorf("sandbox %s became %s of %q during its reset: %w", x.ID, x.State, x.Tenant, errdefs.ErrConflict)
		}
		x.State = sandbox.StateIdle
		return nil
	}); err != nil {
		return err
	}
	s.log.Info("sandbox reset and returned to its pool", "sandbox", sb.ID, "pool", pl.key.name(), "lease", l.ID,
		"killed", res.Killed, "removed", res.Removed, "agent_ms", res.DurationMS)
	return nil
}

// rekeyAgent replaces the token of a sandbox's agent, where the sandboxer
// has one: the agent is given the next token's SHA-256 over this
// instance's connection (it closes every other), then the sandboxer makes
// every dialer present the next token. A failure leaves the agent out of
// reach, never open to the old token: the caller destroys the sandbox.
func (s *Service) rekeyAgent(ctx context.Context, id string) error {
	rk, ok := s.boxes.(driver.AgentRekeyer)
	if !ok {
		return nil
	}
	next, err := rk.NextAgentToken(ctx, id)
	if err != nil {
		return err
	}
	if err := s.agent(id).SetToken(ctx, next.SHA256); err != nil {
		return err
	}
	return rk.UseAgentToken(ctx, id, next)
}

// endSessions closes the active sessions and code contexts of a sandbox
// whose holder is gone: later calls on them answer session_closed.
func (s *Service) endSessions(ctx context.Context, sandboxID string) error {
	list, err := s.store.ListSandboxSessions(ctx, sandboxID)
	if err != nil {
		return err
	}
	for _, se := range list {
		if se.State != sandbox.SessionActive {
			continue
		}
		if _, err := s.store.UpdateSession(ctx, se.ID, func(x *sandbox.Session) error {
			x.State, x.UpdatedAt = sandbox.SessionClosed, s.now()
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}
