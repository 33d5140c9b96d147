package control

import (
	"context"
	"errors"
	"fmt"
	"time"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/egress"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/policy"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/stopwatch"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/tenant"
)

// AcquireLeaseInput is a lease request.
type AcquireLeaseInput struct {
	Tenant    string
	Profile   string
	RiskLevel string
	Runtime   string
	// TTLSeconds nil takes the profile's default lease length.
	TTLSeconds  *int64
	Holder      string
	WaitSeconds int64
	Env         map[string]string
	Metadata    map[string]string
	Resources   sandbox.Resources // zero fields take the profile default
	// Network is the requested network policy; nil takes the tenant's or
	// the profile's default.
	Network *egress.Policy
	// Reserved, if set, reserves the lease's sandbox to a service
	// workload of its own (sandbox.Sandbox.Reserved): for workload
	// packages, never from the API. The sandbox is destroyed when the
	// lease ends.
	Reserved string
	// From, if set, starts the lease's sandbox from a saved state (always
	// cold, unless SnapshotID names a pool): for workload packages (a
	// lease from a snapshot).
	From *FromState
	// SnapshotID is the snapshot From comes from: when a warm pool of the
	// profile and runtime is fed from it, an idle member of that pool
	// serves the lease (From starts the sandbox only when none is idle).
	SnapshotID string
	// Volumes are the tenant's named volumes to mount: such a lease is
	// always served cold (a warm member's container has its mounts).
	Volumes []sandbox.VolumeRequest
	// Audit, if set, is the audit record of the request asking for the
	// lease when nothing after the lease's stored can fail it: it is
	// appended in the claim's transaction, with Target set to the lease's
	// id and Time to the claim's (Seq set says it was stored).
	Audit *tenant.AuditRecord
}

// LeaseOutput is a lease with the sandbox it holds.
type LeaseOutput struct {
	Lease   *sandbox.Lease
	Sandbox *sandbox.Sandbox
}

func invalidTTL(ttl, maxTTL int64) error {
	return errdefs.WithCode("invalid_ttl", invalid("ttl_seconds must be between 1 and %d, got %d", maxTTL, ttl))
}

// AcquireLease hands the tenant a sandbox for ttl: a warm pool member when
// one is idle (one store transaction, no Docker call), else a cold create
// after waiting up to wait_seconds for capacity. Every grant's wait is
// observed (genesis_lease_wait_seconds), whichever API asked: the leases
// API, MCP servers, E2B and OpenSandbox creates.
func (s *Service) AcquireLease(ctx context.Context, in AcquireLeaseInput) (*LeaseOutput, error) {
	start := time.Now() // wall time for the latency metric, not the service clock
	out, err := s.acquireLease(ctx, in)
	if err == nil {
		s.obs.ObserveLeaseWait(out.Sandbox.Runtime, time.Since(start))
	}
	return out, err
}

