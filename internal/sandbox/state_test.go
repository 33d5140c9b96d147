package sandbox

import (
	"errors"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
)

func TestTransitions(t *testing.T) {
	t.Parallel()
	allowed := [][2]State{
		{StateCreated, StateStarting}, {StateStarting, StateReady}, {StateReady, StateLeased},
		{StateLeased, StateBusy}, {StateBusy, StateIdle}, {StateIdle, StateLeased},
		{StateReady, StateDraining}, {StateDraining, StateDestroyed}, {StateStarting, StateFailed},
		{StateFailed, StateDestroyed}, {StateLeased, StateDraining}, {StateDraining, StateIdle},
		{StateDraining, StateReady},
	}
	for _, p := range allowed {
		if err := Transition(p[0], p[1]); err != nil {
			t.Errorf("%s → %s refused: %v", p[0], p[1], err)
		}
	}
	refused := [][2]State{
		{StateDestroyed, StateReady}, {StateDestroyed, StateFailed}, {StateCreated, StateReady},
		{StateDraining, StateLeased}, {StateFailed, StateReady},
	}
	for _, p := range refused {
		err := Transition(p[0], p[1])
		if !errors.Is(err, errdefs.ErrFailedPrecondition) || errdefs.Code(err) != "invalid_state" {
			t.Errorf("%s → %s: err %v, want failed precondition invalid_state", p[0], p[1], err)
		}
	}
	if err := Transition("bogus", StateReady); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("unknown state: %v", err)
	}
	for _, s := range AllStates {
		if s != StateDestroyed && !CanTransition(s, StateDestroyed) && s != StateDestroyed {
			t.Errorf("%s cannot be destroyed", s)
		}
		if s != StateDestroyed && s != StateFailed && !CanTransition(s, StateFailed) {
			t.Errorf("%s cannot fail", s)
		}
	}
}

func TestFinalJobState(t *testing.T) {
	t.Parallel()
	cases := []struct {
		r    ExitReason
		code int
		want JobState
	}{
		{ExitExited, 0, JobSucceeded}, {ExitExited, 3, JobFailed}, {ExitTimeout, 124, JobFailed},
		{ExitOOM, 137, JobFailed}, {ExitSignal, 137, JobFailed}, {ExitCanceled, 0, JobCanceled}, {ExitLost, 0, JobLost},
	}
	for _, c := range cases {
		if got := FinalJobState(c.r, c.code); got != c.want || !got.Final() {
			t.Errorf("%s/%d = %s, want %s", c.r, c.code, got, c.want)
		}
	}
	if JobRunning.Final() || JobPending.Final() {
		t.Error("running/pending must not be final")
	}
}

func TestIDs(t *testing.T) {
	t.Parallel()
	id := NewID("sbx")
	if !ValidID("sbx", id) || ValidID("job", id) || ValidID("sbx", "sbx_../../etc") {
		t.Fatalf("ValidID wrong for %q", id)
	}
	if NewID("sbx") == id {
		t.Fatal("ids repeat")
	}
}

func TestExpired(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	exp := now.Add(time.Minute)
	s := Sandbox{ExpiresAt: &exp}
	if s.Expired(now) || !s.Expired(exp) || (&Sandbox{}).Expired(now) {
		t.Fatal("Expired wrong")
	}
}
