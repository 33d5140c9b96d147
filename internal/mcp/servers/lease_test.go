package servers

import (
	"errors"
	"net/http"
	"slices"
	"testing"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// TestStartOnLease: a lease's servers start all or none. Started on a
// lease they name it and their key; when one cannot start, the ones
// started are deleted and the lease is released. CheckLeaseServers
// refuses, before any lease exists, too many servers, a lease_id and a
// server that holds operator secrets.
func TestStartOnLease(t *testing.T) {
	t.Parallel()
	m, fl, _, _ := newReservedManager(t)
	ctx := t.Context()
	lease := func() *sandbox.Lease {
		l := &sandbox.Lease{ID: sandbox.NewID("lse"), Tenant: "a", SandboxID: sandbox.NewID("sbx"), Runtime: sandbox.RuntimeRunsc, State: sandbox.LeaseActive}
		fl.mu.Lock()
		fl.leases[l.ID] = l
		fl.mu.Unlock()
		return l
	}

	ok := lease()
	made, err := m.StartOnLease(ctx, "a", ok.ID, "key_1", []CreateRequest{{Catalog: "plain"}, {Catalog: "plain"}})
	if err != nil || len(made) != 2 {
		t.Fatalf("StartOnLease of two servers: %v, %v", made, err)
	}
	for _, inst := range made {
		if inst.LeaseID != ok.ID || inst.CreatedBy != "key_1" || inst.SandboxID != ok.SandboxID {
			t.Errorf("a lease's server: lease %s, created by %s, sandbox %s; want %s, key_1, %s", inst.LeaseID, inst.CreatedBy, inst.SandboxID, ok.ID, ok.SandboxID)
		}
	}
	before := len(m.List("a"))

	bad := lease()
	_, err = m.StartOnLease(ctx, "a", bad.ID, "key_1", []CreateRequest{{Catalog: "plain"}, {Catalog: "nope"}})
	if !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("StartOnLease with an unknown entry: %v, want not found", err)
	}
	if n := len(m.List("a")); n != before {
		t.Errorf("after a failed StartOnLease the tenant has %d servers, want the %d before it", n, before)
	}
	fl.mu.Lock()
	released := slices.Clone(fl.released)
	fl.mu.Unlock()
	if !slices.Contains(released, bad.ID) || slices.Contains(released, ok.ID) {
		t.Errorf("released leases %v; want %s (the failed one) and not %s", released, bad.ID, ok.ID)
	}

	many := make([]CreateRequest, MaxLeaseServers+1)
	for i := range many {
		many[i] = CreateRequest{Catalog: "plain"}
	}
	for name, reqs := range map[string][]CreateRequest{
		"too many":   many,
		"a lease_id": {{Catalog: "plain", LeaseID: ok.ID}},
	} {
		if err := m.CheckLeaseServers(ctx, "a", reqs); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("CheckLeaseServers, %s: %v, want invalid", name, err)
		}
	}
	wantCode(t, "CheckLeaseServers, env secrets", m.CheckLeaseServers(ctx, "a", []CreateRequest{{Catalog: "plain"}, {Catalog: "env-server"}}),
		http.StatusBadRequest, CodeNeedOwnSandbox)
	if err := m.CheckLeaseServers(ctx, "a", []CreateRequest{{Catalog: "plain"}}); err != nil {
		t.Errorf("CheckLeaseServers of a plain entry: %v", err)
	}
}
