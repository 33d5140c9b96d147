package control_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/controltest"
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
	if caps := h.Svc.NetworkCapabilities(); caps.Gateway != "idle" {
		t.Fatalf("gateway before the drain: %+v; want idle", caps)
	}
	// What a started gateway leaves: its container and run directory.
	name := "genesis-egress-" + controltest.Instance
	if _, err := h.Drv.Create(ctx, driver.Spec{Name: name, Image: controltest.Image, Runtime: sandbox.RuntimeRunc,
		Labels: map[string]string{driver.LabelInstance: controltest.Instance, driver.LabelPurpose: driver.PurposeEgressGateway}}); err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(h.Dir, "egress-run")
	if err := os.MkdirAll(runDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := h.Svc.Drain(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Drv.Inspect(ctx, name); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("gateway container after the drain: %v; want removed", err)
	}
	if controltest.Exists(runDir) {
		t.Errorf("gateway run directory %s left after the drain", runDir)
	}
	if caps := h.Svc.NetworkCapabilities(); caps.Gateway != "down" || caps.Modes["allowlist"] {
		t.Errorf("gateway after the drain: %+v; want down", caps)
	}
}
