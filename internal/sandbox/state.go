package sandbox

import (
	"fmt"

	"genesis.dev/sandbox/internal/errdefs"
)

// State is the lifecycle state of a sandbox.
type State string

// Sandbox states. created → starting → ready → (leased ⇄ busy ⇄ idle) →
// draining → destroyed, and any non-final state → failed. A running
// sandbox may be paused (its processes frozen, its memory held) or
// hibernated (its state on disk, no container) and come back to the state
// it left (Suspension.ResumeState).
const (
	StateCreated    State = "created"
	StateStarting   State = "starting"
	StateReady      State = "ready"
	StateLeased     State = "leased"
	StateBusy       State = "busy"
	StateIdle       State = "idle"
	StatePaused     State = "paused"
	StateHibernated State = "hibernated"
	StateDraining   State = "draining"
	StateDestroyed  State = "destroyed"
	StateFailed     State = "failed"
)

// AllStates lists every state in lifecycle order.
var AllStates = []State{StateCreated, StateStarting, StateReady, StateLeased, StateBusy, StateIdle, StatePaused, StateHibernated,
	StateDraining, StateDestroyed, StateFailed}

// transitions is the one table of allowed sandbox state changes.
var transitions = map[State][]State{
	StateCreated:  {StateStarting, StateDraining, StateDestroyed, StateFailed},
	StateStarting: {StateReady, StateDraining, StateDestroyed, StateFailed},
	StateReady:    {StateLeased, StateBusy, StateIdle, StatePaused, StateDraining, StateDestroyed, StateFailed},
	StateLeased:   {StateBusy, StateIdle, StateReady, StatePaused, StateDraining, StateDestroyed, StateFailed},
	StateBusy:     {StateLeased, StateIdle, StateReady, StatePaused, StateDraining, StateDestroyed, StateFailed},
	StateIdle:     {StateLeased, StateBusy, StateReady, StatePaused, StateDraining, StateDestroyed, StateFailed},
	// Every suspension starts as paused (nothing new reaches inside) and
	// ends in the state the sandbox left; a hibernation goes on from
	// paused to hibernated once its state is on disk.
	StatePaused:     {StateReady, StateLeased, StateBusy, StateIdle, StateHibernated, StateDraining, StateDestroyed, StateFailed},
	StateHibernated: {StatePaused, StateReady, StateLeased, StateBusy, StateIdle, StateDraining, StateDestroyed, StateFailed},
	// draining → ready → idle: a reset pool member returns to its pool
	// (on_release: reset), ready (nobody's, not claimable) while its ready
	// hooks run, as a new member is; every other draining sandbox is
	// destroyed.
	StateDraining:  {StateIdle, StateReady, StateDestroyed, StateFailed},
	StateFailed:    {StateDraining, StateDestroyed},
	StateDestroyed: {},
}

// Valid reports whether s is a known state.
func (s State) Valid() bool { _, ok := transitions[s]; return ok }

// Suspended reports whether a sandbox in state s is paused or hibernated.
func (s State) Suspended() bool { return s == StatePaused || s == StateHibernated }

// Final reports whether no further transition leaves s.
func (s State) Final() bool { return s == StateDestroyed }

// Running reports whether a sandbox in state s has a live container that can
// run jobs.
func (s State) Running() bool {
	switch s {
	case StateReady, StateLeased, StateBusy, StateIdle:
		return true
	}
	return false
}

// CanTransition reports whether from → to is allowed by the table.
func CanTransition(from, to State) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Transition checks from → to against the table and returns an error of
// class ErrFailedPrecondition when it is not allowed.
func Transition(from, to State) error {
	if !from.Valid() || !to.Valid() {
		return errdefs.Invalid("unknown sandbox state %q → %q", from, to)
	}
	if !CanTransition(from, to) {
		return errdefs.WithCode("invalid_state", fmt.Errorf("sandbox cannot go from %s to %s: %w", from, to, errdefs.ErrFailedPrecondition))
	}
	return nil
}

// JobState is the state of a job record.
type JobState string

// Job states. Every job is recorded as pending or running before it runs and
// always ends in exactly one final state.
const (
	JobPending   JobState = "pending"
	JobRunning   JobState = "running"
	JobSucceeded JobState = "succeeded" // exited with code 0
	JobFailed    JobState = "failed"    // exited non-zero, timeout, signal, oom
	JobCanceled  JobState = "canceled"
	JobLost      JobState = "lost" // the service lost track (crash, sandbox gone)
)

// Final reports whether the job state is final.
func (s JobState) Final() bool {
	switch s {
	case JobSucceeded, JobFailed, JobCanceled, JobLost:
		return true
	}
	return false
}

// ExitReason says why a job ended.
type ExitReason string

// Exit reasons.
const (
	ExitExited   ExitReason = "exited"
	ExitTimeout  ExitReason = "timeout"
	ExitSignal   ExitReason = "signal"
	ExitOOM      ExitReason = "oom"
	ExitCanceled ExitReason = "canceled"
	ExitLost     ExitReason = "lost"
)

// FinalJobState maps an exit reason and code to the job's final state.
func FinalJobState(reason ExitReason, code int) JobState {
	switch reason {
	case ExitExited:
		if code == 0 {
			return JobSucceeded
		}
		return JobFailed
	case ExitCanceled:
		return JobCanceled
	case ExitLost:
		return JobLost
	default:
		return JobFailed
	}
}
