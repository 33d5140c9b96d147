package control

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// poolKey names the warm pool of one profile under one runtime, fed from
// the profile's image or from a snapshot.
type poolKey struct {
	profile  string
	runtime  sandbox.Runtime
	snapshot string // "": the profile's image
}

func (k poolKey) name() string {
	if k.snapshot != "" {
		return k.profile + "-" + string(k.runtime) + "-" + k.snapshot
	}
	return k.profile + "-" + string(k.runtime)
}

// PoolFeeder makes the members of warm pools fed from a snapshot:
// implemented by the package that keeps snapshots, registered with
// AddHook.
type PoolFeeder interface {
	// PoolMember returns the state a new member of a pool of profile and
	// runtime starts from, taken from snapshot id (of any tenant: the
	// operator named it), or why no member can start from it (it is gone,
	// damaged, not ready, or of another profile or runtime).
	PoolMember(ctx context.Context, snapshotID, profile string, runtime sandbox.Runtime) (*FromState, error)
}

// poolFeeder is the registered PoolFeeder, if any (hooks are fixed at
// Start).
func (s *Service) poolFeeder() PoolFeeder {
	for _, h := range s.hooks {
		if f, ok := h.(PoolFeeder); ok {
			return f
		}
	}
	return nil
}

// pool is the in-memory side of one warm pool: its settings, statistics and
// draining flag. Its members live in the store: sandboxes of this instance,
// of tenant "", in state idle, of the pool's profile and runtime; they are
// invisible to every tenant until a claim hands one over.
type pool struct {
	key         poolKey
	spec        config.PoolSpec
	kick        chan struct{} // wakes the refill loop; capacity 1
	wakePending atomic.Bool   // a delayed wake is due (wakeSoon)

	draining atomic.Bool
	hits     atomic.Int64 // leases served warm
	misses   atomic.Int64 // leases that found the pool empty
	replaced atomic.Int64 // unhealthy idle members replaced
	recycled atomic.Int64 // released sandboxes reset and returned (on_release: reset)
	// resetFailed counts resets that failed, whose sandboxes were destroyed.
	resetFailed atomic.Int64
	creating    atomic.Int64 // members being made now
	// resetting counts the released sandboxes whose recycle is queued or
	// running and may return them to this pool (queueRecycle); a claim
	// that finds the pool empty waits a little for one (awaitReturn).
	resetting atomic.Int64
	retMu     sync.Mutex
	retCh     chan struct{} // closed when a recycle counted in resetting ends

	mu       sync.Mutex
	made     int64     // members made ready in all
	runStart time.Time // start of the current refill run (zero: none)
	runMade  int64     // members made in the current run
	rate     float64   // members/s of the last refill run
	lastErr  string
	lastCode string // the problem code of lastErr
}

// PoolView is a pool with its counts and statistics, for GET /v1/pools.
type PoolView struct {
	Name     string
	Profile  string
	Runtime  sandbox.Runtime
	MinIdle  int
	MaxTotal int
	// Counts by state of the live sandboxes of this profile and runtime
	// made by this instance (idle ones are the pool's warm members).
	Counts   map[sandbox.State]int
	Total    int
	Starting int64
	Hits     int64
	Misses   int64
	Made     int64
	Replaced int64
	// Recycled counts released sandboxes reset and returned to the pool;
	// ResetFailed the resets that failed (those sandboxes were destroyed).
	Recycled    int64
	ResetFailed int64
	RefillRate  float64 // members/s of the last (or current) refill run
	Draining    bool
	LastError   string
	// SnapshotID is the snapshot the pool's members are made from ("":
	// the profile's image).
	SnapshotID string
	// State is PoolDraining, PoolFailing (its last member create failed
	// for a reason other than host capacity: LastError says why),
	// PoolReady (it holds min_idle idle members) or PoolFilling.
	State string
}

// The states of a pool (PoolView.State).
const (
	PoolReady    = "ready"
	PoolFilling  = "filling"
	PoolFailing  = "failing"
	PoolDraining = "draining"
)

// initPools builds the configured pools (nothing runs until startPools).
func (s *Service) initPools() {
	s.pools = map[poolKey]*pool{}
	if !s.cfg.WarmPools {
		return
	}
	for _, p := range s.cfg.Profiles {
		for _, spec := range p.Pools {
			k := poolKey{p.Name, spec.Runtime, spec.SnapshotID}
			pl := &pool{key: k, spec: spec, kick: make(chan struct{}, 1)}
			s.pools[k] = pl
			s.poolList = append(s.poolList, pl)
		}
	}
}

