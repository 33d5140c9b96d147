// Package sqlite is the embedded state store: store/sqlstore on a single
// SQLite file with the pure-Go modernc.org/sqlite driver. It is the SQLite
// dialect of sqlstore and the Open that configures the connections; every
// query and the schema history live in sqlstore.
//
// It owns the database file's connection settings (WAL journal, 5 s busy
// timeout, foreign keys, synchronous NORMAL) and the file's WAL
// checkpoints, which a connection of their own runs in the background
// (checkpointer) rather than a commit that crosses SQLite's automatic
// threshold, whose writes and fsyncs held that commit. All writes go through one
// connection that begins its transactions with BEGIN IMMEDIATE, so
// read-modify-write updates are serialized (SQLite needs no row locks) and
// never lose a write; reads use a separate pool of read-only connections. A
// ":memory:" path gives a private in-memory database on a single
// connection, for tests.
//
// Stored forms: times are UTC text in sqlstore.TextTimeLayout (years 1 to
// 9999); maps, resources, commands and document records are JSON text.
//
// The package knows records only: it imports sqlstore and errdefs and must
// not import driver, control or httpapi.
package sqlite
