package storetest

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/tenant"
)

// Bench runs the store benchmarks of the hot paths against the store
// implementation that open makes: a job's create-and-finish records, and a
// lease claim from a warm pool with the return of the sandbox.
//
// Besides wall time, each reports cpu-ns/op: the CPU time of this process
// (user and system, without the database server's) per operation, which
// other load on the machine disturbs far less.
func Bench(b *testing.B, open func(b *testing.B) store.Store) {
	b.Run("JobCreateUpdateGet", func(b *testing.B) { benchJob(b, open(b)) })
	b.Run("ClaimReturn", func(b *testing.B) { benchClaim(b, open(b), nil) })
	// A lease's claim with its request's audit record: appended after
	// the claim (its own write transaction, as before Claim.Audit), or in
	// the claim's transaction.
	b.Run("ClaimAuditReturn/separate", func(b *testing.B) {
		st := open(b)
		benchClaim(b, st, func(c *store.Claim, r *tenant.AuditRecord) func() error {
			return func() error { return st.AppendAudit(b.Context(), r) }
		})
	})
	b.Run("ClaimAuditReturn/in-claim", func(b *testing.B) {
		benchClaim(b, open(b), func(c *store.Claim, r *tenant.AuditRecord) func() error {
			c.Audit = r
			return nil
		})
	})
}

// loopCPU runs the benchmark loop of b with body and reports the process's
// CPU time per iteration.
func loopCPU(b *testing.B, body func(i int)) {
	before := processCPU(b)
	i := 0
	for b.Loop() {
		body(i)
		i++
	}
	b.ReportMetric(float64(processCPU(b)-before)/float64(i), "cpu-ns/op")
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchJob(b *testing.B, s store.Store) {
	defer s.Close()
	ctx := b.Context()
	if err := s.CreateSandbox(ctx, newSandbox("sbx_b", "tenant-1", base)); err != nil {
		b.Fatal(err)
	}
	finished := base.Add(time.Second)
	loopCPU(b, func(i int) {
		id := fmt.Sprintf("job_%d", i)
		if err := s.CreateJob(ctx, newJob(id, "tenant-1", "sbx_b", base)); err != nil {
			b.Fatal(err)
		}
		if _, err := s.UpdateJob(ctx, id, func(j *sandbox.Job) error {
			j.State, j.ExitCode, j.ExitReason, j.FinishedAt = sandbox.JobSucceeded, ptr(0), sandbox.ExitExited, &finished
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		if _, err := s.GetJob(ctx, "tenant-1", id); err != nil {
			b.Fatal(err)
		}
	})
}

// benchClaim claims and returns pool members; audit, if set, is given each
// claim and its audit record before the claim and returns what to run
// after it (nil: nothing).
func benchClaim(b *testing.B, s store.Store, audit func(*store.Claim, *tenant.AuditRecord) func() error) {
	defer s.Close()
	ctx := b.Context()
	const members = 8
	for i := range members {
		sb := newSandbox(fmt.Sprintf("sbx_p%d", i), "", base.Add(time.Duration(i)))
		sb.State = sandbox.StateIdle
		if err := s.CreateSandbox(ctx, sb); err != nil {
			b.Fatal(err)
		}
	}
	loopCPU(b, func(i int) {
		l := &sandbox.Lease{ID: fmt.Sprintf("lease_%d", i), Tenant: "tenant-1", State: sandbox.LeaseActive,
			CreatedAt: base, RenewedAt: base, ExpiresAt: base.Add(time.Hour)}
		c := store.Claim{Lease: l, Profile: "code-python-basic", Runtime: sandbox.RuntimeRunc, Now: base}
		var after func() error
		if audit != nil {
			after = audit(&c, &tenant.AuditRecord{Time: base, Actor: "key_1", Tenant: "tenant-1", Action: "POST /v1/leases",
				Target: l.ID, Status: 201, RequestID: fmt.Sprintf("req_%d", i), Remote: "127.0.0.1:1"})
		}
		_, sb, err := s.ClaimSandbox(ctx, c)
		if err != nil {
			b.Fatal(err)
		}
		if after != nil {
			if err := after(); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := s.UpdateLease(ctx, l.ID, func(l *sandbox.Lease) error {
			l.State = sandbox.LeaseReleased
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		if _, err := s.UpdateSandbox(ctx, sb.ID, 0, base, func(sb *sandbox.Sandbox) error {
			sb.State = sandbox.StateDraining
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		if _, err := s.ReturnSandbox(ctx, store.Return{SandboxID: sb.ID, Tenant: "tenant-1", From: sandbox.StateDraining,
			RiskLevel: sandbox.RiskLow, Now: base}); err != nil {
			b.Fatal(err)
		}
	})
}
