// Package postgres is the state store for multi-instance deployments:
// store/sqlstore on a PostgreSQL database through pgx's database/sql driver
// (github.com/jackc/pgx/v5/stdlib), so that several sandbox-service
// processes can share one database. It is the PostgreSQL dialect of
// sqlstore and the Open that configures the connection pool; every query
// and the schema history live in sqlstore.
//
// Open migrates on one connection while holding a PostgreSQL advisory
// lock, so processes starting together apply each migration once.
// Read-modify-write updates read the row with SELECT … FOR UPDATE in a
// READ COMMITTED transaction, so concurrent updates, from any process,
// serialize on the row and never lose a write; pool claims use FOR UPDATE
// SKIP LOCKED so that concurrent claimers take different members.
// Statements are prepared once per connection (pgx's statement cache).
//
// Stored forms: times are BIGINT nanoseconds since the Unix epoch (the
// contract needs nanoseconds; TIMESTAMPTZ keeps microseconds), which limits
// them to the years 1677–2262; maps, resources, commands and document
// records are JSONB. PostgreSQL text cannot hold a NUL byte (and JSONB no
// \u0000): such a value is rejected with errdefs.ErrInvalidArgument.
//
// The package knows records only: it imports sqlstore and errdefs and must
// not import driver, control or httpapi.
package postgres
