package control_test

import (
	"context"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/controltest"
)

// harness is the shared service harness (over the fake driver, with real
// agents) with the helpers of this package's tests.
type harness struct{ *controltest.Harness }

// newHarness builds a started service with runc and runsc healthy;
// configure, if not nil, edits the settings first.
func newHarness(t *testing.T, configure func(*config.Config)) *harness {
	t.Helper()
	return &harness{controltest.New(t, configure)}
}

// newHarnessWith is newHarness with tune changing the service's own
// settings before it starts.
func newHarnessWith(t *testing.T, configure func(*config.Config), tune func(*control.Config)) *harness {
	t.Helper()
	return &harness{controltest.NewWith(t, configure, tune)}
}

// recycled waits until the recycles of the released leases (which run
// after the release answers) have finished.
func (h *harness) recycled(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.Svc.WaitRecycles(ctx); err != nil {
		t.Fatalf("waiting for the recycles of released leases: %v", err)
	}
}
