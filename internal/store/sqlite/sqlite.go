package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/store/sqlstore"
)

// MemoryPath is the Config.Path that selects a private in-memory database.
// Each Open with it yields a new, empty database that lives until Close.
const MemoryPath = ":memory:"

// busyTimeoutMS is how long a connection waits for another writer (another
// process on the same file) before it gives up with SQLITE_BUSY.
const busyTimeoutMS = 5000

// maxReadConns bounds the pool of read-only connections of a file database.
const maxReadConns = 4

// Config configures a store.
type Config struct {
	// Path is the database file, created if missing, or MemoryPath.
	Path string
	// Logger receives migration and lifecycle messages; nil discards them.
	Logger *slog.Logger
}

// Open opens (creating if needed) the database at cfg.Path, configures it and
// applies any pending migrations (see sqlstore.Open for the refusals).
func Open(ctx context.Context, cfg Config) (*sqlstore.Store, error) {
	if cfg.Path == "" {
		return nil, errdefs.Invalid("sqlite store: empty database path")
	}
	if strings.ContainsRune(cfg.Path, '?') || strings.HasPrefix(cfg.Path, "file:") {
		return nil, errdefs.Invalid("sqlite store: database path %q must be a plain file path (no '?', no file: URI)", cfg.Path)
	}
	if cfg.Path != MemoryPath {
		if err := ownerOnly(cfg.Path); err != nil {
			return nil, fmt.Errorf("sqlite store: %w: %w", errdefs.ErrUnavailable, err)
		}
	}
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
	if cfg.Path != MemoryPath {
		if err := enableWAL(ctx, writer); err != nil {
			writer.Close()
			return nil, fmt.Errorf("sqlite store: %s: switching to WAL: %w: %w", cfg.Path, errdefs.ErrUnavailable, err)
		}
	}
	var reader *sql.DB
	if cfg.Path != MemoryPath {
		if reader, err = sql.Open("sqlite", dsn(cfg.Path, true)); err != nil {
			writer.Close()
			return nil, fmt.Errorf("sqlite store: open %s for reading: %w: %w", cfg.Path, errdefs.ErrUnavailable, err)
		}
		reader.SetMaxOpenConns(maxReadConns)
		reader.SetMaxIdleConns(maxReadConns)
	}
	scfg := sqlstore.Config{Dialect: Dialect{}, Writer: writer, Reader: reader, Logger: cfg.Logger, PrepareHot: true}
	var ckpt *sql.DB
	if cfg.Path != MemoryPath {
		// The checkpoints' own connection (see checkpointer).
		if ckpt, err = sql.Open("sqlite", dsn(cfg.Path, false)); err != nil {
			reader.Close()
			writer.Close()
			return nil, fmt.Errorf("sqlite store: open %s for checkpoints: %w: %w", cfg.Path, errdefs.ErrUnavailable, err)
		}
		ckpt.SetMaxOpenConns(1)
		ckpt.SetMaxIdleConns(1)
		ckpt.SetConnMaxLifetime(0)
		ckpt.SetConnMaxIdleTime(0)
	}
	var cp *checkpointer
	scfg.OnClose = func() error {
		if cp != nil {
			return cp.close()
		}
		return nil
	}
	s, err := sqlstore.Open(ctx, scfg)
	if err != nil {
		for _, db := range []*sql.DB{ckpt, reader, writer} {
			if db != nil {
				db.Close()
			}
		}
		return nil, err
	}
	if ckpt != nil {
		log := cfg.Logger
		if log == nil {
			log = slog.New(slog.DiscardHandler)
		}
		cp = startCheckpointer(ckpt, log)
	}
	return s, nil
}

// enableWAL switches the database file to WAL, a persistent property of
// the file. Processes opening one new file at once can each hold a lock the
// other's switch needs; SQLite then answers SQLITE_BUSY at once instead of
// calling the busy handler (waiting could deadlock), so the switch is tried
// again, with a short pause, for up to busyTimeoutMS. (Set as a connection
// parameter, the switch failed the connection itself: two of four services
// starting together on one new file could fail to open it.)
func enableWAL(ctx context.Context, db *sql.DB) error {
	deadline := time.Now().Add(busyTimeoutMS * time.Millisecond)
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		var mode string
		err := db.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode)
		if err == nil {
			if !strings.EqualFold(mode, "wal") {
				return fmt.Errorf("journal mode is %q, not wal", mode)
			}
			return nil
		}
		if (Dialect{}).Classify(err) != sqlstore.KindUnavailable || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
	}
}

