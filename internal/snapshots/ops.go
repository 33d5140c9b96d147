package snapshots

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/trace"
)

// take writes the state of sandbox sb, already paused for operation op
// (BeginSuspend), into a new snapshot record and its files: its workspace
// (unless workspace is false: a hibernation keeps its workspace in place),
// its root filesystem's changes and, when memory, its processes and memory.
// With stop (a hibernation) the container stops with the save; otherwise it
// is left as it was. On success the record is ready; on failure it is
// failed, its files gone, and the sandbox as the caller must undo.
//
// The capture returns seal, which the caller runs once the sandbox is back
// as it was (thawed): the checksums of the files and the record made ready,
// so that the sandbox stays frozen no longer than the capture needs. A
// failed seal leaves the record failed and its files gone, like a failed
// capture.
func (m *Manager) take(ctx context.Context, sb *sandbox.Sandbox, sn *sandbox.Snapshot, workspace, stop, frozen bool) (prepared bool, seal func() error, err error) {
	dr, err := m.disk.Begin(sn.ID)
	if err != nil {
		return false, nil, err
	}
	// fail answers the error the caller gets: a full disk is said as
	// such (its causes name host paths; they go to the log).
	fail := func(err error) error {
		if m.disk.Full() {
			m.log.Warn("a snapshot did not fit on the snapshots' disk", "snapshot", sn.ID, "sandbox", sb.ID, "err", err)
			err = errStorageFull()
		}
		dr.Discard()
		m.failSnapshot(ctx, sn, err)
		return err
	}
	defer func() {
		if err != nil {
			err = fail(err)
		}
	}()
	pauser, _ := m.cfg.Driver.(driver.Pauser)
	rs, _ := m.cfg.Driver.(driver.RootfsSaver)
	runsc := sb.Runtime == sandbox.RuntimeRunsc
	lim, err := m.sizeLimits(ctx, sb, sn)
	if err != nil {
		return false, nil, err
	}
	var files int64 // the workspace's tar and the root filesystem's changes, so far
	steps := stepTimer{log: m.log, what: "snapshot " + sn.ID, start: time.Now()}
	steps.last = steps.start
	if sn.Memory {
		if frozen && pauser != nil {
			// A paused sandbox's agent answers nothing: thaw it to ready it.
			if err = pauser.Unpause(ctx, sb.ContainerID); err != nil {
				return false, nil, err
			}
		}
		if err = m.quiesce(ctx, sb); err != nil {
			return false, nil, err
		}
		prepared = true
		steps.mark("agent closed")
	}
	// Frozen from here on: the workspace, the root filesystem and the
	// memory are taken at one instant.
	if pauser != nil {
		if err = pauser.Pause(ctx, sb.ContainerID); err != nil {
			return prepared, nil, err
		}
		steps.mark("frozen")
	}
	if workspace {
		if files, err = m.writeWorkspace(ctx, sb.ID, dr, TreeLimits{MaxContent: sb.Resources.DiskMB << 20, MaxBytes: lim.files}); err != nil {
			return prepared, nil, lim.explain(err)
		}
		steps.mark("workspace")
	}
	var imageBytes int64 // a runc snapshot's image: not in the draft
	switch {
	case runsc && rs != nil:
		p := filepath.Join(dr.Dir(), "rootfs.tar")
		if err = rs.SaveRootfsUpper(ctx, sb.ContainerID, p); err != nil {
			return prepared, nil, err
		}
		if fi, serr := os.Stat(p); serr == nil {
			files += fi.Size()
		}
		if err = lim.check(files); err != nil {
			return prepared, nil, err
		}
		dr.Manifest().RootfsTar = "rootfs.tar"
		steps.mark("rootfs tar")
	case rs != nil:
		ref := imageRef(sn.ID)
		if imageBytes, err = rs.CommitRootfs(ctx, sb.ContainerID, ref, map[string]string{driver.LabelManaged: "true", driver.LabelPurpose: "snapshot",
			driver.LabelSandbox: sb.ID, driver.LabelSnapshot: sn.ID}); err != nil {
			return prepared, nil, err
		}
		if err = lim.check(files + imageBytes); err != nil {
			if rerr := rs.RemoveImage(detach(ctx), ref); rerr != nil {
				m.log.Warn("removing the image of a snapshot over its limit", "snapshot", sn.ID, "image", ref, "err", rerr)
			}
			return prepared, nil, err
		}
		dr.Manifest().RootfsImage = ref
		steps.mark("rootfs commit")
	}
	if sn.Memory {
		cp, ok := m.cfg.Driver.(driver.Checkpointer)
		if !ok {
			return prepared, nil, memoryUnavailable(sb, driver.Feature{Reason: "the driver saves no memory"})
		}
		dir := filepath.Join(dr.Dir(), "memory")
		if err = os.Mkdir(dir, 0o700); err != nil {
			return prepared, nil, fmt.Errorf("snapshots: %v: %w", err, errdefs.ErrUnavailable)
		}
		if err = cp.Checkpoint(ctx, sb.ContainerID, driver.CheckpointOptions{ImagePath: dir, LeaveRunning: !stop}); err != nil {
			return prepared, nil, err
		}
		if stop && pauser != nil {
			// Its processes are gone with the save, but the daemon still
			// sees the container paused, and kills a paused runsc
			// container only after a 10 s timeout: thawing it lets it end.
			if uerr := pauser.Unpause(ctx, sb.ContainerID); uerr != nil {
				m.log.Debug("thawing a saved container", "sandbox", sb.ID, "err", uerr)
			}
		}
		dr.Manifest().Memory = "memory"
		steps.mark("memory")
	}
	steps.done()
	seal = func() (err error) {
		defer func() {
			if err != nil {
				err = fail(err)
			}
		}()
		t0 := time.Now()
		size, err := dr.Commit()
		if err != nil {
			return err
		}
		size += imageBytes
		if lim.total > 0 && size > lim.total {
			return lim.explain(errOverMax)
		}
		m.log.Debug("sealed snapshot "+sn.ID, "checksums", time.Since(t0).Round(time.Millisecond))
		now := m.cfg.Now()
		_, err = m.cfg.Store.UpdateSnapshot(detach(ctx), sn.ID, now, func(x *sandbox.Snapshot) error {
			x.State, x.SizeBytes = sandbox.SnapshotReady, size
			if m.cfg.Retention > 0 && !x.Internal {
				exp := now.Add(m.cfg.Retention)
				x.ExpiresAt = &exp
			}
			return nil
		})
		if err == nil {
			sn.State, sn.SizeBytes = sandbox.SnapshotReady, size
		}
		return err
	}
	return prepared, seal, nil
}

