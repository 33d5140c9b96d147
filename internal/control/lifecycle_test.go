package control_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/controltest"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/driver/fake"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/sandbox"
)

func TestCreateExecDelete(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()

	sb := h.Create("a", control.CreateSandboxInput{
		Env:      map[string]string{"GREETING": "hello"},
		Metadata: map[string]string{"owner": "t"},
	})
	if sb.State != sandbox.StateReady || sb.Runtime != sandbox.RuntimeRunc || sb.RiskLevel != sandbox.RiskLow {
		t.Fatalf("created %s/%s/%s, want ready/runc/low (profile default risk)", sb.State, sb.Runtime, sb.RiskLevel)
	}
	rec := h.Record(sb.ID)
	if rec.State != sandbox.StateReady || rec.ContainerID == "" || rec.Tenant != "a" || rec.Image != controltest.Image {
		t.Fatalf("record %+v, want ready with a container, tenant a, image %s", rec, controltest.Image)
	}
	if rec.ExpiresAt == nil || rec.ExpiresAt.Sub(rec.CreatedAt) != time.Duration(h.Cfg.Limits.DefaultTTLSeconds)*time.Second {
		t.Errorf("expires_at %v, want created_at + default TTL", rec.ExpiresAt)
	}

	// The container: labels and hardening.
	cs := h.Containers()
	if len(cs) != 1 || cs[0].ID != rec.ContainerID || !cs[0].Running {
		t.Fatalf("containers %+v, want exactly the running %s", cs, rec.ContainerID)
	}
	wantLabels := map[string]string{
		driver.LabelManaged: "true", driver.LabelSandbox: sb.ID, driver.LabelInstance: controltest.Instance,
		driver.LabelProfile: controltest.Profile, driver.LabelRuntime: "runc", driver.LabelPurpose: "sandbox",
	}
	for k, v := range wantLabels {
		if got := cs[0].Labels[k]; got != v {
			t.Errorf("label %s = %q, want %q", k, got, v)
		}
	}
	for _, k := range []string{driver.LabelCreatedAt, driver.LabelExpiresAt} {
		if _, err := time.Parse(time.RFC3339, cs[0].Labels[k]); err != nil {
			t.Errorf("label %s = %q: %v", k, cs[0].Labels[k], err)
		}
	}
	spec, ok := h.Drv.Spec(rec.ContainerID)
	if !ok {
		t.Fatal("no spec for the container")
	}
	if spec.Network != "none" || spec.User != "1000:1000" || spec.Runtime != sandbox.RuntimeRunc ||
		spec.Image != controltest.Image || spec.Name != "genesis-"+sb.ID || spec.ReadOnly {
		t.Errorf("spec %+v: want network none, user 1000:1000, runc, %s, name genesis-<id>, writable root", spec, controltest.Image)
	}
	if want := (sandbox.Resources{CPU: 0.5, MemoryMB: 256, Pids: 64}); spec.Resources != want {
		t.Errorf("resources %+v, want profile default %+v", spec.Resources, want)
	}
	if len(spec.Cmd) == 0 || spec.Cmd[0] != driver.AgentBinary {
		t.Errorf("cmd %v, want the agent as PID 1", spec.Cmd)
	}
	if !slices.Contains(spec.Env, "GREETING=hello") {
		t.Errorf("env %v lacks GREETING=hello", spec.Env)
	}
	mounts := map[string]driver.Mount{}
	for _, m := range spec.Mounts {
		mounts[m.Target] = m
	}
	if m := mounts[driver.AgentMountDir]; !m.ReadOnly || m.Source == "" {
		t.Errorf("agent mount %+v, want read-only", m)
	}
	runDir := filepath.Join(h.SandboxDir(sb.ID), "run")
	if m := mounts[driver.AgentRunDir]; m.Source != runDir || m.ReadOnly {
		t.Errorf("run mount %+v, want %s read-write", m, runDir)
	}
	if m := mounts["/workspace"]; m.Source != filepath.Join(h.SandboxDir(sb.ID), "workspace") {
		t.Errorf("workspace mount %+v", m)
	}

	// Host directories: owned by the profile user and private to it.
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{runDir, 0o700}, {filepath.Join(h.SandboxDir(sb.ID), "workspace"), 0o700}} {
		fi, err := os.Stat(d.path)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm() != d.mode || st.Uid != 1000 || st.Gid != 1000 {
			t.Errorf("%s: mode %v owner %d:%d, want %v 1000:1000", d.path, fi.Mode().Perm(), st.Uid, st.Gid, d.mode)
		}
	}
	if !controltest.Exists(filepath.Join(runDir, driver.AgentSocketRel)) {
		t.Error("agent socket missing")
	}

	// Exec: success, failure, timeout. Each job ends in one final state.
	execs := []struct {
		name       string
		in         jobs.ExecInput
		code       int
		reason     sandbox.ExitReason
		state      sandbox.JobState
		stdout     string
		stderr     string
		maxElapsed time.Duration
	}{
		{name: "echo", in: jobs.ExecInput{Command: []string{"echo", "hi"}},
			reason: sandbox.ExitExited, state: sandbox.JobSucceeded, stdout: "hi\n"},
		{name: "sandbox env and exit code", in: jobs.ExecInput{Script: `echo "$GREETING $X"; echo oops >&2; exit 3`, Env: map[string]string{"X": "y"}},
			code: 3, reason: sandbox.ExitExited, state: sandbox.JobFailed, stdout: "hello y\n", stderr: "oops\n"},
		{name: "timeout", in: jobs.ExecInput{Command: []string{"sleep", "30"}, TimeoutMS: 300},
			reason: sandbox.ExitTimeout, state: sandbox.JobFailed, maxElapsed: 5 * time.Second},
	}
	for _, e := range execs {
		in := e.in
		in.Tenant, in.SandboxID = "a", sb.ID
		start := time.Now()
		out, err := h.Jobs.Exec(ctx, in)
		if err != nil {
			t.Fatalf("%s: Exec: %v", e.name, err)
		}
		if el := time.Since(start); e.maxElapsed > 0 && el > e.maxElapsed {
			t.Errorf("%s: took %v, want under %v", e.name, el, e.maxElapsed)
		}
		if string(out.Stdout) != e.stdout || string(out.Stderr) != e.stderr {
			t.Errorf("%s: stdout %q stderr %q, want %q %q", e.name, out.Stdout, out.Stderr, e.stdout, e.stderr)
		}
		if out.Job.ExitReason != e.reason || (e.reason == sandbox.ExitExited && (out.Job.ExitCode == nil || *out.Job.ExitCode != e.code)) {
			t.Errorf("%s: exit %v reason %s, want %d %s", e.name, out.Job.ExitCode, out.Job.ExitReason, e.code, e.reason)
		}
		j, err := h.Jobs.GetJob(ctx, "a", out.Job.ID)
		if err != nil {
			t.Fatalf("%s: GetJob: %v", e.name, err)
		}
		if j.State != e.state || j.ExitReason != e.reason || j.FinishedAt == nil || j.ExitCode == nil ||
			j.SandboxID != sb.ID || j.StdoutBytes != int64(len(e.stdout)) {
			t.Errorf("%s: job record %+v, want final %s/%s with %d stdout bytes", e.name, j, e.state, e.reason, len(e.stdout))
		}
	}

	// Delete, then delete again.
	if err := h.Svc.DeleteSandbox(ctx, "a", sb.ID); err != nil {
		t.Fatalf("DeleteSandbox: %v", err)
	}
	gone := h.Record(sb.ID)
	if gone.State != sandbox.StateDestroyed {
		t.Fatalf("state after delete %s, want destroyed", gone.State)
	}
	h.AssertGone(sb.ID)
	if err := h.Svc.DeleteSandbox(ctx, "a", sb.ID); err != nil {
		t.Fatalf("second DeleteSandbox: %v, want nil (idempotent)", err)
	}
	if again := h.Record(sb.ID); again.State != sandbox.StateDestroyed || again.ResourceVersion != gone.ResourceVersion {
		t.Errorf("second delete changed the record: %s v%d → %s v%d", gone.State, gone.ResourceVersion, again.State, again.ResourceVersion)
	}
	_, err := h.Jobs.Exec(ctx, jobs.ExecInput{Tenant: "a", SandboxID: sb.ID, Command: []string{"true"}})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || errdefs.Code(err) != "sandbox_not_running" {
		t.Errorf("exec in destroyed sandbox: %v (code %s), want sandbox_not_running", err, errdefs.Code(err))
	}
}

