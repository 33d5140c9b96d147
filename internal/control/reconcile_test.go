package control_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/controltest"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

func TestReconcileOrphans(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		advance time.Duration // of the service clock past the orphans' creation
		removed bool
	}{
		{name: "younger than grace kept", advance: 0, removed: false},
		{name: "just under grace kept", advance: 30*time.Second - time.Second, removed: false},
		{name: "older than grace removed", advance: 30*time.Second + time.Minute, removed: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(c *config.Config) { c.Intervals.OrphanGrace = 30 * time.Second })
			ctx := context.Background()
			live := h.Create("a", control.CreateSandboxInput{})
			orphanID := sandbox.NewID("sbx")
			orphans := map[string]map[string]string{
				"genesis-" + orphanID: {driver.LabelManaged: "true", driver.LabelSandbox: orphanID,
					driver.LabelInstance: controltest.Instance, driver.LabelPurpose: "sandbox"},
				"genesis-probe-leftover": {driver.LabelManaged: "true", driver.LabelPurpose: "probe"},
			}
			foreign := map[string]map[string]string{
				// Labelled as managed by some other tool, without an instance.
				"foreign-no-instance": {driver.LabelManaged: "true", driver.LabelSandbox: sandbox.NewID("sbx")},
				"other-instance": {driver.LabelManaged: "true", driver.LabelSandbox: sandbox.NewID("sbx"),
					driver.LabelInstance: "gs-someone-else", driver.LabelPurpose: "sandbox"},
			}
			for name, labels := range orphans {
				if _, err := h.Drv.Create(ctx, driver.Spec{Name: name, Image: controltest.Image, Runtime: sandbox.RuntimeRunc, Labels: labels}); err != nil {
					t.Fatal(err)
				}
			}
			for name, labels := range foreign {
				if _, err := h.Drv.Create(ctx, driver.Spec{Name: name, Image: controltest.Image, Runtime: sandbox.RuntimeRunc, Labels: labels}); err != nil {
					t.Fatal(err)
				}
			}
			h.Clock.Advance(tc.advance)
			if err := h.Svc.Reconcile(ctx, false); err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			names := map[string]bool{}
			for _, c := range h.Containers() {
				names[c.Name] = true
			}
			for name := range orphans {
				if names[name] == tc.removed {
					t.Errorf("orphan %s present=%v, want removed=%v", name, names[name], tc.removed)
				}
			}
			if !names["genesis-"+live.ID] {
				t.Error("the container of a live sandbox was removed")
			}
			if !names["foreign-no-instance"] || !names["other-instance"] {
				t.Error("a container without this service's instance label was removed")
			}
			if r := h.Record(live.ID); r.State != sandbox.StateReady {
				t.Errorf("live sandbox is %s after reconcile, want ready", r.State)
			}
		})
	}
}

func TestReconcileBrokenContainers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		breakC func(h *harness, cid string) error
		reason string
	}{
		{name: "container removed behind our back", breakC: func(h *harness, cid string) error {
			return h.Drv.Remove(context.Background(), cid)
		}, reason: "container is gone"},
		{name: "container exited", breakC: func(h *harness, cid string) error {
			return h.Drv.Exit(cid, 137, true)
		}, reason: "exit code 137, oom_killed=true"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, nil)
			ctx := context.Background()
			broken := h.Create("a", control.CreateSandboxInput{})
			healthy := h.Create("a", control.CreateSandboxInput{})
			if err := tc.breakC(h, h.Record(broken.ID).ContainerID); err != nil {
				t.Fatal(err)
			}
			if err := h.Svc.Reconcile(ctx, false); err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			r := h.Record(broken.ID)
			if r.State != sandbox.StateFailed || !strings.Contains(r.FailureReason, tc.reason) {
				t.Errorf("broken sandbox %s %q, want failed with %q", r.State, r.FailureReason, tc.reason)
			}
			if c, ok := h.Container(broken.ID); ok {
				t.Errorf("container of the failed sandbox is left (%s)", c.State)
			}
			if controltest.Exists(h.SandboxDir(broken.ID)) {
				t.Error("dir of the failed sandbox is left")
			}
			if r := h.Record(healthy.ID); r.State != sandbox.StateReady {
				t.Errorf("healthy sandbox is %s, want ready", r.State)
			}
			if _, ok := h.Container(healthy.ID); !ok || !controltest.Exists(h.SandboxDir(healthy.ID)) {
				t.Error("healthy sandbox lost its container or dir")
			}
			h.WaitAgents(1)
		})
	}
}

