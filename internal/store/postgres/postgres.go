package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/store/sqlstore"
)

// Config configures a store.
type Config struct {
	// DSN is a libpq connection string or postgres:// URL, e.g.
	// "postgres://sandbox@db.internal:5432/sandbox?sslmode=verify-full".
	// pgx's pool settings (pool_max_conns, pool_max_conn_lifetime,
	// pool_max_conn_idle_time) in it are honoured unless MaxConns
	// overrides the first.
	DSN string
	// Logger receives migration and lifecycle messages; nil discards them.
	Logger *slog.Logger
	// MaxConns bounds the connection pool; 0 keeps the DSN's pool_max_conns
	// or pgx's default (the greater of 4 and the number of CPUs).
	MaxConns int32
}

// Open connects to the database named by cfg.DSN and applies any pending
// migrations (see sqlstore.Open for the refusals). An unreachable server is
// errdefs.ErrUnavailable.
func Open(ctx context.Context, cfg Config) (*sqlstore.Store, error) {
	if cfg.DSN == "" {
		return nil, errdefs.Invalid("postgres store: empty DSN")
	}
	if cfg.MaxConns < 0 {
		return nil, fmt.Errorf("postgres store: negative MaxConns %d: %w", cfg.MaxConns, errdefs.ErrInvalidArgument)
	}
	// The pool settings are parsed as pgxpool does, and applied to
	// database/sql's pool.
	pcfg, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		// pgx redacts the password in its parse errors.
		return nil, fmt.Errorf("postgres store: parse DSN: %w: %w", errdefs.ErrInvalidArgument, err)
	}
	if cfg.MaxConns > 0 {
		pcfg.MaxConns = cfg.MaxConns
	}
	db := stdlib.OpenDB(*pcfg.ConnConfig)
	// More connections than the pool's size: an instance holds its
	// session locks (its own and, while it leads, the leader's) each on a
	// connection of its own (sqlstore.TryLock) for as long as it runs, and
	// up to sqlstore.WaitLockSlots short ones (sqlstore.Lock: a tenant's
	// quota) besides.
	db.SetMaxOpenConns(int(pcfg.MaxConns) + 2 + sqlstore.WaitLockSlots)
	db.SetMaxIdleConns(int(pcfg.MaxConns))
	db.SetConnMaxLifetime(pcfg.MaxConnLifetime)
	db.SetConnMaxIdleTime(pcfg.MaxConnIdleTime)
	s, err := sqlstore.Open(ctx, sqlstore.Config{Dialect: Dialect{}, Writer: db, Logger: cfg.Logger})
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// Dialect is PostgreSQL's sqlstore.Dialect.
type Dialect struct{}

var _ sqlstore.Dialect = Dialect{}

// Name implements sqlstore.Dialect.
func (Dialect) Name() string { return "postgres" }

// Placeholder is $n.
func (Dialect) Placeholder(n int) string { return fmt.Sprintf("$%d", n) }

// RowLock is FOR UPDATE.
func (Dialect) RowLock() string { return "FOR UPDATE" }

// SkipLockedRowLock is FOR UPDATE SKIP LOCKED.
func (Dialect) SkipLockedRowLock() string { return "FOR UPDATE SKIP LOCKED" }

// InsertOrder is the identity column seq.
func (Dialect) InsertOrder() string { return "seq" }

// Times are stored as int64 nanoseconds since the Unix epoch, which covers
// the years 1677 to 2262.
var (
	minTime = time.Unix(0, math.MinInt64).UTC()
	maxTime = time.Unix(0, math.MaxInt64).UTC()
)

// EncodeTime returns t as Unix nanoseconds; times outside the int64 range
// are ErrInvalidArgument.
func (Dialect) EncodeTime(field string, t time.Time) (any, error) {
	if t.Before(minTime) || t.After(maxTime) {
		return nil, errdefs.Invalid("%s %v is out of range (%d to %d)", field, t, minTime.Year(), maxTime.Year())
	}
	return t.UnixNano(), nil
}

// MetadataContains is JSONB containment of a flat object of strings (which
// the GIN index sandboxes_metadata serves): every pair must be present with
// exactly that string value.
func (Dialect) MetadataContains(col string, m map[string]string) (string, []any, error) {
	// encoding/json sorts map keys, so equal filters are equal arguments.
	b, err := json.Marshal(m)
	if err != nil {
		return "", nil, fmt.Errorf("encode metadata filter: %w: %w", errdefs.ErrInvalidArgument, err)
	}
	return col + " @> ?::jsonb", []any{string(b)}, nil
}