func (s *Service) acquireLease(ctx context.Context, in AcquireLeaseInput) (*LeaseOutput, error) {
	laps := stopwatch.Start[LeaseTimings](ctx)
	if err := s.checkDraining(); err != nil {
		return nil, err
	}
	p, err := s.profile(in.Profile)
	if err != nil {
		return nil, err
	}
	def, maxTTL := s.cfg.LeaseTTL(p)
	ttl := def
	if in.TTLSeconds != nil {
		ttl = *in.TTLSeconds
		if ttl <= 0 || ttl > maxTTL {
			return nil, invalidTTL(ttl, maxTTL)
		}
	}
	if _, err := s.waitDuration(in.WaitSeconds); err != nil {
		return nil, err
	}
	if len(in.Holder) > 256 {
		return nil, invalid("holder is longer than 256 bytes")
	}
	if err := ValidateEnv(in.Env); err != nil {
		return nil, err
	}
	if err := ValidateMetadata(in.Metadata); err != nil {
		return nil, err
	}
	res, err := s.resolveResources(p, in.Resources)
	if err != nil {
		return nil, err
	}
	risk, err := sandbox.ParseRiskLevel(in.RiskLevel, "")
	if err != nil {
		return nil, err
	}
	if in.Runtime != "" && sandbox.Runtime(in.Runtime).Isolation() == 0 {
		return nil, errdefs.WithCode(policy.CodeRuntimeNotAllowed, invalid("unknown runtime %q (known: runc, runsc, kata-*)", in.Runtime))
	}
	tn, err := s.tenantRecord(ctx, in.Tenant)
	if err != nil {
		return nil, err
	}
	dec, err := s.selectRuntimeOf(ctx, p, tn, risk, in.Runtime)
	if err != nil {
		return nil, err
	}
	laps.Lap(lapCheck)
	now := s.now()
	lease := &sandbox.Lease{
		ID: sandbox.NewID("lse"), Tenant: in.Tenant, Profile: p.Name, Runtime: dec.Runtime, Holder: in.Holder,
		State: sandbox.LeaseActive, Metadata: in.Metadata, TTLSeconds: ttl, Reserved: in.Reserved,
		CreatedAt: now, RenewedAt: now, ExpiresAt: now.Add(time.Duration(ttl) * time.Second),
	}
	claim := store.Claim{Lease: lease, Profile: p.Name, Runtime: dec.Runtime, Instance: s.instance,
		RiskLevel: dec.RiskLevel, Env: in.Env, Metadata: in.Metadata, Audit: in.Audit}
	if in.Audit != nil {
		in.Audit.Target, in.Audit.Time = lease.ID, now
	}
	if s.sharedPools() {
		claim.Instance = "" // any instance's member
	}

	claim.Pool = in.SnapshotID
	pl := s.pool(p.Name, dec.Runtime, in.SnapshotID)
	if pl != nil && pl.draining.Load() {
		return nil, errdefs.WithRetryAfter(5*time.Second, errdefs.WithCode("pool_draining", fmt.Errorf(
			"pool %s is draining and hands out no sandboxes: %w", pl.key.name(), errdefs.ErrUnavailable)))
	}
	// Members run the profile's resources and network policy: a lease
	// that asks (or whose tenant asks) for other ones is created cold.
	netPol, err := s.net.PolicyFor(ctx, in.Tenant, p, in.Network)
	if err != nil {
		return nil, err
	}
	// A lease from a saved state is warm only from a pool fed from that
	// snapshot.
	laps.Lap(lapPolicy)
	defer laps.Lap(lapClaim)
	warmOK := pl != nil && res == p.Resources && s.memberPolicy(p, netPol) && (in.From == nil || in.SnapshotID != "") && len(in.Volumes) == 0
	if warmOK {
		if out, err := s.claimWarmOrWait(ctx, pl, claim, res, tn); err == nil || !errors.Is(err, errdefs.ErrNotFound) {
			return out, err
		}
		pl.misses.Add(1)
	}
	if err := s.checkDraining(); err != nil {
		return nil, err
	}
	hold, err := s.reserveColdLease(ctx, in.Tenant, res, time.Duration(in.WaitSeconds)*time.Second)
	if err != nil {
		return nil, err
	}
	defer hold.drop() // a claim that stored the lease dropped it already
	// Cold: the create waits for host capacity in the tenant's fair queue
	// and selects the runtime from the caller's request itself. The disk
	// quota stays as asked (0: the profile default, dropped where quotas
	// cannot be enforced; asked for: refused there).
	coldRes := res
	coldRes.DiskMB = in.Resources.DiskMB
	sb, err := s.CreateSandbox(ctx, CreateSandboxInput{
		Tenant: in.Tenant, Profile: p.Name, Runtime: in.Runtime, RiskLevel: in.RiskLevel,
		Resources: coldRes, Env: in.Env, Metadata: in.Metadata, TTLSeconds: ttl, WaitSeconds: in.WaitSeconds,
		Network: &netPol, Reserved: in.Reserved, From: in.From, Volumes: in.Volumes,
	})
	if err != nil {
		return nil, err
	}
	claim.SandboxID, claim.Env, claim.Metadata = sb.ID, nil, nil // set at create
	claim.Runtime, claim.RiskLevel, claim.Lease.Runtime = sb.Runtime, sb.RiskLevel, sb.Runtime
	claim.Now = s.now()
	// Its TTL counts from the grant: the wait for capacity and the create
	// (long on a busy host) are not the holder's time.
	lease.CreatedAt, lease.RenewedAt, lease.ExpiresAt = claim.Now, claim.Now, claim.Now.Add(time.Duration(ttl)*time.Second)
	// The stored lease replaces the hold in one transaction: a quota check
	// in any instance sees the lease once, never twice (held and stored),
	// which would refuse a lease or a create that fits.
	claim.HoldID = hold.id
	l, leased, err := s.store.ClaimSandbox(ctx, claim)
	if err != nil {
		cctx, cancel := cleanupCtx(ctx, 30*time.Second)
		defer cancel()
		_ = s.destroy(cctx, sb, "lease could not be recorded")
		return nil, err
	}
	return &LeaseOutput{Lease: l, Sandbox: leased}, nil
}