// TestReconcileLaggingStatus: a ready sandbox whose container the backend
// does not report as running yet (a Pod's status lags its container's
// start) is not taken for stopped; once it reads exited, it is.
func TestReconcileLaggingStatus(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	sb := h.Create("a", control.CreateSandboxInput{})
	cid := h.Record(sb.ID).ContainerID
	if err := h.Drv.Lag(cid); err != nil {
		t.Fatal(err)
	}
	if err := h.Svc.Reconcile(ctx, false); err != nil {
		t.Fatal(err)
	}
	if r := h.Record(sb.ID); r.State != sandbox.StateReady {
		t.Fatalf("a sandbox whose status lags is %s (%s); want ready", r.State, r.FailureReason)
	}
	if err := h.Drv.Exit(cid, 1, false); err != nil {
		t.Fatal(err)
	}
	if err := h.Svc.Reconcile(ctx, false); err != nil {
		t.Fatal(err)
	}
	if r := h.Record(sb.ID); r.State != sandbox.StateFailed {
		t.Errorf("a sandbox whose container exited is %s; want failed", r.State)
	}
}

func TestReconcileStartup(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	ready := h.Create("a", control.CreateSandboxInput{})
	now := h.Clock.Now().UTC()
	mk := func(state sandbox.State) *sandbox.Sandbox {
		sb := &sandbox.Sandbox{
			ID: sandbox.NewID("sbx"), Tenant: "a", Profile: controltest.Profile, Runtime: sandbox.RuntimeRunc,
			RiskLevel: sandbox.RiskLow, State: state, Image: controltest.Image,
			Resources: sandbox.Resources{CPU: 0.5, MemoryMB: 256, Pids: 64}, CreatedAt: now, UpdatedAt: now,
		}
		if err := h.St.CreateSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(h.SandboxDir(sb.ID), "run"), 0o700); err != nil {
			t.Fatal(err)
		}
		return sb
	}
	created, starting, draining := mk(sandbox.StateCreated), mk(sandbox.StateStarting), mk(sandbox.StateDraining)
	// A pool member the previous process left ready, nobody's, before idle
	// (while its services started after a create or a reset).
	unfinished := h.Create("a", control.CreateSandboxInput{})
	if _, err := h.St.UpdateSandbox(ctx, unfinished.ID, 0, now, func(x *sandbox.Sandbox) error { x.State = sandbox.StateDraining; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := h.St.ReturnSandbox(ctx, store.Return{SandboxID: unfinished.ID, Tenant: "a", From: sandbox.StateDraining,
		To: sandbox.StateReady, RiskLevel: sandbox.RiskTrusted, Now: now}); err != nil {
		t.Fatal(err)
	}
	started := now
	var running []*sandbox.Job
	for _, st := range []sandbox.JobState{sandbox.JobRunning, sandbox.JobPending} {
		j := &sandbox.Job{ID: sandbox.NewID("job"), Tenant: "a", SandboxID: ready.ID, Command: []string{"sleep", "1"},
			State: st, CreatedAt: now, StartedAt: &started}
		if err := h.St.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		running = append(running, j)
	}

	// A periodic pass leaves a fresh create in progress alone.
	if err := h.Svc.Reconcile(ctx, false); err != nil {
		t.Fatal(err)
	}
	for _, sb := range []*sandbox.Sandbox{created, starting, unfinished} {
		if r := h.Record(sb.ID); r.State != sb.State {
			t.Errorf("periodic reconcile moved an in-progress %s sandbox to %s", sb.State, r.State)
		}
	}
	if j, _ := h.Jobs.GetJob(ctx, "a", running[0].ID); j.State != sandbox.JobRunning {
		t.Errorf("periodic reconcile moved a running job to %s", j.State)
	}

	// At startup, nothing of the previous process is in flight any more.
	if err := h.Svc.Reconcile(ctx, true); err != nil {
		t.Fatal(err)
	}
	want := map[string]sandbox.State{created.ID: sandbox.StateFailed, starting.ID: sandbox.StateFailed,
		draining.ID: sandbox.StateDestroyed, unfinished.ID: sandbox.StateDestroyed, ready.ID: sandbox.StateReady}
	for id, st := range want {
		r := h.Record(id)
		if r.State != st {
			t.Errorf("sandbox %s is %s, want %s", id, r.State, st)
		}
		if st == sandbox.StateFailed && !strings.Contains(r.FailureReason, "service stopped") {
			t.Errorf("failed sandbox reason %q", r.FailureReason)
		}
		if st != sandbox.StateReady && controltest.Exists(h.SandboxDir(id)) {
			t.Errorf("dir of %s sandbox %s is left", st, id)
		}
	}
	for _, j := range running {
		got, err := h.Jobs.GetJob(ctx, "a", j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != sandbox.JobLost || got.ExitReason != sandbox.ExitLost || got.FinishedAt == nil || got.Error == "" {
			t.Errorf("job %s after startup: %s/%s finished %v, want lost/lost with a time and an error", j.State, got.State, got.ExitReason, got.FinishedAt)
		}
	}
	if _, err := h.Jobs.Exec(ctx, jobs.ExecInput{Tenant: "a", SandboxID: ready.ID, Command: []string{"true"}}); err != nil {
		t.Errorf("the ready sandbox no longer runs jobs after startup reconcile: %v", err)
	}
}

func TestReconcileExpiresTTL(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	short := h.Create("a", control.CreateSandboxInput{TTLSeconds: 60})
	long := h.Create("a", control.CreateSandboxInput{TTLSeconds: 3600})

	h.Clock.Advance(45 * time.Second) // a wide margin: the harness clock is real time plus an offset
	if err := h.Svc.Reconcile(ctx, false); err != nil {
		t.Fatal(err)
	}
	if r := h.Record(short.ID); r.State != sandbox.StateReady {
		t.Fatalf("sandbox destroyed before its TTL: %s", r.State)
	}

	h.Clock.Advance(16 * time.Second)
	if err := h.Svc.Reconcile(ctx, false); err != nil {
		t.Fatal(err)
	}
	r := h.Record(short.ID)
	if r.State != sandbox.StateDestroyed || r.FailureReason != "ttl expired" {
		t.Errorf("expired sandbox %s %q, want destroyed with \"ttl expired\"", r.State, r.FailureReason)
	}
	h.assertGoneExceptAgents(short.ID)
	if r := h.Record(long.ID); r.State != sandbox.StateReady {
		t.Errorf("unexpired sandbox is %s", r.State)
	}
	h.WaitAgents(1)
}

// assertGoneExceptAgents checks that sandbox id has no container or dir.
func (h *harness) assertGoneExceptAgents(id string) {
	h.T.Helper()
	if _, ok := h.Container(id); ok {
		h.T.Errorf("container of %s is left", id)
	}
	if controltest.Exists(h.SandboxDir(id)) {
		h.T.Errorf("dir of %s is left", id)
	}
}

func TestReconcileStaleDirs(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	live := h.Create("a", control.CreateSandboxInput{})
	destroyed := h.Create("a", control.CreateSandboxInput{})
	if err := h.Svc.DeleteSandbox(ctx, "a", destroyed.ID); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	dirs := []struct {
		id   string
		age  bool // made an hour old
		kept bool
	}{
		{id: sandbox.NewID("sbx"), age: true, kept: false}, // no record, old
		{id: sandbox.NewID("sbx"), age: false, kept: true}, // no record, fresh: a create may be in flight
		{id: destroyed.ID, age: false, kept: false},        // record destroyed
		{id: live.ID, age: true, kept: true},               // live sandbox
	}
	for _, d := range dirs {
		p := h.SandboxDir(d.id)
		if err := os.MkdirAll(filepath.Join(p, "workspace"), 0o755); err != nil {
			t.Fatal(err)
		}
		if d.age {
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := h.Svc.Reconcile(ctx, false); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if got := controltest.Exists(h.SandboxDir(d.id)); got != d.kept {
			t.Errorf("dir %s (old=%v) exists=%v, want %v", d.id, d.age, got, d.kept)
		}
	}
	if !controltest.Exists(filepath.Join(h.SandboxDir(live.ID), "run", driver.AgentSocketRel)) {
		t.Error("the live sandbox lost its agent socket")
	}
}
