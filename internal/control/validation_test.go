package control_test

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"strings"
	"testing"

	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/controltest"
	"genesis.dev/sandbox/internal/driver/fake"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

func TestCreateRejectsBadInput(t *testing.T) {
	t.Parallel()
	both := newHarness(t, nil)
	runcOnly := newHarness(t, nil)
	runcOnly.SetProbe(controltest.ProbeWith("runc"))

	tests := []struct {
		name     string
		runcOnly bool
		in       control.CreateSandboxInput
		class    error
		code     string
		status   int
	}{
		{name: "unknown profile", in: control.CreateSandboxInput{Profile: "no-such-profile"},
			class: errdefs.ErrNotFound, code: "profile_not_found", status: http.StatusNotFound},
		{name: "unknown runtime", in: control.CreateSandboxInput{Runtime: "kvm"},
			class: errdefs.ErrInvalidArgument, code: "runtime_not_allowed", status: http.StatusBadRequest},
		{name: "runtime not allowed by profile", in: control.CreateSandboxInput{Runtime: "kata-fc"},
			class: errdefs.ErrInvalidArgument, code: "runtime_not_allowed", status: http.StatusBadRequest},
		{name: "unknown risk level", in: control.CreateSandboxInput{RiskLevel: "spicy"},
			class: errdefs.ErrInvalidArgument, code: "invalid_argument", status: http.StatusBadRequest},
		{name: "negative cpu", in: control.CreateSandboxInput{Resources: sandbox.Resources{CPU: -1}},
			class: errdefs.ErrInvalidArgument, code: "invalid_argument", status: http.StatusBadRequest},
		{name: "negative memory", in: control.CreateSandboxInput{Resources: sandbox.Resources{MemoryMB: -5}},
			class: errdefs.ErrInvalidArgument, code: "invalid_argument", status: http.StatusBadRequest},
		{name: "negative pids", in: control.CreateSandboxInput{Resources: sandbox.Resources{Pids: -1}},
			class: errdefs.ErrInvalidArgument, code: "invalid_argument", status: http.StatusBadRequest},
		{name: "absurd cpu", in: control.CreateSandboxInput{Resources: sandbox.Resources{CPU: 1000}},
			class: errdefs.ErrInvalidArgument, code: "invalid_argument", status: http.StatusBadRequest},
		{name: "absurd memory", in: control.CreateSandboxInput{Resources: sandbox.Resources{MemoryMB: 1 << 40}},
			class: errdefs.ErrInvalidArgument, code: "invalid_argument", status: http.StatusBadRequest},
		{name: "too few pids", in: control.CreateSandboxInput{Resources: sandbox.Resources{Pids: 2}},
			class: errdefs.ErrInvalidArgument, code: "invalid_argument", status: http.StatusBadRequest},
		{name: "ttl over max", in: control.CreateSandboxInput{TTLSeconds: 86400 + 1},
			class: errdefs.ErrInvalidArgument, code: "invalid_argument", status: http.StatusBadRequest},
		{name: "negative ttl", in: control.CreateSandboxInput{TTLSeconds: -1},
			class: errdefs.ErrInvalidArgument, code: "invalid_argument", status: http.StatusBadRequest},
		{name: "bad env key", in: control.CreateSandboxInput{Env: map[string]string{"1BAD": "x"}},
			class: errdefs.ErrInvalidArgument, code: "invalid_argument", status: http.StatusBadRequest},
		{name: "env key with =", in: control.CreateSandboxInput{Env: map[string]string{"A=B": "x"}},
			class: errdefs.ErrInvalidArgument, code: "invalid_argument", status: http.StatusBadRequest},
		{name: "reserved env prefix", in: control.CreateSandboxInput{Env: map[string]string{"GENESIS_AGENT_LOG_LEVEL": "debug"}},
			class: errdefs.ErrInvalidArgument, code: "invalid_argument", status: http.StatusBadRequest},
		{name: "env value with NUL", in: control.CreateSandboxInput{Env: map[string]string{"A": "x\x00y"}},
			class: errdefs.ErrInvalidArgument, code: "invalid_argument", status: http.StatusBadRequest},
		{name: "bad metadata key", in: control.CreateSandboxInput{Metadata: map[string]string{"-bad key": "x"}},
			class: errdefs.ErrInvalidArgument, code: "invalid_argument", status: http.StatusBadRequest},
		{name: "image missing", in: control.CreateSandboxInput{Profile: "tool-basic"},
			class: errdefs.ErrFailedPrecondition, code: "image_not_built", status: http.StatusConflict},
		{name: "declared profile without recipe", in: control.CreateSandboxInput{Profile: "browser-playwright"},
			class: errdefs.ErrFailedPrecondition, code: "image_not_built", status: http.StatusConflict},
		{name: "runc for untrusted", in: control.CreateSandboxInput{Runtime: "runc", RiskLevel: "untrusted"},
			class: errdefs.ErrInvalidArgument, code: "runtime_not_allowed", status: http.StatusBadRequest},
		{name: "high risk with only runc healthy", runcOnly: true, in: control.CreateSandboxInput{RiskLevel: "high"},
			class: errdefs.ErrFailedPrecondition, code: "runtime_unavailable", status: http.StatusConflict},
		{name: "default medium risk with only runc healthy", runcOnly: true, in: control.CreateSandboxInput{Profile: "code-python-basic"},
			class: errdefs.ErrFailedPrecondition, code: "runtime_unavailable", status: http.StatusConflict},
		{name: "explicit runsc with only runc healthy", runcOnly: true, in: control.CreateSandboxInput{Runtime: "runsc"},
			class: errdefs.ErrFailedPrecondition, code: "runtime_unavailable", status: http.StatusConflict},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := both
			if tc.runcOnly {
				h = runcOnly
			}
			sb, err := h.Svc.CreateSandbox(context.Background(), withTenant(tc.in, "a"))
			if err == nil {
				t.Fatalf("CreateSandbox succeeded (%s %s), want %v", sb.ID, sb.Runtime, tc.class)
			}
			if !errors.Is(err, tc.class) || errdefs.Code(err) != tc.code || errdefs.HTTPStatus(err) != tc.status {
				t.Errorf("err %v: code %s status %d, want class %v code %s status %d",
					err, errdefs.Code(err), errdefs.HTTPStatus(err), tc.class, tc.code, tc.status)
			}
		})
	}
	t.Cleanup(func() {
		// Bad input changes nothing: no record, container, dir or agent, and
		// the driver was never asked to create (so never a runc container
		// for high-risk work).
		for _, h := range []*harness{both, runcOnly} {
			h.AssertNothingCreated()
			if n := h.Drv.Calls(fake.OpCreate); n != 0 {
				t.Errorf("driver Create called %d times", n)
			}
		}
	})
}

