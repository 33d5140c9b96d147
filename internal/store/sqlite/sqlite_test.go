package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/store/sqlite"
	"genesis.dev/sandbox/internal/store/sqlstore"
	"genesis.dev/sandbox/internal/store/storetest"
)

func openFile(t *testing.T, path string) *sqlstore.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), sqlite.Config{Path: path})
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	return s
}

func TestConformanceFile(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		return openFile(t, filepath.Join(t.TempDir(), "state.db"))
	})
}

func TestConformanceMemory(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		return openFile(t, sqlite.MemoryPath)
	})
}

// rawDB opens the file behind the store's back, as an operator would.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatalf("sql.Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func schemaVersions(t *testing.T, db *sql.DB) []int {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "SELECT version FROM schema_migrations ORDER BY version")
	if err != nil {
		t.Fatalf("read schema_migrations: %v", err)
	}
	defer rows.Close()
	var vs []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return vs
}

// firstVersion is the first version of the single schema history (the
// baseline).
const firstVersion = 8

func TestMigrationsIdempotentOnReopen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.db")
	for i := range 3 {
		s := openFile(t, path)
		if err := s.Ping(t.Context()); err != nil {
			t.Fatalf("open %d: Ping: %v", i, err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("open %d: Close: %v", i, err)
		}
	}
	db := rawDB(t, path)
	vs := schemaVersions(t, db)
	if len(vs) == 0 || vs[0] != firstVersion {
		t.Fatalf("schema_migrations versions = %v, want %d…n", vs, firstVersion)
	}
	for i, v := range vs {
		if v != firstVersion+i {
			t.Fatalf("schema_migrations versions = %v, want each version once, in order", vs)
		}
	}
	var appliedAt string
	if err := db.QueryRowContext(t.Context(), "SELECT applied_at FROM schema_migrations WHERE version = ?", firstVersion).Scan(&appliedAt); err != nil {
		t.Fatal(err)
	}
	if _, err := time.Parse(time.RFC3339Nano, appliedAt); err != nil {
		t.Errorf("applied_at %q is not an RFC 3339 time: %v", appliedAt, err)
	}
}

func TestFileSettings(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.db")
	s := openFile(t, path)
	defer s.Close()
	var mode string
	if err := rawDB(t, path).QueryRowContext(t.Context(), "PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" {
		t.Errorf("journal_mode = %q, want wal", mode)
	}
}

func TestRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.db")
	s := openFile(t, path)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)
	if _, err := db.ExecContext(t.Context(), "INSERT INTO schema_migrations (version, applied_at) VALUES (9999, '2099-01-01T00:00:00Z')"); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s, err := sqlite.Open(t.Context(), sqlite.Config{Path: path})
	if err == nil {
		s.Close()
		t.Fatal("Open of a database with schema version 9999 succeeded, want refusal")
	}
	if !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("Open error = %v, want class ErrFailedPrecondition", err)
	}
	if code := errdefs.Code(err); code != "schema_too_new" {
		t.Errorf("Open error code = %q, want schema_too_new", code)
	}
}

