package control_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/controltest"
	"genesis.dev/sandbox/internal/egress"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// recordingHook records the hook calls it gets; readyErr, if set, fails
// SandboxReady.
type recordingHook struct {
	mu       sync.Mutex
	calls    []string
	readyErr error
}

func (r *recordingHook) Name() string { return "recording" }

func (r *recordingHook) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, s)
}

func (r *recordingHook) SandboxReady(ctx context.Context, a *control.Attachment) error {
	if a.Agent == nil || a.Profile == nil {
		return errors.New("attachment without agent or profile")
	}
	if _, err := a.Agent.Ping(ctx); err != nil {
		return err
	}
	r.add("ready " + a.Sandbox.ID)
	return r.readyErr
}

func (r *recordingHook) SandboxEnding(_ context.Context, id, reason string) {
	r.add("ending " + id)
}

func (r *recordingHook) Recover(context.Context) error {
	r.add("recover")
	return nil
}

func (r *recordingHook) Sweep(context.Context, time.Time, bool) { r.add("sweep") }

func (r *recordingHook) seen(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.calls, s)
}

// TestAttach checks the one running-sandbox check: tenancy, state and busy
// accounting.
func TestAttach(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	sb := h.Create("a", control.CreateSandboxInput{})

	a, err := h.Svc.Attach(ctx, "a", sb.ID, control.AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Sandbox.ID != sb.ID || a.Profile == nil || a.Profile.Name != controltest.Profile || a.Agent == nil {
		t.Fatalf("attachment %+v", a)
	}
	if _, err := a.Agent.Ping(ctx); err != nil {
		t.Fatalf("agent of the attachment: %v", err)
	}
	a.Release()
	a.Release() // idempotent

	if _, err := h.Svc.Attach(ctx, "b", sb.ID, control.AttachOptions{}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("attach to another tenant's sandbox: %v, want not found", err)
	}
	if _, err := h.Svc.Attach(ctx, "a", "sbx_nope", control.AttachOptions{}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("attach to a bad id: %v, want not found", err)
	}
	if err := h.Svc.DeleteSandbox(ctx, "a", sb.ID); err != nil {
		t.Fatal(err)
	}
	_, err = h.Svc.Attach(ctx, "a", sb.ID, control.AttachOptions{})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || errdefs.Code(err) != "sandbox_not_running" {
		t.Errorf("attach to a destroyed sandbox: %v (code %q), want sandbox_not_running", err, errdefs.Code(err))
	}
}

// TestAttachBusy checks that a busy attachment holds a leased sandbox busy
// until it is released.
func TestAttachBusy(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	out, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "a", Profile: controltest.Profile})
	if err != nil {
		t.Fatal(err)
	}
	id := out.Sandbox.ID
	a, err := h.Svc.Attach(ctx, "a", id, control.AttachOptions{Busy: true})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, h, id, sandbox.StateBusy)
	a.Release()
	waitState(t, h, id, sandbox.StateLeased)
}

// TestAttachBusyShortWritesNothing checks that a busy attachment released
// at once (a short exec) leaves the leased sandbox's record as it was: only
// jobs that run a while move it to busy and back, one write each way.
func TestAttachBusyShortWritesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	out, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "a", Profile: controltest.Profile})
	if err != nil {
		t.Fatal(err)
	}
	id := out.Sandbox.ID
	v0 := h.Record(id).ResourceVersion
	short, err := h.Svc.Attach(ctx, "a", id, control.AttachOptions{Busy: true})
	if err != nil {
		t.Fatal(err)
	}
	short.Release()
	long, err := h.Svc.Attach(ctx, "a", id, control.AttachOptions{Busy: true})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, h, id, sandbox.StateBusy)
	long.Release()
	waitState(t, h, id, sandbox.StateLeased)
	if v := h.Record(id).ResourceVersion; v != v0+2 {
		t.Errorf("record version %d after a short and a long busy attachment, want %d (one write to busy, one back)", v, v0+2)
	}
}

// TestHooks checks when control calls the hooks, and that a failing ready
// hook fails the create and rolls it back.
func TestHooks(t *testing.T) {
	t.Parallel()
	rec := &recordingHook{}
	h := &harness{controltest.NewOpts(t, controltest.Options{Hooks: []control.Hook{rec}})}
	ctx := context.Background()
	if !rec.seen("recover") || !rec.seen("sweep") {
		t.Errorf("start-up calls %v, want recover and sweep", rec.calls)
	}
	late := &recordingHook{}
	h.Svc.AddHook(late) // after Start: refused
	sb := h.Create("a", control.CreateSandboxInput{})
	if late.seen("ready " + sb.ID) {
		t.Error("a hook added after Start was called")
	}
	if !rec.seen("ready " + sb.ID) {
		t.Errorf("calls %v, want ready of %s", rec.calls, sb.ID)
	}
	if err := h.Svc.DeleteSandbox(ctx, "a", sb.ID); err != nil {
		t.Fatal(err)
	}
	if !rec.seen("ending " + sb.ID) {
		t.Errorf("calls %v, want ending of %s", rec.calls, sb.ID)
	}

	rec.mu.Lock()
	rec.readyErr = errors.New("service did not start")
	rec.mu.Unlock()
	_, err := h.Svc.CreateSandbox(ctx, control.CreateSandboxInput{Tenant: "a", Profile: controltest.Profile})
	if err == nil {
		t.Fatal("create with a failing ready hook succeeded")
	}
	var failed *sandbox.Sandbox
	for _, r := range h.Records() {
		if r.ID != sb.ID {
			failed = r
		}
	}
	if failed == nil || failed.State != sandbox.StateFailed {
		t.Fatalf("records after the failed create: %+v", h.Records())
	}
	if !rec.seen("ending " + failed.ID) {
		t.Errorf("calls %v, want ending of the failed %s", rec.calls, failed.ID)
	}
	h.AssertGone(failed.ID)
}

// Attach reads a sandbox's network record only for a caller that asks
// (AttachOptions.Network); GetSandbox always shows it.
func TestAttachNetworkOnRequest(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	sb := h.Create("a", control.CreateSandboxInput{})
	// A network record as netctl leaves it for a networked sandbox (the
	// harness has no gateway to make a real one).
	if err := h.St.CreateSandboxNetwork(ctx, &sandbox.Network{SandboxID: sb.ID, Tenant: "a", Status: sandbox.NetworkActive,
		Policy: egress.Policy{Mode: egress.ModeAllowlist, Allow: []egress.Rule{{Host: "api.example.com"}}}, UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	plain, err := h.Svc.Attach(ctx, "a", sb.ID, control.AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	plain.Release()
	if plain.Sandbox.Network != nil {
		t.Errorf("Attach without Network read the network record: %+v", plain.Sandbox.Network)
	}
	withNet, err := h.Svc.Attach(ctx, "a", sb.ID, control.AttachOptions{Network: true})
	if err != nil {
		t.Fatal(err)
	}
	withNet.Release()
	if n := withNet.Sandbox.Network; n == nil || n.Mode != egress.ModeAllowlist || n.Status != sandbox.NetworkActive {
		t.Errorf("Attach with Network: network %+v; want allowlist, active", n)
	}
	got, err := h.Svc.GetSandbox(ctx, "a", sb.ID)
	if err != nil || got.Network == nil || got.Network.Mode != egress.ModeAllowlist {
		t.Errorf("GetSandbox: %+v, %v; want the network summary", got, err)
	}
}
