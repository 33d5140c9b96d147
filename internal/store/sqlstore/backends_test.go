package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/store/pgtest"
	"genesis.dev/sandbox/internal/store/sqlstore"
	"genesis.dev/sandbox/internal/store/storetest"
	"genesis.dev/sandbox/internal/tenant"
)

// The tests of this file run on every backend: what the store does beyond
// the conformance suite (which each backend's package runs) whatever the
// database, against real SQLite files and a real PostgreSQL.

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// firstVersion is the first version of the single schema history.
const firstVersion = 8

// embeddedVersions are the versions of the embedded steps, in order.
func embeddedVersions(t *testing.T) []int {
	t.Helper()
	steps, err := fs.Glob(sqlstore.MigrationFS, "migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	var vs []int
	for _, p := range steps {
		v, err := strconv.Atoi(strings.SplitN(path.Base(p), "_", 2)[0])
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	slices.Sort(vs)
	return vs
}

// forEach runs f on each backend, in parallel, with a new empty database:
// db reaches it behind the store's back, as an operator would, and the
// store opens target.
func forEach(t *testing.T, f func(t *testing.T, b backend, db *sql.DB, target string)) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			db, target := b.newDB(t)
			f(t, b, db, target)
		})
	}
}

func (b backend) mustOpen(t *testing.T, target string) *sqlstore.Store {
	t.Helper()
	s, err := b.open(t.Context(), target)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func TestMigrationsIdempotentOnReopen(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, db *sql.DB, target string) {
		for i := range 3 {
			s := b.mustOpen(t, target)
			if err := s.Ping(t.Context()); err != nil {
				t.Fatalf("open %d: Ping: %v", i, err)
			}
			if err := s.Close(); err != nil {
				t.Fatalf("open %d: Close: %v", i, err)
			}
		}
		vs := schemaVersions(t, db)
		if len(vs) == 0 {
			t.Fatal("schema_migrations is empty after Open")
		}
		for i, v := range vs {
			if v != firstVersion+i {
				t.Fatalf("schema_migrations versions = %v, want %d…n, each once", vs, firstVersion)
			}
		}
		var missing int
		if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM schema_migrations WHERE applied_at IS NULL").Scan(&missing); err != nil || missing != 0 {
			t.Errorf("versions without applied_at: %d, %v", missing, err)
		}
	})
}

// TestConcurrentOpen plays service processes starting together on a new
// database: each migration is applied exactly once.
func TestConcurrentOpen(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, db *sql.DB, target string) {
		const n = 4
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				s, err := b.openSingle(t.Context(), target)
				if err != nil {
					t.Errorf("Open %d: %v", i, err)
					return
				}
				s.Close()
			})
		}
		wg.Wait()
		vs := schemaVersions(t, db)
		for i, v := range vs {
			if v != firstVersion+i {
				t.Fatalf("schema_migrations versions = %v after %d concurrent opens, want %d…n, each once", vs, n, firstVersion)
			}
		}
	})
}

func TestRefusesNewerSchema(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, db *sql.DB, target string) {
		b.mustOpen(t, target).Close()
		if _, err := db.ExecContext(t.Context(), b.rebind(b.recordVersion), 9999); err != nil {
			t.Fatal(err)
		}
		s, err := b.open(t.Context(), target)
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
	})
}

// TestTwoStoresOnOneDatabase plays two service processes sharing one
// database: their increments of one sandbox serialize (on the row lock, or
// SQLite's write lock and busy timeout) and none is lost.
func TestTwoStoresOnOneDatabase(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, db *sql.DB, target string) {
		ctx := t.Context()
		a := b.mustOpen(t, target)
		defer a.Close()
		c := b.mustOpen(t, target)
		defer c.Close()
		now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		if err := a.CreateSandbox(ctx, &sandbox.Sandbox{ID: "sbx_shared", State: sandbox.StateCreated, CreatedAt: now, UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
		const perStore = 20
		var wg sync.WaitGroup
		for _, s := range []*sqlstore.Store{a, c} {
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
		got, err := c.GetSandbox(ctx, "", "sbx_shared")
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprint(2 * perStore); got.Metadata["n"] != want {
			t.Errorf("counter = %q, want %s (lost updates)", got.Metadata["n"], want)
		}
		if want := int64(2*perStore + 1); got.ResourceVersion != want {
			t.Errorf("ResourceVersion = %d, want %d", got.ResourceVersion, want)
		}
	})
}

// TestClaimStormTwoStores races pool claims through two stores (as two
// service instances would) on one database.
func TestClaimStormTwoStores(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, db *sql.DB, target string) {
		a := b.mustOpen(t, target)
		defer a.Close()
		c := b.mustOpen(t, target)
		defer c.Close()
		storetest.ClaimStorm(t, a, c)
	})
}

func TestDataSurvivesReopen(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, db *sql.DB, target string) {
		ctx := t.Context()
		created := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
		expires := created.Add(time.Hour)
		s := b.mustOpen(t, target)
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
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}

		s = b.mustOpen(t, target)
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
	})
}

// TestForeignKeys: jobs, sessions and API keys must name an existing
// sandbox or tenant.
func TestForeignKeys(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, db *sql.DB, target string) {
		s := b.mustOpen(t, target)
		defer s.Close()
		err := s.CreateJob(t.Context(), &sandbox.Job{ID: "job_orphan", SandboxID: "sbx_missing", State: sandbox.JobPending, CreatedAt: time.Unix(0, 0)})
		if !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("CreateJob for an unknown sandbox: err = %v, want class ErrNotFound", err)
		}
		err = s.CreateSession(t.Context(), &sandbox.Session{ID: "ses_orphan", SandboxID: "sbx_missing"})
		if !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("CreateSession for an unknown sandbox: err = %v, want class ErrNotFound", err)
		}
		err = s.CreateKey(t.Context(), &tenant.Key{ID: "key_orphan", Tenant: "nobody", Hash: [32]byte{1}, CreatedAt: time.Unix(0, 0)})
		if !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("CreateKey for an unknown tenant: err = %v, want class ErrNotFound", err)
		}
	})
}

func TestMetadataFilter(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, db *sql.DB, target string) {
		ctx := t.Context()
		s := b.mustOpen(t, target)
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
	})
}

func TestContextErrors(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, db *sql.DB, target string) {
		s := b.mustOpen(t, target)
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
	})
}

// TestPanicInFnReleasesWriter: a panicking fn (recovered by the caller, as
// an HTTP server does) must not leave its transaction, row lock or
// connection behind: with a single connection, the next update and Close
// must go through.
func TestPanicInFnReleasesWriter(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, db *sql.DB, target string) {
		s, err := b.openSingle(t.Context(), target)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			closed := make(chan struct{})
			go func() { s.Close(); close(closed) }()
			select {
			case <-closed:
			case <-time.After(10 * time.Second):
				t.Error("Close blocked: a connection was never released")
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
	})
}

// BenchmarkStore measures the hot paths (storetest.Bench) on a SQLite file
// and on PostgreSQL.
func BenchmarkStore(b *testing.B) {
	for _, be := range backends() {
		b.Run(be.name, func(b *testing.B) {
			storetest.Bench(b, func(b *testing.B) store.Store {
				_, target := be.newDB(b)
				s, err := be.open(b.Context(), target)
				if err != nil {
					b.Fatal(err)
				}
				return s
			})
		})
	}
}
