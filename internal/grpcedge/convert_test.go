package grpcedge

import (
	"maps"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/snapshots"
)

// allSet fails t for each field of m (and of its message fields) that a
// conversion of a fully populated domain value left unset, except those
// named in skip: a field added to a .proto is either carried or named
// here with the reason.
func allSet(t *testing.T, what string, m proto.Message, skip map[string]string) {
	t.Helper()
	var walk func(prefix string, r protoreflect.Message)
	walk = func(prefix string, r protoreflect.Message) {
		fields := r.Descriptor().Fields()
		for i := range fields.Len() {
			f := fields.Get(i)
			name := prefix + string(f.Name())
			if _, ok := skip[name]; ok {
				continue
			}
			if !r.Has(f) {
				t.Errorf("%s: %s is not carried", what, name)
				continue
			}
			if f.Kind() == protoreflect.MessageKind && !f.IsList() && !f.IsMap() && f.Message().FullName().Parent() == "genesis.sandbox.v1" {
				walk(name+".", r.Get(f).Message())
			}
		}
	}
	walk("", m.ProtoReflect())
}

func TestConversionsCarryEveryField(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	later, code := now.Add(time.Hour), 3
	sb := &sandbox.Sandbox{
		ID: "sbx_1", Tenant: "t1", Profile: "p", Runtime: "runsc", RiskLevel: "high", State: "paused", Image: "img",
		Resources: sandbox.Resources{CPU: 1, MemoryMB: 512, Pids: 64, DiskMB: 100}, Env: map[string]string{"A": "b"},
		Metadata: map[string]string{"k": "v"}, FailureReason: "none", ResourceVersion: 7, CreatedAt: now, UpdatedAt: now, ExpiresAt: &later,
		Network:    &sandbox.NetworkSummary{Mode: "allowlist", Status: "active", StatusReason: "ok"},
		Reserved:   "mcp:x",
		Suspension: &sandbox.Suspension{ResumeState: "ready", Operation: "pausing", Memory: true, Since: now},
	}
	byGet := map[string]string{"endpoints": "set by GetSandbox (endpointsPB)", "services": "set by GetSandbox (serviceStatusPB)"}
	made := map[string]string{
		"memory_restored":        "set by madePB, on a sandbox made from a snapshot",
		"sessions_from_snapshot": "set by madePB, on a sandbox made from a snapshot",
	}
	maps.Copy(made, byGet)
	allSet(t, "Sandbox", sandboxPB(sb), made)
	allSet(t, "Sandbox from a snapshot", madePB(&snapshots.Made{Sandbox: sb, Sessions: map[string]string{"ses_a": "ses_b"}}), byGet)
	st := serviceStatusPB(jobs.ServiceState{Name: "web", State: "ready", JobID: "job_1", Restarts: 2, LastExit: &code, Error: "e", Since: now, Ready: &later})
	allSet(t, "ServiceStatus", st, nil)
	eps := endpointsPB("https://api.example", "sbx_1", &config.Profile{Endpoints: []config.EndpointSpec{{Name: "web", Port: 8080}, {Name: "db", Port: 5432, Protocol: "tcp"}}})
	if len(eps) != 2 || eps[0].Url != "https://api.example/v1/sandboxes/sbx_1/ports/8080/" || eps[0].Protocol != "http" ||
		eps[1].Url != "wss://api.example/v1/sandboxes/sbx_1/ports/5432/tcp" || eps[1].Protocol != "tcp" {
		t.Errorf("endpoints %v", eps)
	}
	allSet(t, "Endpoint", eps[0], nil)

	j := &sandbox.Job{
		ID: "job_1", SandboxID: "sbx_1", State: "failed", Command: []string{"x"}, Script: "y", Cwd: "/", ExitCode: &code,
		ExitReason: "exited", Signal: "SIGTERM", Error: "e", StdoutBytes: 1, StderrBytes: 2, StdoutTruncated: true, StderrTruncated: true,
		TimeoutMS: 5, Mode: "background", CreatedAt: now, StartedAt: &now, FinishedAt: &later,
	}
	allSet(t, "Job", jobPB(j), nil)
	allSet(t, "ExecResult", execResultPB(&jobs.ExecOutput{Job: j, Stdout: []byte("o"), Stderr: []byte("e"), DurationMS: 9}), nil)
	allSet(t, "Exit", exitPB(jobs.ExitOfJob(j)), map[string]string{"duration_ms": "a job's record keeps no duration; the log's exit event has it"})

	l := &sandbox.Lease{
		ID: "lease_1", Tenant: "t1", SandboxID: "sbx_1", Profile: "p", Runtime: "runc", Holder: "h", State: "released", Warm: true,
		Metadata: map[string]string{"k": "v"}, Reserved: "mcp:x", TTLSeconds: 60, ResourceVersion: 2, CreatedAt: now, RenewedAt: now,
		ExpiresAt: later, EndedAt: &later, EndReason: "released",
	}
	allSet(t, "Lease", leasePB(l), map[string]string{"sandbox": "set by AcquireLease from the lease's sandbox"})
}
