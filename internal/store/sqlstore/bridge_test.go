package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", for raw access

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/store/pgtest"
	"genesis.dev/sandbox/internal/store/postgres"
	"genesis.dev/sandbox/internal/store/sqlite"
	"genesis.dev/sandbox/internal/store/sqlstore"
)

// backend is one database the store runs on, with what the tests need to
// reach it behind the store's back and to play the release before the
// single schema history.
type backend struct {
	name string
	// newDB returns an empty database: the raw handle and the target the
	// store opens.
	newDB func(t testing.TB) (db *sql.DB, target string)
	open  func(ctx context.Context, target string) (*sqlstore.Store, error)
	// openSingle opens the store on one connection.
	openSingle func(ctx context.Context, target string) (*sqlstore.Store, error)
	// createVersions and recordVersion are the old runner's statements.
	createVersions, recordVersion string
	// rebind turns "?" placeholders into the database's.
	rebind func(string) string
	// schema describes the database's tables, columns, indexes and
	// constraints, to compare a bridged schema with a new one.
	schema func(t *testing.T, db *sql.DB) []string
}

func sqliteBackend() backend {
	return backend{
		name: "sqlite",
		newDB: func(t testing.TB) (*sql.DB, string) {
			p := filepath.Join(t.TempDir(), "genesis.db")
			db, err := sql.Open("sqlite", p+"?_busy_timeout=5000&_foreign_keys=on")
			if err != nil {
				t.Fatal(err)
			}
			db.SetMaxOpenConns(1)
			t.Cleanup(func() { db.Close() })
			return db, p
		},
		open: func(ctx context.Context, p string) (*sqlstore.Store, error) {
			return sqlite.Open(ctx, sqlite.Config{Path: p})
		},
		openSingle: func(ctx context.Context, p string) (*sqlstore.Store, error) {
			return sqlite.Open(ctx, sqlite.Config{Path: p}) // one write connection
		},
		createVersions: `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER NOT NULL PRIMARY KEY,
			applied_at TEXT    NOT NULL
		) STRICT`,
		recordVersion: "INSERT INTO schema_migrations (version, applied_at) VALUES (?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
		rebind:        func(q string) string { return q },
		schema:        sqliteSchema,
	}
}

func postgresBackend() backend {
	return backend{
		name: "postgres",
		newDB: func(t testing.TB) (*sql.DB, string) {
			dsn := pgtest.Start(t)
			db, err := sql.Open("pgx", dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db, dsn
		},
		open: func(ctx context.Context, dsn string) (*sqlstore.Store, error) {
			// Few connections, so that parallel tests stay within the test
			// cluster's max_connections.
			return postgres.Open(ctx, postgres.Config{DSN: dsn, MaxConns: 4})
		},
		openSingle: func(ctx context.Context, dsn string) (*sqlstore.Store, error) {
			return postgres.Open(ctx, postgres.Config{DSN: dsn, MaxConns: 1})
		},
		createVersions: `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER     NOT NULL PRIMARY KEY,
			applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
		)`,
		recordVersion: "INSERT INTO schema_migrations (version) VALUES (?)",
		rebind: func(q string) string {
			var b strings.Builder
			n := 0
			for _, r := range q {
				if r == '?' {
					n++
					fmt.Fprintf(&b, "$%d", n)
					continue
				}
				b.WriteRune(r)
			}
			return b.String()
		},
		schema: postgresSchema,
	}
}

func backends() []backend { return []backend{sqliteBackend(), postgresBackend()} }

func schemaVersions(t *testing.T, db *sql.DB) []int {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "SELECT version FROM schema_migrations ORDER BY version")
	if err != nil {
		t.Fatal(err)
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

// TestBridgedSchemaMatchesNew compares the schema of a release database
// (testdata/release) bridged from the old history with that of a new
// database: tables, column types,
// defaults, indexes and constraints must be the same, so that later steps
// of the single history apply to both alike.
func TestBridgedSchemaMatchesNew(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			oldDB, oldTarget := b.newDB(t)
			b.loadRelease(t, oldDB)
			newDB, newTarget := b.newDB(t)
			for _, target := range []string{oldTarget, newTarget} {
				s, err := b.open(ctx, target)
				if err != nil {
					t.Fatal(err)
				}
				s.Close()
			}
			got, want := b.schema(t, oldDB), b.schema(t, newDB)
			if len(want) < 20 {
				t.Fatalf("schema description of a new database has only %d lines: %v", len(want), want)
			}
			for _, line := range want {
				if !slices.Contains(got, line) {
					t.Errorf("bridged database lacks: %s", line)
				}
			}
			for _, line := range got {
				if !slices.Contains(want, line) {
					t.Errorf("bridged database has, unlike a new one: %s", line)
				}
			}
		})
	}
}

// TestRefusesPartOfOldHistory: a database part way through an old history
// (here at its version 3) is refused, since it must be finished by the
// release that used that history, and left unchanged.
func TestRefusesPartOfOldHistory(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			db, target := b.newDB(t)
			if _, err := db.ExecContext(t.Context(), b.createVersions); err != nil {
				t.Fatal(err)
			}
			for v := 1; v <= 3; v++ {
				if _, err := db.ExecContext(t.Context(), b.rebind(b.recordVersion), v); err != nil {
					t.Fatal(err)
				}
			}
			s, err := b.open(t.Context(), target)
			if err == nil {
				s.Close()
				t.Fatal("Open of a database at old version 3 succeeded, want refusal")
			}
			if !errors.Is(err, errdefs.ErrFailedPrecondition) || errdefs.Code(err) != "schema_too_old" {
				t.Errorf("Open error = %v (code %q), want ErrFailedPrecondition with code schema_too_old", err, errdefs.Code(err))
			}
			if vs := schemaVersions(t, db); !slices.Equal(vs, []int{1, 2, 3}) {
				t.Errorf("schema_migrations versions = %v after the refusal, want [1 2 3]", vs)
			}
		})
	}
}

