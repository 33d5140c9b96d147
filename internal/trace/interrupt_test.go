package trace_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/trace"
)

// TestInterrupt: pause refuses agent actions with paused, step lets exactly
// one through, abort refuses with aborted (and refuses step) until resume;
// every step is in the trace.
// TestInterruptEndsWithTheHold: a pause holds its tenant's agent only, and
// ends with the tenant's hold on the sandbox, so a pooled sandbox's next
// holder is not paused.
func TestInterruptEndsWithTheHold(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir(), nil)
	ctx := context.Background()
	if _, err := s.Interrupt(ctx, "t1", "sb", "pause", "api"); err != nil {
		t.Fatal(err)
	}
	if err := s.Admit(ctx, "t1", "sb", "exec"); errdefs.Code(err) != "paused" {
		t.Fatalf("t1's action on its paused sandbox: %v", err)
	}
	if err := s.Admit(ctx, "t2", "sb", "exec"); err != nil {
		t.Errorf("another tenant's action on a sandbox t1 paused: %v", err)
	}
	s.SandboxEnding(ctx, "sb", "lease ended")
	if err := s.Admit(ctx, "t1", "sb", "exec"); err != nil {
		t.Errorf("an action after the hold ended: %v", err)
	}
}

func TestInterrupt(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir(), nil)
	ctx := context.Background()
	admit := func(want string) {
		t.Helper()
		err := s.Admit(ctx, "t1", "sb", "exec")
		if want == "" && err != nil || want != "" && (!errors.Is(err, errdefs.ErrConflict) || errdefs.Code(err) != want) {
			t.Fatalf("admit: %v, want %q", err, want)
		}
	}
	op := func(name, wantState string) {
		t.Helper()
		st, err := s.Interrupt(ctx, "t1", "sb", name, "human:ann")
		if err != nil || st.State != wantState {
			t.Fatalf("%s: %+v %v, want %s", name, st, err, wantState)
		}
	}
	admit("")
	op("pause", trace.StatePaused)
	admit("paused")
	op("step", trace.StatePaused)
	admit("")
	admit("paused")
	op("abort", trace.StateAborted)
	admit("aborted")
	if _, err := s.Interrupt(ctx, "t1", "sb", "step", "api"); errdefs.Code(err) != "aborted" {
		t.Fatalf("step while aborted: %v", err)
	}
	if _, err := s.Interrupt(ctx, "t1", "sb", "rewind", "api"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("unknown op: %v", err)
	}
	op("resume", trace.StateRunning)
	admit("")
	evs, _, err := s.Read("t1", "sb", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, string(e.Kind))
	}
	want := "interrupt.pause action.refused interrupt.step interrupt.stepped action.refused interrupt.abort action.refused interrupt.resume"
	if strings.Join(kinds, " ") != want {
		t.Fatalf("trace kinds:\n%s\nwant\n%s", strings.Join(kinds, " "), want)
	}
}
