package storetest

import (
	"fmt"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// Bench runs the store benchmarks of the hot paths against the store
// implementation that open makes: a job's create-and-finish records, and a
// lease claim from a warm pool with the return of the sandbox.
func Bench(b *testing.B, open func(b *testing.B) store.Store) {
	b.Run("JobCreateUpdateGet", func(b *testing.B) { benchJob(b, open(b)) })
	b.Run("ClaimReturn", func(b *testing.B) { benchClaim(b, open(b)) })
}

func benchJob(b *testing.B, s store.Store) {
	defer s.Close()
	ctx := b.Context()
	if err := s.CreateSandbox(ctx, newSandbox("sbx_b", "tenant-1", base)); err != nil {
		b.Fatal(err)
	}
	finished := base.Add(time.Second)
	i := 0
	for b.Loop() {
		id := fmt.Sprintf("job_%d", i)
		i++
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
	}
}

func benchClaim(b *testing.B, s store.Store) {
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
	i := 0
	for b.Loop() {
		l := &sandbox.Lease{ID: fmt.Sprintf("lease_%d", i), Tenant: "tenant-1", State: sandbox.LeaseActive,
			CreatedAt: base, RenewedAt: base, ExpiresAt: base.Add(time.Hour)}
		i++
		_, sb, err := s.ClaimSandbox(ctx, store.Claim{Lease: l, Profile: "code-python-basic", Runtime: sandbox.RuntimeRunc, Now: base})
		if err != nil {
			b.Fatal(err)
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
	}
}
