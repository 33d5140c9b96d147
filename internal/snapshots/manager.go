package snapshots

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/agent/agentclient"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/trace"
)

// Lifecycle is the lifecycle layer as this package uses it
// (control.Service).
type Lifecycle interface {
	GetSandbox(ctx context.Context, tenant, id string) (*sandbox.Sandbox, error)
	ListSandboxes(ctx context.Context, f store.SandboxFilter) ([]*sandbox.Sandbox, error)
	ProfileConfig(name string) (*config.Profile, bool)
	CreateSandbox(ctx context.Context, in control.CreateSandboxInput) (*sandbox.Sandbox, error)
	AcquireLease(ctx context.Context, in control.AcquireLeaseInput) (*control.LeaseOutput, error)
	DeleteSandbox(ctx context.Context, tenant, id string) error
	BeginSuspend(ctx context.Context, tenant, id, op string) (*sandbox.Sandbox, error)
	SetSuspended(ctx context.Context, id string, to sandbox.State, fn func(*sandbox.Suspension)) (*sandbox.Sandbox, error)
	MarkOperation(ctx context.Context, tenant, id, op string) (*sandbox.Sandbox, error)
	EndSuspend(ctx context.Context, id string) (*sandbox.Sandbox, error)
	RemoveContainer(ctx context.Context, id string) error
	NewContainer(ctx context.Context, id string, o control.ContainerOptions) error
	WorkspaceDir(id string) (string, error)
	AgentOf(id string) *agentclient.Client
	ResumeAgent(id string) error
	Probe(ctx context.Context) driver.ProbeResult
	// SnapshotPool names the warm pool fed from a snapshot ("": none).
	SnapshotPool(id string) string
	// RefuseIfVolumes answers 409 sandbox_has_volumes for a sandbox that
	// mounts named volumes: their data is in no snapshot, and a sandbox
	// restored or woken in a new container would hold none.
	RefuseIfVolumes(ctx context.Context, tenant, id string) error
}

// Sessions are the shell sessions and code contexts of sandboxes
// (jobs.Manager).
type Sessions interface {
	ListSandboxSessions(ctx context.Context, sandboxID string) ([]*sandbox.Session, error)
	CopySessions(ctx context.Context, tenant, to string, from []sandbox.Session, memory bool) (map[string]string, error)
}

// Config wires a Manager.
type Config struct {
	Lifecycle Lifecycle
	// Driver keeps containers' state (its optional Pauser, Checkpointer and
	// RootfsSaver).
	Driver driver.Driver
	Store  store.Snapshots
	// Dir holds the snapshots' files.
	Dir string
	// Instance is the service instance's id: its Sweep removes the runc
	// snapshot images of this instance that no snapshot names any more.
	Instance string
	// Retention is how long a snapshot is kept after it is taken (0: until
	// deleted).
	Retention time.Duration
	// MaxPerTenant and MaxBytesPerTenant bound what a tenant keeps (0: no
	// bound).
	MaxPerTenant      int
	MaxBytesPerTenant int64
	// MaxBytesPerSnapshot bounds one snapshot's files: its workspace and
	// its root filesystem's changes (0: no bound). A workspace's files
	// are bounded by its sandbox's disk size too.
	MaxBytesPerSnapshot int64
	// MaxFork bounds one fork's copies (default 16).
	MaxFork int
	// Sessions, if set, keeps a sandbox's shell sessions and code contexts
	// in the sandboxes made from its snapshots.
	Sessions Sessions
	// Trace, if set, records each operation in the sandbox's trace
	// (sandbox.paused, sandbox.resumed, sandbox.hibernated, sandbox.woken,
	// snapshot.taken, sandbox.forked, sandbox.rolled_back).
	Trace  trace.Recorder
	Now    func() time.Time
	Logger *slog.Logger
}

