package sqlstore

import (
	"context"
	"database/sql"
	"time"
)

// Dialect is what differs between the databases the store runs on. Queries
// in this package are written with "?" placeholders and standard SQL; a
// dialect supplies the rest.
type Dialect interface {
	// Name names the database in errors and logs ("sqlite", "postgres").
	Name() string
	// Placeholder returns the text of the n-th (1-based) query parameter:
	// "?" or "$n".
	Placeholder(n int) string
	// RowLock is the clause that locks the rows a SELECT reads until the
	// transaction ends ("FOR UPDATE"), or "" where a write transaction
	// excludes every other writer anyway.
	RowLock() string
	// SkipLockedRowLock is RowLock that skips rows other transactions hold
	// ("FOR UPDATE SKIP LOCKED"), so concurrent pool claims take different
	// members, or "".
	SkipLockedRowLock() string
	// InsertOrder is the column that orders rows of one table by insertion
	// (the tie-breaker of oldest-first lists).
	InsertOrder() string
	// EncodeTime returns t in its stored form. A time the form cannot hold
	// is errdefs.ErrInvalidArgument; field names it in the error.
	EncodeTime(field string, t time.Time) (any, error)
	// MetadataContains returns a condition, and its arguments, that keeps
	// rows whose JSON object column col holds every pair of m with exactly
	// that string value. m is not empty.
	MetadataContains(col string, m map[string]string) (cond string, args []any, err error)
	// SetJSONString returns an expression for the JSON document column col
	// with its top-level string key set to the value of one "?" parameter.
	SetJSONString(col, key string) string
	// AuditOrderLock is a statement (or "") run inside the transaction of an
	// audit insert before it, so that audit sequence numbers become visible
	// in the order they are given out.
	AuditOrderLock() string
	// Schema gives the dialect's words for the migration templates.
	Schema() Schema
	// LegacyVersion is the last version of the backend's history before
	// the single one (see migrate.go).
	LegacyVersion() int
	// LockMigrations serializes processes migrating one database: it holds
	// a lock on conn until unlock, or does nothing where each migration's
	// write transaction serializes them anyway.
	LockMigrations(ctx context.Context, conn *sql.Conn) (unlock func(context.Context) error, err error)
	// Classify tells what a driver error means.
	Classify(err error) ErrorKind
}

// ErrorKind is what a database error means to the store.
type ErrorKind int

// The error kinds a Dialect tells apart.
const (
	// KindOther is any other failure (a bug or a broken database).
	KindOther ErrorKind = iota
	// KindUniqueViolation is a primary-key or unique constraint failure.
	KindUniqueViolation
	// KindForeignKeyViolation is a foreign-key constraint failure.
	KindForeignKeyViolation
	// KindUnavailable is a transient failure worth retrying later: a busy
	// or locked database, a serialization failure or deadlock, a server
	// that cannot be reached or is shutting down.
	KindUnavailable
	// KindTimeout is a statement that ran out of time on the server.
	KindTimeout
	// KindInvalidValue is a value the database cannot store (e.g. a NUL
	// byte in a PostgreSQL text value).
	KindInvalidValue
)

// Schema is the dialect's vocabulary in migration templates.
type Schema struct {
	// Postgres is true on PostgreSQL, for statements only it has (GIN
	// indexes).
	Postgres bool
	// Time, JSON, Int64, Bool and Bytes are column types.
	Time, JSON, Int64, Bool, Bytes string
	// Seq is the definition of an explicit insertion-order column with a
	// trailing comma, or "" where the table has one implicitly (rowid).
	Seq string
	// SeqKey is ", seq" where indexes must name the insertion-order column
	// explicitly, else "".
	SeqKey string
	// Serial is the type of an auto-numbered integer primary key column
	// (with the PRIMARY KEY clause).
	Serial string
	// TableOptions follows every CREATE TABLE (e.g. "STRICT").
	TableOptions string
	// AppliedAt is the column definition of schema_migrations.applied_at,
	// and Now an SQL expression of the current time for it.
	AppliedAt, Now string
}
