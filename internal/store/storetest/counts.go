package storetest

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

func testCountSandboxesByState(t *testing.T, s store.Store) {
	ctx := t.Context()
	got, err := s.CountSandboxesByState(ctx)
	if err != nil {
		t.Fatalf("CountSandboxesByState of an empty store: %v", err)
	}
	if len(got) != 0 {
		t.Errorf("CountSandboxesByState of an empty store = %v, want an empty map", got)
	}
	want := map[sandbox.State]int{sandbox.StateReady: 3, sandbox.StateIdle: 2, sandbox.StateDestroyed: 1}
	i := 0
	for st, n := range want {
		for range n {
			// Of several tenants: the count is of every tenant.
			sb := newSandbox(fmt.Sprintf("sbx_n%d", i), fmt.Sprintf("tenant-%d", i%2), base.Add(time.Duration(i)))
			sb.State = st
			mustCreateSandbox(t, s, sb)
			i++
		}
	}
	// A state change moves a sandbox from one count to another.
	if _, err := s.UpdateSandbox(ctx, "sbx_n0", 0, base, func(sb *sandbox.Sandbox) error {
		want[sb.State]--
		if want[sb.State] == 0 {
			delete(want, sb.State)
		}
		sb.State = sandbox.StateFailed
		return nil
	}); err != nil {
		t.Fatalf("UpdateSandbox: %v", err)
	}
	want[sandbox.StateFailed] = 1
	if got, err = s.CountSandboxesByState(ctx); err != nil {
		t.Fatalf("CountSandboxesByState: %v", err)
	}
	if !maps.Equal(got, want) {
		t.Errorf("CountSandboxesByState = %v, want %v", got, want)
	}
}
