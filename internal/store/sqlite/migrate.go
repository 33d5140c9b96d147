package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"slices"
	"strconv"
	"strings"

	"genesis.dev/sandbox/internal/errdefs"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migration is one embedded schema step, identified by the number that
// prefixes its file name (0001_init.sql is version 1).
type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations reads migrations/NNNN_name.sql from fsys, ordered by
// version. Versions must start at 1 and have no gaps or duplicates.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, "migrations")
	if err != nil {
		return nil, fmt.Errorf("sqlite store: read migrations: %w: %w", errdefs.ErrInternal, err)
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
			return nil, fmt.Errorf("sqlite store: migration %q is not named NNNN_name.sql: %w", name, errdefs.ErrInternal)
		}
		body, err := fs.ReadFile(fsys, path.Join("migrations", name))
		if err != nil {
			return nil, fmt.Errorf("sqlite store: read migration %s: %w: %w", name, errdefs.ErrInternal, err)
		}
		migs = append(migs, migration{version: v, name: name, sql: string(body)})
	}
	slices.SortFunc(migs, func(a, b migration) int { return a.version - b.version })
	for i, m := range migs {
		if m.version != i+1 {
			return nil, fmt.Errorf("sqlite store: migration %s has version %d, want %d (versions must run 1, 2, 3… without gaps or duplicates): %w", m.name, m.version, i+1, errdefs.ErrInternal)
		}
	}
	if len(migs) == 0 {
		return nil, fmt.Errorf("sqlite store: no migrations embedded: %w", errdefs.ErrInternal)
	}
	return migs, nil
}

// schemaTooNewCode is the problem code of the error for a database written
// by a newer build.
const schemaTooNewCode = "schema_too_new"

// migrate brings db up to the last of migs. Each migration runs in its own
// immediate transaction together with its schema_migrations row, and the
// applied version is re-read inside that transaction, so two processes
// opening the same file at once apply each migration exactly once.
func migrate(ctx context.Context, db *sql.DB, migs []migration, log *slog.Logger) error {
	const create = `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER NOT NULL PRIMARY KEY,
		applied_at TEXT    NOT NULL
	) STRICT`
	if _, err := db.ExecContext(ctx, create); err != nil {
		return dbError(ctx, "create schema_migrations", err)
	}
	known := migs[len(migs)-1].version
	for _, m := range migs {
		applied, err := applyMigration(ctx, db, m, known)
		if err != nil {
			return err
		}
		if applied {
			log.Info("applied schema migration", "version", m.version, "name", m.name)
		}
	}
	return nil
}

// applyMigration runs m unless the database is already at or past its
// version. It reports whether it ran m.
func applyMigration(ctx context.Context, db *sql.DB, m migration, known int) (applied bool, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, dbError(ctx, "begin migration", err)
	}
	// Always roll back on the way out (a no-op after Commit), so an error
	// or a panic in fn never leaves the single writer inside a transaction.
	defer func() { _ = tx.Rollback() }()
	var current int
	if err := tx.QueryRowContext(ctx, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations").Scan(&current); err != nil {
		return false, dbError(ctx, "read schema version", err)
	}
	if current > known {
		return false, errdefs.WithCode(schemaTooNewCode, fmt.Errorf(
			"sqlite store: database schema version %d is newer than this build supports (%d); run a newer sandbox-service or restore a matching backup: %w",
			current, known, errdefs.ErrFailedPrecondition))
	}
	if current >= m.version {
		return false, tx.Rollback()
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return false, dbError(ctx, "migration "+m.name, err)
	}
	if _, err := tx.ExecContext(ctx,
		"INSERT INTO schema_migrations (version, applied_at) VALUES (?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
		m.version); err != nil {
		return false, dbError(ctx, "record migration "+m.name, err)
	}
	if err := tx.Commit(); err != nil {
		return false, dbError(ctx, "commit migration "+m.name, err)
	}
	return true, nil
}
