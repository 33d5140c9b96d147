package control_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// TestDrainRemovesGateway: at the end of a drain the egress gateway
// container of the instance and its run directory are gone, and the gateway
// is not started again (networked modes read down).
func TestDrainRemovesGateway(t *testing.T) {
	t.Parallel()
	h := newHarnessWith(t, nil, func(c *control.Config) { c.EgressDir = t.TempDir() })
	ctx := context.Background()
	if caps := h.svc.NetworkCapabilities(); caps.Gateway != "idle" {
		t.Fatalf("gateway before the drain: %+v; want idle", caps)
	}
	// What a started gateway leaves: its container and run directory.
	name := "genesis-egress-" + testInstance
	if _, err := h.drv.Create(ctx, driver.Spec{Name: name, Image: testImage, Runtime: sandbox.RuntimeRunc,
		Labels: map[string]string{driver.LabelInstance: testInstance, driver.LabelPurpose: driver.PurposeEgressGateway}}); err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(h.dir, "egress-run")
	if err := os.MkdirAll(runDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := h.svc.Drain(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := h.drv.Inspect(ctx, name); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("gateway container after the drain: %v; want removed", err)
	}
	if exists(runDir) {
		t.Errorf("gateway run directory %s left after the drain", runDir)
	}
	if caps := h.svc.NetworkCapabilities(); caps.Gateway != "down" || caps.Modes["allowlist"] {
		t.Errorf("gateway after the drain: %+v; want down", caps)
	}
}