// SetJSONString uses jsonb_set.
func (Dialect) SetJSONString(col, key string) string {
	return "jsonb_set(" + col + ", '{" + key + "}', to_jsonb(?::text))"
}

// auditLockKey is the advisory lock that orders audit inserts.
const auditLockKey int64 = 0x67656e6175646974 // "genaudit"

// AuditOrderLock takes a transaction-scoped advisory lock, held until the
// insert commits.
func (Dialect) AuditOrderLock() string {
	return fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", auditLockKey)
}

// Schema implements sqlstore.Dialect.
func (Dialect) Schema() sqlstore.Schema {
	return sqlstore.Schema{
		Postgres: true,
		Time:     "BIGINT", JSON: "JSONB", Int64: "BIGINT", Bool: "BOOLEAN", Bytes: "BYTEA",
		Seq:       "seq BIGINT GENERATED ALWAYS AS IDENTITY,",
		SeqKey:    ", seq",
		Serial:    "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
		AppliedAt: "TIMESTAMPTZ NOT NULL DEFAULT now()",
		Now:       "now()",
	}
}

// LegacyVersion is the last version of the PostgreSQL history of earlier
// releases (0005_leases.sql).
func (Dialect) LegacyVersion() int { return 5 }

// migrationLockKey is the key of the session-level advisory lock held while
// migrating. Advisory locks are per database, so the key only has to differ
// from those of other applications sharing the database.
const migrationLockKey int64 = 0x67656e5f73627831 // "gen_sbx1"

// LockMigrations takes a session-level advisory lock on conn, so that two
// processes opening one database at once serialize: the second waits for
// the first, then finds nothing left to do. If releasing it fails, the
// connection is discarded, which releases it too.
func (Dialect) LockMigrations(ctx context.Context, conn *sql.Conn) (func(context.Context) error, error) {
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", migrationLockKey); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		_, err := conn.ExecContext(ctx, "SELECT pg_advisory_unlock($1)", migrationLockKey)
		if err != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		return err
	}, nil
}

// SQLSTATE codes the store tells apart.
// https://www.postgresql.org/docs/current/errcodes-appendix.html
const (
	sqlstateUniqueViolation     = "23505"
	sqlstateForeignKeyViolation = "23503"
	sqlstateQueryCanceled       = "57014"
)

// Classify maps SQLSTATE codes and connection failures:
//   - a unique violation, a foreign-key violation, a statement timeout and
//     bad data (SQLSTATE class 22, e.g. a NUL byte in a text value) are
//     their kinds;
//   - a server that cannot be reached, is shutting down, is out of
//     connections, is a read-only standby, or aborted the transaction for a
//     serialization failure or deadlock is KindUnavailable (retry later).
func (Dialect) Classify(err error) sqlstore.ErrorKind {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		if isConnectionError(err) {
			return sqlstore.KindUnavailable
		}
		return sqlstore.KindOther
	}
	switch code := pe.Code; {
	case code == sqlstateUniqueViolation:
		return sqlstore.KindUniqueViolation
	case code == sqlstateForeignKeyViolation:
		return sqlstore.KindForeignKeyViolation
	case code == sqlstateQueryCanceled: // statement_timeout
		return sqlstore.KindTimeout
	case strings.HasPrefix(code, "22"): // data exception
		return sqlstore.KindInvalidValue
	case strings.HasPrefix(code, "08"), // connection exception
		strings.HasPrefix(code, "53"),  // insufficient resources (too many connections, disk full)
		strings.HasPrefix(code, "57P"), // admin shutdown, crash shutdown, cannot connect now
		strings.HasPrefix(code, "40"),  // serialization failure, deadlock detected
		code == "55P03",                // lock not available (lock_timeout)
		code == "25006":                // read-only transaction: a standby after a failover
		return sqlstore.KindUnavailable
	}
	return sqlstore.KindOther
}

// isConnectionError reports an error of the connection rather than of the
// statement: the server could not be reached or the connection broke.
func isConnectionError(err error) bool {
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || pgconn.SafeToRetry(err) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
