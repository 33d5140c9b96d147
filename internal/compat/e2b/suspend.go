package e2b

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"genesis.dev/sandbox/internal/compat/shared"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/snapshots"
)

// Pause, resume, auto-pause, snapshots and forks (docs/compat-e2b.md).
//
// E2B's pause keeps a sandbox's memory and frees what it holds: here it is
// a hibernation (snapshots.Manager.HibernateWith) — the container is gone,
// its state on disk, its processes and memory kept where the runtime keeps
// them (runsc), its files always (runc keeps files only). Connect, and
// traffic to a sandbox created with autoResume, wake it. A sandbox
// created with lifecycle onTimeout "pause" is hibernated when its time runs
// out instead of ending (control's ExpiryHook). A paused sandbox is kept
// for the longest its profile allows (control.KeepLongest), then ends.

// Snapshots is what the adapter translates pause, resume, auto-pause,
// snapshots and forks onto: snapshots.Manager.
type Snapshots interface {
	HibernateWith(ctx context.Context, tenant, id string, o snapshots.HibernateOptions) (*sandbox.Sandbox, error)
	// Resume says, of a hibernated sandbox's wake, whether its memory
	// came back (nil for a thaw).
	Resume(ctx context.Context, tenant, id string) (*sandbox.Sandbox, *bool, error)
	Snapshot(ctx context.Context, tenant, id string, o snapshots.SnapshotOptions) (*sandbox.Snapshot, error)
	CreateFrom(ctx context.Context, snapID string, in snapshots.CreateOptions) (*snapshots.Made, error)
	Fork(ctx context.Context, tenant, id string, count int, in snapshots.CreateOptions) ([]*snapshots.Made, error)
	Get(ctx context.Context, tenant, id string) (*sandbox.Snapshot, error)
	List(ctx context.Context, tenant, sandboxID string, limit int) ([]*sandbox.Snapshot, error)
	Delete(ctx context.Context, tenant, id string) error
}

// Metadata keys the adapter keeps on a sandbox besides its template; none
// is shown in the SDK's metadata.
const (
	// onTimeoutKey is "pause" for a sandbox created with lifecycle
	// onTimeout "pause" (autoPause).
	onTimeoutKey = "e2b.on_timeout"
	// pauseMemoryKey is "false" for one created with onTimeout
	// {keepMemory: false} (autoPauseMemory), "true" when asked for.
	pauseMemoryKey = "e2b.pause_memory"
	// autoResumeKey is "true" for one created with autoResume.
	autoResumeKey = "e2b.auto_resume"
	// pausedKey is set while a sandbox is paused through this adapter
	// (pause or auto-pause): traffic then wakes it only with autoResume.
	// A sandbox hibernated otherwise (/v1, an idle profile) wakes at the
	// next call, as everywhere in the service.
	pausedKey = "e2b.paused"
)

// hiddenKeys are the adapter's own metadata keys.
var hiddenKeys = map[string]bool{templateKey: true, onTimeoutKey: true, pauseMemoryKey: true, autoResumeKey: true, pausedKey: true}

// notSupported is the 501 of a call the service has no snapshots for.
func notSupported(what string) error {
	return errdefs.WithCode("not_supported", errdefs.Mark(fmt.Errorf("%s is not available on this service (no snapshot support)", what), errdefs.ErrNotImplemented))
}

// stateOf is a sandbox's state in E2B's words: paused (paused or
// hibernated here) or running.
func stateOf(sb *sandbox.Sandbox) string {
	if sb.State.Suspended() {
		return "paused"
	}
	return "running"
}

// lifecycle is a sandbox's lifecycle policy as get shows it.
type lifecycle struct {
	OnTimeout  string `json:"onTimeout"`
	AutoResume bool   `json:"autoResume"`
}

func lifecycleOf(sb *sandbox.Sandbox) *lifecycle {
	l := &lifecycle{OnTimeout: "kill", AutoResume: sb.Metadata[autoResumeKey] == "true"}
	if sb.Metadata[onTimeoutKey] == "pause" {
		l.OnTimeout = "pause"
	}
	return l
}