// failSnapshot records why a snapshot failed and removes its files.
func (m *Manager) failSnapshot(ctx context.Context, sn *sandbox.Snapshot, cause error) {
	m.removeFiles(ctx, sn)
	if _, err := m.cfg.Store.UpdateSnapshot(detach(ctx), sn.ID, m.cfg.Now(), func(x *sandbox.Snapshot) error {
		x.State, x.Error, x.SizeBytes = sandbox.SnapshotFailed, cause.Error(), 0
		return nil
	}); err != nil {
		m.log.Warn("recording a failed snapshot", "snapshot", sn.ID, "err", err)
	}
}

// newRecord inserts the record of a snapshot of sb about to be taken.
func (m *Manager) newRecord(ctx context.Context, sb *sandbox.Sandbox, name string, memory, internal bool) (*sandbox.Snapshot, error) {
	now := m.cfg.Now()
	sn := &sandbox.Snapshot{ID: sandbox.NewID("snap"), Tenant: sb.Tenant, Name: name, SandboxID: sb.ID, Parent: sb.Metadata[ParentKey],
		State: sandbox.SnapshotCreating, Profile: sb.Profile, Runtime: sb.Runtime, Image: sb.Image, RiskLevel: sb.RiskLevel,
		Resources: sb.Resources, Memory: memory, Internal: internal, CreatedAt: now, UpdatedAt: now}
	if m.cfg.Sessions != nil {
		list, err := m.cfg.Sessions.ListSandboxSessions(ctx, sb.ID)
		if err != nil {
			return nil, err
		}
		for _, se := range list {
			if se.State == sandbox.SessionActive {
				sn.Sessions = append(sn.Sessions, *se)
			}
		}
	}
	if err := m.cfg.Store.CreateSnapshot(ctx, sn); err != nil {
		return nil, err
	}
	return sn, nil
}

// copySessions gives a sandbox made from sn copies of sn's sessions.
func (m *Manager) copySessions(ctx context.Context, sn *sandbox.Snapshot, sb *sandbox.Sandbox, memory bool) map[string]string {
	if m.cfg.Sessions == nil || len(sn.Sessions) == 0 {
		return nil
	}
	ids, err := m.cfg.Sessions.CopySessions(ctx, sb.Tenant, sb.ID, sn.Sessions, memory)
	if err != nil {
		m.log.Warn("copying the sessions of a snapshot", "snapshot", sn.ID, "sandbox", sb.ID, "err", err)
	}
	return ids
}

// ParentKey is the metadata key of a sandbox made from a snapshot: the
// snapshot's id.
const ParentKey = "genesis.snapshot"

var snapshotName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// checkQuota refuses a snapshot a tenant may not keep.
func (m *Manager) checkQuota(ctx context.Context, tenant string) error {
	if m.cfg.MaxPerTenant <= 0 && m.cfg.MaxBytesPerTenant <= 0 {
		return nil
	}
	n, bytes, err := m.cfg.Store.SnapshotUsage(ctx, tenant)
	if err != nil {
		return err
	}
	if m.cfg.MaxPerTenant > 0 && n >= m.cfg.MaxPerTenant {
		return errdefs.WithCode("quota_exceeded", errdefs.Mark(fmt.Errorf("tenant %s keeps %d snapshots, its limit: delete one first", tenant, n), errdefs.ErrResourceExhausted))
	}
	if m.cfg.MaxBytesPerTenant > 0 && bytes >= m.cfg.MaxBytesPerTenant {
		return errdefs.WithCode("quota_exceeded", errdefs.Mark(fmt.Errorf("tenant %s's snapshots take %d bytes, its limit is %d: delete one first",
			tenant, bytes, m.cfg.MaxBytesPerTenant), errdefs.ErrResourceExhausted))
	}
	return nil
}

// sizeLimits are the most a snapshot may take, in bytes (0: no bound).
type sizeLimits struct {
	// files bounds the workspace's tar and the root filesystem's changes
	// together: MaxBytesPerSnapshot, or less when total is less.
	files int64
	// total bounds the whole snapshot: what is left of its tenant's
	// MaxBytesPerTenant (the service's own snapshots count in none).
	total   int64
	byQuota bool // files is total
	tenant  string
}

// sizeLimits returns the limits of snapshot sn of sb.
func (m *Manager) sizeLimits(ctx context.Context, sb *sandbox.Sandbox, sn *sandbox.Snapshot) (sizeLimits, error) {
	lim := sizeLimits{files: m.cfg.MaxBytesPerSnapshot, tenant: sb.Tenant}
	if m.cfg.MaxBytesPerTenant > 0 && !sn.Internal {
		_, used, err := m.cfg.Store.SnapshotUsage(ctx, sb.Tenant)
		if err != nil {
			return lim, err
		}
		lim.total = max(m.cfg.MaxBytesPerTenant-used, 1)
		if lim.files <= 0 || lim.total < lim.files {
			lim.files, lim.byQuota = lim.total, true
		}
	}
	return lim, nil
}

