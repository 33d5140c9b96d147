package jobs

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// stallSandboxes attaches to one running sandbox, or, with stall, waits
// until the caller's ctx ends (a record that does not come back).
type stallSandboxes struct{ stall bool }

func (f stallSandboxes) Attach(ctx context.Context, tenant, id string, _ control.AttachOptions) (*control.Attachment, error) {
	if f.stall {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &control.Attachment{Sandbox: &sandbox.Sandbox{ID: id, Tenant: tenant, State: sandbox.StateReady}}, nil
}

func (stallSandboxes) FailIfGone(context.Context, *sandbox.Sandbox) (string, bool) { return "", false }

func (stallSandboxes) ListSandboxes(context.Context, control.SandboxFilter) ([]*sandbox.Sandbox, error) {
	return nil, nil
}

func (stallSandboxes) ProfileConfig(string) (*config.Profile, bool) { return nil, false }

// stallRecords is a store whose job insert waits until the caller's ctx
// ends (the single write connection held by someone else); nothing else
// is called before it.
type stallRecords struct{ records }

func (stallRecords) CreateJob(ctx context.Context, _ *sandbox.Job) error {
	<-ctx.Done()
	return ctx.Err()
}

// stalledManager is a Manager whose job records wait for their context,
// with sbx's sandboxes.
func stalledManager(sbx stallSandboxes) *Manager {
	return &Manager{
		sbx: sbx, store: stallRecords{},
		lim: config.Limits{MaxExecTimeoutMS: 600_000, DefaultExecTimeoutMS: 60_000, MaxOutputBytes: 1 << 20, DefaultOutputBytes: 1 << 20},
		now: time.Now, log: slog.New(slog.DiscardHandler), obs: noObserver{},
	}
}

// TestExecDeadlineFromArrival: a synchronous exec answers once its
// timeout, the kill grace and execSlack have passed since it arrived,
// whatever it waits for on the way to the agent, with 504
// deadline_exceeded saying what it was waiting for, while its caller
// still waits. (The host deadline used to start only at the agent call, so
// a wait before it lasted as long as the caller's patience.)
func TestExecDeadlineFromArrival(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		sbx     stallSandboxes
		waiting string
	}{
		{"attach", stallSandboxes{stall: true}, "waiting for the sandbox"},
		{"job record", stallSandboxes{}, "waiting for the job's record"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				m := stalledManager(tc.sbx)
				const timeoutMS = 30_000
				start := time.Now()
				_, err := m.Exec(context.Background(), ExecInput{Tenant: "a", SandboxID: "sbx_x", Script: "true", TimeoutMS: timeoutMS})
				took := time.Since(start)
				if want := timeoutMS*time.Millisecond + killGrace + execSlack; took != want {
					t.Errorf("answered after %v, want %v (its timeout, the kill grace and the slack)", took, want)
				}
				if !errors.Is(err, errdefs.ErrDeadlineExceeded) || errdefs.Code(err) != "deadline_exceeded" || errdefs.HTTPStatus(err) != 504 {
					t.Fatalf("error %v (code %s, status %d); want 504 deadline_exceeded", err, errdefs.Code(err), errdefs.HTTPStatus(err))
				}
				if !strings.Contains(err.Error(), tc.waiting) || !strings.Contains(err.Error(), "30000 ms") {
					t.Errorf("error %q does not say the timeout and that it was %s", err, tc.waiting)
				}
			})
		})
	}

	// A background job's start likewise answers within jobStartTimeout
	// of its arrival.
	for _, tc := range []struct {
		name    string
		sbx     stallSandboxes
		waiting string
	}{
		{"start attach", stallSandboxes{stall: true}, "waiting for the sandbox"},
		{"start job record", stallSandboxes{}, "waiting for the job's record"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				m := stalledManager(tc.sbx)
				start := time.Now()
				_, err := m.StartJob(context.Background(), ExecInput{Tenant: "a", SandboxID: "sbx_x", Script: "sleep 1000"})
				if took := time.Since(start); took != jobStartTimeout {
					t.Errorf("answered after %v, want %v", took, jobStartTimeout)
				}
				if !errors.Is(err, errdefs.ErrDeadlineExceeded) || errdefs.HTTPStatus(err) != 504 || !strings.Contains(err.Error(), tc.waiting) {
					t.Errorf("error %v (status %d); want 504 deadline_exceeded %s", err, errdefs.HTTPStatus(err), tc.waiting)
				}
			})
		})
	}

	// A caller that gives up first gets its own error, not the exec's.
	t.Run("caller gone", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			m := stalledManager(stallSandboxes{stall: true})
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err := m.Exec(ctx, ExecInput{Tenant: "a", SandboxID: "sbx_x", Script: "true", TimeoutMS: 30_000})
			if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errdefs.ErrDeadlineExceeded) {
				t.Errorf("error %v; want the caller's context.DeadlineExceeded", err)
			}
		})
	})
}
