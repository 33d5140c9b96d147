package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/egress"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// testNetworks checks network records: round trip, one per sandbox, tenant
// isolation, If-Match versions, status filters, and event paging by cursor.
func testNetworks(t *testing.T, st store.Store) {
	ctx := context.Background()
	a, b := newSandbox(sandbox.NewID("sbx"), "a", base), newSandbox(sandbox.NewID("sbx"), "b", base)
	for _, sb := range []*sandbox.Sandbox{a, b} {
		if err := st.CreateSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	pol := egress.Policy{Mode: egress.ModeAllowlist, Allow: []egress.Rule{{Host: "api.example.com", Ports: []int{443}}}}
	n := &sandbox.Network{SandboxID: a.ID, Tenant: "a", Policy: pol, Status: sandbox.NetworkPending, UpdatedAt: base.In(east)}
	if err := st.CreateSandboxNetwork(ctx, n); err != nil {
		t.Fatalf("CreateSandboxNetwork: %v", err)
	}
	if n.ResourceVersion != 1 {
		t.Errorf("ResourceVersion after create = %d; want 1", n.ResourceVersion)
	}
	if err := st.CreateSandboxNetwork(ctx, n); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("second create: %v; want ErrAlreadyExists", err)
	}
	if err := st.CreateSandboxNetwork(ctx, &sandbox.Network{SandboxID: "sbx_nope", Tenant: "a"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("create for unknown sandbox: %v; want ErrNotFound", err)
	}
	got, err := st.GetSandboxNetwork(ctx, "a", a.ID)
	if err != nil || got.Policy.Mode != egress.ModeAllowlist || len(got.Policy.Allow) != 1 || got.Policy.Allow[0].Ports[0] != 443 ||
		got.Status != sandbox.NetworkPending || !got.UpdatedAt.Equal(base) || got.ResourceVersion != 1 {
		t.Fatalf("round trip = %+v, %v", got, err)
	}
	if _, err := st.GetSandboxNetwork(ctx, "b", a.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("other tenant sees network: %v", err)
	}
	if _, err := st.GetSandboxNetwork(ctx, "", b.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("sandbox without network: %v; want ErrNotFound", err)
	}
	later := base.Add(time.Second)
	up, err := st.UpdateSandboxNetwork(ctx, a.ID, 1, later, func(x *sandbox.Network) error {
		x.Status, x.GatewayIP, x.Tenant, x.SandboxID = sandbox.NetworkActive, "10.1.2.3", "evil", "sbx_other"
		return nil
	})
	if err != nil || up.ResourceVersion != 2 || up.Status != sandbox.NetworkActive || up.Tenant != "a" || up.SandboxID != a.ID || !up.UpdatedAt.Equal(later) {
		t.Fatalf("update = %+v, %v", up, err)
	}
	if _, err := st.UpdateSandboxNetwork(ctx, a.ID, 1, later, func(*sandbox.Network) error {
		t.Error("fn called despite a stale version")
		return nil
	}); !errors.Is(err, errdefs.ErrPreconditionFailed) {
		t.Errorf("stale If-Match: %v; want ErrPreconditionFailed", err)
	}
	boom := errors.New("boom")
	if _, err := st.UpdateSandboxNetwork(ctx, a.ID, 0, later, func(x *sandbox.Network) error { x.GatewayIP = "x"; return boom }); !errors.Is(err, boom) {
		t.Errorf("fn error: %v", err)
	}
	if _, err := st.UpdateSandboxNetwork(ctx, "sbx_nope", 0, later, func(*sandbox.Network) error { return nil }); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("update unknown: %v; want ErrNotFound", err)
	}
	if again, _ := st.GetSandboxNetwork(ctx, "", a.ID); again.GatewayIP != "10.1.2.3" || again.ResourceVersion != 2 {
		t.Errorf("stored after aborted update = %+v", again)
	}
	if err := st.CreateSandboxNetwork(ctx, &sandbox.Network{SandboxID: b.ID, Tenant: "b", Status: sandbox.NetworkEnforcementDown, UpdatedAt: base}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		statuses []sandbox.NetworkStatus
		want     int
	}{{nil, 2}, {[]sandbox.NetworkStatus{sandbox.NetworkActive}, 1}, {[]sandbox.NetworkStatus{sandbox.NetworkActive, sandbox.NetworkEnforcementDown}, 2}, {[]sandbox.NetworkStatus{sandbox.NetworkRemoved}, 0}} {
		list, err := st.ListSandboxNetworks(ctx, tc.statuses...)
		if err != nil || len(list) != tc.want {
			t.Errorf("ListSandboxNetworks(%v) = %d records, %v; want %d", tc.statuses, len(list), err, tc.want)
		}
	}

	// Events: appended in order, paged by cursor, per sandbox; unknown
	// sandboxes dropped.
	var evs []sandbox.NetworkEvent
	for i := range 7 {
		sb := a.ID
		if i%2 == 1 {
			sb = b.ID
		}
		evs = append(evs, sandbox.NetworkEvent{SandboxID: sb, Time: base.Add(time.Duration(i) * time.Millisecond).In(west),
			Name: fmt.Sprintf("h%d.example.com", i), Address: "203.0.113.7", Port: 443, Proto: egress.ProtoTLS,
			Decision: egress.DecisionAllow, Reason: "rule", BytesUp: int64(i), BytesDown: int64(10 * i), DurationMS: int64(100 * i)})
	}
	evs = append(evs, sandbox.NetworkEvent{SandboxID: "sbx_nope", Time: base, Proto: egress.ProtoDNS, Decision: egress.DecisionDeny})
	if err := st.AppendNetworkEvents(ctx, evs[:3]); err != nil {
		t.Fatalf("AppendNetworkEvents: %v", err)
	}
	if err := st.AppendNetworkEvents(ctx, evs[3:]); err != nil {
		t.Fatalf("AppendNetworkEvents: %v", err)
	}
	var seen []sandbox.NetworkEvent
	var cursor int64
	for range 10 {
		page, err := st.ListNetworkEvents(ctx, a.ID, cursor, 2)
		if err != nil {
			t.Fatalf("ListNetworkEvents: %v", err)
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			if e.Cursor <= cursor {
				t.Fatalf("cursor %d not after %d", e.Cursor, cursor)
			}
			cursor = e.Cursor
		}
		seen = append(seen, page...)
	}
	if len(seen) != 4 {
		t.Fatalf("paged events of a = %d; want 4", len(seen))
	}
	for i, e := range seen {
		w := evs[2*i]
		if e.Name != w.Name || e.SandboxID != a.ID || !e.Time.Equal(w.Time) || e.Time.Location() != time.UTC ||
			e.BytesDown != w.BytesDown || e.DurationMS != w.DurationMS || e.Port != 443 || e.Proto != w.Proto || e.Decision != w.Decision || e.Reason != "rule" {
			t.Errorf("event %d = %+v; want %+v", i, e, w)
		}
	}
	if rest, err := st.ListNetworkEvents(ctx, b.ID, 0, 100); err != nil || len(rest) != 3 {
		t.Errorf("events of b = %d, %v; want 3", len(rest), err)
	}
	if _, err := st.ListNetworkEvents(ctx, a.ID, 0, 0); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("limit 0: %v; want ErrInvalidArgument", err)
	}
}