// check refuses files bytes of the workspace and root filesystem.
func (l sizeLimits) check(files int64) error {
	if l.files > 0 && files > l.files {
		return l.explain(errOverMax)
	}
	return nil
}

// explain says which limit a snapshot over one passed (errOverMax, or
// WriteTree's snapshot_too_large past its MaxBytes): 429 quota_exceeded
// for the tenant's, 413 snapshot_too_large for one snapshot's. Other
// errors are returned as they are.
func (l sizeLimits) explain(err error) error {
	if !errors.Is(err, errOverMax) {
		return err
	}
	if l.byQuota {
		return errdefs.WithCode("quota_exceeded", errdefs.Mark(fmt.Errorf("the snapshot would take more than the %d bytes left of tenant %s's snapshot limit: nothing was kept; delete snapshots first",
			l.total, l.tenant), errdefs.ErrResourceExhausted))
	}
	return errTooLarge("the snapshot's files (workspace and root filesystem changes) take more than %d bytes, the limit of one snapshot: nothing was kept", l.files)
}

// SnapshotOptions ask for a snapshot.
type SnapshotOptions struct {
	Name string
	// Memory asks for processes and memory too; nil takes them where the
	// runtime keeps them.
	Memory *bool
}

// Snapshot saves a running or paused sandbox's state as a new snapshot of
// its tenant's. The sandbox is frozen only while its state is written and
// comes back to the state it was in.
func (m *Manager) Snapshot(ctx context.Context, tenant, id string, o SnapshotOptions) (*sandbox.Snapshot, error) {
	if o.Name != "" && !snapshotName.MatchString(o.Name) {
		return nil, errdefs.WithCode("invalid_name", errdefs.Mark(fmt.Errorf("snapshot name %.70q: letters, digits, '.', '_' and '-', at most 63", o.Name), errdefs.ErrInvalidArgument))
	}
	if err := m.checkQuota(ctx, tenant); err != nil {
		return nil, err
	}
	defer m.lock(id)()
	sb, err := m.cfg.Lifecycle.GetSandbox(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if err := m.cfg.Lifecycle.RefuseIfVolumes(ctx, tenant, id); err != nil {
		return nil, err
	}
	memory, err := m.wantMemory(ctx, sb, o.Memory)
	if err != nil {
		return nil, err
	}
	return m.snapshot(ctx, sb, o.Name, memory, false)
}

// wantMemory settles whether a snapshot of sb holds memory.
func (m *Manager) wantMemory(ctx context.Context, sb *sandbox.Sandbox, asked *bool) (bool, error) {
	f := m.features(ctx, sb)
	if !f.FSSnapshot.Supported {
		return false, unsupported("a snapshot", sb, f.FSSnapshot)
	}
	return memoryDecision(sb, f.MemoryCheckpoint, asked)
}

// memoryDecision settles whether a snapshot of sb holds memory, given
// what its runtime can do (mem) and what was asked (nil: where it can).
func memoryDecision(sb *sandbox.Sandbox, mem driver.Feature, asked *bool) (bool, error) {
	can := mem.Supported && sb.Network == nil
	switch {
	case asked == nil:
		return can, nil
	case *asked && !can && mem.Supported:
		// The runtime keeps memory; this sandbox's network is why not.
		return false, errdefs.WithCode("memory_checkpoint_unsupported", errdefs.Mark(fmt.Errorf(
			"sandbox %s has a network (mode %s), so its snapshots keep files only: its connections cannot move to another container; ask with memory: false",
			sb.ID, sb.Network.Mode), errdefs.ErrNotImplemented))
	case *asked && !can:
		return false, memoryUnavailable(sb, mem)
	}
	return *asked, nil
}

// snapshot takes a snapshot of sb (locked by the caller).
func (m *Manager) snapshot(ctx context.Context, sb *sandbox.Sandbox, name string, memory, internal bool) (*sandbox.Snapshot, error) {
	wasPaused := sb.State == sandbox.StatePaused
	sb, err := m.cfg.Lifecycle.BeginSuspend(ctx, sb.Tenant, sb.ID, "snapshotting")
	if err != nil {
		return nil, err
	}
	sn, err := m.newRecord(ctx, sb, name, memory, internal)
	if err != nil {
		m.undo(ctx, sb, false, wasPaused)
		return nil, err
	}
	prepared, seal, err := m.take(detach(ctx), sb, sn, true, false, wasPaused)
	m.undo(ctx, sb, prepared, wasPaused) // back to the state it was in, either way
	if err != nil {
		return nil, err
	}
	if err := seal(); err != nil {
		return nil, err
	}
	if !internal {
		m.record(ctx, sb, "api", trace.KindSnapshotTaken, map[string]any{"snapshot_id": sn.ID, "name": sn.Name, "memory": sn.Memory, "size_bytes": sn.SizeBytes})
	}
	return sn, nil
}

// Hibernate saves a sandbox's state to disk and removes its container, so
// that it holds no memory; Wake (or the next call that needs it) brings it
// back under the same id. Its processes come back where the runtime keeps
// them (runsc), its files always.
func (m *Manager) Hibernate(ctx context.Context, tenant, id string) (*sandbox.Sandbox, error) {
	return m.HibernateWith(ctx, tenant, id, HibernateOptions{})
}

// HibernateOptions ask for a hibernation.
type HibernateOptions struct {
	// Memory false keeps the files only (the sandbox starts afresh on them
	// when woken); true asks for its processes and memory too, refused
	// where the runtime cannot keep them; nil keeps them where it can.
	Memory *bool
}

// HibernateWith is Hibernate as o asks.
func (m *Manager) HibernateWith(ctx context.Context, tenant, id string, o HibernateOptions) (*sandbox.Sandbox, error) {
	defer m.lock(id)()
	sb, err := m.cfg.Lifecycle.GetSandbox(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if sb.State == sandbox.StateHibernated {
		return sb, nil
	}
	if err := m.cfg.Lifecycle.RefuseIfVolumes(ctx, tenant, id); err != nil {
		return nil, err
	}
	if _, ok := m.cfg.Driver.(driver.Pauser); !ok {
		return nil, unsupported("hibernation", sb, driver.Feature{Reason: "the driver cannot freeze a sandbox"})
	}
	memory, err := m.wantMemory(ctx, sb, o.Memory)
	if err != nil {
		return nil, err
	}
	wasPaused := sb.State == sandbox.StatePaused
	if sb, err = m.cfg.Lifecycle.BeginSuspend(ctx, tenant, id, "hibernating"); err != nil {
		return nil, err
	}
	ctx = detach(ctx)
	sn, err := m.newRecord(ctx, sb, "", memory, true)
	if err != nil {
		m.undo(ctx, sb, false, wasPaused)
		return nil, err
	}
	prepared, seal, err := m.take(ctx, sb, sn, false, true, wasPaused)
	if err == nil {
		err = seal()
	}
	if err != nil {
		m.undo(ctx, sb, prepared, wasPaused)
		return nil, err
	}
	t0 := time.Now()
	if err := m.cfg.Lifecycle.RemoveContainer(ctx, id); err != nil {
		// The state is saved; the container could not go. The sandbox is
		// hibernated all the same: its wake removes what is left.
		m.log.Warn("removing a hibernated sandbox's container", "sandbox", id, "err", err)
	}
	t1 := time.Now()
	out, err := m.cfg.Lifecycle.SetSuspended(ctx, id, sandbox.StateHibernated, func(s *sandbox.Suspension) {
		s.SnapshotID, s.Memory = sn.ID, memory
	})
	m.log.Debug("hibernated", "sandbox", id, "remove_container", t1.Sub(t0).Round(time.Millisecond), "record", time.Since(t1).Round(time.Millisecond))
	m.record(ctx, out, actorOf(ctx), trace.KindSandboxHibernated, map[string]any{"memory": memory, "size_bytes": sn.SizeBytes})
	return out, err
}

// Wake brings a hibernated sandbox back under its id: restored from its
// saved state where the runtime keeps memory (its processes continue),
// from its files otherwise (its profile's services start again). Waking a
// running sandbox succeeds.
func (m *Manager) Wake(ctx context.Context, tenant, id string) (*sandbox.Sandbox, error) {
	sb, _, err := m.wake(context.WithValue(ctx, byService{}, true), tenant, id)
	return sb, err
}

// wake is Wake that also says whether processes and memory came back (nil:
// the sandbox was not hibernated).
func (m *Manager) wake(ctx context.Context, tenant, id string) (*sandbox.Sandbox, *bool, error) {
	defer m.lock(id)()
	sb, err := m.cfg.Lifecycle.GetSandbox(ctx, tenant, id)
	if err != nil {
		return nil, nil, err
	}
	if sb.State != sandbox.StateHibernated {
		if sb.State.Running() {
			return sb, nil, nil
		}
		return nil, nil, errdefs.WithCode("not_suspended", errdefs.Mark(fmt.Errorf("sandbox %s is %s, not hibernated", id, sb.State), errdefs.ErrFailedPrecondition))
	}
	if sb, err = m.cfg.Lifecycle.MarkOperation(ctx, tenant, id, "waking"); err != nil {
		return nil, nil, err
	}
	ctx = detach(ctx)
	snapID := sb.Suspension.SnapshotID
	sn, err := m.cfg.Store.GetSnapshot(ctx, "", snapID)
	var memory bool
	if err == nil {
		memory, err = m.restoreInto(ctx, sb, sn, true)
	}
	if err != nil {
		// Left hibernated with the reason: its files are all still there.
		if _, serr := m.cfg.Lifecycle.SetSuspended(ctx, id, sandbox.StateHibernated, nil); serr != nil {
			m.log.Warn("recording a failed wake", "sandbox", id, "err", serr)
		}
		return nil, nil, fmt.Errorf("waking sandbox %s: %w", id, err)
	}
	out, err := m.cfg.Lifecycle.EndSuspend(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	m.dropInternal(ctx, sn)
	m.record(ctx, out, actorOf(ctx), trace.KindSandboxWoken, map[string]any{"memory_restored": memory})
	return out, &memory, nil
}

// restoreInto gives sandbox sb a new container from snapshot sn: restored
// with its memory when sn holds it (falling back to its files if that
// fails), started on its files otherwise. The workspace is the sandbox's
// own (a wake), or filled from sn first (fill: a rollback). It says
// whether memory came back.
func (m *Manager) restoreInto(ctx context.Context, sb *sandbox.Sandbox, sn *sandbox.Snapshot, keepWorkspace bool) (bool, error) {
	man, err := m.disk.Open(sn.ID)
	if err != nil {
		return false, err
	}
	verify := m.disk.Verify
	if sn.Internal {
		verify = m.disk.VerifySizes // the service's own, written moments ago
	}
	if err := verify(man); err != nil {
		return false, err
	}
	if !keepWorkspace {
		dir, err := m.workspaceOf(sb.ID)
		if err != nil {
			return false, err
		}
		if err := emptyDir(dir); err != nil {
			return false, err
		}
		if err := m.fillWorkspace(ctx, man, dir); err != nil {
			return false, err
		}
	}
	o := m.containerOptions(man, true)
	err = m.cfg.Lifecycle.NewContainer(ctx, sb.ID, o)
	if err == nil {
		return o.Restore != nil && o.Restore.ImagePath != "", nil
	}
	if o.Restore == nil || o.Restore.ImagePath == "" {
		return false, err
	}
	// The memory could not come back (a runsc of another version, a
	// damaged image the checksums did not catch): the files can.
	m.log.Warn("restoring memory failed; starting from the files", "sandbox", sb.ID, "snapshot", sn.ID, "err", err)
	if ferr := m.cfg.Lifecycle.NewContainer(ctx, sb.ID, m.containerOptions(man, false)); ferr != nil {
		return false, errors.Join(err, ferr)
	}
	return false, nil
}

// containerOptions is how a container comes up from a snapshot's files.
func (m *Manager) containerOptions(man *Manifest, memory bool) control.ContainerOptions {
	var o control.ContainerOptions
	switch {
	case man.RootfsImage != "":
		o.Image = man.RootfsImage
	case memory && man.Memory != "":
		o.Restore = &driver.RestoreOrder{ImagePath: filepath.Join(m.disk.Path(man.ID), man.Memory)}
	case man.RootfsTar != "":
		o.Restore = &driver.RestoreOrder{RootfsUpperTar: filepath.Join(m.disk.Path(man.ID), man.RootfsTar)}
	}
	return o
}

// dropInternal removes an internal snapshot that served its use; a runc
// one's image stays while a container runs from it (removed with the
// sandbox).
func (m *Manager) dropInternal(ctx context.Context, sn *sandbox.Snapshot) {
	if !sn.Internal {
		return
	}
	if man, err := m.disk.Open(sn.ID); err == nil && man.RootfsImage != "" {
		return // its container's image: dropped with the sandbox (SandboxEnding)
	}
	m.removeFiles(ctx, sn)
	if err := m.cfg.Store.DeleteSnapshot(ctx, sn.ID); err != nil {
		m.log.Warn("deleting a used internal snapshot", "snapshot", sn.ID, "err", err)
	}
}

// emptyDir removes everything inside dir, never following a link.
func emptyDir(dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("snapshots: %v: %w", err, errdefs.ErrUnavailable)
	}
	defer root.Close()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("snapshots: %v: %w", err, errdefs.ErrUnavailable)
	}
	for _, e := range entries {
		if err := root.RemoveAll(e.Name()); err != nil {
			return fmt.Errorf("snapshots: empty the workspace: %v: %w", err, errdefs.ErrUnavailable)
		}
	}
	return nil
}

// Rollback returns a sandbox to snapshot snapID of the same tenant,
// profile and runtime under the same id, endpoints and lease: its
// workspace becomes the snapshot's, and its processes too where the
// snapshot holds them.
func (m *Manager) Rollback(ctx context.Context, tenant, id, snapID string) (*sandbox.Sandbox, bool, error) {
	sn, err := m.Get(ctx, tenant, snapID)
	if err != nil {
		return nil, false, err
	}
	defer m.lock(id)()
	sb, err := m.cfg.Lifecycle.GetSandbox(ctx, tenant, id)
	if err != nil {
		return nil, false, err
	}
	if err := m.cfg.Lifecycle.RefuseIfVolumes(ctx, tenant, id); err != nil {
		return nil, false, err
	}
	if sn.Profile != sb.Profile || sn.Runtime != sb.Runtime {
		return nil, false, errdefs.WithCode("snapshot_mismatch", errdefs.Mark(fmt.Errorf("snapshot %s is of a %s sandbox under %s; sandbox %s is %s under %s",
			sn.ID, sn.Profile, sn.Runtime, id, sb.Profile, sb.Runtime), errdefs.ErrFailedPrecondition))
	}
	man, err := m.disk.Open(sn.ID)
	if err == nil {
		err = m.disk.Verify(man)
	}
	if err != nil {
		return nil, false, err
	}
	if sb, err = m.cfg.Lifecycle.BeginSuspend(ctx, tenant, id, "rolling back"); err != nil {
		return nil, false, err
	}
	ctx = detach(ctx)
	if err := m.cfg.Lifecycle.RemoveContainer(ctx, id); err != nil {
		m.undo(ctx, sb, false, false)
		return nil, false, err
	}
	memory, err := m.restoreInto(ctx, sb, sn, false)
	if err != nil {
		// Its container is gone and its workspace half written: it ends.
		m.log.Error("a rollback failed after the sandbox's container was removed", "sandbox", id, "err", err)
		if derr := m.cfg.Lifecycle.DeleteSandbox(ctx, tenant, id); derr != nil {
			m.log.Warn("ending a sandbox whose rollback failed", "sandbox", id, "err", derr)
		}
		return nil, false, fmt.Errorf("rolling sandbox %s back: %w", id, err)
	}
	out, err := m.cfg.Lifecycle.EndSuspend(ctx, id)
	m.record(ctx, out, "api", trace.KindSandboxRolledBack, map[string]any{"snapshot_id": sn.ID, "memory_restored": memory})
	return out, memory, err
}

// CreateOptions ask for a new sandbox from a snapshot: the control
// create's input (its profile and runtime are the snapshot's).
type CreateOptions = control.CreateSandboxInput

// CreateFrom makes a new sandbox of tenant from snapshot snapID: its
// files, and its processes and memory where the snapshot holds them. It
// says whether memory came back (a failed memory restore falls back to the
// files, never to nothing).
func (m *Manager) CreateFrom(ctx context.Context, snapID string, in CreateOptions) (*Made, error) {
	sn, err := m.Get(ctx, in.Tenant, snapID)
	if err != nil {
		return nil, err
	}
	man, err := m.usable(sn, in.Profile, in.Runtime)
	if err != nil {
		return nil, err
	}
	made := m.made(ctx, sn, man, in)
	return made, made.Err
}

// Made is a sandbox made from a snapshot.
type Made struct {
	Sandbox *sandbox.Sandbox
	// Memory says its processes and memory came back (false: its files).
	Memory bool
	// Sessions maps the snapshot's sessions and code contexts to the new
	// sandbox's copies of them.
	Sessions map[string]string
	Err      error
}

// made makes one sandbox from sn and copies sn's sessions into it.
func (m *Manager) made(ctx context.Context, sn *sandbox.Snapshot, man *Manifest, in CreateOptions) *Made {
	sb, memory, err := m.createFrom(ctx, sn, man, in)
	if err != nil {
		return &Made{Err: err}
	}
	return &Made{Sandbox: sb, Memory: memory, Sessions: m.copySessions(detach(ctx), sn, sb, memory)}
}

// usable checks that sn can start a sandbox (of profile and runtime, if
// set) and returns its verified manifest.
func (m *Manager) usable(sn *sandbox.Snapshot, profile, runtime string) (*Manifest, error) {
	if sn.State != sandbox.SnapshotReady {
		return nil, errdefs.WithCode("snapshot_not_ready", errdefs.Mark(fmt.Errorf("snapshot %s is %s", sn.ID, sn.State), errdefs.ErrFailedPrecondition))
	}
	if profile != "" && profile != sn.Profile {
		return nil, errdefs.WithCode("snapshot_mismatch", errdefs.Mark(fmt.Errorf("snapshot %s is of a %s sandbox; a sandbox from it has that profile too (leave the profile out)",
			sn.ID, sn.Profile), errdefs.ErrInvalidArgument))
	}
	if runtime != "" && runtime != string(sn.Runtime) {
		return nil, errdefs.WithCode("snapshot_mismatch", errdefs.Mark(fmt.Errorf("snapshot %s is of a %s sandbox; a sandbox from it runs under %s too",
			sn.ID, sn.Runtime, sn.Runtime), errdefs.ErrInvalidArgument))
	}
	man, err := m.disk.Open(sn.ID)
	if err != nil {
		return nil, err
	}
	verify := m.disk.Verify
	if sn.Internal || m.pooled(sn.ID) {
		verify = m.disk.VerifySizes
	}
	// The workspace is checked as it is read.
	if err := verify(man, man.Workspace); err != nil {
		return nil, err
	}
	return man, nil
}

// pooled says whether snapshot id feeds a warm pool and was checked in
// full for its first member (PoolMember): a lease from it, warm or cold,
// then checks sizes, so that a warm lease costs no hashing of the memory
// image.
func (m *Manager) pooled(id string) bool {
	if m.cfg.Lifecycle.SnapshotPool(id) == "" {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.checked[id]
}

func (m *Manager) createFrom(ctx context.Context, sn *sandbox.Snapshot, man *Manifest, in CreateOptions) (*sandbox.Sandbox, bool, error) {
	in.Profile, in.Runtime = sn.Profile, string(sn.Runtime)
	if in.RiskLevel == "" {
		in.RiskLevel = string(sn.RiskLevel)
	}
	if in.Resources == (sandbox.Resources{}) {
		in.Resources = sn.Resources
	}
	first := in
	first.From = m.fromState(sn, man, true)
	sb, err := m.cfg.Lifecycle.CreateSandbox(ctx, first)
	if err == nil || first.From.Restore == nil || first.From.Restore.ImagePath == "" || !restoreFailure(err) {
		return sb, err == nil && first.From.Restore != nil && first.From.Restore.ImagePath != "", err
	}
	m.log.Warn("a new sandbox could not restore its snapshot's memory; starting from its files", "snapshot", sn.ID, "err", err)
	second := in
	second.IdempotencyKey = "" // the first attempt's id is taken by its failed record
	second.From = m.fromState(sn, man, false)
	sb, err = m.cfg.Lifecycle.CreateSandbox(ctx, second)
	return sb, false, err
}

// fromState is how a sandbox starts from sn: with its memory, or from its
// files only.
func (m *Manager) fromState(sn *sandbox.Snapshot, man *Manifest, memory bool) *control.FromState {
	o := m.containerOptions(man, memory)
	meta := map[string]string{}
	switch {
	case !sn.Internal:
		meta[ParentKey] = sn.ID
	case sn.Parent != "":
		meta[ParentKey] = sn.Parent
	}
	return &control.FromState{Image: o.Image, Restore: o.Restore, Metadata: meta,
		Fill: func(ctx context.Context, dir string) error { return m.fillWorkspace(ctx, man, dir) }}
}

// LeaseFrom acquires a lease of tenant whose sandbox starts from snapshot
// snapID, with copies of its sessions: an idle member of a warm pool fed
// from the snapshot where there is one, else a sandbox made for it.
func (m *Manager) LeaseFrom(ctx context.Context, snapID string, in control.AcquireLeaseInput) (*control.LeaseOutput, *Made, error) {
	sn, err := m.Get(ctx, in.Tenant, snapID)
	if err != nil {
		return nil, nil, err
	}
	man, err := m.usable(sn, in.Profile, in.Runtime)
	if err != nil {
		return nil, nil, err
	}
	in.Profile, in.Runtime, in.SnapshotID = sn.Profile, string(sn.Runtime), sn.ID
	if in.RiskLevel == "" {
		in.RiskLevel = string(sn.RiskLevel)
	}
	if in.Resources == (sandbox.Resources{}) {
		in.Resources = sn.Resources
	}
	first := in
	first.From = m.fromState(sn, man, true)
	// A pool member was made with the snapshot's memory where it holds
	// some (PoolMember), as first is.
	memory := first.From.Restore != nil && first.From.Restore.ImagePath != ""
	out, err := m.cfg.Lifecycle.AcquireLease(ctx, first)
	if err != nil && memory && restoreFailure(err) {
		m.log.Warn("a lease's sandbox could not restore its snapshot's memory; starting from its files", "snapshot", sn.ID, "err", err)
		second := in
		second.From = m.fromState(sn, man, false)
		out, err = m.cfg.Lifecycle.AcquireLease(ctx, second)
		memory = false
	}
	if err != nil {
		return nil, nil, err
	}
	return out, &Made{Sandbox: out.Sandbox, Memory: memory, Sessions: m.copySessions(detach(ctx), sn, out.Sandbox, memory)}, nil
}

// inUse refuses to delete a snapshot a warm pool is fed from.
func (m *Manager) inUse(sn *sandbox.Snapshot) error {
	pool := m.cfg.Lifecycle.SnapshotPool(sn.ID)
	if pool == "" {
		return nil
	}
	return errdefs.WithCode("snapshot_in_use", errdefs.Mark(fmt.Errorf("snapshot %s feeds warm pool %s: remove the pool's snapshot_id from the configuration and restart the service first",
		sn.ID, pool), errdefs.ErrConflict))
}

// PoolMember returns how a member of the warm pool of profile and runtime
// fed from snapshot id starts: from the snapshot's files, and its memory
// where it holds some. The snapshot may be any tenant's (the operator
// named it in the configuration); a member is nobody's until a lease
// claims it, and only a lease that names the snapshot, so of its tenant,
// does (LeaseFrom). Its files are checked in full for the pool's first
// member and by their sizes after that (they never change); the
// workspace is checked as each member reads it.
func (m *Manager) PoolMember(ctx context.Context, id, profile string, runtime sandbox.Runtime) (*control.FromState, error) {
	sn, err := m.cfg.Store.GetSnapshot(ctx, "", id)
	if err == nil && (sn.Internal || sn.State == sandbox.SnapshotDeleting) {
		err = fmt.Errorf("snapshot %s: %w", id, errdefs.ErrNotFound)
	}
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, errdefs.WithCode("snapshot_not_found", fmt.Errorf("snapshot %s does not exist (deleted?): %w", id, err))
	}
	if err != nil {
		return nil, err
	}
	if sn.Profile != profile || sn.Runtime != runtime {
		return nil, errdefs.WithCode("snapshot_mismatch", errdefs.Mark(fmt.Errorf("snapshot %s is of a %s sandbox under %s; the pool is of %s under %s",
			id, sn.Profile, sn.Runtime, profile, runtime), errdefs.ErrFailedPrecondition))
	}
	if sn.State != sandbox.SnapshotReady {
		return nil, errdefs.WithCode("snapshot_not_ready", errdefs.Mark(fmt.Errorf("snapshot %s is %s", sn.ID, sn.State), errdefs.ErrFailedPrecondition))
	}
	man, err := m.disk.Open(sn.ID)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	checked := m.checked[id]
	m.mu.Unlock()
	verify := m.disk.Verify
	if checked {
		verify = m.disk.VerifySizes
	}
	if err := verify(man, man.Workspace); err != nil {
		m.mu.Lock()
		delete(m.checked, id)
		m.mu.Unlock()
		return nil, err
	}
	m.mu.Lock()
	m.checked[id] = true
	m.mu.Unlock()
	return m.fromState(sn, man, true), nil
}

// restoreFailure says err is the start of a container failing (as a
// restore does), not a refusal of the request.
func restoreFailure(err error) bool {
	return !errors.Is(err, errdefs.ErrInvalidArgument) && !errors.Is(err, errdefs.ErrResourceExhausted) &&
		!errors.Is(err, errdefs.ErrPermissionDenied) && !errors.Is(err, errdefs.ErrNotFound) && !errors.Is(err, errdefs.ErrTooLarge)
}

// Fork makes count new sandboxes with the state of sandbox id: one
// snapshot taken once, restored count times, each copy a sandbox of its
// own (a new id, its own workspace, a new seed in its identity file).
// The copies are made concurrently; each says whether its memory came
// back or why it failed.
func (m *Manager) Fork(ctx context.Context, tenant, id string, count int, in CreateOptions) ([]*Made, error) {
	if count < 1 || count > m.cfg.MaxFork {
		return nil, errdefs.WithCode("invalid_count", errdefs.Mark(fmt.Errorf("count must be between 1 and %d, got %d", m.cfg.MaxFork, count), errdefs.ErrInvalidArgument))
	}
	unlock := m.lock(id)
	sb, err := m.cfg.Lifecycle.GetSandbox(ctx, tenant, id)
	if err != nil {
		unlock()
		return nil, err
	}
	if err := m.cfg.Lifecycle.RefuseIfVolumes(ctx, tenant, id); err != nil {
		unlock()
		return nil, err
	}
	memory, err := m.wantMemory(ctx, sb, nil)
	if err != nil {
		unlock()
		return nil, err
	}
	sn, err := m.snapshot(ctx, sb, "", memory, true)
	unlock()
	if err != nil {
		return nil, err
	}
	man, err := m.usable(sn, "", "")
	if err != nil {
		m.dropInternal(detach(ctx), sn)
		return nil, err
	}
	if sb.Metadata[ParentKey] != "" {
		sn.Parent = sb.Metadata[ParentKey]
	}
	ctx = detach(ctx)
	out := make([]*Made, count)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i := range out {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			copyIn := in
			copyIn.Tenant = tenant
			copyIn.IdempotencyKey = ""
			if copyIn.Metadata == nil {
				copyIn.Metadata = map[string]string{}
			} else {
				copyIn.Metadata = cloneMap(copyIn.Metadata)
			}
			copyIn.Metadata["genesis.fork_of"] = id
			out[i] = m.made(ctx, sn, man, copyIn)
		})
	}
	wg.Wait()
	m.dropInternal(ctx, sn)
	var ids []string
	for _, c := range out {
		if c.Sandbox != nil {
			ids = append(ids, c.Sandbox.ID)
		}
	}
	m.record(ctx, sb, "api", trace.KindSandboxForked, map[string]any{"count": count, "sandboxes": ids, "memory": memory})
	return out, nil
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Get returns a ready (or creating or failed) snapshot of tenant's; the
// service's own ones are not found.
func (m *Manager) Get(ctx context.Context, tenant, id string) (*sandbox.Snapshot, error) {
	if !sandbox.ValidID("snap", id) {
		return nil, fmt.Errorf("snapshot %.40q: %w", id, errdefs.ErrNotFound)
	}
	sn, err := m.cfg.Store.GetSnapshot(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if sn.Internal || sn.State == sandbox.SnapshotDeleting {
		return nil, fmt.Errorf("snapshot %s: %w", id, errdefs.ErrNotFound)
	}
	return sn, nil
}

// List returns a tenant's snapshots (of one sandbox when sandboxID is
// set), newest first.
func (m *Manager) List(ctx context.Context, tenant, sandboxID string, limit int) ([]*sandbox.Snapshot, error) {
	return m.cfg.Store.ListSnapshots(ctx, store.SnapshotFilter{Tenant: tenant, SandboxID: sandboxID, Limit: limit,
		States: []sandbox.SnapshotState{sandbox.SnapshotCreating, sandbox.SnapshotReady, sandbox.SnapshotFailed}})
}

// Delete removes a tenant's snapshot and its files. Deleting a deleted
// snapshot succeeds.
func (m *Manager) Delete(ctx context.Context, tenant, id string) error {
	sn, err := m.Get(ctx, tenant, id)
	if errors.Is(err, errdefs.ErrNotFound) {
		if _, gerr := m.cfg.Store.GetSnapshot(ctx, tenant, id); errors.Is(gerr, errdefs.ErrNotFound) && sandbox.ValidID("snap", id) {
			return nil
		}
	}
	if err != nil {
		return err
	}
	if sn.State == sandbox.SnapshotCreating {
		return errdefs.WithCode(control.CodeOperationInProgress, errdefs.Mark(fmt.Errorf("snapshot %s is being taken", id), errdefs.ErrConflict))
	}
	if err := m.inUse(sn); err != nil {
		return err
	}
	return m.delete(detach(ctx), sn)
}

func (m *Manager) delete(ctx context.Context, sn *sandbox.Snapshot) error {
	if _, err := m.cfg.Store.UpdateSnapshot(ctx, sn.ID, m.cfg.Now(), func(x *sandbox.Snapshot) error {
		x.State = sandbox.SnapshotDeleting
		return nil
	}); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return err
	}
	m.removeFiles(ctx, sn)
	return m.cfg.Store.DeleteSnapshot(ctx, sn.ID)
}