func TestCreateRuntimeAndSpecChoices(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	yes := true
	tests := []struct {
		name     string
		in       control.CreateSandboxInput
		runtime  sandbox.Runtime
		risk     sandbox.RiskLevel
		res      sandbox.Resources
		readOnly bool
	}{
		{name: "profile default risk", runtime: "runc", risk: "low", res: sandbox.Resources{CPU: 0.5, MemoryMB: 256, Pids: 64}},
		{name: "trusted", in: control.CreateSandboxInput{RiskLevel: "trusted"}, runtime: "runc", risk: "trusted", res: sandbox.Resources{CPU: 0.5, MemoryMB: 256, Pids: 64}},
		{name: "medium", in: control.CreateSandboxInput{RiskLevel: "medium"}, runtime: "runsc", risk: "medium", res: sandbox.Resources{CPU: 0.5, MemoryMB: 256, Pids: 64}},
		{name: "high", in: control.CreateSandboxInput{RiskLevel: "high"}, runtime: "runsc", risk: "high", res: sandbox.Resources{CPU: 0.5, MemoryMB: 256, Pids: 64}},
		{name: "untrusted", in: control.CreateSandboxInput{RiskLevel: "untrusted"}, runtime: "runsc", risk: "untrusted", res: sandbox.Resources{CPU: 0.5, MemoryMB: 256, Pids: 64}},
		{name: "explicit runsc at low risk", in: control.CreateSandboxInput{Runtime: "runsc"}, runtime: "runsc", risk: "low", res: sandbox.Resources{CPU: 0.5, MemoryMB: 256, Pids: 64}},
		{name: "resources override", in: control.CreateSandboxInput{Resources: sandbox.Resources{CPU: 2, MemoryMB: 512, Pids: 100}},
			runtime: "runc", risk: "low", res: sandbox.Resources{CPU: 2, MemoryMB: 512, Pids: 100}},
		{name: "partial resources", in: control.CreateSandboxInput{Resources: sandbox.Resources{MemoryMB: 128}},
			runtime: "runc", risk: "low", res: sandbox.Resources{CPU: 0.5, MemoryMB: 128, Pids: 64}},
		{name: "read-only root", in: control.CreateSandboxInput{ReadOnlyRoot: &yes}, runtime: "runc", risk: "low",
			res: sandbox.Resources{CPU: 0.5, MemoryMB: 256, Pids: 64}, readOnly: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sb, err := h.Svc.CreateSandbox(context.Background(), withTenant(tc.in, "a"))
			if err != nil {
				t.Fatalf("CreateSandbox: %v", err)
			}
			defer func() {
				if err := h.Svc.DeleteSandbox(context.Background(), "a", sb.ID); err != nil {
					t.Errorf("DeleteSandbox: %v", err)
				}
			}()
			if sb.Runtime != tc.runtime || sb.RiskLevel != tc.risk || sb.Resources != tc.res {
				t.Errorf("sandbox %s/%s %+v, want %s/%s %+v", sb.Runtime, sb.RiskLevel, sb.Resources, tc.runtime, tc.risk, tc.res)
			}
			rec, err := h.St.GetSandbox(context.Background(), "a", sb.ID)
			if err != nil {
				t.Fatal(err)
			}
			spec, ok := h.Drv.Spec(rec.ContainerID)
			if !ok {
				t.Fatalf("no container %s", rec.ContainerID)
			}
			if spec.Runtime != tc.runtime || spec.Labels[driver.LabelRuntime] != string(tc.runtime) || spec.Resources != tc.res {
				t.Errorf("spec runtime %s label %s resources %+v, want %s %+v", spec.Runtime, spec.Labels[driver.LabelRuntime], spec.Resources, tc.runtime, tc.res)
			}
			if spec.ReadOnly != tc.readOnly || (tc.readOnly && spec.Tmpfs["/tmp"] == "") {
				t.Errorf("read-only %v tmpfs %v, want read-only %v with a /tmp tmpfs", spec.ReadOnly, spec.Tmpfs, tc.readOnly)
			}
		})
	}
}

