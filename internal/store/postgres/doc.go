// Package postgres is the state store for multi-instance deployments: it
// implements store.Store on a PostgreSQL database with pgx (pgxpool), so that
// several sandbox-service processes can share one database.
//
// It owns the connection pool and the versioned schema migrations embedded
// under migrations/. Open applies pending migrations on a connection of its
// own while holding a PostgreSQL advisory lock, so processes starting
// together apply each migration once; it refuses a schema newer than this
// build. Update{Sandbox,Job,Session} read the row with SELECT … FOR UPDATE in
// a READ COMMITTED transaction and check ifVersion inside it, so concurrent
// updates, from any process, serialize on the row and never lose a write.
//
// Stored forms: times are BIGINT nanoseconds since the Unix epoch (the
// contract needs nanoseconds; TIMESTAMPTZ keeps microseconds), which limits
// them to the years 1677–2262; maps, resources, commands and session records
// are JSONB. PostgreSQL text cannot hold a NUL byte (and JSONB no \u0000):
// such a value is rejected with errdefs.ErrInvalidArgument.
//
// Beyond the store contract, as in store/sqlite, a job or session must name
// an existing sandbox (a foreign key): creating one for an unknown sandbox
// fails with errdefs.ErrNotFound.
//
// The package knows records only: it imports sandbox, store and errdefs and
// must not import driver, control or httpapi.
package postgres
