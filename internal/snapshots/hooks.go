package snapshots

import (
	"context"
	"errors"
	"strings"
	"time"

	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// The manager's control hooks: Wake (control.Waker), SandboxEnding (the
// service's own snapshots of an ended sandbox go, and a snapshot image its
// container ran from when nothing else runs from it), Recover (what a
// process that stopped mid-operation left: half-made snapshots removed,
// half-suspended sandboxes finished or undone) and Sweep (retention).

// SandboxEnding removes the service's own snapshots of a sandbox that
// ended, and the snapshot image it ran from when no other container
// uses it.
func (m *Manager) SandboxEnding(ctx context.Context, sandboxID, reason string) {
	if reason == "lease released" || strings.HasPrefix(reason, "lease ") {
		// A lease's end comes before the destroy (or a reset): the
		// sandbox may still wake; its destroy tells again.
		sb, err := m.cfg.Lifecycle.GetSandbox(ctx, "", sandboxID)
		if err == nil && !sb.State.Final() && sb.State != sandbox.StateFailed && sb.State != sandbox.StateDraining {
			return
		}
	}
	list, err := m.cfg.Store.ListSnapshots(ctx, store.SnapshotFilter{SandboxID: sandboxID, Internal: true})
	if err != nil {
		m.log.Warn("listing the snapshots of an ended sandbox", "sandbox", sandboxID, "err", err)
		return
	}
	for _, sn := range list {
		if sn.Internal && sn.State != sandbox.SnapshotCreating {
			if err := m.delete(ctx, sn); err != nil {
				m.log.Warn("removing the service's snapshot of an ended sandbox", "snapshot", sn.ID, "err", err)
			}
		}
	}
	if sb, err := m.cfg.Lifecycle.GetSandbox(ctx, "", sandboxID); err == nil && strings.HasPrefix(sb.Image, "genesis-snapshot/") {
		if rs, ok := m.cfg.Driver.(driver.RootfsSaver); ok {
			_ = rs.RemoveImage(ctx, sb.Image) // refused while another container runs from it
		}
	}
}

// Recover finishes what a stopped process left: drafts and snapshots it
// was writing are removed (their records failed), and every sandbox caught
// in the middle of an operation is brought to a state that holds.
func (m *Manager) Recover(ctx context.Context) error {
	for _, id := range m.disk.Drafts() {
		if err := m.disk.Remove(id); err != nil {
			m.log.Warn("removing a snapshot draft", "snapshot", id, "err", err)
		}
	}
	creating, err := m.cfg.Store.ListSnapshots(ctx, store.SnapshotFilter{Internal: true, States: []sandbox.SnapshotState{sandbox.SnapshotCreating, sandbox.SnapshotDeleting}})
	if err != nil {
		return err
	}
	for _, sn := range creating {
		if sn.State == sandbox.SnapshotDeleting {
			_ = m.delete(ctx, sn)
			continue
		}
		m.failSnapshot(ctx, sn, errors.New("the service stopped while the snapshot was taken"))
	}
	list, err := m.cfg.Lifecycle.ListSandboxes(ctx, store.SandboxFilter{States: []sandbox.State{sandbox.StatePaused, sandbox.StateHibernated}})
	if err != nil {
		return err
	}
	for _, sb := range list {
		if sb.Suspension != nil && sb.Suspension.Operation != "" {
			m.recoverOne(ctx, sb)
		}
	}
	return nil
}

// recoverOne settles a sandbox a stopped process left mid-operation.
func (m *Manager) recoverOne(ctx context.Context, sb *sandbox.Sandbox) {
	op := sb.Suspension.Operation
	log := m.log.With("sandbox", sb.ID, "operation", op)
	running, frozen := m.containerState(ctx, sb)
	switch {
	case op == "hibernating" && m.snapshotReady(ctx, sb.Suspension.SnapshotID, sb.ID):
		// The state was saved: the hibernation stands.
		if running {
			if err := m.cfg.Lifecycle.RemoveContainer(ctx, sb.ID); err != nil {
				log.Warn("removing the container of an interrupted hibernation", "err", err)
			}
		}
		m.setSuspended(ctx, sb.ID, sandbox.StateHibernated, m.latestInternal(ctx, sb.ID))
	case op == "waking":
		if running {
			if err := m.cfg.Lifecycle.RemoveContainer(ctx, sb.ID); err != nil {
				log.Warn("removing the container of an interrupted wake", "err", err)
			}
		}
		m.setSuspended(ctx, sb.ID, sandbox.StateHibernated, "") // woken at the next call
	case running:
		// Pausing, resuming, a snapshot, or a hibernation that did not get
		// to save: the container is there; it runs again (an agent that was
		// readied for a save listens again within its deadline).
		if p, ok := m.cfg.Driver.(driver.Pauser); ok && frozen && op != "pausing" {
			_ = p.Unpause(ctx, sb.ContainerID)
		}
		// An agent readied for a save that never came listens again now,
		// not at its deadline; the sandbox is ready once it serves.
		_ = m.cfg.Lifecycle.ResumeAgent(sb.ID)
		m.awaitAgent(ctx, sb.ID)
		if op == "pausing" && frozen {
			m.setSuspended(ctx, sb.ID, sandbox.StatePaused, "")
			return
		}
		m.endSuspend(ctx, sb.ID)
	default:
		// No container and no saved state (a rollback or a hibernation cut
		// short after its container went): the workspace is all there is.
		log.Warn("the operation was cut short without a container; starting the sandbox again from its files")
		if err := m.cfg.Lifecycle.NewContainer(ctx, sb.ID, m.freshOptions()); err != nil {
			log.Error("the sandbox could not start again; it ends", "err", err)
			_ = m.cfg.Lifecycle.DeleteSandbox(ctx, "", sb.ID)
			return
		}
		m.endSuspend(ctx, sb.ID)
	}
}

// freshOptions start a container on the sandbox's own image and files.
func (m *Manager) freshOptions() control.ContainerOptions { return control.ContainerOptions{} }

func (m *Manager) setSuspended(ctx context.Context, id string, to sandbox.State, snapID string) {
	if _, err := m.cfg.Lifecycle.SetSuspended(ctx, id, to, func(s *sandbox.Suspension) {
		if snapID != "" {
			s.SnapshotID = snapID
		}
	}); err != nil {
		m.log.Warn("recording a recovered operation", "sandbox", id, "err", err)
	}
}

func (m *Manager) endSuspend(ctx context.Context, id string) {
	if _, err := m.cfg.Lifecycle.EndSuspend(ctx, id); err != nil {
		m.log.Warn("recording a recovered operation", "sandbox", id, "err", err)
	}
}

// containerState says whether a sandbox's container exists and runs, and
// whether it is frozen.
func (m *Manager) containerState(ctx context.Context, sb *sandbox.Sandbox) (running, frozen bool) {
	if sb.ContainerID == "" {
		return false, false
	}
	st, err := m.cfg.Driver.Inspect(ctx, sb.ContainerID)
	if err != nil {
		return false, false
	}
	return st.Running, st.State == "paused"
}

// snapshotReady says whether the service's snapshot id (or, when empty,
// its latest one of the sandbox) is ready.
func (m *Manager) snapshotReady(ctx context.Context, id, sandboxID string) bool {
	if id == "" {
		id = m.latestInternal(ctx, sandboxID)
	}
	if id == "" {
		return false
	}
	sn, err := m.cfg.Store.GetSnapshot(ctx, "", id)
	return err == nil && sn.State == sandbox.SnapshotReady
}

// latestInternal is the newest ready internal snapshot of a sandbox.
func (m *Manager) latestInternal(ctx context.Context, sandboxID string) string {
	list, err := m.cfg.Store.ListSnapshots(ctx, store.SnapshotFilter{SandboxID: sandboxID, Internal: true,
		States: []sandbox.SnapshotState{sandbox.SnapshotReady}, Limit: 1})
	if err != nil || len(list) == 0 || !list[0].Internal {
		return ""
	}
	return list[0].ID
}

// Sweep deletes the snapshots whose retention ended, and hibernates the
// leased sandboxes idle for longer than their profile's
// lease.hibernate_idle.
func (m *Manager) Sweep(ctx context.Context, now time.Time, _ bool) {
	if n := m.expired(ctx, now); n > 0 {
		m.log.Info("removed expired snapshots", "count", n)
	}
	idle, err := m.cfg.Lifecycle.ListSandboxes(ctx, store.SandboxFilter{States: []sandbox.State{sandbox.StateLeased}})
	if err != nil {
		m.log.Warn("listing leased sandboxes", "err", err)
		return
	}
	for _, sb := range idle {
		p, ok := m.cfg.Lifecycle.ProfileConfig(sb.Profile)
		if !ok || p.Lease.HibernateIdle <= 0 || now.Sub(sb.UpdatedAt) < p.Lease.HibernateIdle || sb.Reserved != "" {
			continue
		}
		m.mu.Lock()
		busy := m.idling[sb.ID]
		m.idling[sb.ID] = true
		m.mu.Unlock()
		if busy {
			continue
		}
		m.wg.Go(func() {
			defer func() {
				m.mu.Lock()
				delete(m.idling, sb.ID)
				m.mu.Unlock()
			}()
			if _, err := m.Hibernate(context.WithValue(context.WithoutCancel(ctx), byService{}, true), sb.Tenant, sb.ID); err != nil {
				m.log.Info("an idle sandbox was not hibernated", "sandbox", sb.ID, "err", err)
				return
			}
			m.log.Info("hibernated an idle sandbox", "sandbox", sb.ID, "idle", now.Sub(sb.UpdatedAt).Round(time.Second))
		})
	}
}
