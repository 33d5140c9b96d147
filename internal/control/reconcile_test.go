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
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/sandbox"
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
			live := h.create("a", control.CreateSandboxInput{})
			orphanID := sandbox.NewID("sbx")
			orphans := map[string]map[string]string{
				"genesis-" + orphanID: {driver.LabelManaged: "true", driver.LabelSandbox: orphanID,
					driver.LabelInstance: testInstance, driver.LabelPurpose: "sandbox"},
				"genesis-probe-leftover": {driver.LabelManaged: "true", driver.LabelPurpose: "probe"},
			}
			foreign := map[string]map[string]string{
				// Labelled as managed by some other tool, without an instance.
				"foreign-no-instance": {driver.LabelManaged: "true", driver.LabelSandbox: sandbox.NewID("sbx")},
				"other-instance": {driver.LabelManaged: "true", driver.LabelSandbox: sandbox.NewID("sbx"),
					driver.LabelInstance: "gs-someone-else", driver.LabelPurpose: "sandbox"},
			}
			for name, labels := range orphans {
				if _, err := h.drv.Create(ctx, driver.Spec{Name: name, Image: testImage, Runtime: sandbox.RuntimeRunc, Labels: labels}); err != nil {
					t.Fatal(err)
				}
			}
			for name, labels := range foreign {
				if _, err := h.drv.Create(ctx, driver.Spec{Name: name, Image: testImage, Runtime: sandbox.RuntimeRunc, Labels: labels}); err != nil {
					t.Fatal(err)
				}
			}
			h.clock.Advance(tc.advance)
			if err := h.svc.Reconcile(ctx, false); err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			names := map[string]bool{}
			for _, c := range h.containers() {
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
			if r := h.record(live.ID); r.State != sandbox.StateReady {
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
			return h.drv.Remove(context.Background(), cid)
		}, reason: "container is gone"},
		{name: "container exited", breakC: func(h *harness, cid string) error {
			return h.drv.Exit(cid, 137, true)
		}, reason: "exit code 137, oom_killed=true"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, nil)
			ctx := context.Background()
			broken := h.create("a", control.CreateSandboxInput{})
			healthy := h.create("a", control.CreateSandboxInput{})
			if err := tc.breakC(h, h.record(broken.ID).ContainerID); err != nil {
				t.Fatal(err)
			}
			if err := h.svc.Reconcile(ctx, false); err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			r := h.record(broken.ID)
			if r.State != sandbox.StateFailed || !strings.Contains(r.FailureReason, tc.reason) {
				t.Errorf("broken sandbox %s %q, want failed with %q", r.State, r.FailureReason, tc.reason)
			}
			if c, ok := h.container(broken.ID); ok {
				t.Errorf("container of the failed sandbox is left (%s)", c.State)
			}
			if exists(h.sandboxDir(broken.ID)) {
				t.Error("dir of the failed sandbox is left")
			}
			if r := h.record(healthy.ID); r.State != sandbox.StateReady {
				t.Errorf("healthy sandbox is %s, want ready", r.State)
			}
			if _, ok := h.container(healthy.ID); !ok || !exists(h.sandboxDir(healthy.ID)) {
				t.Error("healthy sandbox lost its container or dir")
			}
			h.waitAgents(1)
		})
	}
}

