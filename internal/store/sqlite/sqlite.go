package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/store"

	// The pure-Go SQLite driver, registered with database/sql as "sqlite".
	_ "modernc.org/sqlite"
)

// MemoryPath is the Config.Path that selects a private in-memory database.
// Each Open with it yields a new, empty database that lives until Close.
const MemoryPath = ":memory:"

// busyTimeoutMS is how long a connection waits for another writer (another
// process on the same file) before it gives up with SQLITE_BUSY.
const busyTimeoutMS = 5000

// maxReadConns bounds the pool of read-only connections of a file database.
const maxReadConns = 4

// Config configures a Store.
type Config struct {
	// Path is the database file, created if missing, or MemoryPath.
	Path string
	// Logger receives migration and lifecycle messages; nil discards them.
	Logger *slog.Logger
}

// Store is the SQLite implementation of store.Store. It is safe for
// concurrent use.
type Store struct {
	writer *sql.DB // exactly one connection; BEGIN IMMEDIATE transactions
	reader *sql.DB // read-only connections; the writer itself in memory mode
	log    *slog.Logger
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the database at cfg.Path, configures it and
// applies any pending embedded migrations. It refuses, with an error of class
// errdefs.ErrFailedPrecondition, a database whose schema version is newer
// than this build knows.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Path == "" {
		return nil, fmt.Errorf("sqlite store: empty database path: %w", errdefs.ErrInvalidArgument)
	}
	if strings.ContainsRune(cfg.Path, '?') || strings.HasPrefix(cfg.Path, "file:") {
		return nil, fmt.Errorf("sqlite store: database path %q must be a plain file path (no '?', no file: URI): %w", cfg.Path, errdefs.ErrInvalidArgument)
	}
	migs, err := loadMigrations(migrationFS)
	if err != nil {
		return nil, err
	}

	memory := cfg.Path == MemoryPath
	writer, err := sql.Open("sqlite", dsn(cfg.Path, false))
	if err != nil {
		return nil, fmt.Errorf("sqlite store: open %s: %w: %w", cfg.Path, errdefs.ErrUnavailable, err)
	}
	// One write connection serializes all writers of this process; in memory
	// mode it is also the only connection, since the database lives in it.
	writer.SetMaxOpenConns(1)
	writer.SetMaxIdleConns(1)
	writer.SetConnMaxLifetime(0)
	writer.SetConnMaxIdleTime(0)
	s := &Store{writer: writer, reader: writer, log: log}

	if err := writer.PingContext(ctx); err != nil {
		writer.Close()
		return nil, dbError(ctx, "open "+cfg.Path, err)
	}
	if err := migrate(ctx, writer, migs, log); err != nil {
		writer.Close()
		return nil, err
	}
	if !memory {
		reader, err := sql.Open("sqlite", dsn(cfg.Path, true))
		if err != nil {
			writer.Close()
			return nil, fmt.Errorf("sqlite store: open %s for reading: %w: %w", cfg.Path, errdefs.ErrUnavailable, err)
		}
		reader.SetMaxOpenConns(maxReadConns)
		reader.SetMaxIdleConns(maxReadConns)
		s.reader = reader
		if err := reader.PingContext(ctx); err != nil {
			s.Close()
			return nil, dbError(ctx, "open "+cfg.Path+" for reading", err)
		}
	}
	log.Debug("sqlite store opened", "path", cfg.Path, "schema_version", migs[len(migs)-1].version)
	return s, nil
}

// dsn builds the driver data source name for path. Write connections use WAL
// (a persistent property of the file), synchronous NORMAL and BEGIN
// IMMEDIATE; read connections are query-only.
func dsn(path string, readOnly bool) string {
	q := url.Values{}
	q.Set("_busy_timeout", fmt.Sprint(busyTimeoutMS))
	q.Set("_foreign_keys", "on")
	if readOnly {
		q.Set("_query_only", "on")
	} else {
		q.Set("_journal_mode", "WAL")
		q.Set("_synchronous", "NORMAL")
		q.Set("_txlock", "immediate")
	}
	return path + "?" + q.Encode()
}

// Ping checks that the database answers on both the read and write side.
func (s *Store) Ping(ctx context.Context) error {
	for _, db := range []*sql.DB{s.reader, s.writer} {
		var one int
		if err := db.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
			return dbError(ctx, "ping", err)
		}
	}
	return nil
}

// Close closes the database. An in-memory database is discarded.
func (s *Store) Close() error {
	var errs []error
	if s.reader != s.writer {
		errs = append(errs, s.reader.Close())
	}
	errs = append(errs, s.writer.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sqlite store: close: %w: %w", errdefs.ErrInternal, err)
	}
	return nil
}