// memberPolicy reports whether pol is the network policy the pool members
// of p run with (the profile's, as a tenant-less create picks it).
func (s *Service) memberPolicy(p *config.Profile, pol egress.Policy) bool {
	member, err := p.Network.Policy.Normalize(s.cfg.Network.OperatorConfig)
	return err == nil && member.Equal(pol)
}

// claimWarmOrWait is claimWarm that, when pl has no idle member but
// released sandboxes of it are being recycled (a release answers before
// its reset), waits up to returnWaitMax for one of them to come back
// rather than creating a sandbox cold.
func (s *Service) claimWarmOrWait(ctx context.Context, pl *pool, c store.Claim, res sandbox.Resources, tn *tenant.Tenant) (*LeaseOutput, error) {
	var deadline <-chan time.Time
	for {
		back := pl.recycleWait()
		out, err := s.claimWarm(ctx, pl, c, res, tn)
		if err == nil || !errors.Is(err, errdefs.ErrNotFound) || pl.resetting.Load() == 0 {
			return out, err
		}
		if deadline == nil {
			t := time.NewTimer(returnWaitMax)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-back:
		case <-deadline:
			return nil, err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// claimWarm takes an idle member of pl for tenant tn (its record as read
// for this lease); errdefs.ErrNotFound when none is idle.
func (s *Service) claimWarm(ctx context.Context, pl *pool, c store.Claim, res sandbox.Resources, tn *tenant.Tenant) (*LeaseOutput, error) {
	c.Lease = func() *sandbox.Lease { l := *c.Lease; l.Warm = true; return &l }()
	c.Now = s.now()
	// The tenant's quota is held from its check until the claim is stored.
	releaseQuota, _, err := s.reserveOf(ctx, tn, res, true)
	if err != nil {
		return nil, err
	}
	l, sb, err := s.store.ClaimSandbox(ctx, c)
	releaseQuota()
	if err != nil {
		return nil, err
	}
	s.noteHeld(sb.ID)
	pl.hits.Add(1)
	pl.wakeSoon()
	return &LeaseOutput{Lease: l, Sandbox: sb}, nil
}

// GetLease returns a lease of tenant as it stands now (an active lease past
// its expiry reads as expired).
func (s *Service) GetLease(ctx context.Context, tenant, id string) (*sandbox.Lease, error) {
	if !sandbox.ValidID("lse", id) {
		return nil, errdefs.WithCode("lease_not_found", fmt.Errorf("lease %q: %w", id, errdefs.ErrNotFound))
	}
	l, err := s.store.GetLease(ctx, tenant, id)
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			return nil, errdefs.WithCode("lease_not_found", err)
		}
		return nil, err
	}
	l.State = l.Effective(s.now())
	return l, nil
}

// ListLeases lists a tenant's leases.
func (s *Service) ListLeases(ctx context.Context, f store.LeaseFilter) ([]*sandbox.Lease, error) {
	for _, st := range f.States {
		if st != sandbox.LeaseActive && !st.Final() {
			return nil, invalid("unknown lease state %q", st)
		}
	}
	list, err := s.store.ListLeases(ctx, f)
	if err != nil {
		return nil, err
	}
	now := s.now()
	for _, l := range list {
		l.State = l.Effective(now)
	}
	return list, nil
}

// leaseEnded is the error for renewing or releasing a lease that ended.
func leaseEnded(l *sandbox.Lease, now time.Time) error {
	st := l.Effective(now)
	return errdefs.WithCode("lease_"+string(st), fmt.Errorf("lease %s is %s: %w", l.ID, st, errdefs.ErrConflict))
}

// RenewLease extends an active lease by ttl seconds from now (nil: the
// lease's own length). An expired or released lease is not renewed.
func (s *Service) RenewLease(ctx context.Context, tenant, id string, ttl *int64) (*sandbox.Lease, error) {
	cur, err := s.GetLease(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	p, err := s.profile(cur.Profile)
	if err != nil {
		return nil, err
	}
	_, maxTTL := s.cfg.LeaseTTL(p)
	n := cur.TTLSeconds
	if ttl != nil {
		if n = *ttl; n <= 0 || n > maxTTL {
			return nil, invalidTTL(n, maxTTL)
		}
	}
	now := s.now()
	exp := now.Add(time.Duration(n) * time.Second)
	l, err := s.store.UpdateLease(ctx, id, func(l *sandbox.Lease) error {
		if l.State != sandbox.LeaseActive || l.Expired(now) {
			return leaseEnded(l, now)
		}
		l.RenewedAt, l.ExpiresAt, l.TTLSeconds = now, exp, n
		return nil
	})
	if err != nil {
		return nil, err
	}
	if _, err := s.store.UpdateSandbox(ctx, l.SandboxID, 0, now, func(x *sandbox.Sandbox) error {
		x.ExpiresAt = &exp
		return nil
	}); err != nil {
		s.log.Warn("renewing the sandbox expiry of a lease", "lease", id, "sandbox", l.SandboxID, "err", err)
	}
	return l, nil
}

// ReleaseLease ends an active lease and returns once its sandbox is reset
// and back in its pool or destroyed (its running jobs canceled), with the
// recycle's error: for callers whose release means the sandbox is gone
// when it returns (the compat APIs' deletes, MCP servers). The leases API
// answers earlier: ReleaseLeaseNoWait. Releasing a released lease
// succeeds; an expired one is a conflict (the reaper has ended or will end
// it).
func (s *Service) ReleaseLease(ctx context.Context, tenant, id string) error {
	done, err := s.releaseLease(ctx, tenant, id)
	if err != nil || done == nil {
		return err
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err() // the recycle goes on
	}
}

// ReleaseLeaseNoWait ends an active lease and answers once the lease is
// released and its sandbox taken from the holder (draining, in the same
// store transaction); the sandbox's running jobs are canceled and it is
// reset or destroyed after the answer, by a recycle worker
// (recycle_queue.go). A crash in between leaves the sandbox draining, and
// the next start-up destroys it. Releasing a released lease succeeds; an
// expired one is a conflict.
func (s *Service) ReleaseLeaseNoWait(ctx context.Context, tenant, id string) error {
	_, err := s.releaseLease(ctx, tenant, id)
	return err
}

// releaseLease ends the lease, queues its sandbox's recycle and returns
// the channel its outcome comes on (nil: nothing to wait for).
func (s *Service) releaseLease(ctx context.Context, tenant, id string) (<-chan error, error) {
	cur, err := s.GetLease(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if cur.State == sandbox.LeaseReleased {
		return nil, nil
	}
	now := s.now()
	l, before, err := s.endLeaseDraining(ctx, cur, sandbox.LeaseReleased, "released", func(l *sandbox.Lease) error {
		if l.Expired(now) {
			return leaseEnded(l, now)
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, errdefs.ErrFailedPrecondition) {
			return nil, nil // released concurrently
		}
		return nil, err
	}
	return s.queueRecycle(l, before), nil
}

// endLeaseDraining moves active lease l to a final state (check may refuse)
// and its sandbox to draining, in one store transaction, and returns the
// ended lease and the sandbox as it was before (nil when it is gone). A
// lease that is no longer active is errdefs.ErrFailedPrecondition.
func (s *Service) endLeaseDraining(ctx context.Context, l *sandbox.Lease, to sandbox.LeaseState, reason string, check func(*sandbox.Lease) error) (*sandbox.Lease, *sandbox.Sandbox, error) {
	now := s.now()
	var inst string
	if s.reps != nil {
		inst = s.instance // another instance's sandbox is this one's to end (takeToEnd, in the same write)
	}
	return s.store.EndLease(ctx, store.LeaseEnd{LeaseID: l.ID, SandboxID: l.SandboxID, Now: now, Instance: inst, End: func(x *sandbox.Lease) error {
		if check != nil {
			if err := check(x); err != nil {
				return err
			}
		}
		x.State, x.EndedAt, x.EndReason = to, &now, reason
		return nil
	}})
}

// endLease moves an active lease to a final state; check may refuse.
// A lease that is no longer active is errdefs.ErrFailedPrecondition.
func (s *Service) endLease(ctx context.Context, id string, to sandbox.LeaseState, reason string, check func(*sandbox.Lease) error) (*sandbox.Lease, error) {
	now := s.now()
	return s.store.UpdateLease(ctx, id, func(l *sandbox.Lease) error {
		if l.State != sandbox.LeaseActive {
			return fmt.Errorf("lease %s is %s: %w", l.ID, l.State, errdefs.ErrFailedPrecondition)
		}
		if check != nil {
			if err := check(l); err != nil {
				return err
			}
		}
		l.State, l.EndedAt, l.EndReason = to, &now, reason
		return nil
	})
}

// endSandboxLeases ends the active lease of a sandbox, if any.
func (s *Service) endSandboxLeases(ctx context.Context, sandboxID string, to sandbox.LeaseState, reason string) error {
	leases, err := s.store.ListLeases(ctx, store.LeaseFilter{SandboxID: sandboxID, States: []sandbox.LeaseState{sandbox.LeaseActive}})
	if err != nil {
		return err
	}
	for _, l := range leases {
		if _, err := s.endLease(ctx, l.ID, to, reason, nil); err != nil && !errors.Is(err, errdefs.ErrFailedPrecondition) {
			return err
		}
	}
	return nil
}

// reapLeases ends the active leases of this instance's sandboxes whose
// expiry has passed and recycles their sandboxes.
func (s *Service) reapLeases(ctx context.Context, now time.Time) int {
	leases, err := s.store.ListLeases(ctx, store.LeaseFilter{States: []sandbox.LeaseState{sandbox.LeaseActive}, ExpiresBefore: now})
	if err != nil {
		s.log.Warn("listing expired leases", "err", err)
		return 0
	}
	n := 0
	for _, l := range leases {
		sb, err := s.store.GetSandbox(ctx, "", l.SandboxID)
		if err != nil || (sb.Instance != "" && sb.Instance != s.instance) {
			continue // another instance reaps its own
		}
		if s.keepExpired(ctx, sb, l, now) {
			continue // a hook keeps it (E2B's auto-pause)
		}
		ended, before, err := s.endLeaseDraining(ctx, l, sandbox.LeaseExpired, "ttl expired", func(x *sandbox.Lease) error {
			if !x.Expired(now) {
				return fmt.Errorf("lease %s was renewed: %w", x.ID, errdefs.ErrFailedPrecondition)
			}
			return nil
		})
		if err != nil {
			continue
		}
		// The reaper has no caller waiting: it recycles in line.
		_, err = s.recycle(ctx, ended, before)
		if err != nil {
			s.log.Warn("recycling the sandbox of an expired lease", "lease", l.ID, "err", err)
		}
		s.auditSystem(ctx, l.Tenant, "lease_expired", l.ID, err)
		n++
	}
	return n
}

// jobRunning keeps a leased sandbox busy while a job runs on it, in
// memory and, once jobs have run on it a while, in its record (s.busy,
// internal/busy); the returned func is called when the job ends.
// Sandboxes that are not leased are left as they are.
func (s *Service) jobRunning(ctx context.Context, sb *sandbox.Sandbox) (done func()) {
	if sb.State != sandbox.StateLeased && sb.State != sandbox.StateBusy {
		return func() {}
	}
	return s.busy.Running(ctx, sb.ID, sb.State == sandbox.StateBusy)
}

// writeBusy is the busy accounting's write (busy.Config.Write).
func (s *Service) writeBusy(ctx context.Context, id string, busy bool) {
	cctx, cancel := cleanupCtx(ctx, 10*time.Second)
	defer cancel()
	if busy {
		s.flipBusy(cctx, id, sandbox.StateLeased, sandbox.StateBusy)
	} else {
		s.flipBusy(cctx, id, sandbox.StateBusy, sandbox.StateLeased)
	}
}

// flipBusy moves a sandbox from → to when it is in from (a release or a
// failure in between wins).
func (s *Service) flipBusy(ctx context.Context, id string, from, to sandbox.State) {
	_, err := s.store.UpdateSandbox(ctx, id, 0, s.now(), func(x *sandbox.Sandbox) error {
		if x.State != from {
			return errNoChange
		}
		x.State = to
		return nil
	})
	if err != nil && !errors.Is(err, errNoChange) {
		s.log.Warn("recording a leased sandbox busy or not", "sandbox", id, "to", to, "err", err)
	}
}

var errNoChange = errors.New("no change")