// startPools starts one refill loop per pool whose image is present and
// runtime healthy; a pool that cannot be filled says why in its view.
func (s *Service) startPools(ctx context.Context) {
	for _, pl := range s.poolList {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.poolLoop(ctx, pl)
		}()
	}
}

// claimRefillDelay is how long after a claim the pool starts refilling.
// Creating a member costs the host a burst of CPU (Docker, the runtime,
// the new agent); holding it back this long lets the lease holder's first
// commands, which usually follow the lease at once, run without it.
const claimRefillDelay = 100 * time.Millisecond

// wakeSoon wakes the refill loop after claimRefillDelay; wakes asked for
// while one is pending are merged into it.
func (pl *pool) wakeSoon() {
	if pl.wakePending.CompareAndSwap(false, true) {
		time.AfterFunc(claimRefillDelay, func() {
			pl.wakePending.Store(false)
			pl.wake()
		})
	}
}

func (pl *pool) wake() {
	select {
	case pl.kick <- struct{}{}:
	default:
	}
}

// sharedRefillEvery is how often the leader looks at shared pools: claims
// made through the other instances do not wake its refill loop.
const sharedRefillEvery = time.Second

func (s *Service) poolLoop(ctx context.Context, pl *pool) {
	t := time.NewTicker(s.cfg.Intervals.PoolCheck)
	defer t.Stop()
	var look <-chan time.Time
	if s.sharedPools() {
		lt := time.NewTicker(sharedRefillEvery)
		defer lt.Stop()
		look = lt.C
	}
	for {
		s.refill(ctx, pl)
		select {
		case <-ctx.Done():
			return
		case <-pl.kick:
		case <-look:
		case <-t.C:
			s.checkIdle(ctx, pl)
		}
	}
}

// sharedPools says whether the pools are the cluster's rather than this
// instance's: instances share the store and every one of them reaches
// every sandbox (they run on a cluster, not on the instances' hosts).
// Then a claim through any instance takes any idle member, and only the
// leader makes, checks and retires members, counting them all, so two
// instances never both refill a pool and a pool's size does not grow with
// the number of instances.
func (s *Service) sharedPools() bool { return s.reps != nil && s.remote }

// poolMembers lists the live sandboxes of a pool's profile and runtime: of
// every instance when the pools are shared, else of this instance.
func (s *Service) poolMembers(ctx context.Context, k poolKey) ([]*sandbox.Sandbox, error) {
	if s.sharedPools() {
		return s.membersOf(ctx, k, "")
	}
	return s.membersOf(ctx, k, s.instance)
}

// membersOf lists the live sandboxes of a pool's profile and runtime made
// by instance ("": by any).
func (s *Service) membersOf(ctx context.Context, k poolKey, instance string) ([]*sandbox.Sandbox, error) {
	list, err := s.store.ListSandboxes(ctx, store.SandboxFilter{Instance: instance, Profile: k.profile, States: liveStates})
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(list, func(sb *sandbox.Sandbox) bool { return sb.Runtime != k.runtime || sb.Pool != k.snapshot }), nil
}

// tendsPools says whether this instance makes, checks and retires pool
// members: always, unless the pools are shared and another instance leads.
func (s *Service) tendsPools() bool { return !s.sharedPools() || s.Leader() }

func isIdleMember(sb *sandbox.Sandbox) bool { return sb.Tenant == "" && sb.State == sandbox.StateIdle }

// refill makes members until the pool holds min_idle idle ones, without
// passing max_total or taking host capacity that requests wait for.
func (s *Service) refill(ctx context.Context, pl *pool) {
	for ctx.Err() == nil && !pl.draining.Load() && !s.draining.Load() && s.tendsPools() {
		list, err := s.poolMembers(ctx, pl.key)
		if err != nil {
			s.log.Warn("pool refill: listing members", "pool", pl.key.name(), "err", err)
			return
		}
		idle := 0
		for _, sb := range list {
			if isIdleMember(sb) {
				idle++
			}
		}
		creating := int(pl.creating.Load())
		// Host capacity is checked per member: a member takes only free
		// capacity that no waiting request could have had.
		n := min(pl.spec.MinIdle-idle-creating, pl.spec.MaxTotal-len(list)-creating)
		if n <= 0 {
			pl.mu.Lock()
			pl.runStart = time.Time{}
			pl.mu.Unlock()
			return
		}
		pl.mu.Lock()
		if pl.runStart.IsZero() {
			pl.runStart, pl.runMade = time.Now(), 0
		}
		pl.mu.Unlock()
		var wg sync.WaitGroup
		var failed atomic.Bool
		for range n {
			pl.creating.Add(1)
			wg.Go(func() {
				defer pl.creating.Add(-1)
				if err := s.makeMember(ctx, pl); err != nil {
					failed.Store(true)
				}
			})
		}
		wg.Wait()
		if failed.Load() {
			return // try again at the next kick or tick, not in a tight loop
		}
	}
}

