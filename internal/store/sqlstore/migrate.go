package sqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"text/template"

	"genesis.dev/sandbox/internal/errdefs"
)

// The schema has one history, migrations/NNNN_name.sql, for every dialect.
// Each file is a text/template rendered with the dialect's Schema (column
// types, the insertion-order column, table options), so a step is written
// once. The applied versions are rows of schema_migrations.
//
// Versions 1 to 7 belong to the per-backend histories of earlier releases
// (SQLite 1–7, PostgreSQL 1–5), which this history replaces. Its first step,
// version 8 (baselineVersion), creates exactly the schema those histories
// ended with. The bridge: a database whose highest version is the end of its
// backend's old history (Dialect.LegacyVersion) is marked as being at the
// baseline without running it, and migrates on from there. A database part
// way through an old history is refused: it must first be opened by the
// release that finished that history.

//go:embed migrations/*.sql
var migrationFS embed.FS

// baselineVersion is the first version of the single history.
const baselineVersion = 8

// Problem codes of the errors for a database this build cannot migrate.
const (
	schemaTooNewCode = "schema_too_new"
	schemaTooOldCode = "schema_too_old"
)

// migration is one schema step, identified by the number that prefixes its
// file name (0008_baseline.sql is version 8), rendered for one dialect.
type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations reads migrations/NNNN_name.sql from fsys, renders each for
// schema and orders them by version. Versions must start at
// baselineVersion and have no gaps or duplicates.
func loadMigrations(fsys fs.FS, schema Schema) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, "migrations")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w: %w", errdefs.ErrInternal, err)
	}
	var migs []migration
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || path.Ext(name) != ".sql" {
			continue
		}
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %q is not named NNNN_name.sql: %w", name, errdefs.ErrInternal)
		}
		body, err := fs.ReadFile(fsys, path.Join("migrations", name))
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w: %w", name, errdefs.ErrInternal, err)
		}
		tmpl, err := template.New(name).Option("missingkey=error").Parse(string(body))
		if err != nil {
			return nil, fmt.Errorf("parse migration %s: %w: %w", name, errdefs.ErrInternal, err)
		}
		var out bytes.Buffer
		if err := tmpl.Execute(&out, schema); err != nil {
			return nil, fmt.Errorf("render migration %s: %w: %w", name, errdefs.ErrInternal, err)
		}
		migs = append(migs, migration{version: v, name: name, sql: out.String()})
	}
	slices.SortFunc(migs, func(a, b migration) int { return a.version - b.version })
	for i, m := range migs {
		if want := baselineVersion + i; m.version != want {
			return nil, fmt.Errorf("migration %s has version %d, want %d (versions must run %d, %d, … without gaps or duplicates): %w",
				m.name, m.version, want, baselineVersion, baselineVersion+1, errdefs.ErrInternal)
		}
	}
	if len(migs) == 0 {
		return nil, fmt.Errorf("no migrations embedded: %w", errdefs.ErrInternal)
	}
	return migs, nil
}

// migrate brings the database up to the last embedded migration. It works
// on one connection, holding the dialect's migration lock (if any)
// throughout; each step runs in its own write transaction together with its
// schema_migrations row, and re-reads the applied version inside it, so two
// processes opening one database at once apply each step exactly once.
func (s *Store) migrate(ctx context.Context) error {
	return s.migrateFrom(ctx, migrationFS)
}

// migrateFrom is migrate with the migrations of fsys.
func (s *Store) migrateFrom(ctx context.Context, fsys fs.FS) error {
	schema := s.d.Schema()
	migs, err := loadMigrations(fsys, schema)
	if err != nil {
		return fmt.Errorf("%s store: %w", s.d.Name(), err)
	}
	conn, err := s.writer.Conn(ctx)
	if err != nil {
		return s.dbError(ctx, "connect", err)
	}
	defer conn.Close()
	unlock, err := s.d.LockMigrations(ctx, conn)
	if err != nil {
		return s.dbError(ctx, "take migration lock", err)
	}
	defer func() {
		if err := unlock(context.WithoutCancel(ctx)); err != nil {
			s.log.Warn("releasing the migration lock failed", "err", err)
		}
	}()
	create := `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER NOT NULL PRIMARY KEY,
		applied_at ` + schema.AppliedAt + `
	) ` + schema.TableOptions
	if _, err := conn.ExecContext(ctx, create); err != nil {
		return s.dbError(ctx, "create schema_migrations", err)
	}
	known := migs[len(migs)-1].version
	for _, m := range migs {
		applied, bridged, err := s.applyMigration(ctx, conn, m, known)
		if err != nil {
			return err
		}
		switch {
		case bridged:
			s.log.Info("schema history bridged: the database is at the end of its old history, which is this history's baseline",
				"old_version", s.d.LegacyVersion(), "version", m.version)
		case applied:
			s.log.Info("applied schema migration", "version", m.version, "name", m.name)
		}
	}
	return nil
}

// applyMigration runs m unless the database is already at or past its
// version. For the baseline step, a database at the end of its backend's
// old history is marked as being at the baseline instead (bridged).
func (s *Store) applyMigration(ctx context.Context, conn *sql.Conn, m migration, known int) (applied, bridged bool, err error) {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return false, false, s.dbError(ctx, "begin migration "+m.name, err)
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit
	var current int
	if err := tx.QueryRowContext(ctx, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations").Scan(&current); err != nil {
		return false, false, s.dbError(ctx, "read schema version", err)
	}
	legacy := s.d.LegacyVersion()
	switch {
	case current > known:
		return false, false, errdefs.WithCode(schemaTooNewCode, fmt.Errorf(
			"%s store: database schema version %d is newer than this build supports (%d); run a newer sandbox-service or restore a matching backup: %w",
			s.d.Name(), current, known, errdefs.ErrFailedPrecondition))
	case current >= m.version:
		return false, false, nil
	case m.version == baselineVersion && current == legacy:
		bridged = true
	case m.version == baselineVersion && current != 0:
		return false, false, errdefs.WithCode(schemaTooOldCode, fmt.Errorf(
			"%s store: database schema version %d is part way through the history of earlier releases (which ends at %d); open it once with the last release that used that history, then with this one: %w",
			s.d.Name(), current, legacy, errdefs.ErrFailedPrecondition))
	}
	if !bridged {
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return false, false, s.dbError(ctx, "migration "+m.name, err)
		}
	}
	if _, err := tx.ExecContext(ctx, s.q("INSERT INTO schema_migrations (version, applied_at) VALUES (?, "+s.d.Schema().Now+")"), m.version); err != nil {
		return false, false, s.dbError(ctx, "record migration "+m.name, err)
	}
	if err := tx.Commit(); err != nil {
		return false, false, s.dbError(ctx, "commit migration "+m.name, err)
	}
	return !bridged, bridged, nil
}