func withTenant(in control.CreateSandboxInput, tenant string) control.CreateSandboxInput {
	in.Tenant = tenant
	if in.Profile == "" {
		in.Profile = controltest.Profile
	}
	return in
}

// inspectsAs reports every container as st says (the container a create
// waits on, as the cluster or the daemon would show it).
type inspectsAs struct {
	driver.Driver
	st driver.Status
}

func (d *inspectsAs) Inspect(ctx context.Context, id string) (driver.Status, error) {
	if _, err := d.Driver.Inspect(ctx, id); err != nil {
		return driver.Status{}, err
	}
	st := d.st
	st.ID = id
	return st, nil
}

// TestAgentWaitSaysWhy: a create whose agent never answers says whether
// the container exited (with its code) or was still there, not yet
// running or running: a Pod whose container the node has not started yet
// (state "created") did not exit.
func TestAgentWaitSaysWhy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		st   driver.Status
		want string
	}{
		{"exited", driver.Status{State: "exited", ExitCode: 3}, "sandbox container exited (code 3) before its agent answered"},
		{"not started yet", driver.Status{State: "created"}, "agent did not answer within 300ms"},
		{"running", driver.Status{State: "running", Running: true}, "agent did not answer within 300ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarnessWith(t, func(c *config.Config) { c.Intervals.AgentReadyTimeout = 300 * time.Millisecond },
				func(c *control.Config) { c.Driver = &inspectsAs{Driver: c.Driver, st: tc.st} })
			h.Agents.Enabled.Store(false)
			_, err := h.Svc.CreateSandbox(context.Background(), withTenant(control.CreateSandboxInput{}, "a"))
			if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CreateSandbox: %v; want unavailable saying %q", err, tc.want)
			}
		})
	}
}