// errPoolDrained refuses a member create of a drained pool.
var errPoolDrained = fmt.Errorf("the pool is drained: %w", errdefs.ErrUnavailable)

// makeMember cold-creates one idle, tenant-less member of pl (from its
// snapshot when it is fed from one). The caller
// has raised pl.creating; the draining check comes after that, so a drain
// that has waited for pl.creating to read zero sees no member appear.
func (s *Service) makeMember(ctx context.Context, pl *pool) error {
	if pl.draining.Load() {
		return errPoolDrained
	}
	in := CreateSandboxInput{
		Profile: pl.key.profile, Runtime: string(pl.key.runtime),
		// The claim sets the holder's effective risk; the runtime is fixed by
		// the pool and every claim is checked against policy first.
		RiskLevel:  string(sandbox.RiskTrusted),
		poolMember: true,
	}
	var sb *sandbox.Sandbox
	var err error
	if pl.key.snapshot != "" {
		in.poolSnapshot = pl.key.snapshot
		in.From, err = s.memberFrom(ctx, pl.key)
	}
	if err == nil {
		sb, err = s.CreateSandbox(ctx, in)
	}
	s.memberMade(pl, err)
	if err != nil {
		return err
	}
	if pl.draining.Load() || (s.draining.Load() && !s.HandsOver()) {
		// Drained (or the service drains) while it was being made: it must not stay idle, even if
		// nobody waits for it (a DrainPool whose caller went away). Done
		// before pl.creating drops, so a waiting drain finds it gone. A
		// service that hands its sandboxes over (StopTaking) keeps it: an
		// idle member of the shared pool, which the leader adopts.
		s.retireMember(context.WithoutCancel(ctx), sb, "pool drained")
	}
	return nil
}

// memberFrom is the state a member of the snapshot pool k starts from.
func (s *Service) memberFrom(ctx context.Context, k poolKey) (*FromState, error) {
	f := s.poolFeeder()
	if f == nil {
		return nil, errdefs.WithCode("not_supported", errdefs.Mark(fmt.Errorf("pool %s is fed from snapshot %s, but this service keeps no snapshots",
			k.name(), k.snapshot), errdefs.ErrNotImplemented))
	}
	from, err := f.PoolMember(ctx, k.snapshot, k.profile, k.runtime)
	if err != nil {
		return nil, fmt.Errorf("pool %s cannot start a member from snapshot %s: %w", k.name(), k.snapshot, err)
	}
	return from, nil
}

// SnapshotPool names the warm pool fed from snapshot id, or "" when none
// is: such a snapshot must not be deleted.
func (s *Service) SnapshotPool(id string) string {
	for _, pl := range s.poolList {
		if pl.key.snapshot == id {
			return pl.key.name()
		}
	}
	return ""
}

// memberMade records the outcome of a member create in pl's statistics.
func (s *Service) memberMade(pl *pool, err error) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if err != nil {
		// Logged when the reason changes, not at every retry.
		if code := errdefs.Code(err); err.Error() != pl.lastErr && code != "capacity_exhausted" && code != "image_building" {
			s.log.Warn("pool refill: creating a member", "pool", pl.key.name(), "err", err)
		}
		pl.lastErr, pl.lastCode = err.Error(), errdefs.Code(err)
		return
	}
	pl.lastErr, pl.lastCode = "", ""
	pl.made++
	pl.runMade++
	if d := time.Since(pl.runStart).Seconds(); d > 0 {
		pl.rate = float64(pl.runMade) / d
	}
}

