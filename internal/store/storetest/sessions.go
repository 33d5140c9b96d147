package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// runSessions checks session records: round trip, tenant isolation,
// updates keeping identity fields, and not-found classes.
func testSessions(t *testing.T, st store.Store) {
	{
		ctx := context.Background()
		now := time.Date(2026, 5, 1, 12, 0, 0, 123, time.UTC)
		sb := &sandbox.Sandbox{ID: sandbox.NewID("sbx"), Tenant: "a", Profile: "p", Runtime: "runc", RiskLevel: "low",
			State: sandbox.StateReady, Image: "i", CreatedAt: now, UpdatedAt: now}
		if err := st.CreateSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
		se := &sandbox.Session{ID: sandbox.NewID("ses"), Tenant: "a", SandboxID: sb.ID, Kind: sandbox.SessionShell,
			State: sandbox.SessionActive, CreatedAt: now, UpdatedAt: now}
		if err := st.CreateSession(ctx, se); err != nil {
			t.Fatal(err)
		}
		if err := st.CreateSession(ctx, se); !errors.Is(err, errdefs.ErrAlreadyExists) {
			t.Fatalf("duplicate session: %v", err)
		}
		got, err := st.GetSession(ctx, "a", se.ID)
		if err != nil || got.Kind != se.Kind || got.SandboxID != sb.ID || !got.CreatedAt.Equal(now) {
			t.Fatalf("round trip: %+v %v", got, err)
		}
		if _, err := st.GetSession(ctx, "b", se.ID); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("other tenant sees session: %v", err)
		}
		if _, err := st.GetSession(ctx, "", "ses_nope"); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("unknown session: %v", err)
		}
		up, err := st.UpdateSession(ctx, se.ID, func(x *sandbox.Session) error {
			x.Cwd, x.Runs, x.Tenant, x.State = "/tmp", 3, "evil", sandbox.SessionClosed
			return nil
		})
		if err != nil || up.Cwd != "/tmp" || up.Runs != 3 || up.Tenant != "a" || up.State != sandbox.SessionClosed {
			t.Fatalf("update: %+v %v", up, err)
		}
		again, _ := st.GetSession(ctx, "", se.ID)
		if again.Runs != 3 || again.Tenant != "a" {
			t.Fatalf("update not stored: %+v", again)
		}
		boom := errors.New("boom")
		if _, err := st.UpdateSession(ctx, se.ID, func(x *sandbox.Session) error { x.Runs = 99; return boom }); !errors.Is(err, boom) {
			t.Fatalf("fn error: %v", err)
		}
		if again, _ := st.GetSession(ctx, "", se.ID); again.Runs != 3 {
			t.Fatal("aborted update was stored")
		}
	}
}
