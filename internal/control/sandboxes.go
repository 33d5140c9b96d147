package control

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/egress"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/imagestate"
	"genesis.dev/sandbox/internal/policy"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/tenant"
)

// CreateSandboxInput is a validated-on-use create request.
type CreateSandboxInput struct {
	Tenant       string
	Profile      string
	Runtime      string
	RiskLevel    string
	Resources    sandbox.Resources // zero fields take the profile default
	Env          map[string]string
	Metadata     map[string]string
	TTLSeconds   int64 // 0: default TTL
	ReadOnlyRoot *bool
	// IdempotencyKey, if set, makes retries safe: the sandbox id is derived
	// from (tenant, key), so a repeated request returns the sandbox the
	// first one made instead of creating another.
	IdempotencyKey string
	// WaitSeconds is how long the request may wait for host capacity (0:
	// not at all).
	WaitSeconds int64
	// Network is the requested network policy; nil takes the tenant's or
	// the profile's default.
	Network *egress.Policy
	// ReadOnlyDirs are host directories bind-mounted read-only into the
	// sandbox, container path → host directory: for workload packages
	// (a skill revision at /skill), never from the API.
	ReadOnlyDirs map[string]string
	// Reserved, if set, reserves the sandbox to a service workload of its
	// own from its first record on (sandbox.Sandbox.Reserved): for
	// workload packages, never from the API.
	Reserved string
	// From, if set, starts the sandbox from a saved state (a snapshot):
	// for workload packages, never from the API directly.
	From *FromState
	// Volumes are the tenant's named volumes to mount.
	Volumes []sandbox.VolumeRequest
	// poolMember makes a tenant-less idle warm-pool member with no expiry.
	poolMember bool
	// poolSnapshot is the snapshot a pool member's pool is fed from
	// (sandbox.Sandbox.Pool).
	poolSnapshot string
}

// FromState is the saved state a new sandbox starts from.
type FromState struct {
	// Image, if set, replaces the profile's image (a runc snapshot's
	// committed root filesystem).
	Image string
	// Restore brings processes, memory or root filesystem changes back
	// (runsc).
	Restore *driver.RestoreOrder
	// Fill writes the workspace before the container starts; dir is its
	// host directory.
	Fill func(ctx context.Context, dir string) error
	// Metadata is merged under the request's metadata (the snapshot's
	// lineage).
	Metadata map[string]string
}

// reservedMountTargets are container paths a read-only dir may not cover.
var reservedMountTargets = []string{"/", "/workspace", driver.AgentMountDir, driver.AgentRunDir, "/proc", "/sys", "/dev", "/etc", "/tmp", "/usr", "/bin", "/sbin", "/lib"}

// readOnlyMounts checks ReadOnlyDirs and returns them as mounts.
func readOnlyMounts(dirs map[string]string) ([]driver.Mount, error) {
	var out []driver.Mount
	for _, target := range sortedKeys(dirs) {
		src := dirs[target]
		if !filepath.IsAbs(target) || filepath.Clean(target) != target || !filepath.IsAbs(src) {
			return nil, invalid("read-only dir %q → %q: both must be clean absolute paths", target, src)
		}
		for _, r := range reservedMountTargets {
			if target == r || strings.HasPrefix(r, target+"/") || (r != "/" && strings.HasPrefix(target, r+"/")) {
				return nil, invalid("read-only dir %q overlaps the reserved path %s", target, r)
			}
		}
		if fi, err := os.Stat(src); err != nil || !fi.IsDir() {
			return nil, invalid("read-only dir source %q is not a directory", src)
		}
		out = append(out, driver.Mount{Source: src, Target: target, ReadOnly: true})
	}
	return out, nil
}

// idempotentID derives a sandbox id from a tenant's idempotency key.
func idempotentID(tenant, key string) string {
	sum := sha256.Sum256([]byte("genesis-idempotency\x00" + tenant + "\x00" + key))
	return "sbx_" + idEncoding.EncodeToString(sum[:10])
}

var idEncoding = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

