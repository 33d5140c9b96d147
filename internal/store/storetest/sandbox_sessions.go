package storetest

import (
	"context"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// testSandboxSessions checks that ListSandboxSessions returns every session
// of one sandbox, of any tenant and state, oldest first, and nothing of
// another sandbox.
func testSandboxSessions(t *testing.T, st store.Store) {
	ctx := context.Background()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	mk := func(tenant string) *sandbox.Sandbox {
		sb := &sandbox.Sandbox{ID: sandbox.NewID("sbx"), Tenant: tenant, Profile: "p", Runtime: "runc", RiskLevel: "low",
			State: sandbox.StateReady, Image: "i", CreatedAt: now, UpdatedAt: now}
		if err := st.CreateSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
		return sb
	}
	a, b := mk("a"), mk("b")
	if got, err := st.ListSandboxSessions(ctx, a.ID); err != nil || len(got) != 0 {
		t.Fatalf("sessions of a sandbox without any: %v, %v", got, err)
	}
	var want []string
	for i, kind := range []sandbox.SessionKind{sandbox.SessionPython, sandbox.SessionShell, sandbox.SessionShell} {
		prefix := "ses"
		if kind == sandbox.SessionPython {
			prefix = "ctx"
		}
		se := &sandbox.Session{ID: sandbox.NewID(prefix), Tenant: []string{"a", "x", "a"}[i], SandboxID: a.ID, Kind: kind,
			State: sandbox.SessionActive, CreatedAt: now.Add(time.Duration(3-i) * time.Minute), UpdatedAt: now}
		if err := st.CreateSession(ctx, se); err != nil {
			t.Fatal(err)
		}
		want = append([]string{se.ID}, want...) // created later ones first
	}
	if _, err := st.UpdateSession(ctx, want[0], func(se *sandbox.Session) error { se.State = sandbox.SessionClosed; return nil }); err != nil {
		t.Fatal(err)
	}
	other := &sandbox.Session{ID: sandbox.NewID("ses"), Tenant: "b", SandboxID: b.ID, Kind: sandbox.SessionShell,
		State: sandbox.SessionActive, CreatedAt: now, UpdatedAt: now}
	if err := st.CreateSession(ctx, other); err != nil {
		t.Fatal(err)
	}
	got, err := st.ListSandboxSessions(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d sessions, want %d", len(got), len(want))
	}
	for i, se := range got {
		if se.ID != want[i] || se.SandboxID != a.ID {
			t.Errorf("session %d: %s of %s, want %s (oldest first)", i, se.ID, se.SandboxID, want[i])
		}
	}
	if got[0].State != sandbox.SessionClosed {
		t.Errorf("closed session listed as %s", got[0].State)
	}
}