func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	sb := h.Create("a", control.CreateSandboxInput{Metadata: map[string]string{"k": "v"}})
	out, err := h.Jobs.Exec(ctx, jobs.ExecInput{Tenant: "a", SandboxID: sb.ID, Command: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	v := "changed"
	ops := []struct {
		name string
		do   func() error
	}{
		{"get", func() error { _, err := h.Svc.GetSandbox(ctx, "b", sb.ID); return err }},
		{"exec", func() error {
			_, err := h.Jobs.Exec(ctx, jobs.ExecInput{Tenant: "b", SandboxID: sb.ID, Command: []string{"true"}})
			return err
		}},
		{"patch", func() error {
			_, err := h.Svc.PatchSandbox(ctx, "b", sb.ID, 0, map[string]*string{"k": &v})
			return err
		}},
		{"delete", func() error { return h.Svc.DeleteSandbox(ctx, "b", sb.ID) }},
		{"get job", func() error { _, err := h.Jobs.GetJob(ctx, "b", out.Job.ID); return err }},
	}
	for _, op := range ops {
		if err := op.do(); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("tenant b %s of a's sandbox: %v, want not found", op.name, err)
		}
	}
	list, err := h.Svc.ListSandboxes(ctx, store.SandboxFilter{Tenant: "b"})
	if err != nil || len(list) != 0 {
		t.Errorf("tenant b lists %d sandboxes (err %v), want none", len(list), err)
	}
	rec := h.Record(sb.ID)
	if rec.State != sandbox.StateReady || rec.Metadata["k"] != "v" || rec.ResourceVersion != sb.ResourceVersion {
		t.Errorf("tenant b changed a's sandbox: %s %v v%d", rec.State, rec.Metadata, rec.ResourceVersion)
	}
	if _, ok := h.Container(sb.ID); !ok {
		t.Error("tenant b removed a's container")
	}
	if jobs, _ := h.St.ListJobs(ctx, store.JobFilter{SandboxID: sb.ID}); len(jobs) != 1 {
		t.Errorf("%d jobs recorded, want only a's one (b's exec must not be recorded)", len(jobs))
	}
}

func TestPatchSandbox(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	sb := h.Create("a", control.CreateSandboxInput{Metadata: map[string]string{"keep": "1", "drop": "x"}})
	add := "y"
	got, err := h.Svc.PatchSandbox(ctx, "a", sb.ID, sb.ResourceVersion, map[string]*string{"drop": nil, "add": &add})
	if err != nil {
		t.Fatalf("PatchSandbox: %v", err)
	}
	want := map[string]string{"keep": "1", "add": "y"}
	if !maps.Equal(got.Metadata, want) || got.ResourceVersion <= sb.ResourceVersion {
		t.Fatalf("after patch %v v%d, want %v with a version above %d", got.Metadata, got.ResourceVersion, want, sb.ResourceVersion)
	}

	bad := "z"
	failing := []struct {
		name    string
		version int64
		patch   map[string]*string
		class   error
	}{
		{"stale version", sb.ResourceVersion, map[string]*string{"keep": &bad}, errdefs.ErrPreconditionFailed},
		{"invalid key", got.ResourceVersion, map[string]*string{"bad key!": &bad}, errdefs.ErrInvalidArgument},
		{"too long value", 0, map[string]*string{"keep": ptr(strings.Repeat("v", 2000))}, errdefs.ErrInvalidArgument},
		{"unknown id", 0, map[string]*string{"keep": &bad}, errdefs.ErrNotFound},
	}
	for _, f := range failing {
		id := sb.ID
		if f.name == "unknown id" {
			id = sandbox.NewID("sbx")
		}
		_, err := h.Svc.PatchSandbox(ctx, "a", id, f.version, f.patch)
		if !errors.Is(err, f.class) {
			t.Errorf("%s: %v, want %v", f.name, err, f.class)
		}
		if rec := h.Record(sb.ID); !maps.Equal(rec.Metadata, want) || rec.ResourceVersion != got.ResourceVersion {
			t.Errorf("%s changed the record: %v v%d", f.name, rec.Metadata, rec.ResourceVersion)
		}
	}

	if err := h.Svc.DeleteSandbox(ctx, "a", sb.ID); err != nil {
		t.Fatal(err)
	}
	_, err = h.Svc.PatchSandbox(ctx, "a", sb.ID, 0, map[string]*string{"add": &bad})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || errdefs.Code(err) != "invalid_state" {
		t.Errorf("patch of destroyed sandbox: %v, want invalid_state", err)
	}
}

func ptr[T any](v T) *T { return &v }