// checkIdle pings the agent of every idle member and replaces those that do
// not answer.
func (s *Service) checkIdle(ctx context.Context, pl *pool) {
	if !s.tendsPools() {
		return
	}
	list, err := s.poolMembers(ctx, pl.key)
	if err != nil {
		return
	}
	for _, sb := range list {
		if !isIdleMember(sb) {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := s.agent(sb.ID).Ping(pctx)
		cancel()
		if err == nil {
			continue
		}
		if s.retireMember(ctx, sb, "unhealthy pool member: "+err.Error()) {
			pl.replaced.Add(1)
		}
	}
}

// retireMember destroys an idle member unless a claim took it first.
func (s *Service) retireMember(ctx context.Context, sb *sandbox.Sandbox, reason string) bool {
	cur, err := s.store.UpdateSandbox(ctx, sb.ID, 0, s.now(), func(x *sandbox.Sandbox) error {
		if !isIdleMember(x) {
			return fmt.Errorf("sandbox %s was claimed: %w", x.ID, errdefs.ErrConflict)
		}
		x.State = sandbox.StateDraining
		return nil
	})
	if err != nil {
		return false
	}
	if err := s.destroy(ctx, cur, reason); err != nil {
		s.log.Warn("retiring pool member", "sandbox", sb.ID, "err", err)
	}
	return true
}

// pool returns the pool a lease of profile under rt (from snapshot, if
// set) draws from, or nil.
func (s *Service) pool(profile string, rt sandbox.Runtime, snapshot string) *pool {
	return s.pools[poolKey{profile, rt, snapshot}]
}

// Pools returns every pool with its counts.
func (s *Service) Pools(ctx context.Context) ([]PoolView, error) {
	out := make([]PoolView, 0, len(s.poolList))
	for _, pl := range s.poolList {
		list, err := s.poolMembers(ctx, pl.key)
		if err != nil {
			return nil, err
		}
		v := PoolView{
			Name: pl.key.name(), Profile: pl.key.profile, Runtime: pl.key.runtime, SnapshotID: pl.key.snapshot,
			MinIdle: pl.spec.MinIdle, MaxTotal: pl.spec.MaxTotal, Counts: map[sandbox.State]int{},
			Total: len(list), Starting: pl.creating.Load(), Hits: pl.hits.Load(), Misses: pl.misses.Load(),
			Replaced: pl.replaced.Load(), Recycled: pl.recycled.Load(), ResetFailed: pl.resetFailed.Load(), Draining: pl.draining.Load() || s.draining.Load(),
		}
		for _, sb := range list {
			v.Counts[sb.State]++
		}
		pl.mu.Lock()
		v.Made, v.RefillRate, v.LastError = pl.made, pl.rate, pl.lastErr
		v.State = poolState(v.Draining, pl.lastErr != "" && pl.lastCode != "capacity_exhausted", v.Counts[sandbox.StateIdle], v.MinIdle)
		pl.mu.Unlock()
		out = append(out, v)
	}
	return out, nil
}

// poolState is the state of a pool: draining, failing (its last member
// create failed for a reason other than host capacity), ready (it holds
// minIdle idle members) or filling.
func poolState(draining, failing bool, idle, minIdle int) string {
	switch {
	case draining:
		return PoolDraining
	case failing:
		return PoolFailing
	case idle >= minIdle:
		return PoolReady
	}
	return PoolFilling
}

// DrainPool stops the pools called name (a pool name such as
// "tool-basic-runc", or a profile name for all of its pools) from handing
// out and making members, waits for the member creates in flight and
// destroys every idle member: when it returns, the pools hold no idle
// member and none is being made. Leases already taken are left alone.
func (s *Service) DrainPool(ctx context.Context, name string) ([]PoolView, error) {
	var hit []*pool
	for _, pl := range s.poolList {
		if pl.key.name() == name || pl.key.profile == name {
			hit = append(hit, pl)
		}
	}
	if len(hit) == 0 {
		known := make([]string, len(s.poolList))
		for i, pl := range s.poolList {
			known[i] = pl.key.name()
		}
		msg := fmt.Sprintf("no pool %q; the pools are %s", name, strings.Join(known, ", "))
		if len(known) == 0 {
			msg = fmt.Sprintf("no pool %q; this service has no warm pools", name)
		}
		return nil, errdefs.WithCode("pool_not_found", errdefs.Mark(errors.New(msg), errdefs.ErrNotFound))
	}
	// A member being made may not be idle yet (or not even have its
	// record): wait until the creates in flight are done (no new one starts
	// once draining is set), then destroy every idle member.
	for _, pl := range hit {
		pl.draining.Store(true)
	}
	if err := waitPoolCreates(ctx, hit); err != nil {
		return nil, err
	}
	for _, pl := range hit {
		s.retireIdle(ctx, pl)
	}
	views, err := s.Pools(ctx)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(views, func(v PoolView) bool {
		return !slices.ContainsFunc(hit, func(pl *pool) bool { return pl.key.name() == v.Name })
	}), nil
}

// retireIdle destroys every idle member of pl this instance made (with
// shared pools, the others' stay for the instances that go on).
func (s *Service) retireIdle(ctx context.Context, pl *pool) {
	list, err := s.membersOf(ctx, pl.key, s.instance)
	if err != nil {
		s.log.Warn("draining pool", "pool", pl.key.name(), "err", err)
		return
	}
	var wg sync.WaitGroup
	for _, sb := range list {
		if isIdleMember(sb) {
			wg.Go(func() { s.retireMember(ctx, sb, "pool drained") })
		}
	}
	wg.Wait()
}

var errDraining = errdefs.WithRetryAfter(5*time.Second, errdefs.WithCode("service_draining",
	fmt.Errorf("this service instance is draining and takes no new sandboxes or leases: %w", errdefs.ErrUnavailable)))

// isDraining reports errDraining while the service drains.
func (s *Service) checkDraining() error {
	if s.draining.Load() {
		return errDraining
	}
	return nil
}

// Draining reports whether the service drains.
func (s *Service) Draining() bool { return s.draining.Load() }

// Drain stops this instance from taking new sandboxes and leases, destroys
// the pools' idle members, lets active leases run until they end or
// timeout passes, then destroys every live sandbox of this instance (ending
// the leases still active). It returns when everything is gone or ctx ends.
func (s *Service) Drain(ctx context.Context, timeout time.Duration) error {
	s.draining.Store(true)
	s.log.Info("draining", "timeout", timeout)
	// A member being made may not have its record yet: wait until the
	// refills in flight are done (no new ones start while draining).
	if err := waitPoolCreates(ctx, s.poolList); err != nil {
		return err
	}
	for _, pl := range s.poolList {
		s.retireIdle(ctx, pl)
	}
	deadline := time.Now().Add(timeout)
	for {
		n, err := s.activeLeases(ctx)
		if err != nil {
			s.log.Warn("drain: counting leases", "err", err)
		}
		if n == 0 && err == nil {
			break
		}
		if time.Now().After(deadline) {
			s.log.Warn("drain deadline passed with leases active; destroying them", "leases", n)
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	// The recycles of released leases finish first (a reset would race
	// the destroy below; most of them destroy anyway while draining).
	if err := s.WaitRecycles(ctx); err != nil {
		return err
	}
	live, err := s.store.ListSandboxes(ctx, store.SandboxFilter{Instance: s.instance, States: liveStates})
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	for _, sb := range live {
		wg.Go(func() {
			if err := s.endSandboxLeases(ctx, sb.ID, sandbox.LeaseExpired, "service drained"); err != nil {
				s.log.Warn("drain: ending lease", "sandbox", sb.ID, "err", err)
			}
			err := s.destroy(ctx, sb, EndDrained)
			if err != nil {
				s.log.Warn("drain: destroying", "sandbox", sb.ID, "err", err)
			}
			if sb.Tenant != "" { // pool members belong to nobody
				s.auditSystem(ctx, sb.Tenant, "service_drained", sb.ID, err)
			}
		})
	}
	wg.Wait()
	s.net.Shutdown(ctx)
	s.log.Info("drained", "destroyed", len(live))
	return nil
}

// HandsOver says whether a stopping instance leaves its sandboxes to the
// others instead of destroying them (Drain): instances share the store and
// every one of them reaches every sandbox, so the leader adopts them once
// this process is gone, and a rolling update keeps its users' sandboxes.
func (s *Service) HandsOver() bool { return s.sharedPools() }

// StopTaking makes this instance take no new sandboxes or leases (503
// service_draining, /readyz 503) and waits for the pool members being
// made, so that none is left half made; its sandboxes keep running. Close
// then gives up its store lock, and the leader adopts them.
func (s *Service) StopTaking(ctx context.Context) error {
	s.draining.Store(true)
	s.log.Info("taking no new work; the sandboxes of this instance go to the leader once it stops")
	return waitPoolCreates(ctx, s.poolList)
}

// waitPoolCreates waits until no member of pools is being made. A member's
// count is raised before its create checks for draining (the service's or
// its pool's), so once draining is set and the counts read zero no member
// can appear any more.
func waitPoolCreates(ctx context.Context, pools []*pool) error {
	for {
		n := int64(0)
		for _, pl := range pools {
			n += pl.creating.Load()
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// activeLeases counts the active leases on this instance's running
// sandboxes (a lease of a failed or ending sandbox has nothing to wait for).
func (s *Service) activeLeases(ctx context.Context) (int, error) {
	leases, err := s.store.ListLeases(ctx, store.LeaseFilter{States: []sandbox.LeaseState{sandbox.LeaseActive}})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, l := range leases {
		sb, err := s.store.GetSandbox(ctx, "", l.SandboxID)
		if err == nil && sb.Instance == s.instance && sb.State.Running() {
			n++
		} else if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return 0, err
		}
	}
	return n, nil
}
