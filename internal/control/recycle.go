package control

import (
	"context"
	"errors"
	"fmt"
	"time"

	"genesis.dev/sandbox/internal/agent/agentclient"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// resetTimeout bounds the agent's reset of one sandbox (its process sweep
// and job kills have their own shorter deadlines inside).
const resetTimeout = 90 * time.Second

// recycle disposes of the sandbox of an ended lease l, which the lease's
// end moved to draining (endLeaseDraining); sb is the sandbox as it was
// before that (nil: it was gone). The SandboxEnding hooks are told first
// (the jobs hook cancels its running jobs), then it is reset and returned
// to its pool where the profile says so (lease.on_release: reset) and the
// sandbox is still like the pool's members; otherwise, or when any step of
// the reset fails, it is destroyed and the pool makes a fresh member.
// reset says it went back to its pool.
func (s *Service) recycle(ctx context.Context, l *sandbox.Lease, sb *sandbox.Sandbox) (reset bool, err error) {
	if sb == nil || sb.State == sandbox.StateDestroyed {
		return false, nil
	}
	s.sandboxEnding(ctx, sb.ID, "lease "+string(l.State))
	defer s.forgetHeld(sb.ID)
	pl := s.pool(sb.Profile, sb.Runtime, sb.Pool)
	reason := leaseEndReason(l.State)
	// Another instance's member (shared pools) became this one's in the
	// write that drained it (endLeaseDraining): should this process die
	// before the end, the leader adopts the draining record from it and
	// destroys it at once.
	if why := s.resetRefusal(ctx, l, sb, pl); why != "" {
		s.log.Debug("destroying instead of resetting", "sandbox", sb.ID, "lease", l.ID, "why", why)
	} else if err := s.resetMember(ctx, pl, l, sb); err != nil {
		s.log.Warn("reset failed; destroying the sandbox", "sandbox", sb.ID, "lease", l.ID, "err", err)
		reason += "; reset failed: " + err.Error()
		pl.resetFailed.Add(1)
	} else {
		return true, nil // counted in recycled by resetMember
	}
	cctx, cancel := cleanupCtx(ctx, 2*time.Minute)
	defer cancel()
	cur, gerr := s.store.GetSandbox(cctx, "", sb.ID)
	if gerr != nil {
		cur = sb
	}
	if sb.State == sandbox.StatePaused && cur.State == sandbox.StateDraining {
		// Paused when its lease ended (the end drained the record, so
		// destroy no longer sees it paused).
		s.thawToEnd(cctx, cur)
	}
	err = s.destroy(cctx, cur, reason)
	if pl != nil {
		pl.wake()
	}
	return false, err
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
	case pl.key.snapshot != "":
		// A wipe would leave the profile's bare image, not the
		// snapshot's state the pool's members start with: the pool makes
		// a fresh member from the snapshot instead.
		return "its pool is fed from snapshot " + pl.key.snapshot
	case !l.Warm:
		return "the sandbox was created for the lease, not taken from the pool"
	case sb.Instance != s.instance && !s.sharedPools():
		return "another instance's sandbox"
	case sb.State != sandbox.StateLeased && sb.State != sandbox.StateBusy:
		return "the sandbox is " + string(sb.State)
	case pl.draining.Load() || s.draining.Load():
		return "draining"
	case !s.heldAgentTrusted(sb.ID):
		return "the agent was dialled again during the lease: a socket the holder put at its address could have answered"
	}
	if _, err := s.store.GetSandboxNetwork(ctx, "", sb.ID); !errors.Is(err, errdefs.ErrNotFound) {
		return "the sandbox has its own network"
	}
	return ""
}

// resetMember wipes the sandbox of the ended lease l and returns it to pl.
// Each step fails closed: on any error the caller destroys the sandbox.
//  1. The sandbox left the holder's hands when the lease ended (draining,
//     in the lease's end transaction): draining refuses every new exec,
//     file, session or terminal call, and a crash from then on leaves it
//     draining, which the next start-up destroys.
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
	// The lease's end drained it (step 1); nothing else may have
	// touched it since.
	cur, err := s.store.GetSandbox(ctx, "", sb.ID)
	if err != nil {
		return err
	}
	if cur.Tenant != l.Tenant || cur.State != sandbox.StateDraining {
		return fmt.Errorf("sandbox %s is %s of tenant %q: %w", cur.ID, cur.State, cur.Tenant, errdefs.ErrConflict)
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
	if !s.heldAgentTrusted(sb.ID) {
		return fmt.Errorf("the agent was dialled again for the reset: its answer is not trusted: %w", errdefs.ErrFailedPrecondition)
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
	// Counted before the member shows idle, so that whoever sees it idle in
	// the pool's view (Pools) sees it counted too; uncounted if it does not
	// get there.
	pl.recycled.Add(1)
	if _, err := s.store.UpdateSandbox(ctx, sb.ID, 0, s.now(), func(x *sandbox.Sandbox) error {
		if x.Tenant != "" || x.State != sandbox.StateReady {
			return fmt.Errorf("sandbox %s became %s of %q during its reset: %w", x.ID, x.State, x.Tenant, errdefs.ErrConflict)
		}
		x.State = sandbox.StateIdle
		return nil
	}); err != nil {
		pl.recycled.Add(-1)
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

// heldAgent is a sandbox's agent client when a warm claim handed the
// sandbox to a holder, and how many connections it had opened then.
type heldAgent struct {
	c     *agentclient.Client
	dials uint64
}

// noteHeld records the agent connection of a sandbox a warm claim has just
// handed to a holder. Until then none of the holder's code ran in it, so
// the connections opened so far — and the first one, if none was — reach
// the agent itself.
func (s *Service) noteHeld(id string) {
	c := s.agent(id)
	s.heldMu.Lock()
	defer s.heldMu.Unlock()
	s.held[id] = heldAgent{c: c, dials: c.Dials()}
}

func (s *Service) forgetHeld(id string) {
	s.heldMu.Lock()
	defer s.heldMu.Unlock()
	delete(s.held, id)
}

// heldAgentTrusted reports whether the reset of a sandbox's ended lease
// goes to its agent for sure: the connection is one opened before the
// holder's code ran (noteHeld). The holder's code can put a socket of its
// own at the agent's address (the run directory is its user's); a
// connection opened later — after a restart of the service, a broken
// connection, a full one — may reach that socket, whose "reset" would keep
// the holder's code for the next holder. Such a sandbox is destroyed. A
// sandboxer whose agents admit connections by a token (driver.AgentRekeyer)
// has no such address.
func (s *Service) heldAgentTrusted(id string) bool {
	if _, ok := s.boxes.(driver.AgentRekeyer); ok {
		return true
	}
	s.heldMu.Lock()
	h, ok := s.held[id]
	s.heldMu.Unlock()
	if !ok || h.c != s.agent(id) {
		return false // claimed before a restart, or the client was replaced
	}
	return h.c.Dials() <= max(h.dials, 1)
}
