package control_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/controltest"
	"genesis.dev/sandbox/internal/sandbox"
)

// keepingHook keeps the expired sandboxes whose metadata says keep=yes.
type keepingHook struct {
	mu   sync.Mutex
	kept []string
}

func (k *keepingHook) Name() string { return "keeping" }

func (k *keepingHook) KeepExpired(_ context.Context, sb *sandbox.Sandbox) bool {
	return sb.Metadata["keep"] == "yes"
}

func (k *keepingHook) ExpiryKept(_ context.Context, sb *sandbox.Sandbox) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.kept = append(k.kept, sb.ID)
}

func (k *keepingHook) keptIDs() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.kept...)
}

// TestExpiryHookKeeps: a sandbox whose time runs out — a lease's, or its
// own TTL without a lease — that an ExpiryHook keeps is not ended: its
// lease stays active (or the sandbox runs on) with its end moved to the
// longest its profile allows, and the hook is told once that is recorded.
// One the hook does not keep ends as before.
func TestExpiryHookKeeps(t *testing.T) {
	t.Parallel()
	k := &keepingHook{}
	h := &harness{controltest.NewOpts(t, controltest.Options{Hooks: []control.Hook{k}, Configure: func(c *config.Config) {
		for i := range c.Profiles {
			if c.Profiles[i].Name == controltest.Profile {
				c.Profiles[i].Lease.MaxTTLSeconds = 3600
			}
		}
	}})}
	ctx := context.Background()
	kept, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "a", Profile: controltest.Profile, TTLSeconds: ttl(5), Metadata: map[string]string{"keep": "yes"}})
	if err != nil {
		t.Fatal(err)
	}
	ended, err := h.Svc.AcquireLease(ctx, control.AcquireLeaseInput{Tenant: "a", Profile: controltest.Profile, TTLSeconds: ttl(5)})
	if err != nil {
		t.Fatal(err)
	}
	own := h.Create("a", control.CreateSandboxInput{TTLSeconds: 5, Metadata: map[string]string{"keep": "yes"}})
	h.Clock.Advance(6 * time.Second)
	now := h.Clock.Now()
	if err := h.Svc.Reconcile(ctx, false); err != nil {
		t.Fatal(err)
	}
	l, err := h.Svc.GetLease(ctx, "a", kept.Lease.ID)
	if err != nil || l.State != sandbox.LeaseActive || l.ExpiresAt.Sub(now) < 3590*time.Second || l.ExpiresAt.Sub(now) > 3610*time.Second {
		t.Fatalf("kept lease: %+v %v; want active until about %v", l, err, now.Add(time.Hour))
	}
	sb := h.Record(kept.Sandbox.ID)
	if sb.State != sandbox.StateLeased || sb.ExpiresAt == nil || !sb.ExpiresAt.Equal(l.ExpiresAt) {
		t.Errorf("kept sandbox: %s until %v, want leased until the lease's %v", sb.State, sb.ExpiresAt, l.ExpiresAt)
	}
	sb = h.Record(own.ID)
	longest := time.Duration(h.Cfg.Limits.MaxTTLSeconds) * time.Second
	if sb.State.Final() || sb.ExpiresAt == nil || sb.ExpiresAt.Sub(now) < longest-10*time.Second {
		t.Errorf("kept sandbox without a lease: %s until %v, want it running until about %v (limits.max_ttl_seconds)", sb.State, sb.ExpiresAt, now.Add(longest))
	}
	if got := k.keptIDs(); len(got) != 2 {
		t.Errorf("ExpiryKept told of %v, want the two kept sandboxes", got)
	}
	if got := h.Record(ended.Sandbox.ID).State; got != sandbox.StateDestroyed {
		t.Errorf("a sandbox no hook keeps is %s after its lease ran out", got)
	}
	// KeepLongest does the same for a caller (an adapter pausing a
	// sandbox), from now.
	h.Clock.Advance(10 * time.Minute)
	got, err := h.Svc.KeepLongest(ctx, "a", kept.Sandbox.ID)
	if err != nil || got.ExpiresAt == nil || got.ExpiresAt.Sub(h.Clock.Now()) < 3590*time.Second {
		t.Fatalf("KeepLongest: %+v %v", got, err)
	}
	if _, err := h.Svc.KeepLongest(ctx, "b", kept.Sandbox.ID); err == nil {
		t.Error("KeepLongest of another tenant's sandbox succeeded")
	}
}