func TestDataSurvivesReopen(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "state.db")
	created := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	expires := created.Add(time.Hour)
	s := openFile(t, path)
	sb := &sandbox.Sandbox{
		ID: "sbx_keep", Tenant: "t", Profile: "tool-basic", State: sandbox.StateCreated,
		ContainerID: "c0ffee", Metadata: map[string]string{"k": "v"},
		CreatedAt: created, UpdatedAt: created, ExpiresAt: &expires,
	}
	if err := s.CreateSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateSandbox(ctx, "sbx_keep", 1, created.Add(time.Second), func(sb *sandbox.Sandbox) error {
		sb.State = sandbox.StateStarting
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	code := 3
	if err := s.CreateJob(ctx, &sandbox.Job{ID: "job_keep", Tenant: "t", SandboxID: "sbx_keep", State: sandbox.JobFailed,
		ExitCode: &code, ExitReason: sandbox.ExitExited, CreatedAt: created}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openFile(t, path)
	defer s.Close()
	got, err := s.GetSandbox(ctx, "t", "sbx_keep")
	if err != nil {
		t.Fatalf("GetSandbox after reopen: %v", err)
	}
	if got.State != sandbox.StateStarting || got.ResourceVersion != 2 || got.ContainerID != "c0ffee" ||
		got.Metadata["k"] != "v" || got.ExpiresAt == nil || !got.ExpiresAt.Equal(expires) ||
		!got.UpdatedAt.Equal(created.Add(time.Second)) {
		t.Errorf("sandbox after reopen = %+v", got)
	}
	j, err := s.GetJob(ctx, "t", "job_keep")
	if err != nil {
		t.Fatalf("GetJob after reopen: %v", err)
	}
	if j.ExitCode == nil || *j.ExitCode != 3 || j.State != sandbox.JobFailed {
		t.Errorf("job after reopen = %+v", j)
	}
}

func TestMemoryStoresAreSeparate(t *testing.T) {
	t.Parallel()
	a := openFile(t, sqlite.MemoryPath)
	defer a.Close()
	b := openFile(t, sqlite.MemoryPath)
	defer b.Close()
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := a.CreateSandbox(t.Context(), &sandbox.Sandbox{ID: "sbx_x", State: sandbox.StateCreated, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.GetSandbox(t.Context(), "", "sbx_x"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("second in-memory store sees the first one's sandbox: err = %v", err)
	}
}

func TestCreateJobNeedsSandbox(t *testing.T) {
	t.Parallel()
	s := openFile(t, sqlite.MemoryPath)
	defer s.Close()
	err := s.CreateJob(t.Context(), &sandbox.Job{ID: "job_orphan", SandboxID: "sbx_missing", State: sandbox.JobPending, CreatedAt: time.Unix(0, 0)})
	if !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("CreateJob for an unknown sandbox: err = %v, want class ErrNotFound", err)
	}
}

// TestTwoStoresOnOneFile plays two service processes sharing a file: their
// writes serialize through SQLite's lock and the busy timeout, losing none.
func TestTwoStoresOnOneFile(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "state.db")
	a := openFile(t, path)
	defer a.Close()
	b := openFile(t, path)
	defer b.Close()
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := a.CreateSandbox(ctx, &sandbox.Sandbox{ID: "sbx_shared", State: sandbox.StateCreated, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	const perStore = 15
	var wg sync.WaitGroup
	for _, s := range []*sqlstore.Store{a, b} {
		for i := range perStore {
			wg.Go(func() {
				_, err := s.UpdateSandbox(ctx, "sbx_shared", 0, now, func(sb *sandbox.Sandbox) error {
					n, _ := strconv.Atoi(sb.Metadata["n"])
					sb.Metadata = map[string]string{"n": strconv.Itoa(n + 1)}
					return nil
				})
				if err != nil {
					t.Errorf("update %d: %v", i, err)
				}
			})
		}
	}
	wg.Wait()
	got, err := b.GetSandbox(ctx, "", "sbx_shared")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprint(2 * perStore); got.Metadata["n"] != want {
		t.Errorf("counter = %q, want %s", got.Metadata["n"], want)
	}
}

func TestOpenRejectsBadPath(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"", "state.db?mode=ro", "file:state.db"} {
		s, err := sqlite.Open(t.Context(), sqlite.Config{Path: path})
		if err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded, want ErrInvalidArgument", path)
			continue
		}
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("Open(%q) error = %v, want class ErrInvalidArgument", path, err)
		}
	}
}

func TestCanceledContext(t *testing.T) {
	t.Parallel()
	s := openFile(t, sqlite.MemoryPath)
	defer s.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := s.GetSandbox(ctx, "", "sbx_any")
	if err == nil || errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("GetSandbox with a canceled context: err = %v, want a context error", err)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("GetSandbox with a canceled context: err = %v, want it to wrap context.Canceled", err)
	}
}

// TestUpdatePanicReleasesWriter: a callback that panics must not leave the
// single write connection inside a transaction.
func TestUpdatePanicReleasesWriter(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "p.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now().UTC()
	sb := &sandbox.Sandbox{ID: sandbox.NewID("sbx"), Tenant: "a", Profile: "p", Runtime: "runc", RiskLevel: "low",
		State: sandbox.StateReady, Image: "i", CreatedAt: now, UpdatedAt: now}
	if err := st.CreateSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() { _ = recover() }()
		_, _ = st.UpdateSandbox(ctx, sb.ID, 0, now, func(*sandbox.Sandbox) error { panic("boom") })
	}()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := st.UpdateSandbox(wctx, sb.ID, 0, now, func(x *sandbox.Sandbox) error { x.FailureReason = "ok"; return nil }); err != nil {
		t.Fatalf("write after a panicking update: %v", err)
	}
}

func TestClaimStormTwoHandles(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.db")
	a := openFile(t, path)
	defer a.Close()
	b := openFile(t, path)
	defer b.Close()
	storetest.ClaimStorm(t, a, b)
}