var (
	envKeyRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
	metaKeyRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,62}$`)
)

const (
	maxEnvEntries   = 128
	maxEnvValue     = 32 << 10
	maxMetaEntries  = 64
	maxMetaValueLen = 1024
)

func invalid(format string, args ...any) error {
	return errdefs.Invalid(format, args...)
}

// ValidateEnv checks environment keys and sizes.
func ValidateEnv(env map[string]string) error {
	if len(env) > maxEnvEntries {
		return invalid("env has %d entries, at most %d allowed", len(env), maxEnvEntries)
	}
	for k, v := range env {
		if !envKeyRE.MatchString(k) {
			return invalid("env key %q is not a valid variable name", k)
		}
		if strings.HasPrefix(k, "GENESIS_AGENT_") {
			return invalid("env key %q uses the reserved prefix GENESIS_AGENT_", k)
		}
		if len(v) > maxEnvValue || strings.ContainsRune(v, 0) {
			return invalid("env value of %q is longer than %d bytes or contains NUL", k, maxEnvValue)
		}
	}
	return nil
}

// ValidateMetadata checks metadata keys and sizes.
func ValidateMetadata(md map[string]string) error {
	if len(md) > maxMetaEntries {
		return invalid("metadata has %d entries, at most %d allowed", len(md), maxMetaEntries)
	}
	for k, v := range md {
		if !metaKeyRE.MatchString(k) {
			return invalid("metadata key %q must match %s", k, metaKeyRE)
		}
		if len(v) > maxMetaValueLen {
			return invalid("metadata value of %q is longer than %d bytes", k, maxMetaValueLen)
		}
	}
	return nil
}

func (s *Service) resolveResources(p *config.Profile, req sandbox.Resources) (sandbox.Resources, error) {
	l := s.cfg.Limits
	r := p.Resources
	if req.CPU < 0 || req.MemoryMB < 0 || req.Pids < 0 || req.DiskMB < 0 {
		return r, invalid("resources must not be negative")
	}
	if req.CPU != 0 {
		r.CPU = req.CPU
	}
	if req.MemoryMB != 0 {
		r.MemoryMB = req.MemoryMB
	}
	if req.Pids != 0 {
		r.Pids = req.Pids
	}
	if req.DiskMB != 0 {
		r.DiskMB = req.DiskMB // settled by resolveDisk
	}
	switch {
	case r.CPU < 0.01 || r.CPU > l.MaxCPU:
		return r, invalid("resources.cpu must be between 0.01 and %v, got %v", l.MaxCPU, r.CPU)
	case r.MemoryMB < 16 || r.MemoryMB > l.MaxMemoryMB:
		return r, invalid("resources.memory_mb must be between 16 and %d, got %d", l.MaxMemoryMB, r.MemoryMB)
	case r.Pids < 8 || r.Pids > l.MaxPids:
		return r, invalid("resources.pids must be between 8 and %d, got %d", l.MaxPids, r.Pids)
	}
	return r, nil
}

// CreateSandbox creates and starts a sandbox and waits until its agent
// answers. Every step that fails rolls back what the earlier steps made; the
// record then says failed with the reason.
func (s *Service) CreateSandbox(ctx context.Context, in CreateSandboxInput) (*sandbox.Sandbox, error) {
	if err := s.checkDraining(); err != nil {
		return nil, err
	}
	tl := newTimeline(s.now)
	if in.IdempotencyKey != "" {
		if len(in.IdempotencyKey) > 255 {
			return nil, invalid("Idempotency-Key is longer than 255 bytes")
		}
		if sb, err := s.store.GetSandbox(ctx, in.Tenant, idempotentID(in.Tenant, in.IdempotencyKey)); err == nil {
			return sb, nil // a retry: the first request's sandbox
		}
	}
	p, err := s.profile(in.Profile)
	if err != nil {
		return nil, err
	}
	res, err := s.resolveResources(p, in.Resources)
	if err != nil {
		return nil, err
	}
	if res.DiskMB, err = s.resolveDisk(ctx, p, in.Resources.DiskMB); err != nil {
		return nil, err
	}
	if err := ValidateEnv(in.Env); err != nil {
		return nil, err
	}
	if in.From != nil && len(in.From.Metadata) > 0 {
		md := maps.Clone(in.From.Metadata)
		maps.Copy(md, in.Metadata)
		in.Metadata = md
	}
	if err := ValidateMetadata(in.Metadata); err != nil {
		return nil, err
	}
	netPol, err := s.net.PolicyFor(ctx, in.Tenant, p, in.Network)
	if err != nil {
		return nil, err
	}
	roMounts, err := readOnlyMounts(in.ReadOnlyDirs)
	if err != nil {
		return nil, err
	}
	if len(in.Volumes) > 0 && in.poolMember {
		return nil, invalid("a pool member mounts no volumes")
	}
	if len(in.Volumes) > 0 && in.From != nil {
		// A saved state (a runsc checkpoint) is restored onto the mounts
		// it was taken with; volumes are not part of it (docs/volumes.md).
		return nil, errdefs.WithCode("invalid_volume_mount", invalid("a sandbox made from a snapshot mounts no volumes"))
	}
	if err := s.checkVolumes(ctx, in.Tenant, in.Volumes, p.VolumeRoots); err != nil {
		return nil, err
	}
	ttl := in.TTLSeconds
	switch {
	case ttl < 0 || ttl > s.cfg.Limits.MaxTTLSeconds:
		return nil, invalid("ttl_seconds must be between 1 and %d, got %d", s.cfg.Limits.MaxTTLSeconds, ttl)
	case ttl == 0:
		ttl = s.cfg.Limits.DefaultTTLSeconds
	}
	wait, err := s.waitDuration(in.WaitSeconds)
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
	ref, declared := s.images.Ref(p)
	fromImage := in.From != nil && in.From.Image != ""
	if fromImage {
		ref, declared = in.From.Image, true
	}
	if !declared {
		return nil, errdefs.WithCode("image_not_built", fmt.Errorf(
			"profile %s is declared but its image is not available: %s: %w", p.Name, imagestate.BuildCommand(p, false), errdefs.ErrFailedPrecondition))
	}
	dec, err := s.selectRuntime(ctx, p, in.Tenant, risk, in.Runtime)
	if err != nil {
		return nil, err
	}
	tl.runtime = dec.Runtime
	// An image being built in the background is waited for within the
	// request's wait_seconds; what is left of it waits for capacity.
	tl.mark("validate")
	imageWait := s.now()
	if err := s.images.Await(ctx, p, ref, wait, !fromImage); err != nil {
		return nil, err
	}
	wait = max(0, wait-s.now().Sub(imageWait))
	tl.mark("image")
	// A tenant over its quota is refused at once, before any wait for
	// host capacity; the check is repeated under the tenant's lock below.
	// Pool members belong to no tenant until a lease claims them (the
	// claim checks the quota).
	if !in.poolMember {
		if err := s.checkQuota(ctx, in.Tenant, res, false); err != nil {
			return nil, err
		}
	}
	// Host capacity: wait for it in the tenant's fair queue (a pool member
	// takes only free capacity nobody waits for). It is held by the record
	// from its insert on and given back when the sandbox ends.
	var release func()
	if in.poolMember {
		r, ok := s.admission.TryAcquire(in.Tenant, res)
		if !ok {
			return nil, errdefs.WithCode("capacity_exhausted", fmt.Errorf("no free host capacity for a pool member: %w", errdefs.ErrUnavailable))
		}
		release = r
	} else {
		release, err = s.admit(ctx, in.Tenant, res, wait)
	}
	if err != nil {
		return nil, err
	}
	if err := s.awaitCreateSlot(ctx, wait); err != nil {
		release()
		return nil, err
	}
	defer func() { <-s.createSem }()
	// The tenant's quota is held from its check until the record exists.
	releaseQuota := func() {}
	if !in.poolMember {
		if releaseQuota, err = s.reserveQuota(ctx, in.Tenant, res, false); err != nil {
			release()
			return nil, err
		}
	}
	defer releaseQuota()
	tl.mark("admit")
	s.admitMu.Lock()

	now := s.now()
	exp := now.Add(time.Duration(ttl) * time.Second)
	expires := &exp
	if in.poolMember {
		expires = nil // idle until claimed; the claim sets the lease's expiry
	}
	readOnly := p.ReadOnlyRoot
	if in.ReadOnlyRoot != nil {
		readOnly = *in.ReadOnlyRoot
	}
	id := sandbox.NewID("sbx")
	if in.IdempotencyKey != "" {
		id = idempotentID(in.Tenant, in.IdempotencyKey)
	}
	sb := &sandbox.Sandbox{
		ID:        id,
		Tenant:    in.Tenant,
		Instance:  s.instance,
		Profile:   p.Name,
		Runtime:   dec.Runtime,
		RiskLevel: dec.RiskLevel,
		State:     sandbox.StateCreated,
		Image:     ref,
		Resources: res,
		Env:       in.Env,
		Metadata:  in.Metadata,
		CreatedAt: now,
		UpdatedAt: now,
		ExpiresAt: expires,
		Reserved:  in.Reserved,
		Pool:      in.poolSnapshot,
	}
	err = s.store.CreateSandbox(ctx, sb)
	s.admitMu.Unlock()
	releaseQuota()
	if err != nil {
		release()
	} else {
		s.holdCapacity(sb.ID, release)
	}
	if errors.Is(err, errdefs.ErrAlreadyExists) && in.IdempotencyKey != "" {
		// A concurrent retry with the same key won the insert.
		return s.store.GetSandbox(ctx, in.Tenant, sb.ID)
	}
	if err != nil {
		return nil, err
	}
	tl.mark("insert")
	if err := s.net.Record(ctx, sb, netPol); err != nil {
		return nil, s.failCreate(ctx, sb, err)
	}
	// From here on the work must finish (or roll back) even if the caller
	// goes away: detach from its cancellation, keep a deadline.
	wctx, cancel := cleanupCtx(ctx, s.createBound())
	defer cancel()
	tl.mark("network_record")
	uid, gid, err := parseUser(p.User)
	if err != nil {
		return nil, s.failCreate(wctx, sb, err)
	}
	volMounts, err := s.acquireVolumes(wctx, sb, uid, gid, in.Volumes, p.VolumeRoots)
	if err != nil {
		return nil, s.failCreate(wctx, sb, err)
	}
	tl.mark("volumes")
	out, err := s.startSandbox(wctx, tl, sb, p, readOnly, append(roMounts, volMounts...), in.From)
	if errdefs.Code(err) == "image_not_built" {
		s.images.Forget(ref) // removed since Await saw it: the next create asks again
	}
	if err == nil && in.poolMember {
		err = s.warmUp(wctx, sb.ID)
		tl.mark("warm_up")
	}
	if err == nil {
		a := s.attachment(out)
		a.Warm = in.poolMember
		err = s.sandboxReady(wctx, a)
		tl.mark("ready_hooks")
	}
	if err == nil && in.poolMember {
		out, err = s.setState(wctx, sb.ID, sandbox.StateIdle, nil)
	}
	if err != nil {
		return nil, s.failCreate(wctx, sb, err)
	}
	out = s.withNetwork(wctx, out)
	tl.mark("answer")
	tl.log(s.log, "create timeline", "sandbox", sb.ID, "runtime", tl.runtime)
	return out, nil
}

// createBound is the longest a create may take from its record's insert:
// a record older than that in created or starting is stuck.
func (s *Service) createBound() time.Duration {
	return s.cfg.Intervals.AgentReadyTimeout + 3*s.cfg.Intervals.DockerCallTimeout
}

// awaitCreateSlot takes one of the slots that bound the creates running at
// once. A create queues for one before its record exists, so the queue
// takes none of the create's own time (createBound): in a burst, each
// create waits its turn for as long as its request waits for capacity,
// and at least createBound, instead of losing to the queue the time its
// container needs to start.
func (s *Service) awaitCreateSlot(ctx context.Context, wait time.Duration) error {
	t := time.NewTimer(max(wait, s.createBound()))
	defer t.Stop()
	select {
	case s.createSem <- struct{}{}:
		return nil
	case <-t.C:
		return fmt.Errorf("waiting for a create slot: %w", errdefs.ErrDeadlineExceeded)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// selectRuntime applies the runtime policy to a request of tenant for
// profile p: the profile's (or the service's) default risk level, the
// stored tenant's floor (from the configuration or the API) and the
// runtimes that are healthy now.
func (s *Service) selectRuntime(ctx context.Context, p *config.Profile, tenant string, risk sandbox.RiskLevel, runtime string) (policy.Decision, error) {
	tn, err := s.tenantRecord(ctx, tenant)
	if err != nil {
		return policy.Decision{}, err
	}
	return s.selectRuntimeOf(ctx, p, tn, risk, runtime)
}

// selectRuntimeOf is selectRuntime with the tenant's record read already.
func (s *Service) selectRuntimeOf(ctx context.Context, p *config.Profile, tn *tenant.Tenant, risk sandbox.RiskLevel, runtime string) (policy.Decision, error) {
	defRisk := p.DefaultRiskLevel
	if defRisk == "" {
		defRisk = s.cfg.DefaultRiskLevel
	}
	return policy.Select(
		policy.RuntimeRequest{RiskLevel: risk, Runtime: sandbox.Runtime(runtime)},
		policy.ProfileRuntimes{Name: p.Name, AllowedRuntimes: p.AllowedRuntimes, DefaultRiskLevel: defRisk},
		policy.TenantPolicy{MinRiskLevel: tn.MinRiskLevel},
		s.Probe(ctx).HealthyRuntimes(),
	)
}

// warmUp runs one exec and one background job through a new pool
// member's agent before the member is handed out, so that a lease holder's
// first command finds the agent's code, its job shim and the sandbox's
// shell already in memory instead of paying for the first use of each. A
// member whose agent cannot do this is not healthy: its create fails.
func (s *Service) warmUp(ctx context.Context, id string) error {
	a := s.agent(id)
	cmd := []string{"/bin/sh", "-c", "echo warm"}
	res, err := a.Exec(ctx, agentproto.ExecRequest{Command: cmd})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("exited with %d: %s", res.ExitCode, res.Stderr)
	}
	if err != nil {
		return fmt.Errorf("warm-up exec in the new pool member: %w", err)
	}
	const job = "pool-warm-up"
	err = a.StartJobFollow(ctx, agentproto.JobStartRequest{ExecRequest: agentproto.ExecRequest{JobID: job, Command: cmd}},
		func(agentproto.JobInfo) {}, func(agentproto.Frame) error { return nil })
	if err == nil {
		err = a.ForgetJob(ctx, job)
	}
	if err != nil {
		return fmt.Errorf("warm-up job in the new pool member: %w", err)
	}
	return nil
}

var liveStates = []sandbox.State{sandbox.StateCreated, sandbox.StateStarting, sandbox.StateReady,
	sandbox.StateLeased, sandbox.StateBusy, sandbox.StateIdle, sandbox.StatePaused, sandbox.StateHibernated, sandbox.StateDraining}

func parseUser(u string) (uid, gid int, err error) {
	x, y, err := driver.ParseUser(u)
	if err != nil {
		return 0, 0, invalid("profile user %q must be numeric uid:gid", u)
	}
	return int(x), int(y), nil
}

func (s *Service) startSandbox(ctx context.Context, tl *timeline, sb *sandbox.Sandbox, p *config.Profile, readOnly bool, extra []driver.Mount, from *FromState) (*sandbox.Sandbox, error) {
	spec, err := s.containerSpec(ctx, sb, p, readOnly, extra)
	if err != nil {
		return nil, err
	}
	if from != nil {
		spec.Container.Restore = from.Restore
	}
	tl.mark("spec")
	cid, err := s.boxes.CreateSandbox(ctx, spec)
	if err != nil {
		return nil, err
	}
	tl.mark("container_create")
	if from != nil && from.Fill != nil {
		dir, err := s.WorkspaceDir(sb.ID)
		if err == nil {
			err = from.Fill(ctx, dir)
		}
		if err != nil {
			return nil, err
		}
	}
	// The record says starting (with the container's id) while the
	// container starts, not before: a store write less on a cold create's
	// path. A crash in between leaves a record that says created, which
	// the reconciler ends as it ends one that says starting (the
	// container found by its name).
	recorded := make(chan error, 1)
	go func() {
		_, err := s.setState(ctx, sb.ID, sandbox.StateStarting, func(x *sandbox.Sandbox) { x.ContainerID = cid })
		recorded <- err
	}()
	err = s.startUntilAgent(ctx, tl, sb.ID, cid)
	if rerr := <-recorded; err == nil {
		err = rerr
	}
	tl.mark("record_starting")
	if err != nil {
		return nil, err
	}
	out, err := s.setState(ctx, sb.ID, sandbox.StateReady, nil)
	tl.mark("record_ready")
	return out, err
}

// startContainer starts a sandbox's container and waits for its agent.
func (s *Service) startContainer(ctx context.Context, id, cid string) error {
	if err := s.driver.Start(ctx, cid); err != nil {
		return err
	}
	return s.awaitAgent(ctx, id, cid, nil, nil)
}

// awaitAgent waits up to the agent-ready timeout for the agent of a
// started container to answer; ready, if not nil, is a wait already under
// way (startUntilAgent's), which stop ends. A container that exits first
// is reported so.
func (s *Service) awaitAgent(ctx context.Context, id, cid string, ready <-chan error, stop func()) error {
	rctx, cancel := context.WithTimeout(ctx, s.cfg.Intervals.AgentReadyTimeout)
	defer cancel()
	var err error
	if ready == nil {
		_, err = s.agent(id).WaitReady(rctx, agentPoll)
	} else {
		select {
		case err = <-ready:
		case <-rctx.Done():
			stop()
			err = <-ready // the wait's own error: unavailable, with the last dial's
		}
	}
	if err != nil {
		st, ierr := s.driver.Inspect(ctx, cid)
		if ierr == nil && !notEnded(st) { // a Pod whose container is not started yet has not exited
			return fmt.Errorf("sandbox container exited (code %d) before its agent answered: %w", st.ExitCode, errdefs.ErrUnavailable)
		}
		return fmt.Errorf("agent did not answer within %v: %w", s.cfg.Intervals.AgentReadyTimeout, err)
	}
	return nil
}

// agentPoll is how often a starting sandbox's agent is dialled until it
// answers (a refused dial of a Unix socket costs microseconds).
const agentPoll = 2 * time.Millisecond

// startUntilAgent starts a new sandbox's container and returns as soon as
// its agent answers, dialling it while the daemon's start call is still
// running. The agent answers only once the runtime has started its
// process, and the daemon answers the start call after bookkeeping of its
// own (the container's state written to disk, its event), which under
// runc ends after the agent listens: a create that waited for both paid
// for that bookkeeping. The start call's answer is still taken: when the
// agent answered first, a goroutine waits for it and fails the sandbox if
// the call failed after all. Meanwhile the daemon reports the container
// "created", which the reconciler counts as not ended.
func (s *Service) startUntilAgent(ctx context.Context, tl *timeline, id, cid string) error {
	pctx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	var wake <-chan struct{}
	if w, ok := s.boxes.(driver.AgentWatcher); ok {
		wake = w.WatchAgent(pctx, id) // dial as the socket appears, not at the next poll
	}
	ready := make(chan error, 1)
	go func() {
		_, err := s.agent(id).WaitReadyWake(pctx, agentPoll, wake)
		ready <- err
	}()
	// The call outlives this create when the agent answers first; the
	// driver bounds it with its own deadline.
	started := make(chan error, 1)
	sctx := context.WithoutCancel(ctx)
	go func() { started <- s.driver.Start(sctx, cid) }()
	select {
	case err := <-started:
		if err != nil {
			return err
		}
		tl.mark("container_start")
		if err := s.awaitAgent(ctx, id, cid, ready, stopPoll); err != nil {
			return err
		}
		tl.mark("agent_ready")
		return nil
	case err := <-ready:
		if err != nil {
			// Not a refusal (those are retried until pctx ends): an
			// answer that is no agent's. The start's outcome first.
			if serr := <-started; serr != nil {
				return serr
			}
			return fmt.Errorf("agent of the new sandbox: %w", err)
		}
	}
	tl.mark("agent_ready_before_start_answer")
	agentAt := s.now()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		err := <-started
		if err == nil {
			// What the create did not wait for, in a timeline line of
			// its own.
			s.log.Debug("create timeline", "sandbox", id, "runtime", tl.runtime,
				slog.Duration("start_answer_after_agent", s.now().Sub(agentAt)))
			return
		}
		fctx, cancel := cleanupCtx(sctx, s.cfg.Intervals.DockerCallTimeout)
		defer cancel()
		sb, gerr := s.store.GetSandbox(fctx, "", id)
		if gerr != nil || sb.State.Final() || sb.State == sandbox.StateDraining {
			return // gone or going anyway
		}
		s.markFailed(fctx, sb, "container start failed after its agent answered: "+err.Error())
	}()
	return nil
}

// containerSpec is what a sandbox's container is made from.
func (s *Service) containerSpec(ctx context.Context, sb *sandbox.Sandbox, p *config.Profile, readOnly bool, extra []driver.Mount) (driver.SandboxSpec, error) {
	uid, gid, err := parseUser(p.User)
	if err != nil {
		return driver.SandboxSpec{}, err
	}
	env := make([]string, 0, len(sb.Env)+2)
	env = append(env, agentproto.FileRootsEnv+"="+strings.Join(p.Roots(), ":"), agentproto.EnvSandboxID+"="+sb.ID)
	for _, k := range sortedKeys(sb.Env) {
		env = append(env, k+"="+sb.Env[k])
	}
	labels := map[string]string{
		driver.LabelManaged:   "true",
		driver.LabelInstance:  s.instance,
		driver.LabelSandbox:   sb.ID,
		driver.LabelProfile:   sb.Profile,
		driver.LabelRuntime:   string(sb.Runtime),
		driver.LabelPurpose:   "sandbox",
		driver.LabelCreatedAt: sb.CreatedAt.Format(time.RFC3339),
	}
	if sb.ExpiresAt != nil {
		labels[driver.LabelExpiresAt] = sb.ExpiresAt.Format(time.RFC3339)
	}
	spec := driver.Spec{
		Name:      "genesis-" + sb.ID,
		Image:     sb.Image,
		Runtime:   sb.Runtime,
		Labels:    labels,
		Env:       env,
		User:      p.User,
		WorkDir:   "/workspace",
		Resources: sb.Resources,
		CapAdd:    p.CapAdd,
		ReadOnly:  readOnly,
		Mounts:    extra,
		Network:   "none",
		Hostname:  "sandbox",
	}
	if readOnly {
		spec.Tmpfs = map[string]string{"/tmp": "rw,nosuid,nodev,size=64m,mode=1777"}
	}
	if err := s.prepareNetwork(ctx, sb, &spec); err != nil {
		return driver.SandboxSpec{}, err
	}
	return driver.SandboxSpec{ID: sb.ID, Container: spec, UID: uid, GID: gid, DiskMB: sb.Resources.DiskMB}, nil
}

// failCreate rolls back a half-made sandbox and records why it failed.
func (s *Service) failCreate(ctx context.Context, sb *sandbox.Sandbox, cause error) error {
	s.log.Warn("sandbox create failed; rolling back", "sandbox", sb.ID, "err", cause)
	s.teardown(ctx, sb.ID, "")
	if _, err := s.setState(ctx, sb.ID, sandbox.StateFailed, func(x *sandbox.Sandbox) {
		x.FailureReason = "create failed: " + cause.Error()
	}); err != nil {
		s.log.Error("recording failed create", "sandbox", sb.ID, "err", err)
	}
	s.sandboxEnding(ctx, sb.ID, "create failed")
	return cause
}

// teardown removes a sandbox's container (found by record or by label) and
// host directories. It is idempotent and best effort; errors are logged.
func (s *Service) teardown(ctx context.Context, id, containerID string) {
	s.dropAgent(id)
	cctx, cancel := cleanupCtx(ctx, s.cfg.Intervals.DockerCallTimeout)
	defer cancel()
	if err := s.boxes.RemoveSandbox(cctx, id, containerID); err != nil {
		s.log.Error("removing sandbox", "sandbox", id, "err", err)
	} else {
		s.releaseVolumes(cctx, id) // its container is gone
	}
	s.net.Release(cctx, id)
}

// setState moves a sandbox to state through the transition table, applying
// mutate to the record in the same update.
func (s *Service) setState(ctx context.Context, id string, to sandbox.State, mutate func(*sandbox.Sandbox)) (*sandbox.Sandbox, error) {
	sb, err := s.store.UpdateSandbox(ctx, id, 0, s.now(), func(x *sandbox.Sandbox) error {
		if x.State != to {
			if err := sandbox.Transition(x.State, to); err != nil {
				return err
			}
			x.State = to
		}
		if mutate != nil {
			mutate(x)
		}
		return nil
	})
	if err == nil && (to == sandbox.StateDestroyed || to == sandbox.StateFailed) {
		s.releaseCapacity(id) // its container is gone
		// A lease of a sandbox that is gone holds nothing: it ends too.
		why := "sandbox " + string(to)
		if sb.FailureReason != "" {
			why += ": " + sb.FailureReason
		}
		if lerr := s.endSandboxLeases(ctx, id, sandbox.LeaseReleased, why); lerr != nil {
			s.log.Warn("ending the lease of an ended sandbox", "sandbox", id, "err", lerr)
		}
	}
	return sb, err
}

// GetSandbox returns a sandbox of tenant, with its network summary.
func (s *Service) GetSandbox(ctx context.Context, tenant, id string) (*sandbox.Sandbox, error) {
	sb, err := s.lookup(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	return s.withNetwork(ctx, sb), nil
}

// lookup returns a sandbox of tenant as stored: without its network
// summary, which costs another store read.
func (s *Service) lookup(ctx context.Context, tenant, id string) (*sandbox.Sandbox, error) {
	if !sandbox.ValidID("sbx", id) {
		return nil, fmt.Errorf("sandbox %q: %w", id, errdefs.ErrNotFound)
	}
	return s.store.GetSandbox(ctx, tenant, id)
}

// ListSandboxes lists a tenant's sandboxes.
func (s *Service) ListSandboxes(ctx context.Context, f store.SandboxFilter) ([]*sandbox.Sandbox, error) {
	for _, st := range f.States {
		if !st.Valid() {
			return nil, invalid("unknown state %q", st)
		}
	}
	return s.store.ListSandboxes(ctx, f)
}

// PatchSandbox merges metadata (nil values delete keys), honouring ifVersion.
func (s *Service) PatchSandbox(ctx context.Context, tenant, id string, ifVersion int64, patch map[string]*string) (*sandbox.Sandbox, error) {
	if _, err := s.GetSandbox(ctx, tenant, id); err != nil {
		return nil, err
	}
	return s.store.UpdateSandbox(ctx, id, ifVersion, s.now(), func(x *sandbox.Sandbox) error {
		if x.State.Final() {
			return errdefs.WithCode("invalid_state", fmt.Errorf("sandbox %s is destroyed: %w", id, errdefs.ErrFailedPrecondition))
		}
		md := maps.Clone(x.Metadata)
		if md == nil {
			md = map[string]string{}
		}
		for k, v := range patch {
			if v == nil {
				delete(md, k)
			} else {
				md[k] = *v
			}
		}
		if err := ValidateMetadata(md); err != nil {
			return err
		}
		x.Metadata = md
		return nil
	})
}

// DeleteSandbox destroys a sandbox. Deleting a destroyed sandbox succeeds.
func (s *Service) DeleteSandbox(ctx context.Context, tenant, id string) error {
	sb, err := s.GetSandbox(ctx, tenant, id)
	if err != nil {
		return err
	}
	return s.destroy(ctx, sb, "")
}

func (s *Service) destroy(ctx context.Context, sb *sandbox.Sandbox, reason string) error {
	if sb.State == sandbox.StateDestroyed {
		return nil
	}
	if sb.State != sandbox.StateDraining {
		if err := s.takeToEnd(ctx, sb); err != nil {
			return err
		}
		if _, err := s.setState(ctx, sb.ID, sandbox.StateDraining, nil); err != nil && !errors.Is(err, errdefs.ErrFailedPrecondition) {
			return err
		}
	}
	if sb.State == sandbox.StatePaused {
		s.thawToEnd(ctx, sb)
	}
	s.teardown(ctx, sb.ID, sb.ContainerID)
	cctx, cancel := cleanupCtx(ctx, 10*time.Second)
	defer cancel()
	_, err := s.setState(cctx, sb.ID, sandbox.StateDestroyed, func(x *sandbox.Sandbox) {
		if reason != "" {
			x.FailureReason = reason
		}
	})
	if err != nil {
		return err
	}
	s.sandboxEnding(cctx, sb.ID, cmp.Or(reason, "destroyed"))
	// Its sessions end as after a reset (session_closed).
	if err := s.endSessions(cctx, sb.ID); err != nil {
		s.log.Warn("ending the sessions of a destroyed sandbox", "sandbox", sb.ID, "err", err)
	}
	s.log.Info("sandbox destroyed", "sandbox", sb.ID, "reason", reason)
	return nil
}

// thawToEnd unfreezes a paused sandbox that is about to be destroyed: a
// frozen container ignores its stop signal until the runtime's kill
// timeout (5 s under runc, 15 s under runsc); thawed, it ends at once.
func (s *Service) thawToEnd(ctx context.Context, sb *sandbox.Sandbox) {
	p, ok := s.driver.(driver.Pauser)
	if !ok || sb.ContainerID == "" {
		return
	}
	uctx, ucancel := cleanupCtx(ctx, s.cfg.Intervals.DockerCallTimeout)
	defer ucancel()
	if err := p.Unpause(uctx, sb.ContainerID); err != nil {
		s.log.Debug("thawing a paused sandbox to end it", "sandbox", sb.ID, "err", err)
	}
}

// takeToEnd makes this instance the owner of another instance's sandbox it
// is about to end (or reset). Should this process die before the end, the
// leader then adopts the draining record from it and finishes the destroy
// at once; left with its owner, a draining record of a dead process would
// look like one still being drained and wait out the stuck-drain bound.
func (s *Service) takeToEnd(ctx context.Context, sb *sandbox.Sandbox) error {
	if s.reps == nil || sb.Instance == "" || sb.Instance == s.instance {
		return nil
	}
	err := s.reps.adopter.TakeSandbox(ctx, sb.ID, sb.Instance, s.instance, s.now())
	if errors.Is(err, errdefs.ErrPreconditionFailed) {
		return nil // ended or taken meanwhile: the state change below tells
	}
	return err
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// RenewSandbox sets a sandbox's expiry to ttl seconds from now (0: the
// service's default TTL), within limits.max_ttl_seconds. A leased
// sandbox's expiry is its lease's: renew the lease instead (409
// leased_sandbox). A destroyed or failed sandbox is not renewed.
func (s *Service) RenewSandbox(ctx context.Context, tenant, id string, ttl int64) (*sandbox.Sandbox, error) {
	switch {
	case ttl < 0 || ttl > s.cfg.Limits.MaxTTLSeconds:
		return nil, errdefs.WithCode("invalid_ttl", invalid("ttl_seconds must be between 1 and %d, got %d", s.cfg.Limits.MaxTTLSeconds, ttl))
	case ttl == 0:
		ttl = s.cfg.Limits.DefaultTTLSeconds
	}
	if _, err := s.GetSandbox(ctx, tenant, id); err != nil {
		return nil, err
	}
	now := s.now()
	exp := now.Add(time.Duration(ttl) * time.Second)
	return s.store.UpdateSandbox(ctx, id, 0, now, func(x *sandbox.Sandbox) error {
		switch {
		case x.State.Final() || x.State == sandbox.StateDraining:
			return errdefs.WithCode("invalid_state", fmt.Errorf("sandbox %s is %s: %w", id, x.State, errdefs.ErrFailedPrecondition))
		case x.State == sandbox.StateLeased || x.State == sandbox.StateBusy || x.State == sandbox.StateIdle:
			return errdefs.WithCode("leased_sandbox", fmt.Errorf("sandbox %s is leased: its expiry is the lease's (POST /v1/leases/{id}/renew): %w", id, errdefs.ErrConflict))
		}
		x.ExpiresAt = &exp
		return nil
	})
}
