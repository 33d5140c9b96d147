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

// probeLeftoverGrace is the least age at which the reconciler removes a
// capability-probe container: longer than a probe's smoke run may take (the
// docker driver bounds it at 20 s; a probe removes its own container), so no
// service instance's probe in flight loses its container.
const probeLeftoverGrace = time.Minute

// ReconcileReport counts what one reconciliation pass changed.
type ReconcileReport struct {
	OrphansRemoved int
	MarkedFailed   int
	Expired        int
	DirsRemoved    int
	// NetworksRemoved counts sandbox networks left behind by gone sandboxes.
	NetworksRemoved int
	LeasesExpired   int
}

// Reconcile brings records and the runtime into agreement:
//   - containers labelled as ours (managed, and of this instance when they
//     name one) with no live record are removed once older than the orphan
//     grace (and probe leftovers likewise); other instances' are left alone;
//   - live records whose container is gone or stopped (by an inspection
//     made after the records were read) are marked failed;
//   - at startup, records stuck in created/starting and jobs still running
//     from the previous process are finished (failed / lost), and pool
//     members it left between start (or reset) and idle are destroyed;
//   - sandboxes past their TTL are destroyed;
//   - sandbox directories with no live record are removed.
func (s *Service) Reconcile(ctx context.Context, startup bool) error {
	var rep ReconcileReport
	now := s.now()
	rep.LeasesExpired = s.reapLeases(ctx, now)
	if _, err := s.store.DropLeaseHolds(ctx, "", now); err != nil {
		s.log.Warn("dropping expired lease holds", "err", err)
	}
	containers, err := s.driver.List(ctx)
	if err != nil {
		return fmt.Errorf("listing containers: %w", err)
	}
	mark := s.capacity.Mark()
	records, err := s.store.ListSandboxes(ctx, store.SandboxFilter{States: liveStates})
	if err != nil {
		return err
	}
	live := map[string]*sandbox.Sandbox{}
	mine := records[:0]
	for _, r := range records {
		live[r.ID] = r
		// Another instance sharing the store owns its records: only it can
		// see their containers and reach their agents.
		if r.Instance == "" || r.Instance == s.instance {
			mine = append(mine, r)
		}
	}
	for _, id := range s.capacity.Sweep(func(id string) bool { return live[id] != nil }, mark) {
		s.log.Warn("released host capacity of a sandbox that is no longer live", "sandbox", id)
	}
	records = mine
	byContainer := map[string]driver.Status{}
	for _, c := range containers {
		if c.Labels[driver.LabelPurpose] == driver.PurposeEgressGateway {
			continue // the gateway's own loop owns it
		}
		probe := c.Labels[driver.LabelPurpose] == "probe"
		if !s.ownsInstance(c.Labels[driver.LabelInstance]) && !probe {
			// Another service instance's sandbox, or a container some other
			// tool labelled without an instance: not ours to judge.
			continue
		}
		id := c.Labels[driver.LabelSandbox]
		byContainer[id] = c
		if _, ok := live[id]; ok && c.Labels[driver.LabelPurpose] != "probe" {
			continue
		}
		// No live record: an orphan (or a probe leftover), removed after grace.
		grace := s.cfg.Intervals.OrphanGrace
		if c.Labels[driver.LabelPurpose] == "probe" {
			// Probe containers carry no instance: one may be another
			// service's probe still running; only a long-dead one is a leftover.
			grace = max(grace, probeLeftoverGrace)
		}
		if now.Sub(c.CreatedAt) < grace {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, s.cfg.Intervals.DockerCallTimeout)
		err := s.driver.Remove(cctx, c.ID)
		cancel()
		if err != nil {
			s.log.Warn("removing orphan container", "container", c.Name, "err", err)
			continue
		}
		rep.OrphansRemoved++
		s.log.Info("removed orphan container", "container", c.Name, "sandbox", id)
	}

	for _, r := range records {
		c, hasContainer := byContainer[r.ID]
		if failed, destroyed, handled := s.finishUnfinished(ctx, r, startup, now); handled {
			rep.MarkedFailed += failed
			rep.Expired += destroyed
			continue
		}
		switch {
		case r.Suspension != nil && r.Suspension.Operation != "":
			// Its container comes and goes with the operation: the Recover
			// hook of the package that suspends sandboxes finishes it.
		case r.State == sandbox.StateHibernated:
			// No container by design; its TTL still ends it.
			if r.Expired(now) {
				if err := s.destroy(ctx, r, "ttl expired"); err == nil {
					rep.Expired++
				}
			}
		case !hasContainer || !c.Running:
			why, stopped := s.containerStopped(ctx, r)
			if !stopped {
				continue
			}
			s.markFailed(ctx, r, why)
			rep.MarkedFailed++
		case r.Expired(now) && s.keepExpired(ctx, r, nil, now):
			// A hook keeps it (E2B's auto-pause).
		case r.Expired(now):
			err := s.destroy(ctx, r, EndTTLExpired)
			s.auditSystem(ctx, r.Tenant, "ttl_expired", r.ID, err)
			if err != nil {
				s.log.Warn("destroying expired sandbox", "sandbox", r.ID, "err", err)
			} else {
				rep.Expired++
			}
		}
	}

	if startup {
		s.recoverHooks(ctx) // jobs left running are followed again or lost
	}

	rep.NetworksRemoved = s.reconcileNetworks(ctx, live)
	rep.DirsRemoved = s.removeStaleDirs(ctx)
	s.sweepHooks(ctx, now, startup)
	if rep != (ReconcileReport{}) {
		s.log.Info("reconciled", "orphans_removed", rep.OrphansRemoved, "marked_failed", rep.MarkedFailed,
			"expired", rep.Expired, "dirs_removed", rep.DirsRemoved, "networks_removed", rep.NetworksRemoved, "leases_expired", rep.LeasesExpired)
	}
	return nil
}