// expired deletes the snapshots whose retention ended by now.
func (m *Manager) expired(ctx context.Context, now time.Time) int {
	list, err := m.cfg.Store.ListSnapshots(ctx, store.SnapshotFilter{ExpiredAt: now, Internal: true, Limit: 100})
	if err != nil {
		m.log.Warn("listing expired snapshots", "err", err)
		return 0
	}
	n := 0
	for _, sn := range list {
		if sn.State == sandbox.SnapshotCreating || m.inUse(sn) != nil {
			continue // a pool's snapshot outlives its retention
		}
		if err := m.delete(ctx, sn); err == nil {
			n++
		}
	}
	return n
}

// stepTimer logs how long each step of an operation took (debug level),
// for the per-step figures of the benchmarks and of a slow operation.
type stepTimer struct {
	log   *slog.Logger
	what  string
	last  time.Time
	start time.Time
	parts []any
}

func (t *stepTimer) mark(step string) {
	now := time.Now()
	if t.start.IsZero() {
		t.start, t.last = now, now
	}
	t.parts = append(t.parts, step, now.Sub(t.last).Round(time.Millisecond).String())
	t.last = now
}

func (t *stepTimer) done() {
	if len(t.parts) > 0 {
		t.log.Debug("steps of "+t.what, t.parts...)
	}
}

// byService marks a context whose operation the service itself started
// (an idle hibernation; a wake by the call that needed the sandbox).
type byService struct{}

// actorOf is the trace actor of the operation ctx carries.
func actorOf(ctx context.Context) string {
	if v, _ := ctx.Value(byService{}).(bool); v {
		return "system"
	}
	return "api"
}

// errStorageFull is the problem of a snapshot that did not fit.
func errStorageFull() error {
	return errdefs.WithCode("snapshot_storage_full", errdefs.Mark(errors.New(
		"the disk that keeps snapshots is full, so nothing was kept and the sandbox goes on as it was; delete snapshots you no longer need or give the snapshots' directory more space"),
		errdefs.ErrUnavailable))
}
