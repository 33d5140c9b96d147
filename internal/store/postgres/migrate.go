package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

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
		return nil, fmt.Errorf("postgres store: read migrations: %w: %w", errdefs.ErrInternal, err)
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
			return nil, fmt.Errorf("postgres store: migration %q is not named NNNN_name.sql: %w", name, errdefs.ErrInternal)
		}
		body, err := fs.ReadFile(fsys, path.Join("migrations", name))
		if err != nil {
			return nil, fmt.Errorf("postgres store: read migration %s: %w: %w", name, errdefs.ErrInternal, err)
		}
		migs = append(migs, migration{version: v, name: name, sql: string(body)})
	}
	slices.SortFunc(migs, func(a, b migration) int { return a.version - b.version })
	for i, m := range migs {
		if m.version != i+1 {
			return nil, fmt.Errorf("postgres store: migration %s has version %d, want %d (versions must run 1, 2, 3… without gaps or duplicates): %w", m.name, m.version, i+1, errdefs.ErrInternal)
		}
	}
	if len(migs) == 0 {
		return nil, fmt.Errorf("postgres store: no migrations embedded: %w", errdefs.ErrInternal)
	}
	return migs, nil
}

// schemaTooNewCode is the problem code of the error for a database written
// by a newer build.
const schemaTooNewCode = "schema_too_new"

// migrationLockKey is the key of the session-level advisory lock held while
// migrating. Advisory locks are per database, so the key only has to differ
// from those of other applications sharing the database.
const migrationLockKey int64 = 0x67656e5f73627831 // "gen_sbx1"

// migrate brings the database up to the last of migs. It works on a
// connection of its own that holds an advisory lock throughout, so two
// processes opening one database at once serialize here: the second waits
// for the first, then finds nothing left to do. Each migration runs in its
// own transaction together with its schema_migrations row. Closing the
// connection releases the lock whatever happened.
func migrate(ctx context.Context, cfg *pgx.ConnConfig, migs []migration, log *slog.Logger) error {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return dbError(ctx, "connect", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	start := time.Now()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrationLockKey); err != nil {
		return dbError(ctx, "take migration lock", err)
	}
	if waited := time.Since(start); waited > time.Second {
		log.Info("waited for another process to finish migrating", "waited", waited.Round(time.Millisecond))
	}
	const create = `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER     NOT NULL PRIMARY KEY,
		applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
	)`
	if _, err := conn.Exec(ctx, create); err != nil {
		return dbError(ctx, "create schema_migrations", err)
	}
	var current int
	if err := conn.QueryRow(ctx, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations").Scan(&current); err != nil {
		return dbError(ctx, "read schema version", err)
	}
	if known := migs[len(migs)-1].version; current > known {
		return errdefs.WithCode(schemaTooNewCode, fmt.Errorf(
			"postgres store: database schema version %d is newer than this build supports (%d); run a newer sandbox-service or restore a matching backup: %w",
			current, known, errdefs.ErrFailedPrecondition))
	}
	for _, m := range migs[current:] {
		if err := applyMigration(ctx, conn, m); err != nil {
			return err
		}
		log.Info("applied schema migration", "version", m.version, "name", m.name)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", migrationLockKey); err != nil {
		return dbError(ctx, "release migration lock", err)
	}
	return nil
}

// applyMigration runs m and records it, in one transaction.
func applyMigration(ctx context.Context, conn *pgx.Conn, m migration) error {
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		// Simple protocol: a migration file holds several statements.
		if _, err := tx.Exec(ctx, m.sql, pgx.QueryExecModeSimpleProtocol); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version) VALUES ($1)", m.version)
		return err
	})
	if err != nil {
		return dbError(ctx, "migration "+m.name, err)
	}
	return nil
}