func TestCreateRollsBack(t *testing.T) {
	t.Parallel()
	errStart := errors.New("injected start failure")
	errCreate := errors.New("injected create failure")
	tests := []struct {
		name    string
		setup   func(h *harness)
		wantErr error
		maxTime time.Duration
	}{
		{name: "create fault", setup: func(h *harness) { h.Drv.SetFaults(fake.Faults{Create: errCreate}) }, wantErr: errCreate},
		{name: "start fault", setup: func(h *harness) { h.Drv.SetFaults(fake.Faults{Start: errStart}) }, wantErr: errStart},
		{name: "agent never answers", setup: func(h *harness) { h.Agents.Enabled.Store(false) },
			wantErr: errdefs.ErrUnavailable, maxTime: 5 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(c *config.Config) { c.Intervals.AgentReadyTimeout = 300 * time.Millisecond })
			tc.setup(h)
			start := time.Now()
			_, err := h.Svc.CreateSandbox(context.Background(), withTenant(control.CreateSandboxInput{}, "a"))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("CreateSandbox: %v, want %v", err, tc.wantErr)
			}
			if tc.maxTime > 0 && time.Since(start) > tc.maxTime {
				t.Errorf("failing create took %v, want under %v", time.Since(start), tc.maxTime)
			}
			recs := h.Records()
			if len(recs) != 1 {
				t.Fatalf("%d records, want the one failed record", len(recs))
			}
			r := recs[0]
			if r.State != sandbox.StateFailed || !strings.Contains(r.FailureReason, "create failed") {
				t.Errorf("record %s %q, want failed with the reason", r.State, r.FailureReason)
			}
			if c := h.Containers(); len(c) != 0 {
				t.Errorf("%d containers left behind", len(c))
			}
			if d := h.SandboxDirs(); len(d) != 0 {
				t.Errorf("sandbox dirs left behind: %v", d)
			}
			h.WaitAgents(0)
			if got := h.Drv.Calls(fake.OpCreate); got != 1 {
				t.Errorf("%d driver creates, want 1", got)
			}
		})
	}
}