// legacyVersions are the versions of the backend's old history.
func legacyVersions(b backend) []int {
	last := 5 // PostgreSQL 0001–0005
	if b.name == "sqlite" {
		last = 7 // SQLite 0001–0007
	}
	var vs []int
	for v := 1; v <= last; v++ {
		vs = append(vs, v)
	}
	return vs
}

func queryLines(t *testing.T, db *sql.DB, q string, args ...any) []string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = cols[i] + "=" + v.String
			if !v.Valid {
				parts[i] = cols[i] + "=NULL"
			}
		}
		out = append(out, strings.Join(parts, " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func sqliteSchema(t *testing.T, db *sql.DB) []string {
	var out []string
	tables := queryLines(t, db, `SELECT name, strict FROM pragma_table_list WHERE schema = 'main' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
	out = append(out, tables...)
	for _, line := range tables {
		name := strings.TrimPrefix(strings.Fields(line)[0], "name=")
		for _, c := range queryLines(t, db, `SELECT cid, name, type, "notnull", dflt_value, pk FROM pragma_table_info(?) ORDER BY cid`, name) {
			out = append(out, name+": "+c)
		}
		for _, fk := range queryLines(t, db, `SELECT "table", "from", "to", on_delete FROM pragma_foreign_key_list(?) ORDER BY "from"`, name) {
			out = append(out, name+" fk: "+fk)
		}
	}
	for _, ix := range queryLines(t, db, `SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'index' ORDER BY name`) {
		out = append(out, strings.Join(strings.Fields(ix), " "))
	}
	return out
}

func postgresSchema(t *testing.T, db *sql.DB) []string {
	var out []string
	out = append(out, queryLines(t, db, `SELECT table_name, ordinal_position, column_name, data_type, is_nullable,
		column_default, is_identity, identity_generation FROM information_schema.columns
		WHERE table_schema = 'public' ORDER BY table_name, ordinal_position`)...)
	out = append(out, queryLines(t, db, `SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY indexname`)...)
	out = append(out, queryLines(t, db, `SELECT conrelid::regclass::text AS tbl, conname, pg_get_constraintdef(oid) AS def
		FROM pg_constraint WHERE connamespace = 'public'::regnamespace ORDER BY 1, 2`)...)
	return out
}

// TestLaterStepAppliesToBridgedAndNew: a step after the embedded history
// runs on a bridged database and on a new one alike, once, and a build
// without it refuses the database afterwards.
func TestLaterStepAppliesToBridgedAndNew(t *testing.T) {
	t.Parallel()
	steps, err := fs.Glob(sqlstore.MigrationFS, "migrations/*.sql")
	if err != nil || len(steps) == 0 {
		t.Fatalf("embedded steps %v: %v", steps, err)
	}
	next := fstest.MapFS{}
	last := 0
	for _, p := range steps {
		data, err := fs.ReadFile(sqlstore.MigrationFS, p)
		if err != nil {
			t.Fatal(err)
		}
		next[p] = &fstest.MapFile{Data: data}
		v, err := strconv.Atoi(strings.SplitN(path.Base(p), "_", 2)[0])
		if err != nil {
			t.Fatal(err)
		}
		last = max(last, v)
	}
	later := last + 1
	next[fmt.Sprintf("migrations/%04d_note.sql", later)] = &fstest.MapFile{Data: []byte(`ALTER TABLE sandboxes ADD COLUMN note TEXT NOT NULL DEFAULT '';
CREATE INDEX sandboxes_note ON sandboxes (note{{.SeqKey}});`)}
	for _, b := range backends() {
		for _, bridged := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/bridged=%v", b.name, bridged), func(t *testing.T) {
				t.Parallel()
				ctx := t.Context()
				db, target := b.newDB(t)
				if bridged {
					b.loadRelease(t, db)
				}
				s, err := b.open(ctx, target)
				if err != nil {
					t.Fatal(err)
				}
				for range 2 { // the second run finds nothing to do
					if err := sqlstore.MigrateFrom(ctx, s, next); err != nil {
						t.Fatalf("migrate to %d: %v", later, err)
					}
				}
				s.Close()
				vs := schemaVersions(t, db)
				if got := vs[len(vs)-2:]; !slices.Equal(got, []int{last, later}) {
					t.Errorf("schema_migrations versions = %v, want … %d %d", vs, last, later)
				}
				var notes int
				if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM sandboxes WHERE note = ''").Scan(&notes); err != nil {
					t.Errorf("the step's column: %v", err)
				} else if bridged && notes != 3 {
					t.Errorf("old sandboxes with the new column's default: %d, want 3", notes)
				}
				if s, err = b.open(ctx, target); err == nil {
					s.Close()
				}
				if errdefs.Code(err) != "schema_too_new" {
					t.Errorf("Open by a build that knows only the embedded steps: err = %v, want code schema_too_new", err)
				}
			})
		}
	}
}