// Manager keeps sandboxes' state beyond their containers. It is safe for
// concurrent use; the operations on one sandbox run one at a time.
type Manager struct {
	cfg  Config
	disk Disk
	log  *slog.Logger

	mu    sync.Mutex
	locks map[string]*sync.Mutex // sandbox id → its operations' lock
	// idling are the sandboxes an idle hibernation is under way for.
	idling map[string]bool
	// checked are the snapshots feeding pools whose files were checked in
	// full once (they never change); later members check their sizes.
	checked map[string]bool
	wg      sync.WaitGroup
}

// New returns a Manager.
func New(cfg Config) (*Manager, error) {
	if cfg.Lifecycle == nil || cfg.Driver == nil || cfg.Store == nil || cfg.Dir == "" {
		return nil, errdefs.Invalid("snapshots: lifecycle, driver, store and dir are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxFork <= 0 {
		cfg.MaxFork = 16
	}
	return &Manager{cfg: cfg, disk: Disk{Dir: cfg.Dir}, log: cfg.Logger.With("component", "snapshots"), locks: map[string]*sync.Mutex{}, idling: map[string]bool{},
		checked: map[string]bool{}}, nil
}

// Name is the manager's hook name.
func (m *Manager) Name() string { return "snapshots" }

// lock serialises the operations on sandbox id.
func (m *Manager) lock(id string) func() {
	m.mu.Lock()
	l := m.locks[id]
	if l == nil {
		l = &sync.Mutex{}
		m.locks[id] = l
	}
	m.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// features are what the runtime of sb can do here.
func (m *Manager) features(ctx context.Context, sb *sandbox.Sandbox) driver.RuntimeFeatures {
	ri, ok := m.cfg.Lifecycle.Probe(ctx).Runtime(sb.Runtime)
	if !ok {
		why := driver.Feature{Reason: fmt.Sprintf("runtime %s is not available here", sb.Runtime)}
		return driver.RuntimeFeatures{Pause: why, FSSnapshot: why, MemoryCheckpoint: why}
	}
	return ri.Features
}

// unsupported is the 501 of a feature the runtime lacks.
func unsupported(what string, sb *sandbox.Sandbox, f driver.Feature) error {
	return errdefs.WithCode("not_supported", errdefs.Mark(fmt.Errorf("%s is not available for sandbox %s (runtime %s): %s",
		what, sb.ID, sb.Runtime, f.Reason), errdefs.ErrNotImplemented))
}

// Pause freezes a running sandbox's processes, keeping its memory. Pausing
// a paused sandbox succeeds.
func (m *Manager) Pause(ctx context.Context, tenant, id string) (*sandbox.Sandbox, error) {
	defer m.lock(id)()
	sb, err := m.cfg.Lifecycle.GetSandbox(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if sb.State == sandbox.StatePaused && sb.Suspension != nil && sb.Suspension.Operation == "" {
		return sb, nil
	}
	p, ok := m.cfg.Driver.(driver.Pauser)
	if f := m.features(ctx, sb); !ok || !f.Pause.Supported {
		return nil, unsupported("pause", sb, f.Pause)
	}
	if sb, err = m.cfg.Lifecycle.BeginSuspend(ctx, tenant, id, "pausing"); err != nil {
		return nil, err
	}
	if err := p.Pause(detach(ctx), sb.ContainerID); err != nil {
		m.undo(ctx, sb, false, false)
		return nil, err
	}
	out, err := m.cfg.Lifecycle.SetSuspended(detach(ctx), id, sandbox.StatePaused, nil)
	m.record(ctx, out, "api", trace.KindSandboxPaused, map[string]any{})
	return out, err
}

// Resume brings a paused or hibernated sandbox back to the state it left.
// Resuming a running sandbox succeeds.
// A hibernated sandbox's wake says whether its processes and memory came
// back (nil for a thaw or a running sandbox).
func (m *Manager) Resume(ctx context.Context, tenant, id string) (*sandbox.Sandbox, *bool, error) {
	sb, err := m.cfg.Lifecycle.GetSandbox(ctx, tenant, id)
	if err != nil {
		return nil, nil, err
	}
	if sb.State == sandbox.StateHibernated {
		return m.wake(ctx, tenant, id)
	}
	defer m.lock(id)()
	if sb, err = m.cfg.Lifecycle.GetSandbox(ctx, tenant, id); err != nil {
		return nil, nil, err
	}
	if sb.State != sandbox.StatePaused {
		if sb.State.Running() {
			return sb, nil, nil
		}
		return nil, nil, errdefs.WithCode("not_suspended", errdefs.Mark(fmt.Errorf("sandbox %s is %s", id, sb.State), errdefs.ErrFailedPrecondition))
	}
	if _, err := m.cfg.Lifecycle.MarkOperation(ctx, tenant, id, "resuming"); err != nil {
		return nil, nil, err
	}
	if p, ok := m.cfg.Driver.(driver.Pauser); ok {
		if err := p.Unpause(detach(ctx), sb.ContainerID); err != nil {
			m.cfg.Lifecycle.SetSuspended(detach(ctx), id, sandbox.StatePaused, nil)
			return nil, nil, err
		}
	}
	sb, err = m.cfg.Lifecycle.EndSuspend(detach(ctx), id)
	m.record(ctx, sb, "api", trace.KindSandboxResumed, map[string]any{})
	return sb, nil, err
}

// undo returns a sandbox whose suspending operation ended (or failed) to
// where it was: its agent serving, thawed and in the state it left — or,
// with stayPaused (it was paused before the operation), frozen and paused.
func (m *Manager) undo(ctx context.Context, sb *sandbox.Sandbox, prepared, stayPaused bool) {
	ctx = detach(ctx)
	p, ok := m.cfg.Driver.(driver.Pauser)
	if ok && sb.ContainerID != "" && (prepared || !stayPaused) {
		if err := p.Unpause(ctx, sb.ContainerID); err != nil {
			m.log.Warn("thawing after an operation", "sandbox", sb.ID, "err", err)
		}
	}
	if prepared {
		// The agent listens again once it hears the save is done (a frozen
		// sandbox's save does not always tell it: the service does), or its
		// deadline passed.
		if err := m.cfg.Lifecycle.ResumeAgent(sb.ID); err != nil {
			m.log.Warn("telling the agent the save is done", "sandbox", sb.ID, "err", err)
		}
		m.awaitAgent(ctx, sb.ID)
	}
	if stayPaused {
		if ok && sb.ContainerID != "" && prepared {
			if err := p.Pause(ctx, sb.ContainerID); err != nil {
				m.log.Warn("freezing again after an operation", "sandbox", sb.ID, "err", err)
			}
		}
		if _, err := m.cfg.Lifecycle.SetSuspended(ctx, sb.ID, sandbox.StatePaused, nil); err != nil {
			m.log.Warn("recording the end of an operation", "sandbox", sb.ID, "err", err)
		}
		return
	}
	if _, err := m.cfg.Lifecycle.EndSuspend(ctx, sb.ID); err != nil {
		m.log.Warn("recording the end of an operation", "sandbox", sb.ID, "err", err)
	}
}

// awaitAgent waits until the agent of sandbox id, readied for a save and
// told it is done, serves again (at most its deadline and a margin).
func (m *Manager) awaitAgent(ctx context.Context, id string) {
	wctx, cancel := context.WithTimeout(ctx, prepareTimeout+10*time.Second)
	defer cancel()
	ag := m.cfg.Lifecycle.AgentOf(id)
	for {
		ag.Close() // a connection made while it closed is dead: dial afresh
		actx, acancel := context.WithTimeout(wctx, readyAttempt)
		_, err := ag.WaitReady(actx, 5*time.Millisecond)
		acancel()
		switch {
		case err == nil:
			return
		case wctx.Err() != nil || !errors.Is(err, errdefs.ErrUnavailable):
			m.log.Warn("the agent did not serve again after a save", "sandbox", id, "err", err)
			return
		}
		m.log.Debug("the agent did not answer after a save; dialling it afresh", "sandbox", id, "err", err)
	}
}

// readyAttempt bounds one wait for an agent back from a save. Under runsc
// a host socket whose listener closed still takes connections, which
// nobody answers or resets, while its name is there. An agent that kept
// the name through its closing grace (agents before the name went first;
// one restored from an older snapshot still does) could be frozen so,
// and the first dial after the save landed on the dead socket (a ping on
// it waits for HTTP/2's own ping timeouts, 25 s): such a connection is
// dropped after this and the agent dialled afresh.
// (internal/agent's TestCheckpointSocketGoneWhenClosed.)
const readyAttempt = time.Second

// prepareTimeout is how long an agent waits, closed, for its save.
const prepareTimeout = 30 * time.Second

// quiesce readies the agent of sb for a save and waits until it serves
// nobody.
func (m *Manager) quiesce(ctx context.Context, sb *sandbox.Sandbox) error {
	ag := m.cfg.Lifecycle.AgentOf(sb.ID)
	if _, err := ag.PrepareCheckpoint(ctx, prepareTimeout); err != nil {
		return fmt.Errorf("readying the agent for the save: %w", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, err := ag.Ping(pctx)
		cancel()
		if err != nil {
			ag.Close()
			return nil // nobody answers: closed
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the agent still serves 10 s after it was readied for a save: %w", errdefs.ErrUnavailable)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// detach keeps ctx's values and a deadline but not its cancellation: an
// operation that has begun changing a sandbox finishes (or is undone) even
// if its caller goes away.
func detach(ctx context.Context) context.Context {
	return context.WithoutCancel(ctx)
}

// errMemoryUnavailable says why a runtime keeps files only.
func memoryUnavailable(sb *sandbox.Sandbox, f driver.Feature) error {
	return errdefs.WithCode("memory_checkpoint_unsupported", errdefs.Mark(fmt.Errorf("sandbox %s runs under %s, which keeps files only (%s); ask with memory: false", sb.ID, sb.Runtime, f.Reason), errdefs.ErrNotImplemented))
}

// removeFiles deletes a snapshot's files and its runc image.
func (m *Manager) removeFiles(ctx context.Context, sn *sandbox.Snapshot) {
	if man, err := m.disk.Open(sn.ID); err == nil && man.RootfsImage != "" {
		if rs, ok := m.cfg.Driver.(driver.RootfsSaver); ok {
			if err := rs.RemoveImage(detach(ctx), man.RootfsImage); err != nil {
				m.log.Warn("removing a snapshot's image", "snapshot", sn.ID, "image", man.RootfsImage, "err", err)
			}
		}
	}
	if err := m.disk.Remove(sn.ID); err != nil {
		m.log.Warn("removing a snapshot's files", "snapshot", sn.ID, "err", err)
	}
}

// imageRef is the image of a runc snapshot's root filesystem.
func imageRef(snapID string) string { return imagePrefix + snapID + ":1" }

const imagePrefix = "genesis-snapshot/"

// imageSnapshot is the snapshot id an image reference made by imageRef
// names, or "".
func imageSnapshot(ref string) string {
	id, ok := strings.CutPrefix(ref, imagePrefix)
	if !ok {
		return ""
	}
	id, _, _ = strings.Cut(id, ":")
	return id
}

// imageWanted reports whether a snapshot image must stay: a snapshot that
// is not being deleted names it.
func (m *Manager) imageWanted(ctx context.Context, ref string) bool {
	id := imageSnapshot(ref)
	if id == "" {
		return false
	}
	sn, err := m.cfg.Store.GetSnapshot(ctx, "", id)
	if err != nil {
		return !errors.Is(err, errdefs.ErrNotFound) // unsure: keep it
	}
	return sn.State != sandbox.SnapshotDeleting
}

// sweepImages removes this instance's snapshot images that no snapshot
// names (one whose snapshot was deleted while a sandbox still ran from it,
// or left by a stopped process); an image a container still uses stays
// for the next sweep.
func (m *Manager) sweepImages(ctx context.Context) {
	rs, ok := m.cfg.Driver.(driver.RootfsSaver)
	if !ok || m.cfg.Instance == "" {
		return
	}
	list, err := rs.SavedImages(ctx, driver.LabelManaged+"=true", driver.LabelPurpose+"=snapshot", driver.LabelInstance+"="+m.cfg.Instance)
	if err != nil {
		m.log.Warn("listing snapshot images", "err", err)
		return
	}
	removed := 0
	for _, im := range list {
		// The label names the snapshot from the moment the image exists;
		// its tag comes a moment later, so an image listed in between has
		// no reference yet and must not be taken for a dangling one.
		if id := im.Labels[driver.LabelSnapshot]; id != "" && m.imageWanted(ctx, imageRef(id)) ||
			slices.ContainsFunc(im.Refs, func(ref string) bool { return m.imageWanted(ctx, ref) }) {
			continue
		}
		refs := append(im.Refs, im.ID)
		for _, ref := range refs {
			if err := rs.RemoveImage(ctx, ref); err != nil {
				if !errors.Is(err, errdefs.ErrConflict) {
					m.log.Warn("removing a snapshot image no snapshot names", "image", ref, "err", err)
				}
				break
			}
		}
		removed++
	}
	if removed > 0 {
		m.log.Info("removed snapshot images no snapshot names", "count", removed)
	}
}

// workspaceOf is a sandbox's workspace directory on the host.
func (m *Manager) workspaceOf(id string) (string, error) {
	return m.cfg.Lifecycle.WorkspaceDir(id)
}

// writeWorkspace copies the workspace of sandbox id into the draft, within
// lim, and returns the tar's size.
func (m *Manager) writeWorkspace(ctx context.Context, id string, dr *Draft, lim TreeLimits) (int64, error) {
	dir, err := m.workspaceOf(id)
	if err != nil {
		return 0, err
	}
	f, err := os.OpenFile(filepath.Join(dr.Dir(), "workspace.tar"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, fmt.Errorf("snapshots: create the workspace's tar: %v: %w", errnoOf(err), errdefs.ErrUnavailable)
	}
	n, sum, err := WriteTree(ctx, dir, f, lim)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("snapshots: write the workspace's tar: %v: %w", errnoOf(cerr), errdefs.ErrUnavailable)
	}
	if err != nil {
		return 0, err
	}
	dr.AddSummed("workspace.tar", n, sum)
	dr.Manifest().Workspace = "workspace.tar"
	return n, nil
}

// fillWorkspace writes a snapshot's workspace into dir.
func (m *Manager) fillWorkspace(ctx context.Context, man *Manifest, dir string) error {
	if man.Workspace == "" {
		return nil
	}
	f, ok := man.File(man.Workspace)
	if !ok {
		return errCorrupt(man.Workspace, "not in the manifest")
	}
	r, err := os.Open(filepath.Join(m.disk.Path(man.ID), man.Workspace))
	if errors.Is(err, os.ErrNotExist) {
		return errCorrupt(man.Workspace, "missing")
	}
	if err != nil {
		return fmt.Errorf("snapshots: open %s: %v: %w", man.Workspace, errnoOf(err), errdefs.ErrUnavailable)
	}
	defer r.Close()
	return ReadTree(ctx, r, dir, man.Workspace, f.SHA256)
}

var (
	_ control.Waker      = (*Manager)(nil)
	_ control.PoolFeeder = (*Manager)(nil)
)

// Close waits for the idle hibernations under way.
func (m *Manager) Close() { m.wg.Wait() }

// record puts an operation in a sandbox's trace: actor "api" for a call,
// "system" for the service's own (an idle hibernation, a wake by the next
// call).
func (m *Manager) record(ctx context.Context, sb *sandbox.Sandbox, actor string, kind trace.Kind, data map[string]any) {
	if m.cfg.Trace == nil || sb == nil {
		return
	}
	b, err := json.Marshal(data)
	if err != nil {
		return
	}
	m.cfg.Trace.Record(context.WithoutCancel(ctx), sb.Tenant, sb.ID, trace.Event{Actor: actor, Kind: kind, Data: b})
}
