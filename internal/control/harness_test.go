package control_test

import (
	"testing"

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
