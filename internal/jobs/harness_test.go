package jobs_test

import (
	"testing"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/controltest"
)

// harness is the shared service harness (over the fake driver, with real
// agents), with the jobs manager built and hooked in.
type harness struct{ *controltest.Harness }

// newHarness builds a started service; configure, if not nil, edits the
// settings first.
func newHarness(t *testing.T, configure func(*config.Config)) *harness {
	t.Helper()
	return &harness{controltest.New(t, configure)}
}
