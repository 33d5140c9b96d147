package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/store/pgtest"
	"genesis.dev/sandbox/internal/store/postgres"
	"genesis.dev/sandbox/internal/store/sqlstore"
	"genesis.dev/sandbox/internal/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// testMaxConns keeps the pools of parallel tests within the test cluster's
// max_connections.
const testMaxConns = 4

func open(t *testing.T, dsn string) *sqlstore.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn, MaxConns: testMaxConns})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// rawConn connects behind the store's back, as an operator would.
func rawConn(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("pgx.Connect: %v", err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, pgtest.Start(t))
	})
}

func schemaVersions(t *testing.T, c *pgx.Conn) []int {
	t.Helper()
	rows, err := c.Query(t.Context(), "SELECT version FROM schema_migrations ORDER BY version")
	if err != nil {
		t.Fatalf("read schema_migrations: %v", err)
	}
	vs, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatalf("read schema_migrations: %v", err)
	}
	return vs
}

// firstVersion is the first version of the single schema history (the
// baseline).
const firstVersion = 8

func TestMigrationsIdempotentOnReopen(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Start(t)
	for i := range 3 {
		s := open(t, dsn)
		if err := s.Ping(t.Context()); err != nil {
			t.Fatalf("open %d: Ping: %v", i, err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("open %d: Close: %v", i, err)
		}
	}
	vs := schemaVersions(t, rawConn(t, dsn))
	if len(vs) == 0 {
		t.Fatal("schema_migrations is empty after Open")
	}
	for i, v := range vs {
		if v != firstVersion+i {
			t.Fatalf("schema_migrations versions = %v, want %d…n, each once", vs, firstVersion)
		}
	}
}

// TestConcurrentOpen plays service processes starting together on a new
// database: the advisory lock lets exactly one of them migrate.
func TestConcurrentOpen(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Start(t)
	const n = 4
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			s, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn, MaxConns: 2})
			if err != nil {
				t.Errorf("Open %d: %v", i, err)
				return
			}
			s.Close()
		})
	}
	wg.Wait()
	vs := schemaVersions(t, rawConn(t, dsn))
	for i, v := range vs {
		if v != firstVersion+i {
			t.Fatalf("schema_migrations versions = %v after %d concurrent opens, want %d…n, each once", vs, n, firstVersion)
		}
	}
}

func TestRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Start(t)
	open(t, dsn).Close()
	if _, err := rawConn(t, dsn).Exec(t.Context(), "INSERT INTO schema_migrations (version) VALUES (9999)"); err != nil {
		t.Fatal(err)
	}
	s, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn})
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

// TestTwoStoresOnOneDatabase plays two service processes sharing one
// database: their increments of one sandbox serialize on the row lock and
// none is lost.
func TestTwoStoresOnOneDatabase(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtest.Start(t)
	a := open(t, dsn)
	defer a.Close()
	b := open(t, dsn)
	defer b.Close()
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := a.CreateSandbox(ctx, &sandbox.Sandbox{ID: "sbx_shared", State: sandbox.StateCreated, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	const perStore = 25
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
		t.Errorf("counter = %q, want %s (lost updates)", got.Metadata["n"], want)
	}
	if want := int64(2*perStore + 1); got.ResourceVersion != want {
		t.Errorf("ResourceVersion = %d, want %d", got.ResourceVersion, want)
	}
}

func TestDataSurvivesReopen(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtest.Start(t)
	created := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	expires := created.Add(time.Hour)
	s := open(t, dsn)
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
		ExitCode: &code, ExitReason: sandbox.ExitExited, Mode: sandbox.JobModeBackground, CreatedAt: created}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s = open(t, dsn)
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
	if j.ExitCode == nil || *j.ExitCode != 3 || j.State != sandbox.JobFailed || j.Mode != sandbox.JobModeBackground {
		t.Errorf("job after reopen = %+v", j)
	}
}

// TestForeignKeys: jobs and sessions must name an existing sandbox.
func TestForeignKeys(t *testing.T) {
	t.Parallel()
	s := open(t, pgtest.Start(t))
	defer s.Close()
	err := s.CreateJob(t.Context(), &sandbox.Job{ID: "job_orphan", SandboxID: "sbx_missing", State: sandbox.JobPending, CreatedAt: time.Unix(0, 0)})
	if !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("CreateJob for an unknown sandbox: err = %v, want class ErrNotFound", err)
	}
	err = s.CreateSession(t.Context(), &sandbox.Session{ID: "ses_orphan", SandboxID: "sbx_missing"})
	if !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("CreateSession for an unknown sandbox: err = %v, want class ErrNotFound", err)
	}
}

func TestInvalidValues(t *testing.T) {
	t.Parallel()
	s := open(t, pgtest.Start(t))
	defer s.Close()
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		sb   *sandbox.Sandbox
	}{
		{"time before 1677", &sandbox.Sandbox{ID: "sbx_old", CreatedAt: time.Time{}, UpdatedAt: now}},
		{"time after 2262", &sandbox.Sandbox{ID: "sbx_late", CreatedAt: now, UpdatedAt: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"NUL in text", &sandbox.Sandbox{ID: "sbx_nul", Image: "a\x00b", CreatedAt: now, UpdatedAt: now}},
		{"NUL in JSON", &sandbox.Sandbox{ID: "sbx_nuljson", Env: map[string]string{"K": "a\x00b"}, CreatedAt: now, UpdatedAt: now}},
		{"invalid UTF-8", &sandbox.Sandbox{ID: "sbx_utf8", Profile: "\xff\xfe", CreatedAt: now, UpdatedAt: now}},
	}
	for _, tc := range tests {
		err := s.CreateSandbox(t.Context(), tc.sb)
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: CreateSandbox error = %v, want class ErrInvalidArgument", tc.name, err)
		}
	}
}

