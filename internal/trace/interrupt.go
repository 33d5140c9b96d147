package trace

import (
	"context"
	"encoding/json"
	"fmt"

	"genesis.dev/sandbox/internal/errdefs"
)

// Gate is what producers ask before an agent action (a browser action, an
// exec or job, an MCP tool call) on a sandbox: nil lets it run, an error
// (ErrConflict with code "paused" or "aborted") refuses it at once.
type Gate interface {
	Admit(ctx context.Context, tenant, sandboxID, action string) error
}

// Interrupt states of a sandbox's agent.
const (
	StateRunning = "running"
	StatePaused  = "paused"
	StateAborted = "aborted"
)

// Interruption is the interrupt state of a sandbox.
type Interruption struct {
	State string `json:"state"`
	// Steps is how many agent actions may still pass while paused.
	Steps int `json:"steps"`
}

// gate is the interrupt state its tenant set on a sandbox. It holds that
// tenant's agent only, and ends with the tenant's hold on the sandbox
// (SandboxEnding): a pooled sandbox's next holder starts running freely.
type gate struct {
	tenant string
	state  string
	steps  int
}

// Interrupt applies op (pause, resume, step, abort) for tenant's sandbox,
// records it in the trace as kind "interrupt.<op>" by actor, and returns
// the new state. Step pauses (if running) and lets one more agent action
// through; abort refuses agent actions until resume (cancelling the
// sandbox's running jobs is the caller's part).
func (s *Store) Interrupt(ctx context.Context, tenant, sandboxID, op, actor string) (Interruption, error) {
	if _, err := s.get(tenant, sandboxID, true); err != nil {
		return Interruption{}, err
	}
	s.mu.Lock()
	g := s.gates[sandboxID]
	if g == nil || g.tenant != tenant {
		g = &gate{tenant: tenant, state: StateRunning}
		s.gates[sandboxID] = g
	}
	switch op {
	case "pause":
		if g.state == StateRunning {
			g.state = StatePaused
		}
		g.steps = 0
	case "resume":
		g.state, g.steps = StateRunning, 0
	case "step":
		if g.state == StateAborted {
			s.mu.Unlock()
			return Interruption{}, errdefs.WithCode("aborted", fmt.Errorf(
				"sandbox %s's agent was aborted: resume it before stepping: %w", sandboxID, errdefs.ErrConflict))
		}
		g.state = StatePaused
		g.steps++
	case "abort":
		g.state, g.steps = StateAborted, 0
	default:
		s.mu.Unlock()
		return Interruption{}, errdefs.Invalid("interrupt %q: want pause, resume, step or abort", op)
	}
	out := Interruption{State: g.state, Steps: g.steps}
	s.mu.Unlock()
	b, _ := json.Marshal(out)
	if _, err := s.Append(ctx, tenant, sandboxID, Event{Actor: actor, Kind: Kind("interrupt." + op), Data: b}); err != nil {
		return Interruption{}, err
	}
	return out, nil
}

// Admit is the Gate of producers: while the sandbox is paused (without a
// step left) or aborted, an agent action is refused with 409 paused or
// aborted at once, and the refusal is recorded.
func (s *Store) Admit(ctx context.Context, tenant, sandboxID, action string) error {
	s.mu.Lock()
	g := s.gates[sandboxID]
	if g == nil || g.tenant != tenant || g.state == StateRunning {
		s.mu.Unlock()
		return nil
	}
	state, stepped := g.state, false
	if g.state == StatePaused && g.steps > 0 {
		g.steps--
		stepped = true
	}
	s.mu.Unlock()
	if stepped {
		s.Record(ctx, tenant, sandboxID, Event{Actor: ActorSystem, Kind: KindInterruptStepped, Data: actionData(action)})
		return nil
	}
	s.Record(ctx, tenant, sandboxID, Event{Actor: ActorSystem, Kind: KindActionRefused, Data: actionData(action, "state", state)})
	return errdefs.WithCode(state, errdefs.Mark(fmt.Errorf("sandbox %s's agent is %s: resume its trace, or step it, to let actions through",
		sandboxID, state), errdefs.ErrConflict))
}

func actionData(action string, kv ...string) json.RawMessage {
	d := map[string]string{"action": action}
	for i := 0; i+1 < len(kv); i += 2 {
		d[kv[i]] = kv[i+1]
	}
	b, _ := json.Marshal(d)
	return b
}