// pauseSandbox serves POST /sandboxes/{id}/pause {memory?}: the sandbox is
// hibernated (memory false: its files only) and kept for the longest its
// profile allows; 204. A paused sandbox is 409 (the SDK's "already
// paused").
func (a *Adapter) pauseSandbox(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Memory *bool `json:"memory"`
	}
	if err := shared.DecodeBody(r, &body); err != nil {
		a.writeError(w, r, err)
		return
	}
	sb, err := a.visibleSandbox(r, r.PathValue("id"))
	if err == nil && a.snaps == nil {
		err = notSupported("pause")
	}
	if err == nil && sb.State.Suspended() {
		err = errdefs.WithCode("already_paused", errdefs.Mark(fmt.Errorf("sandbox %s is already paused", sb.ID), errdefs.ErrConflict))
	}
	if err == nil {
		err = a.pause(r.Context(), tenantOf(r.Context()), sb.ID, body.Memory)
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// pause hibernates a sandbox of tenant as E2B's pause does and keeps it.
// It is marked paused first, so that no traffic in between wakes it.
func (a *Adapter) pause(ctx context.Context, tenant, id string, memory *bool) error {
	on := "true"
	if _, err := a.ctl.PatchSandbox(ctx, tenant, id, 0, map[string]*string{pausedKey: &on}); err != nil {
		return err
	}
	if _, err := a.snaps.HibernateWith(ctx, tenant, id, snapshots.HibernateOptions{Memory: memory}); err != nil {
		if _, perr := a.ctl.PatchSandbox(context.WithoutCancel(ctx), tenant, id, 0, map[string]*string{pausedKey: nil}); perr != nil {
			a.log.Warn("unmarking a sandbox whose pause failed", "sandbox", id, "err", perr)
		}
		return err
	}
	ctx = context.WithoutCancel(ctx) // hibernated: the rest is bookkeeping
	if _, err := a.ctl.KeepLongest(ctx, tenant, id); err != nil {
		a.log.Warn("keeping a paused sandbox", "sandbox", id, "err", err)
	}
	return nil
}

// resume brings a paused or hibernated sandbox of tenant back and drops
// the adapter's pause mark.
func (a *Adapter) resume(ctx context.Context, tenant string, sb *sandbox.Sandbox) (*sandbox.Sandbox, error) {
	out, memory, err := a.snaps.Resume(ctx, tenant, sb.ID)
	if err != nil && errdefs.Is(err, errdefs.ErrFailedPrecondition) {
		// A hibernation under way when Resume looked ended meanwhile:
		// once more, now that it is hibernated.
		if cur, gerr := a.ctl.GetSandbox(ctx, tenant, sb.ID); gerr == nil && cur.State == sandbox.StateHibernated {
			out, memory, err = a.snaps.Resume(ctx, tenant, sb.ID)
		}
	}
	if err != nil {
		return nil, err
	}
	if memory != nil && !*memory {
		// Woken from its files: its processes started afresh, the default
		// code context's kernel with them. The next run makes a new one
		// (as E2B's code interpreter after a reboot: its variables gone).
		a.ctxMu.Lock()
		delete(a.contexts, sb.ID)
		a.ctxMu.Unlock()
		if sb.Suspension != nil && sb.Suspension.Memory {
			a.log.Warn("a paused sandbox's memory did not come back; it started again from its files", "sandbox", sb.ID)
		}
	}
	if out.Metadata[pausedKey] != "" {
		if out, err = a.ctl.PatchSandbox(context.WithoutCancel(ctx), tenant, sb.ID, 0, map[string]*string{pausedKey: nil}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// wakesOnTraffic says whether sandbox traffic to a sandbox that does not
// run wakes it: a hibernated one, unless it was paused through this
// adapter without autoResume (E2B's paused sandbox answers nothing until
// it is connected to).
func (a *Adapter) wakesOnTraffic(sb *sandbox.Sandbox) bool {
	return a.snaps != nil && sb.State == sandbox.StateHibernated && (sb.Suspension == nil || sb.Suspension.Operation == "") &&
		(sb.Metadata[pausedKey] == "" || sb.Metadata[autoResumeKey] == "true")
}

// operationWait bounds how long sandbox traffic waits for an operation
// under way on its sandbox (a pause, a wake, a snapshot) to end.
const operationWait = time.Minute

// settled waits until no operation is under way on a sandbox of tenant
// and answers it then (or as it is at the deadline).
func (a *Adapter) settled(ctx context.Context, tenant string, sb *sandbox.Sandbox) (*sandbox.Sandbox, error) {
	ctx, cancel := context.WithTimeout(ctx, operationWait)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for sb.Suspension != nil && sb.Suspension.Operation != "" {
		select {
		case <-ctx.Done():
			return sb, nil
		case <-tick.C:
		}
		cur, err := a.ctl.GetSandbox(ctx, tenant, sb.ID)
		if err != nil {
			return nil, err
		}
		sb = cur
	}
	return sb, nil
}

// wakeOnTraffic resumes a sandbox for its traffic; one that was paused
// through this adapter (autoResume) then ends after the default timeout
// again, as after a create (its pause had kept it for long).
func (a *Adapter) wakeOnTraffic(ctx context.Context, tenant string, sb *sandbox.Sandbox) (*sandbox.Sandbox, error) {
	paused := sb.Metadata[pausedKey] != ""
	out, err := a.resume(ctx, tenant, sb)
	if err != nil || !paused {
		return out, err
	}
	if _, err := a.renew(context.WithoutCancel(ctx), tenant, out, a.timeoutOr(nil)); err != nil {
		a.log.Warn("renewing an auto-resumed sandbox", "sandbox", sb.ID, "err", err)
	}
	return out, nil
}

// resumeOnConnect resumes a suspended sandbox for connect, which asks for
// its memory unless memory is false: a files-only wake is not offered, so
// memory false is refused for a sandbox whose memory was kept (E2B: never
// silently a memory restore).
func (a *Adapter) resumeOnConnect(ctx context.Context, tenant string, sb *sandbox.Sandbox, memory *bool) (*sandbox.Sandbox, error) {
	if a.snaps == nil {
		return nil, notSupported("resume")
	}
	if memory != nil && !*memory && (sb.State == sandbox.StatePaused || sb.Suspension != nil && sb.Suspension.Memory) {
		return nil, errdefs.WithCode("not_supported", errdefs.Mark(fmt.Errorf(
			"sandbox %s kept its memory; a restart from its files only (onResume: 'reboot') is not offered here: connect without it", sb.ID), errdefs.ErrNotImplemented))
	}
	return a.resume(ctx, tenant, sb)
}

// KeepExpired (control's ExpiryHook) keeps a running sandbox created with
// lifecycle onTimeout "pause" whose time ran out: it is paused instead of
// ending.
func (a *Adapter) KeepExpired(_ context.Context, sb *sandbox.Sandbox) bool {
	return a.snaps != nil && sb.Metadata[onTimeoutKey] == "pause" && shared.Running(sb.State) && sb.Reserved == ""
}

// autoPauseTimeout bounds one auto-pause.
const autoPauseTimeout = 5 * time.Minute

// ExpiryKept (control's ExpiryHook) pauses a sandbox KeepExpired kept, in
// the background; one that cannot be paused ends, as its timeout said.
func (a *Adapter) ExpiryKept(ctx context.Context, sb *sandbox.Sandbox) {
	ctx = context.WithoutCancel(ctx)
	var memory *bool
	if v, err := strconv.ParseBool(sb.Metadata[pauseMemoryKey]); err == nil {
		memory = &v
	}
	autoPause := func() {
		a.autoPauses <- struct{}{}
		defer func() { <-a.autoPauses }()
		pctx, cancel := context.WithTimeout(ctx, autoPauseTimeout)
		defer cancel()
		err := a.pause(pctx, sb.Tenant, sb.ID, memory)
		if err == nil {
			a.log.Info("auto-paused a sandbox at its timeout", "sandbox", sb.ID)
			return
		}
		a.log.Warn("auto-pause at the timeout failed; the sandbox ends", "sandbox", sb.ID, "err", err)
		a.end(pctx, sb.Tenant, sb.ID)
	}
	a.bgMu.Lock()
	if a.closed {
		a.bgMu.Unlock()
		autoPause() // closing: no new goroutine for Close to miss
		return
	}
	a.bg.Go(autoPause)
	a.bgMu.Unlock()
}

// end ends a sandbox of tenant: its lease released, or without one the
// sandbox deleted.
func (a *Adapter) end(ctx context.Context, tenant, id string) {
	var err error
	if l, lerr := shared.ActiveLease(ctx, a.ctl, tenant, id); lerr == nil {
		err = a.ctl.ReleaseLease(ctx, tenant, l.ID)
	} else {
		err = a.ctl.DeleteSandbox(ctx, tenant, id)
	}
	if err != nil {
		a.log.Warn("ending a sandbox", "sandbox", id, "err", err)
	}
}

var _ control.ExpiryHook = (*Adapter)(nil)

// Close waits for the auto-pauses under way; later ones run in the
// caller of ExpiryKept.
func (a *Adapter) Close() {
	a.bgMu.Lock()
	a.closed = true
	a.bgMu.Unlock()
	a.bg.Wait()
}

// snapshotInfo is a snapshot as E2B names it.
type snapshotInfo struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`
}

func snapshotInfoOf(sn *sandbox.Snapshot) snapshotInfo {
	out := snapshotInfo{SnapshotID: sn.ID, Names: []string{}}
	if sn.Name != "" {
		out.Names = append(out.Names, sn.Name)
	}
	return out
}

// createSnapshot serves POST /sandboxes/{id}/snapshots {name?}: a
// snapshot of the sandbox (its files, and its memory where the runtime
// keeps it); the sandbox runs on. 201 {snapshotID, names}.
func (a *Adapter) createSnapshot(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name string `json:"name"`
	}
	if err := shared.DecodeBody(r, &body); err != nil {
		a.writeError(w, r, err)
		return
	}
	sb, err := a.visibleSandbox(r, r.PathValue("id"))
	if err == nil && a.snaps == nil {
		err = notSupported("snapshots")
	}
	var sn *sandbox.Snapshot
	if err == nil {
		sn, err = a.snaps.Snapshot(r.Context(), tenantOf(r.Context()), sb.ID, snapshots.SnapshotOptions{Name: body.Name})
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, snapshotInfoOf(sn))
}

// listSnapshots serves GET /snapshots?sandboxID=&name=&limit=: the
// caller's ready snapshots, newest first, one page.
func (a *Adapter) listSnapshots(w http.ResponseWriter, r *http.Request) {
	if a.snaps == nil {
		writeJSON(w, http.StatusOK, []snapshotInfo{})
		return
	}
	q := r.URL.Query()
	limit := 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			a.writeError(w, r, errdefs.Invalid("limit %q must be 1 to 1000", v))
			return
		}
		limit = n
	}
	list, err := a.snaps.List(r.Context(), tenantOf(r.Context()), q.Get("sandboxID"), 0)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	name := q.Get("name")
	out := []snapshotInfo{}
	for _, sn := range list {
		if sn.State != sandbox.SnapshotReady || name != "" && sn.Name != name && sn.ID != name {
			continue
		}
		if limit > 0 && len(out) == limit {
			break
		}
		out = append(out, snapshotInfoOf(sn))
	}
	writeJSON(w, http.StatusOK, out)
}

// findSnapshot finds a ready snapshot of tenant by its id or name (the
// newest of that name): the SDK names one as a template.
func (a *Adapter) findSnapshot(ctx context.Context, tenant, ref string) (*sandbox.Snapshot, bool) {
	if a.snaps == nil || ref == "" {
		return nil, false
	}
	if sandbox.ValidID("snap", ref) {
		sn, err := a.snaps.Get(ctx, tenant, ref)
		return sn, err == nil
	}
	list, err := a.snaps.List(ctx, tenant, "", 0)
	if err != nil {
		return nil, false
	}
	for _, sn := range list {
		if sn.Name == ref && sn.State == sandbox.SnapshotReady {
			return sn, true
		}
	}
	return nil, false
}

// deleteSnapshot serves DELETE /templates/{templateID} for a snapshot
// (the SDK's deleteSnapshot): 204, or 404 for a template that is no
// snapshot of the caller's (templates are not managed through E2B here).
func (a *Adapter) deleteSnapshot(w http.ResponseWriter, r *http.Request) {
	ref := r.PathValue("templateID")
	tenant := tenantOf(r.Context())
	sn, ok := a.findSnapshot(r.Context(), tenant, ref)
	if !ok {
		a.writeError(w, r, fmt.Errorf("snapshot %q not found (templates are the config's e2b.templates, not managed here): %w", ref, errdefs.ErrNotFound))
		return
	}
	if err := a.snaps.Delete(r.Context(), tenant, sn.ID); err != nil {
		a.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// forkResult is one fork's outcome: its sandbox or its error.
type forkResult struct {
	Sandbox *created  `json:"sandbox,omitempty"`
	Error   *apiError `json:"error,omitempty"`
}

// forkSandbox serves POST /sandboxes/{id}/fork {timeout, count}: the
// sandbox's state taken once and count new sandboxes made from it (with
// its memory where the runtime keeps it), each its own; the sandbox runs
// on. 201 with one result per fork.
func (a *Adapter) forkSandbox(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Timeout *int64 `json:"timeout"`
		Count   *int   `json:"count"`
	}
	if err := shared.DecodeBody(r, &body); err != nil {
		a.writeError(w, r, err)
		return
	}
	sb, err := a.visibleSandbox(r, r.PathValue("id"))
	if err == nil && a.snaps == nil {
		err = notSupported("fork")
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	count := 1
	if body.Count != nil {
		count = *body.Count
	}
	tenant := tenantOf(r.Context())
	in := snapshots.CreateOptions{TTLSeconds: a.timeoutOr(body.Timeout), Metadata: map[string]string{}}
	for k, v := range sb.Metadata {
		if k != pausedKey && !strings.HasPrefix(k, "genesis.") {
			in.Metadata[k] = v
		}
	}
	made, err := a.snaps.Fork(r.Context(), tenant, sb.ID, count, in)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	out := make([]forkResult, 0, len(made))
	for _, m := range made {
		if m.Err != nil {
			status := errdefs.HTTPStatus(m.Err)
			out = append(out, forkResult{Error: &apiError{Code: status, Message: errdefs.Detail(m.Err)}})
			continue
		}
		c := a.created(r.Context(), m.Sandbox)
		out = append(out, forkResult{Sandbox: &c})
	}
	writeJSON(w, http.StatusCreated, out)
}

// timeoutOr is a timeout the SDK gave, or the adapter's default.
func (a *Adapter) timeoutOr(t *int64) int64 {
	if t != nil && *t > 0 {
		return *t
	}
	if a.set.DefaultTimeoutSeconds > 0 {
		return a.set.DefaultTimeoutSeconds
	}
	return 300
}
