package control_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/sandbox"
)

// slowStart is a driver whose start call starts the container (and so,
// in the harness, its agent) and then holds its answer until released,
// as a daemon does while it writes down the container's new state.
type slowStart struct {
	driver.Driver
	release chan error    // the start call's answer
	held    chan struct{} // closed once a start call holds its answer
	done    chan struct{} // closed once the held call answered
}

func (d *slowStart) Start(ctx context.Context, id string) error {
	if err := d.Driver.Start(ctx, id); err != nil {
		return err
	}
	close(d.held)
	defer close(d.done)
	select {
	case err := <-d.release:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestCreateAnswersWhenTheAgentAnswers: a create is ready once its agent
// answers, while the daemon's start call still runs; the call's answer is
// still taken, and one that fails after all fails the sandbox.
func TestCreateAnswersWhenTheAgentAnswers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		startErr error
	}{
		{name: "start answers ok"},
		{name: "start fails late", startErr: errors.New("injected late start failure")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			slow := &slowStart{release: make(chan error), held: make(chan struct{}), done: make(chan struct{})}
			h := newHarnessWith(t, nil, func(c *control.Config) {
				slow.Driver = c.Driver
				c.Driver = slow
			})
			ctx := context.Background()
			type result struct {
				sb  *sandbox.Sandbox
				err error
			}
			created := make(chan result, 1)
			go func() {
				sb, err := h.Svc.CreateSandbox(ctx, withTenant(control.CreateSandboxInput{}, "a"))
				created <- result{sb, err}
			}()
			var r result
			select {
			case r = <-created:
			case <-time.After(30 * time.Second):
				slow.release <- nil
				t.Fatal("the create waited for the start call's answer")
			}
			if r.err != nil {
				t.Fatalf("CreateSandbox: %v", r.err)
			}
			select {
			case <-slow.done:
				t.Fatal("the start call answered before the create; the test proves nothing")
			default:
			}
			if r.sb.State != sandbox.StateReady {
				t.Fatalf("created sandbox is %s, want ready", r.sb.State)
			}
			// The agent serves while the start call is held.
			a, err := h.Svc.Attach(ctx, "a", r.sb.ID, control.AttachOptions{})
			if err != nil {
				t.Fatalf("attach before the start call answered: %v", err)
			}
			res, err := a.Agent.Exec(ctx, agentproto.ExecRequest{Command: []string{"echo", "hi"}})
			a.Release()
			if err != nil || string(res.Stdout) != "hi\n" {
				t.Fatalf("exec before the start call answered: %v, %q", err, res.Stdout)
			}

			slow.release <- tc.startErr
			<-slow.done
			if tc.startErr == nil {
				if rec := h.Record(r.sb.ID); rec.State != sandbox.StateReady {
					t.Errorf("after a good start answer the sandbox is %s (%s), want ready", rec.State, rec.FailureReason)
				}
				return
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				rec := h.Record(r.sb.ID)
				if rec.State == sandbox.StateFailed {
					if !strings.Contains(rec.FailureReason, tc.startErr.Error()) {
						t.Errorf("failure reason %q does not name the start's error", rec.FailureReason)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("sandbox is %s after its start call failed, want failed", rec.State)
				}
				time.Sleep(10 * time.Millisecond)
			}
			// Its container goes with it (markFailed's teardown follows
			// the record's change).
			for len(h.Containers()) != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("%d containers left behind by the failed start", len(h.Containers()))
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}
