package sqlstore_test

import (
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store/sqlstore"
)

// TestHotStatementsPrepared checks, on every backend, that the job path
// reads and writes the same records whether its statements run prepared
// or not, also from many goroutines at once; that on SQLite its
// statements are prepared once and then reused (a transaction's ones once
// the transaction has ended), and that PostgreSQL, whose driver caches
// statements itself, keeps none.
func TestHotStatementsPrepared(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, _ *sql.DB, target string) {
		ctx := t.Context()
		s, err := b.open(ctx, target)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		if err := s.CreateSandbox(ctx, &sandbox.Sandbox{ID: "sbx_hot", Tenant: "t1", Profile: "p", Runtime: sandbox.RuntimeRunc,
			State: sandbox.StateReady, CreatedAt: now, UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
		lifecycle := func(id string) error {
			if err := s.CreateJob(ctx, &sandbox.Job{ID: id, Tenant: "t1", SandboxID: "sbx_hot", Command: []string{"true"},
				State: sandbox.JobRunning, Mode: sandbox.JobModeSync, CreatedAt: now, StartedAt: &now}); err != nil {
				return err
			}
			code, done := 3, now.Add(time.Second)
			if _, err := s.UpdateJob(ctx, id, func(j *sandbox.Job) error {
				j.State, j.ExitCode, j.ExitReason, j.FinishedAt = sandbox.JobFailed, &code, sandbox.ExitExited, &done
				return nil
			}); err != nil {
				return err
			}
			j, err := s.GetJob(ctx, "t1", id)
			switch {
			case err != nil:
				return err
			case j.State != sandbox.JobFailed || j.ExitCode == nil || *j.ExitCode != 3 || !j.FinishedAt.Equal(done) || j.Command[0] != "true":
				return fmt.Errorf("job %s read back as %+v", id, j)
			}
			if _, err := s.GetJob(ctx, "t2", id); err == nil {
				return fmt.Errorf("job %s of t1 found for t2", id)
			}
			return nil
		}
		if err := lifecycle("job_first"); err != nil {
			t.Fatal(err)
		}
		prepared := sqlstore.PreparedStatements(s)
		if err := lifecycle("job_second"); err != nil {
			t.Fatal(err)
		}
		switch again := sqlstore.PreparedStatements(s); {
		case b.name == "postgres" && (prepared != 0 || again != 0):
			t.Fatalf("PostgreSQL keeps %d statements prepared, want none (pgx caches its own)", again)
		case b.name != "postgres" && prepared < 4:
			// insert, the transaction's read and update, the read by id
			t.Fatalf("after one job's lifecycle %d statements are prepared, want at least 4", prepared)
		case b.name != "postgres" && again != prepared:
			t.Fatalf("the second lifecycle prepared %d statements more: they are not reused", again-prepared)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for g := range 16 {
			wg.Go(func() {
				for i := range 10 {
					if err := lifecycle(fmt.Sprintf("job_%d_%d", g, i)); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}