// finishUnfinished ends what a process that is gone left half done with
// r: a create (created, starting), a destroy (draining), a pool member
// between its start and idle, a sandbox reserved to one of its workloads. gone says that process is gone (this
// process's start-up, or an adopted instance); otherwise only a create
// stuck past every deadline is ended. handled says r was one of these.
func (s *Service) finishUnfinished(ctx context.Context, r *sandbox.Sandbox, gone bool, now time.Time) (failed, destroyed int, handled bool) {
	switch {
	case r.State == sandbox.StateCreated || r.State == sandbox.StateStarting:
		if gone || s.stuck(r, now) {
			s.markFailed(ctx, r, "service stopped while the sandbox was starting")
			failed++
		}
		return failed, 0, true
	case r.State == sandbox.StateDraining:
		// A destroy that did not finish (its process died, or its last
		// write failed) is done again, once no reset (which drains too)
		// can still be running.
		if gone || (s.stuck(r, now) && now.Sub(r.UpdatedAt) > resetTimeout+time.Minute) {
			if err := s.destroy(ctx, r, r.FailureReason); err == nil {
				destroyed++
			} else {
				s.log.Warn("finishing the destroy of a draining sandbox", "sandbox", r.ID, "err", err)
			}
		}
		return 0, destroyed, true
	case gone && r.Reserved != "":
		// Reserved to a workload of the process that is gone (an MCP
		// server's instance lives in that process's memory): nothing
		// serves it any more, and what runs in it holds operator
		// secrets, so it ends now rather than at its lease's expiry.
		err := s.destroy(ctx, r, "reserved to "+r.Reserved+" of a service process that is gone")
		s.auditSystem(ctx, r.Tenant, "reserved_orphan", r.ID, err)
		if err == nil {
			destroyed++
		} else {
			s.log.Warn("destroying a reserved sandbox left by a previous process", "sandbox", r.ID, "err", err)
		}
		return 0, destroyed, true
	case gone && r.Tenant == "" && r.State == sandbox.StateReady:
		// A pool member between its start (or its reset) and idle: the
		// process stopped while its services started. Nobody can lease it
		// and it counts against the pool's size, so it goes; the pool
		// makes another.
		if err := s.destroy(ctx, r, "pool member left unfinished by the previous process"); err == nil {
			destroyed++
		}
		return 0, destroyed, true
	}
	return 0, 0, false
}

// stuck says r has not changed for longer than any step of a create or a
// destroy may take.
func (s *Service) stuck(r *sandbox.Sandbox, now time.Time) bool {
	return now.Sub(r.UpdatedAt) > s.createBound()
}

// containerStopped tells whether the container of r, a live record that
// the pass's container listing shows gone or not running, is so now, and
// why. The listing is made before the records are read (so that no
// container is taken for an orphan before its record could be seen), so
// it is older than r: a sandbox created or started in between is ready in
// r while the listing has its container missing or not yet started. Only
// an inspection made after r was read decides; it also gives the exit code
// and OOM flag, which a listing does not carry.
func (s *Service) containerStopped(ctx context.Context, r *sandbox.Sandbox) (string, bool) {
	id := r.ContainerID
	if id == "" {
		id = "genesis-" + r.ID
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.Intervals.DockerCallTimeout)
	defer cancel()
	st, err := s.driver.Inspect(cctx, id)
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		return "container is gone", true
	case err != nil:
		s.log.Warn("inspecting the container of a live sandbox", "sandbox", r.ID, "err", err)
		return "", false
	case notEnded(st):
		return "", false
	}
	return fmt.Sprintf("container stopped (exit code %d, oom_killed=%v)", st.ExitCode, st.OOMKilled), true
}

// removeStaleDirs deletes sandbox directories whose record is not live.
func (s *Service) removeStaleDirs(ctx context.Context) int {
	h, ok := s.boxes.(driver.HostDirs)
	if !ok {
		return 0
	}
	return h.Sweep(func(id string, age time.Duration) bool {
		sb, err := s.store.GetSandbox(ctx, "", id)
		// A draining sandbox's directories go with its teardown; until then
		// its agent may still work in them (a reset, on_release: reset).
		if err == nil && (sb.State.Running() || sb.State.Suspended() || sb.State == sandbox.StateCreated || sb.State == sandbox.StateStarting ||
			sb.State == sandbox.StateDraining) {
			return true
		}
		if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return true
		}
		// A create may be in flight before its record is visible.
		return err != nil && age < s.cfg.Intervals.OrphanGrace
	})
}
