package sqlite_test

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/tenant"
)

// BenchmarkExecWrites measures the three writes of a synchronous exec on a
// database file (the job's insert, its final update and the request's
// audit record), one exec after another, and reports each write's
// percentiles: the tail is where a commit waits on the disk (a WAL
// checkpoint inside a committing writer).
func BenchmarkExecWrites(b *testing.B) {
	ctx := b.Context()
	st := openFile(b, filepath.Join(b.TempDir(), "state.db"))
	defer st.Close()
	now := time.Now().UTC()
	sb := &sandbox.Sandbox{ID: sandbox.NewID("sbx"), Tenant: "t", Profile: "p", Runtime: "runc", RiskLevel: "low",
		State: sandbox.StateReady, Image: "i", CreatedAt: now, UpdatedAt: now}
	if err := st.CreateSandbox(ctx, sb); err != nil {
		b.Fatal(err)
	}
	var create, finish, audit []time.Duration
	b.ResetTimer()
	for range b.N {
		j := &sandbox.Job{ID: sandbox.NewID("job"), Tenant: "t", SandboxID: sb.ID, Command: []string{"true"}, State: sandbox.JobRunning,
			TimeoutMS: 60000, Mode: sandbox.JobModeSync, CreatedAt: now, StartedAt: &now}
		t0 := time.Now()
		if err := st.CreateJob(ctx, j); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		code := 0
		j.State, j.ExitCode, j.ExitReason, j.FinishedAt = sandbox.JobSucceeded, &code, sandbox.ExitReason("exited"), &now
		if _, err := st.FinishJob(ctx, j); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if err := st.AppendAudit(ctx, &tenant.AuditRecord{Time: now, Actor: "key_1", Tenant: "t", Action: "POST /v1/sandboxes/{id}/exec",
			Target: sb.ID, Status: 200, RequestID: "req_1", Remote: "127.0.0.1:1"}); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		create, finish, audit = append(create, t1.Sub(t0)), append(finish, t2.Sub(t1)), append(audit, t3.Sub(t2))
	}
	b.StopTimer()
	for _, w := range []struct {
		name string
		d    []time.Duration
	}{{"create", create}, {"finish", finish}, {"audit", audit}} {
		slices.Sort(w.d)
		at := func(p float64) float64 { return float64(w.d[int(p*float64(len(w.d)-1))]) / 1e6 }
		b.ReportMetric(at(0.5), w.name+"-p50-ms")
		b.ReportMetric(at(0.99), w.name+"-p99-ms")
		b.ReportMetric(at(0.999), w.name+"-p999-ms")
		b.ReportMetric(float64(w.d[len(w.d)-1])/1e6, w.name+"-max-ms")
	}
}