func TestReconcileStartup(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	ready := h.create("a", control.CreateSandboxInput{})
	now := h.clock.Now().UTC()
	mk := func(state sandbox.State) *sandbox.Sandbox {
		sb := &sandbox.Sandbox{
			ID: sandbox.NewID("sbx"), Tenant: "a", Profile: testProfile, Runtime: sandbox.RuntimeRunc,
			RiskLevel: sandbox.RiskLow, State: state, Image: testImage,
			Resources: sandbox.Resources{CPU: 0.5, MemoryMB: 256, Pids: 64}, CreatedAt: now, UpdatedAt: now,
		}
		if err := h.st.CreateSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(h.sandboxDir(sb.ID), "run"), 0o700); err != nil {
			t.Fatal(err)
		}
		return sb
	}
	created, starting, draining := mk(sandbox.StateCreated), mk(sandbox.StateStarting), mk(sandbox.StateDraining)
	started := now
	var jobs []*sandbox.Job
	for _, st := range []sandbox.JobState{sandbox.JobRunning, sandbox.JobPending} {
		j := &sandbox.Job{ID: sandbox.NewID("job"), Tenant: "a", SandboxID: ready.ID, Command: []string{"sleep", "1"},
			State: st, CreatedAt: now, StartedAt: &started}
		if err := h.st.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, j)
	}

	// A periodic pass leaves a fresh create in progress alone.
	if err := h.svc.Reconcile(ctx, false); err != nil {
		t.Fatal(err)
	}
	for _, sb := range []*sandbox.Sandbox{created, starting} {
		if r := h.record(sb.ID); r.State != sb.State {
			t.Errorf("periodic reconcile moved an in-progress %s sandbox to %s", sb.State, r.State)
		}
	}
	if j, _ := h.svc.GetJob(ctx, "a", jobs[0].ID); j.State != sandbox.JobRunning {
		t.Errorf("periodic reconcile moved a running job to %s", j.State)
	}

	// At startup, nothing of the previous process is in flight any more.
	if err := h.svc.Reconcile(ctx, true); err != nil {
		t.Fatal(err)
	}
	want := map[string]sandbox.State{created.ID: sandbox.StateFailed, starting.ID: sandbox.StateFailed,
		draining.ID: sandbox.StateDestroyed, ready.ID: sandbox.StateReady}
	for id, st := range want {
		r := h.record(id)
		if r.State != st {
			t.Errorf("sandbox %s is %s, want %s", id, r.State, st)
		}
		if st == sandbox.StateFailed && !strings.Contains(r.FailureReason, "service stopped") {
			t.Errorf("failed sandbox reason %q", r.FailureReason)
		}
		if st != sandbox.StateReady && exists(h.sandboxDir(id)) {
			t.Errorf("dir of %s sandbox %s is left", st, id)
		}
	}
	for _, j := range jobs {
		got, err := h.svc.GetJob(ctx, "a", j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != sandbox.JobLost || got.ExitReason != sandbox.ExitLost || got.FinishedAt == nil || got.Error == "" {
			t.Errorf("job %s after startup: %s/%s finished %v, want lost/lost with a time and an error", j.State, got.State, got.ExitReason, got.FinishedAt)
		}
	}
	if _, err := h.svc.Exec(ctx, control.ExecInput{Tenant: "a", SandboxID: ready.ID, Command: []string{"true"}}); err != nil {
		t.Errorf("the ready sandbox no longer runs jobs after startup reconcile: %v", err)
	}
}

func TestReconcileExpiresTTL(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	short := h.create("a", control.CreateSandboxInput{TTLSeconds: 60})
	long := h.create("a", control.CreateSandboxInput{TTLSeconds: 3600})

	h.clock.Advance(45 * time.Second) // a wide margin: the harness clock is real time plus an offset
	if err := h.svc.Reconcile(ctx, false); err != nil {
		t.Fatal(err)
	}
	if r := h.record(short.ID); r.State != sandbox.StateReady {
		t.Fatalf("sandbox destroyed before its TTL: %s", r.State)
	}

	h.clock.Advance(16 * time.Second)
	if err := h.svc.Reconcile(ctx, false); err != nil {
		t.Fatal(err)
	}
	r := h.record(short.ID)
	if r.State != sandbox.StateDestroyed || r.FailureReason != "ttl expired" {
		t.Errorf("expired sandbox %s %q, want destroyed with \"ttl expired\"", r.State, r.FailureReason)
	}
	h.assertGoneExceptAgents(short.ID)
	if r := h.record(long.ID); r.State != sandbox.StateReady {
		t.Errorf("unexpired sandbox is %s", r.State)
	}
	h.waitAgents(1)
}

// assertGoneExceptAgents checks that sandbox id has no container or dir.
func (h *harness) assertGoneExceptAgents(id string) {
	h.t.Helper()
	if _, ok := h.container(id); ok {
		h.t.Errorf("container of %s is left", id)
	}
	if exists(h.sandboxDir(id)) {
		h.t.Errorf("dir of %s is left", id)
	}
}

func TestReconcileStaleDirs(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	live := h.create("a", control.CreateSandboxInput{})
	destroyed := h.create("a", control.CreateSandboxInput{})
	if err := h.svc.DeleteSandbox(ctx, "a", destroyed.ID); err != nil {
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
		p := h.sandboxDir(d.id)
		if err := os.MkdirAll(filepath.Join(p, "workspace"), 0o755); err != nil {
			t.Fatal(err)
		}
		if d.age {
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := h.svc.Reconcile(ctx, false); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if got := exists(h.sandboxDir(d.id)); got != d.kept {
			t.Errorf("dir %s (old=%v) exists=%v, want %v", d.id, d.age, got, d.kept)
		}
	}
	if !exists(filepath.Join(h.sandboxDir(live.ID), "run", driver.AgentSocketRel)) {
		t.Error("the live sandbox lost its agent socket")
	}
}