// dsn builds the driver data source name for path. Write connections use
// synchronous NORMAL, BEGIN IMMEDIATE and no automatic checkpoint (and
// WAL, which enableWAL sets on the file); read connections are query-only.
func dsn(path string, readOnly bool) string {
	q := url.Values{}
	q.Set("_busy_timeout", fmt.Sprint(busyTimeoutMS))
	q.Set("_foreign_keys", "on")
	if readOnly {
		q.Set("_query_only", "on")
	} else {
		q.Set("_synchronous", "NORMAL")
		q.Set("_txlock", "immediate")
		// No checkpoint inside a commit: the checkpointer runs them.
		q.Set("_pragma", "wal_autocheckpoint(0)")
	}
	return path + "?" + q.Encode()
}

// Dialect is SQLite's sqlstore.Dialect.
type Dialect struct{}

var _ sqlstore.Dialect = Dialect{}

// Name implements sqlstore.Dialect.
func (Dialect) Name() string { return "sqlite" }

// Placeholder implements sqlstore.Dialect.
func (Dialect) Placeholder(int) string { return "?" }

// RowLock is empty: every write transaction holds the single writer (BEGIN
// IMMEDIATE), so no other writer can change a row it read.
func (Dialect) RowLock() string { return "" }

// SkipLockedRowLock is empty, as RowLock.
func (Dialect) SkipLockedRowLock() string { return "" }

// InsertOrder is the implicit rowid.
func (Dialect) InsertOrder() string { return "rowid" }

// EncodeTime renders t in UTC in sqlstore.TextTimeLayout. Years outside
// 1–9999 do not fit the layout.
func (Dialect) EncodeTime(field string, t time.Time) (any, error) {
	u := t.UTC()
	if y := u.Year(); y < 1 || y > 9999 {
		return nil, errdefs.Invalid("%s %v is out of range (years 1 to 9999)", field, t)
	}
	return u.Format(sqlstore.TextTimeLayout), nil
}

// MetadataContains matches each pair with json_each.
func (Dialect) MetadataContains(col string, m map[string]string) (string, []any, error) {
	conds := make([]string, 0, len(m))
	args := make([]any, 0, 2*len(m))
	for k, v := range m {
		conds = append(conds, "EXISTS (SELECT 1 FROM json_each("+col+") AS m WHERE m.key = ? AND m.type = 'text' AND m.value = ?)")
		args = append(args, k, v)
	}
	return strings.Join(conds, " AND "), args, nil
}

// SetJSONString uses json_set.
func (Dialect) SetJSONString(col, key string) string {
	return "json_set(" + col + ", '$." + key + "', ?)"
}

// AuditOrderLock is empty: the single writer orders audit inserts.
func (Dialect) AuditOrderLock() string { return "" }

// Schema implements sqlstore.Dialect: STRICT tables of SQLite's five types.
func (Dialect) Schema() sqlstore.Schema {
	return sqlstore.Schema{
		Time: "TEXT", JSON: "TEXT", Int64: "INTEGER", Bool: "INTEGER", Bytes: "BLOB",
		Serial:       "INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT",
		TableOptions: "STRICT",
		AppliedAt:    "TEXT NOT NULL",
		Now:          "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')",
	}
}

// LegacyVersion is the last version of the SQLite history of earlier
// releases (0007_leases.sql).
func (Dialect) LegacyVersion() int { return 7 }

// LockMigrations does nothing: each migration runs in a BEGIN IMMEDIATE
// transaction that re-reads the applied version, which serializes
// processes opening the same file.
func (Dialect) LockMigrations(context.Context, *sql.Conn) (func(context.Context) error, error) {
	return func(context.Context) error { return nil }, nil
}

// Classify maps SQLite's extended result codes.
func (Dialect) Classify(err error) sqlstore.ErrorKind {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return sqlstore.KindOther
	}
	switch code := se.Code(); {
	case code == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY || code == sqlite3.SQLITE_CONSTRAINT_UNIQUE:
		return sqlstore.KindUniqueViolation
	case code == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
		return sqlstore.KindForeignKeyViolation
	case code&0xff == sqlite3.SQLITE_BUSY || code&0xff == sqlite3.SQLITE_LOCKED:
		return sqlstore.KindUnavailable
	}
	return sqlstore.KindOther
}

// ownerOnly makes the database file, and its WAL and shared-memory files
// where they exist, readable by the service's user alone: they hold the
// tenants, the keys' hashes, the jobs' commands and the audit log. A
// missing database is created with mode 0600, and SQLite gives the files
// it makes beside it the database's mode.
func ownerOnly(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			if err := os.Chmod(p, perm&0o700); err != nil {
				return err
			}
		}
	}
	return nil
}
