// Package sqlstore is the one implementation of store.Store over
// database/sql. Every query, every transaction shape and the schema
// history are written here once, and the store package's rules of what a
// claim, a return or an update changes (store.ApplyClaim, store.NextJob, …)
// are applied here for every database. What differs between the SQL
// databases it runs on is a small Dialect (placeholders, row locks, stored
// time form, JSON operators, column types, error classes), implemented
// next to each driver in store/sqlite (modernc.org/sqlite) and
// store/postgres (pgx's stdlib driver), whose Open functions configure the
// connections and call Open here.
//
// Transactions: every read-modify-write reads its row with the dialect's
// row lock (SELECT … FOR UPDATE on PostgreSQL, in a READ COMMITTED
// transaction) or in a transaction that already excludes every other
// writer (SQLite's single write connection, which begins with BEGIN
// IMMEDIATE), checks the stored version inside it and writes, so
// concurrent updates, from any process, never lose a write.
//
// Schema: one migration history, migrations/NNNN_name.sql, rendered for the
// dialect (column types, insertion-order column, table options) and run by
// one runner (migrate.go). Its versions start at 8: versions 1–7 are the
// per-backend histories of earlier releases, and a database at the end of
// its backend's old history is marked as being at the baseline without
// running it (the bridge).
//
// Beyond the store contract, a job or session must name an existing
// sandbox and an API key an existing tenant (foreign keys): creating one
// for an unknown parent fails with errdefs.ErrNotFound.
//
// The package knows records only: it imports sandbox, tenant, store and
// errdefs and no SQL driver; it must not import driver, control or
// httpapi.
package sqlstore
