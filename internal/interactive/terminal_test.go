package interactive_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/controltest"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/interactive"
)

// TestTerminalEndsWithSandbox checks that the connections to a sandbox's
// terminals are closed when the sandbox ends, and that a terminal cannot be
// opened in another tenant's or a destroyed sandbox.
func TestTerminalEndsWithSandbox(t *testing.T) {
	t.Parallel()
	h := controltest.New(t, nil)
	ctx := context.Background()
	sb := h.Create("a", control.CreateSandboxInput{})
	if _, err := h.Terminals.Open(ctx, interactive.TerminalOptions{Tenant: "b", SandboxID: sb.ID}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("open in another tenant's sandbox: %v, want not found", err)
	}
	w, err := h.Terminals.Open(ctx, interactive.TerminalOptions{Tenant: "a", SandboxID: sb.ID})
	if err != nil {
		t.Fatal(err)
	}
	o, err := h.Terminals.Open(ctx, interactive.TerminalOptions{Tenant: "a", SandboxID: sb.ID, TerminalID: w.ID()})
	if err != nil {
		t.Fatal(err)
	}
	if !w.Writer() || o.Writer() || !w.Created() || o.Created() {
		t.Fatalf("roles: writer %v/%v created %v/%v", w.Writer(), o.Writer(), w.Created(), o.Created())
	}
	ended := make(chan error, 2)
	for _, c := range []*interactive.TerminalConn{w, o} {
		go func() {
			for {
				ev, err := c.Next()
				if err != nil {
					ended <- err
					return
				}
				if ev.Exit != nil {
					ended <- nil
					return
				}
			}
		}()
	}
	if err := h.Svc.DeleteSandbox(ctx, "a", sb.ID); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case <-ended:
		case <-time.After(30 * time.Second):
			t.Fatal("a terminal connection outlived its sandbox")
		}
	}
	if ok, _ := w.Input([]byte("x")); ok {
		t.Error("a closed connection still writes")
	}
	_, err = h.Terminals.Open(ctx, interactive.TerminalOptions{Tenant: "a", SandboxID: sb.ID})
	if errdefs.Code(err) != "sandbox_not_running" {
		t.Errorf("open in a destroyed sandbox: %v, want sandbox_not_running", err)
	}
}