func TestMetadataFilter(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := open(t, pgtest.Start(t))
	defer s.Close()
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, md := range []map[string]string{
		{"a": "1", "b": "2"},
		{"a": "1"},
		{"a": "12"},
		nil,
		{`we"ird`: `va'l\ue`},
	} {
		sb := &sandbox.Sandbox{ID: fmt.Sprintf("sbx_%d", i), Metadata: md, CreatedAt: now.Add(time.Duration(i)), UpdatedAt: now}
		if err := s.CreateSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		filter map[string]string
		want   string
	}{
		{map[string]string{"a": "1"}, "sbx_0 sbx_1"},
		{map[string]string{"a": "1", "b": "2"}, "sbx_0"},
		{map[string]string{"b": "1"}, ""},
		{map[string]string{"a": ""}, ""},
		{map[string]string{`we"ird`: `va'l\ue`}, "sbx_4"},
	}
	for _, tc := range tests {
		list, err := s.ListSandboxes(ctx, store.SandboxFilter{Metadata: tc.filter})
		if err != nil {
			t.Fatalf("ListSandboxes(%v): %v", tc.filter, err)
		}
		var ids []string
		for _, sb := range list {
			ids = append(ids, sb.ID)
		}
		if got := strings.Join(ids, " "); got != tc.want {
			t.Errorf("ListSandboxes(metadata %v) = %q, want %q", tc.filter, got, tc.want)
		}
	}
}

func TestErrorClasses(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Start(t)
	s := open(t, dsn)
	defer s.Close()

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := s.GetSandbox(ctx, "", "sbx_any")
	if !errors.Is(err, context.Canceled) || errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("GetSandbox with a canceled context: err = %v, want it to wrap context.Canceled", err)
	}

	dctx, dcancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer dcancel()
	_, err = s.GetSandbox(dctx, "", "sbx_any")
	if !errors.Is(err, errdefs.ErrDeadlineExceeded) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("GetSandbox with an expired deadline: err = %v, want class ErrDeadlineExceeded wrapping context.DeadlineExceeded", err)
	}

	// A deadline that expires while an update waits for a row lock held by
	// another transaction.
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := s.CreateSandbox(t.Context(), &sandbox.Sandbox{ID: "sbx_locked", CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	holder := rawConn(t, dsn)
	tx, err := holder.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(t.Context(), "SELECT 1 FROM sandboxes WHERE id = 'sbx_locked' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer wcancel()
	called := false
	_, err = s.UpdateSandbox(wctx, "sbx_locked", 0, now, func(*sandbox.Sandbox) error { called = true; return nil })
	if !errors.Is(err, errdefs.ErrDeadlineExceeded) {
		t.Errorf("UpdateSandbox waiting for a locked row past its deadline: err = %v, want class ErrDeadlineExceeded", err)
	}
	if called {
		t.Error("UpdateSandbox called fn without the row lock")
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  postgres.Config
		want error
	}{
		{"empty DSN", postgres.Config{}, errdefs.ErrInvalidArgument},
		{"bad DSN", postgres.Config{DSN: "postgres://host:notaport/db"}, errdefs.ErrInvalidArgument},
		{"negative MaxConns", postgres.Config{DSN: "postgres://127.0.0.1/db", MaxConns: -1}, errdefs.ErrInvalidArgument},
		// Port 1 on loopback: nothing listens there.
		{"unreachable", postgres.Config{DSN: "postgres://postgres@127.0.0.1:1/db?sslmode=disable&connect_timeout=5"}, errdefs.ErrUnavailable},
	}
	for _, tc := range tests {
		s, err := postgres.Open(t.Context(), tc.cfg)
		if err == nil {
			s.Close()
			t.Errorf("%s: Open succeeded, want class %v", tc.name, tc.want)
			continue
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: Open error = %v, want class %v", tc.name, err, tc.want)
		}
	}
}

// TestPanicInFnReleasesLock: a panicking fn (recovered by the caller, as an
// HTTP server does) must not leave its transaction, row lock or pooled
// connection behind.
func TestPanicInFnReleasesLock(t *testing.T) {
	t.Parallel()
	s, err := postgres.Open(t.Context(), postgres.Config{DSN: pgtest.Start(t), MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		// Close waits for every pooled connection: a leaked one blocks it.
		closed := make(chan struct{})
		go func() { s.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Error("Close blocked: a pooled connection was never released")
		}
	}()
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := s.CreateSandbox(t.Context(), &sandbox.Sandbox{ID: "sbx_p", CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("fn's panic did not reach the caller")
			}
		}()
		_, _ = s.UpdateSandbox(t.Context(), "sbx_p", 0, now, func(*sandbox.Sandbox) error { panic("boom") })
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	got, err := s.UpdateSandbox(ctx, "sbx_p", 1, now, func(sb *sandbox.Sandbox) error { sb.ContainerID = "c"; return nil })
	if err != nil {
		t.Fatalf("UpdateSandbox after a panicking update: %v", err)
	}
	if got.ResourceVersion != 2 {
		t.Errorf("ResourceVersion = %d, want 2 (the panicking update must not be stored)", got.ResourceVersion)
	}
}

// TestClaimStormTwoStores races pool claims through two stores (as two
// service instances would) on one database.
func TestClaimStormTwoStores(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Start(t)
	a := open(t, dsn)
	defer a.Close()
	b := open(t, dsn)
	defer b.Close()
	storetest.ClaimStorm(t, a, b)
}
